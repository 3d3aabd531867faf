-- utils_spec: lt.utils.make_grid against torchvision 0.14's algorithm (tests/fixtures/modules_more.json, "grid"
-- cases from gen_modules.py), and PNG files written by lt.utils.save_image read back by an independent reader
-- (Debian's python3-pil): size, mode and every pixel; the error texts of bad input.
local lt = require "lutra"
local X = require "tests.helpers.nn_fixtures"
local cjson = require "cjson"
local unpack = unpack or table.unpack -- luacheck: ignore 143

local err_of = require "tests.helpers.err_of"

local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  os.execute("mkdir -p " .. d)
  return d
end

-- {size = {w, h}, mode = "RGB", data = {bytes...}} as PIL reads the file
local function pil_read(path)
  local p = io.popen("/usr/bin/python3 -c \"import json, sys; from PIL import Image; im = Image.open(sys.argv[1]); " ..
    "print(json.dumps({'size': im.size, 'mode': im.mode, 'format': im.format, 'data': list(im.tobytes())}))\" '" ..
    path .. "' 2>&1")
  local out = p:read("*a")
  p:close()
  local ok, v = pcall(cjson.decode, out)
  assert(ok, "PIL could not read " .. path .. ": " .. out)
  return v
end

local grids = {}
for _, cs in ipairs(X.load("modules_more.json")) do
  if cs.kind == "grid" then grids[#grids + 1] = cs end
end

describe("lt.utils.make_grid", function()
  for _, cs in ipairs(grids) do
    it("lays out " .. cs.name .. " as torchvision's make_grid", function()
      X.check(cs.name, lt.utils.make_grid(X.tensor(cs.input), cs.opts), cs.grid)
    end)
    it("lays out " .. cs.name .. " from float64 images in float64: the float32 numbers", function()
      local g = lt.utils.make_grid(X.tensor(cs.input):double(), cs.opts)
      assert.are.equal("float64", g:dtype())
      X.check(cs.name .. " (float64)", g, cs.grid)
    end)
  end

  it("takes a Lua list of images as a batch, and leaves its input alone when normalizing", function()
    lt.manual_seed(2)
    local a, b = lt.randn(3, 2, 2), lt.randn(3, 2, 2)
    local before = a:tolist()
    local g1 = lt.utils.make_grid({ a, b }, { normalize = true })
    local g2 = lt.utils.make_grid(lt.stack({ a, b }, 1), { normalize = true })
    assert.are.same(g2:tolist(), g1:tolist())
    assert.are.same(before, a:tolist())
  end)

  it("rejects bad input and options by name", function()
    local x = lt.rand(2, 1, 3, 3)
    assert.matches("make_grid: unknown option 'nrows'", err_of(lt.utils.make_grid, x, { nrows = 2 }), 1, true)
    assert.matches("make_grid: option 'nrow' must be an integer >= 1, got 0", err_of(lt.utils.make_grid, x, { nrow = 0 }),
      1, true)
    assert.matches("make_grid: option 'padding' must be an integer >= 0, got -1",
      err_of(lt.utils.make_grid, x, { padding = -1 }), 1, true)
    assert.matches("make_grid: option 'value_range' must be a pair {low, high} of numbers",
      err_of(lt.utils.make_grid, x, { normalize = true, value_range = { 1 } }), 1, true)
    assert.matches("make_grid: expected an image [H x W], [C x H x W] or a batch [B x C x H x W], got [3]",
      err_of(lt.utils.make_grid, lt.rand(3)), 1, true)
    assert.matches("make_grid: expected a float32 or float64 tensor, got int64",
      err_of(lt.utils.make_grid, lt.zeros({ 2, 2 }, "int64")), 1, true)
    assert.matches("make_grid: expected a tensor or a non-empty list of tensors, got an empty list",
      err_of(lt.utils.make_grid, {}), 1, true)
    assert.matches("make_grid: list element 2 is a number, expected a tensor", err_of(lt.utils.make_grid, { x[1], 3 }),
      1, true)
    assert.matches("make_grid: the images of the list differ in shape",
      err_of(lt.utils.make_grid, { lt.rand(1, 2, 2), lt.rand(1, 3, 2) }), 1, true)
    assert.matches("make_grid: expected a tensor or a list of tensors, got string", err_of(lt.utils.make_grid, "x"),
      1, true)
  end)
end)

describe("lt.utils.save_image", function()
  local dir
  setup(function() dir = tmpdir() end)
  teardown(function() os.execute("rm -rf " .. dir) end)

  for _, cs in ipairs(grids) do
    it("writes " .. cs.name .. " as a PNG that PIL reads back with torchvision's size and pixels", function()
      local path = dir .. "/" .. cs.name .. ".png"
      lt.utils.save_image(X.tensor(cs.input), path, cs.opts)
      local im = pil_read(path)
      assert.are.equal("PNG", im.format)
      local c, h, w = unpack(cs.grid.shape)
      assert.are.same({ w, h }, im.size)
      assert.are.equal(({ [3] = "RGB", [4] = "RGBA" })[c], im.mode)
      assert.are.equal(#cs.png_bytes, #im.data)
      for i, v in ipairs(cs.png_bytes) do
        if im.data[i] ~= v then error(string.format("%s: byte %d is %d, expected %d", cs.name, i, im.data[i], v)) end
      end
    end)
  end

  it("writes RGBA for four channels and gray through the C writer for one; NaN as 0, values clamped", function()
    local rgba = lt.tensor { { { 0, 1 } }, { { 0.5, 0.2 } }, { { 1, 0 } }, { { 0.25, 2 } } } -- [4 x 1 x 2]
    lt.utils.save_image(rgba, dir .. "/rgba.png")
    local im = pil_read(dir .. "/rgba.png")
    assert.are.equal("RGBA", im.mode)
    assert.are.same({ 0, 128, 255, 64, 255, 51, 0, 255 }, im.data)
    local gray = lt.tensor { { { 0 / 0, -1, 0.999, 0.0019 } } } -- [1 x 1 x 4]
    require("lutra.core")._write_png(dir .. "/gray.png", gray)
    im = pil_read(dir .. "/gray.png")
    assert.are.equal("L", im.mode)
    assert.are.same({ 4, 1 }, im.size)
    assert.are.same({ 0, 0, 255, 0 }, im.data)
  end)

  it("writes float64 images as torchvision does, v * 255 + 0.5 truncated in double", function()
    -- 99.5 / 255 - 1e-12: in double s = 99.99999999..., byte 99; its float32 rounding gives 100
    local v = 99.5 / 255 - 1e-12
    local x = lt.tensor({ { { v, 0.5, 1.5 } }, { { 0, 1, -1 } }, { { 0.25, 0 / 0, 0.999 } } }, "float64")
    lt.utils.save_image(x, dir .. "/f64.png")
    local im = pil_read(dir .. "/f64.png")
    assert.are.equal("RGB", im.mode)
    assert.are.same({ 99, 0, 64, 128, 255, 0, 255, 0, 255 }, im.data)
    lt.utils.save_image(x:float(), dir .. "/f32.png")
    assert.are.equal(100, pil_read(dir .. "/f32.png").data[1])
    for _, cs in ipairs(grids) do
      local path = dir .. "/" .. cs.name .. "_f64.png"
      lt.utils.save_image(X.tensor(cs.input):double(), path, cs.opts)
      local data = pil_read(path).data
      assert.are.equal(#cs.png_bytes, #data)
      for i, b in ipairs(cs.png_bytes) do
        -- no normalised value of these grids lies within float32's error of a half: the same bytes
        assert(data[i] == b, string.format("%s: byte %d is %d, expected %d", cs.name, i, data[i], b))
      end
    end
  end)

  it("replaces a file whole and reports failures with the path, leaving no partial file", function()
    local path = dir .. "/x.png"
    lt.utils.save_image(lt.zeros(3, 4, 4), path)
    lt.utils.save_image(lt.ones(3, 2, 5), path)
    assert.are.same({ 5, 2 }, pil_read(path).size)
    assert.matches("save_image: " .. dir .. "/no/such/dir/x.png: cannot create temporary file",
      err_of(lt.utils.save_image, lt.zeros(3, 2, 2), dir .. "/no/such/dir/x.png"), 1, true)
    assert.matches("save_image: a PNG holds 1, 3 or 4 channels; the images have 2 (grid [2 x 7 x 12])",
      err_of(lt.utils.save_image, lt.rand(2, 2, 3, 3), path), 1, true)
    assert.matches("save_image: expected a file path (string) as argument 2, got nil",
      err_of(lt.utils.save_image, lt.zeros(3, 2, 2)), 1, true)
    assert.matches("save_image: unknown option 'normalise'",
      err_of(lt.utils.save_image, lt.zeros(3, 2, 2), path, { normalise = true }), 1, true)
    assert.matches("save_image: expected an image [channels x height x width] with 1, 3 or 4 channels, got [2 x 2]",
      err_of(require("lutra.core")._write_png, path, lt.zeros(2, 2)), 1, true)
    assert.matches("lt.utils has no 'save_img' (did you mean 'save_image'?)",
      err_of(function() return lt.utils.save_img end), 1, true)
  end)
end)
