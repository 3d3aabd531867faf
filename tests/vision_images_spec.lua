-- tests/vision_images_spec.lua — lt.vision: PNG/JPEG decoding, every transform and its functional form, and
-- ImageFolder, against torchvision 0.14 on PIL images (tests/fixtures/vision_images.json and the image folder
-- tests/fixtures/vision_images/, from gen_vision_images.py), float64 images among them (torchvision's tensor
-- functions in double, to 1e-12) and every float32 case again on a float64 image (float64 out, the float32 numbers
-- within their tolerance); hostile files; random transforms' reproducibility; the error messages.
local lt = require "lutra"
local cjson = require "cjson"
local X = require "tests.helpers.nn_fixtures"
local err_of = require "tests.helpers.err_of"
local fs = require "tests.helpers.fs"
local V = lt.vision
local T, F = V.transforms, V.transforms.F

local ROOT = "tests/fixtures/vision_images"
local fixture = X.load("vision_images.json")

local function shape_of(t)
  local s = {}
  for d = 1, t:dim() do s[d] = t:size(d) end
  return s
end

local function check(name, got, ref, atol)
  assert.are.same(ref.shape, shape_of(got), name .. ": shape")
  local d = (got:contiguous():view(-1) - lt.tensor(ref.data, got:dtype())):abs():max():item()
  assert(d <= atol, string.format("%s: max |got - torchvision| = %g > %g", name, d, atol))
  return d
end

local function run_op(img, op)
  local n = op[1]
  local function arg(i)
    local v = op[i + 1]
    if v == cjson.null then return nil end
    return v
  end
  if n == "resize" then return F.resize(img, arg(1), arg(2)) end
  if n == "center_crop" then return F.center_crop(img, arg(1)) end
  if n == "crop" then return F.crop(img, arg(1), arg(2), arg(3), arg(4)) end
  if n == "pad" then return F.pad(img, arg(1), arg(2), arg(3)) end
  if n == "hflip" then return F.hflip(img) end
  if n == "vflip" then return F.vflip(img) end
  if n == "grayscale" then return F.rgb_to_grayscale(img, arg(1)) end
  if n == "brightness" then return F.adjust_brightness(img, arg(1)) end
  if n == "contrast" then return F.adjust_contrast(img, arg(1)) end
  if n == "saturation" then return F.adjust_saturation(img, arg(1)) end
  if n == "hue" then return F.adjust_hue(img, arg(1)) end
  if n == "rotate" then return F.rotate(img, arg(1), "nearest", arg(2), arg(3), arg(4)) end
  if n == "blur" then return F.gaussian_blur(img, arg(1), arg(2)) end
  if n == "resized_crop" then return F.resized_crop(img, arg(1), arg(2), arg(3), arg(4), arg(5)) end
  if n == "to_tensor" then return F.to_tensor(img) end
  if n == "double" then return img:double() end
  if n == "convert" then return F.convert_image_dtype(img, arg(1)) end
  if n == "normalize" then return F.normalize(img, arg(1), arg(2)) end
  error("unknown op " .. n)
end

local function build(spec)
  local list = {}
  for i, s in ipairs(spec) do
    local n = s[1]
    if n == "Pad" then list[i] = T.Pad(s[2], { padding_mode = s[3] })
    elseif n == "Normalize" then list[i] = T.Normalize(s[2], s[3])
    else list[i] = T[n](s[2]) end
  end
  return T.Compose(list)
end

