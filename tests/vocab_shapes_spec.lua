-- vocab_shapes_spec.lua — PyTorch names of issue "vocabulary, part 3": pixel_shuffle / pixel_unshuffle (lt.F and the
-- PixelShuffle / PixelUnshuffle modules), view_as, reshape_as, expand_as, type_as against PyTorch 1.13 fixtures
-- (tests/fixtures/vocab3.json from gen_vocab3.py: forward and input gradient) and finite differences; a module's
-- class (m:class_name(), lt.nn.isinstance) and its missing PyTorch methods; Dropout2d/Dropout3d on the inputs
-- PyTorch 1.13 takes.
local lt = require "lutra"
local X = require "tests.helpers.nn_fixtures"
local gradcheck = require "tests.helpers.gradcheck"
local err_of = require "tests.helpers.err_of"

local nn, F = lt.nn, lt.F
local CASES = X.load("vocab3.json")
local T = X.tensor

local RUN = {
  pixel_shuffle = function(x, c) return F.pixel_shuffle(x, c.arg) end,
  pixel_unshuffle = function(x, c) return F.pixel_unshuffle(x, c.arg) end,
  PixelShuffle = function(x, c) return nn.PixelShuffle(c.arg)(x) end,
  PixelUnshuffle = function(x, c) return nn.PixelUnshuffle(c.arg)(x) end,
  view_as = function(x, c) return x:view_as(T(c.other)) end,
  reshape_as = function(x, c) return x:t():reshape_as(T(c.other)) end, -- (the case transposes first: a copy)
  expand_as = function(x, c) return x:expand_as(T(c.other)) end,
}