describe("lt.vision against torchvision 0.14", function()
  for _, case in ipairs(fixture.cases) do
    it("F: " .. case.name .. " (" .. case.file .. ")", function()
      local img = V.io.read_image(ROOT .. "/" .. case.file, case.mode)
      for _, op in ipairs(case.ops) do img = run_op(img, op) end
      assert.are.equal(case.pixels, F.is_pixel_image(img), "pixel image or float image")
      assert.are.equal(case.dtype, img:dtype())
      check(case.name, img, case.output, case.atol)
    end)
    if case.dtype == "float32" then
      -- the same ops on the image as float64 (a pixel image stays one): float64 results, the same numbers
      it("F on a float64 image: " .. case.name .. " (" .. case.file .. ")", function()
        local img = F.as_pixel_image(V.io.read_image(ROOT .. "/" .. case.file, case.mode):double())
        for _, op in ipairs(case.ops) do img = run_op(img, op) end
        assert.are.equal(case.pixels, F.is_pixel_image(img), "pixel image or float image")
        assert.are.equal("float64", img:dtype())
        check(case.name .. " (float64)", img, case.output, case.atol)
      end)
    end
  end

  for _, p in ipairs(fixture.pipelines) do
    it("ImageFolder with Compose: " .. p.name .. " on every sample", function()
      local ds = V.datasets.ImageFolder(ROOT, { transform = build(p.transforms) })
      assert.are.equal(#p.outputs, #ds)
      for i = 1, #ds do
        local s = ds:get(i)
        check(p.name .. " sample " .. i, s[1], p.outputs[i], p.atol)
      end
    end)
    it("ImageFolder with Compose on float64 images: " .. p.name .. " on every sample", function()
      local tf = build(p.transforms)
      local ds = V.datasets.ImageFolder(ROOT,
        { transform = function(img) return tf(F.as_pixel_image(img:double())) end })
      for i = 1, #ds do
        local s = ds:get(i)
        assert.are.equal("float64", s[1]:dtype())
        check(p.name .. " float64 sample " .. i, s[1], p.outputs[i], p.atol)
      end
    end)
  end

  it("ImageFolder: torchvision's classes, class_to_idx and samples, 1-based targets", function()
    local ds = V.datasets.ImageFolder(ROOT)
    assert.are.same(fixture.folder.classes, ds.classes)
    assert.are.same(fixture.folder.class_to_idx, ds.class_to_idx)
    local samples = {}
    for i, s in ipairs(ds.samples) do samples[i] = { s[1]:sub(#ROOT + 2), s[2] } end
    assert.are.same(fixture.folder.samples, samples)
    assert.are.equal(#fixture.folder.samples, #ds)
    local s = ds:get(1)
    assert.are.equal(1, s[2])
    assert.are.equal(3, s[1]:size(1)) -- the default loader converts to RGB
    assert.is_true(F.is_pixel_image(s[1]))
  end)
end)

describe("lt.vision.io", function()
  it("reads the same pixels from a file and from its bytes", function()
    local img = V.io.read_image(ROOT .. "/cat/c_rgb.jpg")
    local b = V.io.decode_image(fs.slurp(ROOT .. "/cat/c_rgb.jpg"))
    assert.are.equal(0, (img - b):abs():max():item())
    assert.are.same({ 3, 33, 21 }, shape_of(img))
    assert.are.same({ 4, 15, 18 }, shape_of(V.io.read_image(ROOT .. "/dog/e_rgba.png")))
    assert.are.same({ 2, 15, 18 }, shape_of(V.io.read_image(ROOT .. "/dog/e_rgba.png", "gray_alpha")))
    assert.are.same({ 1, 17, 29 }, shape_of(V.io.read_image(ROOT .. "/cat/b_gray.png")))
  end)

  it("refuses truncated, damaged and hostile files with an error naming the file", function()
    local dir = fs.tmpdir()
    local png, jpg = fs.slurp(ROOT .. "/cat/a_rgb.png"), fs.slurp(ROOT .. "/cat/c_rgb.jpg")
    local bad = {
      ["trunc.png"] = png:sub(1, math.floor(#png / 2)),
      ["trunc.jpg"] = jpg:sub(1, #jpg - 100), -- inside the scan data
      ["headers.jpg"] = jpg:sub(1, math.floor(#jpg / 3)), -- before the scan starts
      ["header.png"] = png:sub(1, 20),
      ["header.jpg"] = jpg:sub(1, 30),
      ["empty.png"] = "",
      ["text.jpg"] = "hello, not an image",
      -- a PNG header that claims 2^31 - 1 x 2^31 - 1 pixels
      ["huge.png"] = "\137PNG\r\n\26\n\0\0\0\13IHDR\127\255\255\255\127\255\255\255\8\2\0\0\0\0\0\0\0",
      -- the JPEG's bytes with a stretch in the middle overwritten
      ["scrambled.jpg"] = jpg:sub(1, 200) .. string.rep("\255\0\17", 100) .. jpg:sub(501),
    }
    for name, bytes in pairs(bad) do
      local f = assert(io.open(dir .. "/" .. name, "wb"))
      f:write(bytes)
      f:close()
      local ok, e = pcall(V.io.read_image, dir .. "/" .. name)
      -- a damaged JPEG body can decode to some pixels (as with PIL); what matters is no crash, and any error names
      -- the file
      if name ~= "scrambled.jpg" or not ok then
        assert.is_false(ok, name)
        assert.matches("read_image: " .. dir .. "/" .. name .. ": ", tostring(e), 1, true)
      end
      local ok2, e2 = pcall(V.io.decode_image, bytes)
      if not ok2 then assert.matches("decode_image: ", tostring(e2), 1, true) end
    end
    assert.matches("read_image: cannot open", err_of(V.io.read_image, dir .. "/missing.png"), 1, true)
    assert.matches("truncated", err_of(V.io.read_image, dir .. "/trunc.jpg"), 1, true)
    assert.matches("not a PNG or JPEG file", err_of(V.io.read_image, dir .. "/text.jpg"), 1, true)
    fs.rmrf(dir)
  end)

  it("names a bad mode", function()
    assert.matches("read_image: mode must be 'unchanged', 'gray'",
      err_of(V.io.read_image, ROOT .. "/cat/a_rgb.png", "RGB"), 1, true)
    assert.matches("decode_image: expected the file's bytes as a string", err_of(V.io.decode_image, 5), 1, true)
  end)
end)

describe("lt.vision.transforms", function()
  local img = V.io.read_image(ROOT .. "/cat/a_rgb.png", "rgb")

  it("random transforms draw from lutra's generator: lt.manual_seed repeats them", function()
    local tf = T.Compose { T.RandomResizedCrop(12), T.RandomHorizontalFlip(), T.RandomVerticalFlip(),
      T.RandomCrop(10, { padding = 2, padding_mode = "reflect" }),
      T.ColorJitter { brightness = 0.4, contrast = 0.4, saturation = 0.4, hue = 0.1 },
      T.RandomRotation(30), T.GaussianBlur(3), T.ToTensor() }
    lt.manual_seed(7)
    local a = { tf(img), tf(img), tf(img) }
    lt.manual_seed(7)
    for k = 1, 3 do assert.are.equal(0, (tf(img) - a[k]):abs():max():item()) end
    assert.is_true((a[1] - a[2]):abs():max():item() > 0)
    assert.are.same({ 3, 10, 10 }, shape_of(a[1]))
  end)

  it("every transform takes a float64 image and gives float64: the float32 numbers with the same seed", function()
    local img64 = F.as_pixel_image(img:double())
    local transforms = { T.Resize(9), T.Resize({ 7, 12 }, { interpolation = "nearest" }), T.CenterCrop(10),
      T.Pad({ 1, 2 }, { padding_mode = "symmetric" }), T.Grayscale(3), T.RandomHorizontalFlip(1),
      T.RandomVerticalFlip(1), T.RandomCrop(10, { padding = 2, padding_mode = "reflect" }), T.RandomResizedCrop(12),
      T.ColorJitter { brightness = 0.4, contrast = 0.4, saturation = 0.4, hue = 0.1 }, T.RandomRotation(30),
      T.GaussianBlur(5, { sigma = { 0.5, 2 } }) }
    for _, tf in ipairs(transforms) do
      for _, pre in ipairs { T.Lambda(function(x) return x end), T.ToTensor() } do -- pixel images, float images
        local name = tostring(tf) .. " after " .. tostring(pre)
        lt.manual_seed(11)
        local a = tf(pre(img))
        lt.manual_seed(11)
        local b = tf(pre(img64))
        assert.are.equal("float64", b:dtype(), name)
        assert.are.equal(F.is_pixel_image(a), F.is_pixel_image(b), name)
        assert.are.same(shape_of(a), shape_of(b), name)
        local d = (b - a:double()):abs():max():item()
        assert(d <= (F.is_pixel_image(a) and 0 or 1e-6), string.format("%s: max |float64 - float32| = %g", name, d))
      end
    end
    local x = F.to_tensor(img64)
    local n = T.Normalize({ 0.485, 0.456, 0.406 }, { 0.229, 0.224, 0.225 })(x)
    assert.are.equal("float64", n:dtype())
    -- the mean and std in double, as torchvision's (in float32 the error would be ~1e-8)
    local want = (x[1] - 0.485) / 0.229
    assert(((n[1] - want):abs():max():item()) < 1e-15)
  end)

  it("to_tensor gives the default dtype, as torchvision's: float64 after lt.set_default_dtype('float64')", function()
    assert.are.equal("float32", F.to_tensor(img):dtype())
    lt.set_default_dtype("float64")
    local ok, x = pcall(T.ToTensor(), img)
    lt.set_default_dtype("float32")
    assert(ok, x)
    assert.are.equal("float64", x:dtype())
    -- the pixel values divided in double: exactly v / 255
    assert.are.equal(0, (x - img:double() / 255):abs():max():item())
    assert.are.equal("float64", F.to_tensor(F.as_pixel_image(img:double())):dtype())
  end)

  it("ConvertImageDtype: a pixel image to [0, 1] floats of either dtype, a float image cast", function()
    local x = T.ConvertImageDtype()(img)
    assert.are.equal("float32", x:dtype())
    assert.is_false(F.is_pixel_image(x))
    assert.are.equal(0, (x - F.to_tensor(img)):abs():max():item())
    local y = T.ConvertImageDtype("double")(img)
    assert.are.equal("float64", y:dtype())
    assert.are.equal(0, (y - img:double() / 255):abs():max():item())
    assert.are.equal(y, F.convert_image_dtype(y, "float64"))
    assert.are.equal("float32", F.convert_image_dtype(y):dtype())
    assert.are.equal("ConvertImageDtype(dtype=float64)", tostring(T.ConvertImageDtype("float64")))
    assert.matches("convert_image_dtype: dtype must be 'float32' or 'float64' (lutra has no uint8 dtype",
      err_of(F.convert_image_dtype, img, "int64"), 1, true)
    assert.matches("ConvertImageDtype: dtype must be 'float32' or 'float64', got uint8",
      err_of(T.ConvertImageDtype, "uint8"), 1, true)
  end)

  it("refuses images of another dtype or rank, naming it, in the functions and in the kernels", function()
    local arg = { resize = 4, pad = 1, rotate = 10, gaussian_blur = 3, adjust_hue = 0.1 } -- hflip, to_tensor: none
    for _, fname in ipairs { "resize", "pad", "rotate", "gaussian_blur", "adjust_hue", "hflip", "to_tensor" } do
      assert.matches(fname .. ": expected a float32 or float64 image [C x H x W], got dtype int64",
        err_of(F[fname], lt.zeros({ 3, 5, 6 }, "int64"), arg[fname]), 1, true)
      assert.matches(fname .. ": expected an image [C x H x W], got a tensor of shape [5 x 6]",
        err_of(F[fname], lt.zeros({ 5, 6 }, "float64"), arg[fname]), 1, true)
    end
    assert.matches("normalize: expected a float32 or float64 tensor [... x C x H x W], got dtype int64 of shape "
      .. "[3 x 2 x 2]", err_of(F.normalize, lt.zeros({ 3, 2, 2 }, "int64"), { 0 }, { 1 }), 1, true)
    local C = require("lutra.core")._images
    assert.matches("resize: expected a float32 or float64 image [C x H x W], got dtype int64",
      err_of(C.resize, lt.zeros({ 3, 5, 6 }, "int64"), 2, 2, false, false), 1, true)
    assert.matches("pad: expected a float32 or float64 image [C x H x W], got dtype int64",
      err_of(C.pad, lt.zeros({ 3, 5, 6 }, "int64"), 1, 1, 1, 1, 0, { 0 }), 1, true)
    assert.matches("gaussian_blur: expected an image [channels x height x width] with at least one pixel, got [5 x 6]",
      err_of(C.gaussian_blur, lt.zeros({ 5, 6 }, "float64"), 3, 3, 1, 1, false), 1, true)
  end)

  it("RandomCrop takes a window of the (padded) image", function()
    lt.manual_seed(3)
    local seen = {}
    for _ = 1, 20 do
      local out = T.RandomCrop({ 20, 30 })(img)
      local found = false
      for top = 0, img:size(2) - 20 do
        for left = 0, img:size(3) - 30 do
          if (F.crop(img, top, left, 20, 30) - out):abs():max():item() == 0 then
            found = true
            seen[top .. "," .. left] = true
          end
        end
      end
      assert.is_true(found)
    end
    local n = 0
    for _ in pairs(seen) do n = n + 1 end
    assert.is_true(n > 3)
    -- pad_if_needed pads both sides up to the size
    assert.are.same({ 3, 40, 40 }, shape_of(T.RandomCrop(40, { pad_if_needed = true })(img)))
    assert.matches("RandomCrop: the crop size {40, 40} is larger than the image {23, 31}",
      err_of(T.RandomCrop(40), img), 1, true)
  end)

  it("RandomHorizontalFlip(0) and (1), RandomRotation(0) leave or flip the image", function()
    assert.are.equal(img, T.RandomHorizontalFlip(0)(img))
    assert.are.equal(0, (T.RandomHorizontalFlip(1)(img) - F.hflip(img)):abs():max():item())
    assert.are.equal(0, (T.RandomRotation(0)(img) - img):abs():max():item())
  end)

  it("RandomResizedCrop gives the size asked and keeps a pixel image", function()
    lt.manual_seed(1)
    for _ = 1, 5 do
      local out = T.RandomResizedCrop({ 7, 9 }, { scale = { 0.5, 1 } })(img)
      assert.are.same({ 3, 7, 9 }, shape_of(out))
      assert.is_true(F.is_pixel_image(out))
      assert.are.equal(0, (out - out:floor()):abs():max():item())
    end
  end)

  it("Lambda and Compose call through; tostring shows the pipeline", function()
    local tf = T.Compose { T.Lambda(function(x) return x:mul(0) end), T.ToTensor() }
    assert.are.equal(0, tf(img):abs():max():item())
    assert.are.equal("Compose(Resize(size=8, interpolation=bilinear), ToTensor())",
      tostring(T.Compose { T.Resize(8), T.ToTensor() }))
  end)

  it("names the transform, the option and the value in its errors", function()
    assert.matches("Resize: unknown option 'interp' (options: antialias, interpolation, max_size)",
      err_of(T.Resize, 8, { interp = "nearest" }), 1, true)
    assert.matches("resize: interpolation must be 'bilinear' or 'nearest', got bicubic",
      err_of(F.resize, img, 8, "bicubic"), 1, true)
    assert.matches("pad: padding 40 is too large for mode 'reflect' on a side of 31 pixels (at most 30)",
      err_of(F.pad, img, 40, 0, "reflect"), 1, true)
    assert.matches("pad: padding_mode must be 'constant', 'edge', 'reflect' or 'symmetric', got wrap",
      err_of(F.pad, img, 1, 0, "wrap"), 1, true)
    assert.matches("pad: fill must be a number or a list of 1 or 3 numbers (one per channel), got a list of 2",
      err_of(F.pad, img, 1, { 1, 2 }), 1, true)
    assert.matches("normalize: expected a float image, got a pixel image", err_of(F.normalize, img, { 0.5 }, { 0.5 }),
      1, true)
    assert.matches("normalize: std[2] is 0", err_of(F.normalize, F.to_tensor(img), { 0, 0, 0 }, { 1, 0, 1 }), 1, true)
    assert.matches("center_crop: expected an image [C x H x W], got a tensor of shape [23 x 31]",
      err_of(F.center_crop, img[1], 4), 1, true)
    assert.matches("GaussianBlur: kernel_size must be odd positive integers, got {4, 4}", err_of(T.GaussianBlur, 4), 1,
      true)
    assert.matches("adjust_hue: hue_factor 0.7 is not in [-0.5, 0.5]", err_of(F.adjust_hue, img, 0.7), 1, true)
    assert.matches("ColorJitter: hue values should be between -0.5 and 0.5", err_of(T.ColorJitter, { hue = 0.8 }), 1,
      true)
    assert.matches("rotate: interpolation must be 'nearest'", err_of(F.rotate, img, 10, "bilinear"), 1, true)
    assert.matches("lt.vision.transforms has no 'RandomFlip'", err_of(function() return T.RandomFlip end), 1, true)
  end)
end)

describe("lt.vision.datasets.ImageFolder", function()
  it("works with lt.data.DataLoader and lt.utils.make_grid/save_image", function()
    local ds = V.datasets.ImageFolder(ROOT, { transform = T.Compose { T.Resize({ 8, 8 }), T.ToTensor() },
      target_transform = function(t) return t - 1 end })
    local loader = lt.data.DataLoader(ds, { batch_size = 4 })
    local batches = {}
    for b in loader:iter() do batches[#batches + 1] = b end
    assert.are.equal(2, #batches)
    assert.are.same({ 4, 3, 8, 8 }, shape_of(batches[1][1]))
    assert.are.same({ 0, 0, 1, 1 }, batches[1][2]:totable())
    local grid = lt.utils.make_grid(batches[1][1], { nrow = 2 })
    assert.are.same({ 3, 22, 22 }, shape_of(grid)) -- 2 x 8 pixels and 3 x 2 of padding
    local dir = fs.tmpdir()
    lt.utils.save_image(batches[1][1], dir .. "/grid.png", { nrow = 2 })
    local back = V.io.read_image(dir .. "/grid.png")
    assert.is_true((back:div(255) - grid):abs():max():item() <= 0.5 / 255 + 1e-6)
    fs.rmrf(dir)
  end)

  it("filters by extensions or is_valid_file, and names what is missing", function()
    local png = V.datasets.ImageFolder(ROOT .. "/", { extensions = { ".png" }, loader = function(p) return p end })
    for _, s in ipairs(png.samples) do assert.matches("%.[pP][nN][gG]$", s[1]) end
    assert.are.equal(4, #png)
    assert.are.equal(ROOT .. "/cat/a_rgb.png", png:get(2)[1])
    assert.matches("ImageFolder: found no valid file for the classes Zebra, dog in " .. ROOT .. " (supported "
      .. "extensions: .bmp)", err_of(V.datasets.ImageFolder, ROOT, { extensions = { ".bmp", } }):gsub("cat, ", ""),
      1, true)
    assert.matches("ImageFolder: unknown option 'transforms'", err_of(V.datasets.ImageFolder, ROOT,
      { transforms = T.ToTensor() }), 1, true)
    assert.matches("ImageFolder: nowhere is not a folder", err_of(V.datasets.ImageFolder, "nowhere"), 1, true)
    assert.matches("ImageFolder:get: index 99 out of range 1..7", err_of(V.datasets.ImageFolder(ROOT).get,
      V.datasets.ImageFolder(ROOT), 99), 1, true)
  end)
end)