describe("PyTorch 1.13 fixtures (vocab3.json)", function()
  for _, c in ipairs(CASES) do
    if RUN[c.op] then it(c.name .. ": output and input gradient", function()
      local x = T(c.x):requires_grad(true)
      local y = RUN[c.op](x, c)
      X.check(c.name .. " y", y, c.y, 0, 0)
      assert.are.same(c.y.shape, y:shape())
      local loss = (y * T(c.g)):sum()
      loss:backward()
      X.check(c.name .. " dx", x.grad, c.dx, 1e-5, 1e-6)
    end) end -- (the torch7_* cases are vocab_torch7_spec's)
  end
end)

describe("pixel_shuffle, pixel_unshuffle", function()
  it("have finite-difference gradients and undo each other", function()
    assert.is_true(gradcheck(function(x) return F.pixel_shuffle(x, 2) end, { lt.randn(2, 8, 2, 3) }))
    assert.is_true(gradcheck(function(x) return F.pixel_unshuffle(x, 2) end, { lt.randn(1, 2, 4, 2) }))
    local x = lt.randn(2, 18, 3, 4)
    assert.is_true(F.pixel_unshuffle(F.pixel_shuffle(x, 3), 3):allclose(x, 0, 0))
  end)

  it("name the function, the shape and the factor when they do not fit", function()
    assert.matches("pixel_shuffle: the channels (dim 2 of [2 x 3 x 4 x 4]: 3) must be divisible by upscale_factor^2 = 4",
      err_of(F.pixel_shuffle, lt.zeros(2, 3, 4, 4), 2), 1, true)
    assert.matches("pixel_unshuffle: the height and width (5 x 4 of [3 x 5 x 4]) must be divisible by downscale_factor 2",
      err_of(F.pixel_unshuffle, lt.zeros(3, 5, 4), 2), 1, true)
    assert.matches("pixel_shuffle: input must be [... x C x H x W] (3 dims or more), got [4 x 4]",
      err_of(F.pixel_shuffle, lt.zeros(4, 4), 2), 1, true)
    assert.matches("pixel_shuffle: upscale_factor must be an integer >= 1, got 0",
      err_of(F.pixel_shuffle, lt.zeros(4, 4, 4), 0), 1, true)
    assert.matches("PixelShuffle: upscale_factor must be an integer >= 1, got 1.5", err_of(nn.PixelShuffle, 1.5), 1, true)
    assert.matches("PixelShuffle(upscale_factor=2): pixel_shuffle: the channels (dim 2 of [1 x 3 x 2 x 2]: 3)",
      err_of(nn.PixelShuffle(2), lt.zeros(1, 3, 2, 2)), 1,
      true)
    assert.are.equal("PixelUnshuffle(downscale_factor=3)", tostring(nn.PixelUnshuffle { downscale_factor = 3 }))
  end)
end)

describe("view_as, reshape_as, expand_as, type_as", function()
  it("take other's shape or dtype, as methods and lt.* functions", function()
    local x = lt.randn(2, 3)
    assert.are.same({ 3, 2 }, lt.view_as(x, lt.zeros(3, 2)):shape())
    assert.are.equal("int64", x:type_as(lt.zeros({ 2 }, "int64")):dtype())
    assert.are.equal("float32", lt.tensor({ 1, 2 }, "int64"):type_as(x):dtype())
    assert.are.same({ 1, 2 }, lt.tensor({ 1, 2 }, "int64"):type_as(x):totable())
  end)

  it("name themselves and what does not fit", function()
    local x = lt.randn(2, 3)
    assert.matches("view_as: view: shape [4] is invalid", err_of(x.view_as, x, lt.zeros(4)), 1, true)
    assert.matches("bad argument #2 to 'expand_as' (tensor expected, got number)", err_of(x.expand_as, x, 3), 1, true)
    assert.matches("expand_as: expand: cannot expand [2 x 3] to [4 x 4]", err_of(x.expand_as, x, lt.zeros(4, 4)), 1,
      true)
    assert.matches("bad argument #2 to 'type_as' (tensor expected, got string)", err_of(x.type_as, x, "int64"), 1, true)
  end)
end)

describe("a module's class", function()
  it("m:class_name() and lt.nn.isinstance(m, cls), through subclasses and lists", function()
    local c = nn.Conv2d(1, 2, 3)
    assert.are.equal("Conv2d", c:class_name())
    assert.is_true(nn.isinstance(c, nn.Conv2d))
    assert.is_false(nn.isinstance(c, nn.Linear))
    assert.is_true(nn.isinstance(c, nn.Module))
    assert.is_true(nn.isinstance(c, { nn.Linear, nn.Conv2d }))
    assert.is_true(nn.isinstance(nn.Dropout2d(), nn.Dropout))
    assert.is_false(nn.isinstance({}, nn.Module))
    assert.is_false(nn.isinstance(lt.zeros(1), nn.Module))
    local Net = nn.Module:extend("Net")
    function Net:init() self.fc = nn.Linear(2, 2) end
    local net = Net()
    assert.are.equal("Net", net:class_name())
    assert.is_true(nn.isinstance(net, Net))
    assert.is_true(nn.isinstance(net.fc, nn.Linear))
    assert.matches("isinstance: argument #2 must be a module class (e.g. lt.nn.Conv2d) or a list of them, got string",
      err_of(nn.isinstance, c, "Conv2d"), 1, true)
  end)

  it("a PyTorch nn.Module method lutra lacks is an error naming the class; a missing field stays nil", function()
    local m = nn.Linear(2, 2, false)
    assert.matches("Linear has no method 'cuda'", err_of(function() return m:cuda() end), 1, true)
    local Net = nn.Module:extend("Net")
    assert.matches("Net has no method 'register_forward_hook'",
      err_of(function() return Net():register_forward_hook(print) end), 1, true)
    assert.is_nil(m.bias)
    assert.is_nil(m.anything_else)
  end)
end)

describe("Dropout2d and Dropout3d on PyTorch 1.13's inputs", function()
  -- which elements of y are kept (non-zero) for an input of ones
  local function kept(y) return y:ne(0):float() end
  -- whether every row of the 2-D k is all kept or all dropped (one draw for the row)
  local function rows_uniform(k)
    local hi, lo = k:max(2), k:min(2)
    return hi:allclose(lo, 0, 0)
  end

  it("Dropout2d: [N, C, H, W] and [N, C, L] drop whole channels; [N, C] drops single elements", function()
    lt.manual_seed(3)
    local m = nn.Dropout2d(0.5)
    assert.is_true(rows_uniform(kept(m(lt.ones(8, 6, 3, 3))):reshape { 48, 9 })) -- one draw per item and channel
    assert.is_true(rows_uniform(kept(m(lt.ones(8, 6, 5))):reshape { 48, 5 }))
    local k2 = kept(m(lt.ones(40, 50)))
    local frac = k2:mean():item()
    assert.is_true(frac > 0.4 and frac < 0.6)
    -- single elements: rows are not all kept or all dropped
    local row_sums = k2:sum(2)
    assert.is_true(row_sums:gt(0):mul(row_sums:lt(50)):sum():item() > 30)
    assert.is_true(m(lt.ones(40, 50)):max():item() == 2)
    assert.matches("Dropout2d(p=0.5): input must have at least 2 dimensions ([N x C x H x W]), got [5]",
      err_of(m, lt.ones(5)), 1, true)
  end)

  it("Dropout3d: [N, C, D, H, W] per item and channel, [C, D, H, W] per channel, a 1-D input per element", function()
    lt.manual_seed(4)
    local m = nn.Dropout3d(0.5)
    assert.is_true(rows_uniform(kept(m(lt.ones(4, 6, 2, 3, 3))):reshape { 24, 18 }))
    assert.is_true(rows_uniform(kept(m(lt.ones(6, 2, 3, 3))):reshape { 6, 18 }))
    local k1 = kept(m(lt.ones(200)))
    local frac = k1:mean():item()
    assert.is_true(frac > 0.3 and frac < 0.7)
    m:eval()
    local x = lt.randn(3, 4)
    assert.is_true(m(x):allclose(x, 0, 0))
  end)
end)
