-- tests/conv_direct_spec.lua — conv2d's direct path (one input channel, stride 1, kernel <= 7x7, input not
-- requiring grad: the first layer of an image net) against the im2col + GEMM path, which the same call takes
-- when the input requires grad.
local lt = require "lutra"
local F = lt.F
local gradcheck = require "tests.helpers.gradcheck"

-- largest difference relative to the reference's largest magnitude (sums of many products of either sign:
-- an element near 0 carries the rounding of the whole sum)
local rel_diff = require "tests.helpers.rel_diff"

-- forward and weight/bias gradients through the direct path and the im2col path
local function both_paths(s)
  lt.manual_seed(s.seed or 1)
  local x = lt.randn(s.n, 1, s.h, s.w)
  local w = lt.randn(s.o, 1, s.kh, s.kw)
  local b = s.bias and lt.randn(s.o) or nil
  local g = lt.randn(s.n, s.o, s.h + 2 * s.ph - s.kh + 1, s.w + 2 * s.pw - s.kw + 1)
  local function run(xin)
    local wl = w:clone():requires_grad(true)
    local bl = b and b:clone():requires_grad(true)
    local y = F.conv2d(xin, wl, bl, { padding = { s.ph, s.pw } })
    y:backward(g)
    return y, wl.grad, bl and bl.grad
  end
  local y1, gw1, gb1 = run(x)
  local xr = x:clone():requires_grad(true)
  local y2, gw2, gb2 = run(xr)
  assert.is_not_nil(xr.grad) -- the im2col path still gives the input gradient
  return { y1, gw1, gb1 }, { y2, gw2, gb2 }
end

local shapes = {
  { n = 1, h = 13, w = 17, o = 3, kh = 1, kw = 1, ph = 0, pw = 0, bias = true },
  { n = 64, h = 28, w = 28, o = 6, kh = 5, kw = 5, ph = 2, pw = 2, bias = true }, -- LeNet's first layer
  { n = 5, h = 13, w = 17, o = 4, kh = 3, kw = 3, ph = 1, pw = 1, bias = false },
  { n = 3, h = 13, w = 17, o = 9, kh = 7, kw = 7, ph = 0, pw = 0, bias = true }, -- 8 + 1 output channels
  { n = 17, h = 11, w = 9, o = 2, kh = 5, kw = 5, ph = 2, pw = 2, bias = true }, -- blocks of 8 + 8 + 1 images
  { n = 64, h = 13, w = 17, o = 7, kh = 3, kw = 6, ph = 0, pw = 2, bias = false },
  { n = 2, h = 7, w = 9, o = 5, kh = 3, kw = 3, ph = 3, pw = 3, bias = true }, -- padding wider than the kernel
  { n = 4, h = 6, w = 40, o = 3, kh = 2, kw = 4, ph = 1, pw = 0, bias = true }, -- rows of 37: 3 vectors
  { n = 2, h = 5, w = 70, o = 3, kh = 3, kw = 3, ph = 1, pw = 1, bias = true }, -- rows of 70: the portable code
  { n = 1, h = 1, w = 1, o = 2, kh = 1, kw = 1, ph = 0, pw = 0, bias = true },
}

describe("conv2d direct path", function()
  for _, s in ipairs(shapes) do
    local name = string.format("[%d x 1 x %d x %d] kernel %dx%d padding %d,%d, %d out%s", s.n, s.h, s.w, s.kh, s.kw,
      s.ph, s.pw, s.o, s.bias and ", bias" or "")
    it("matches the im2col path: " .. name, function()
      local d, r = both_paths(s)
      assert.is_true(rel_diff(d[1], r[1]) <= 1e-5, "output")
      assert.is_true(rel_diff(d[2], r[2]) <= 1e-5, "weight grad")
      if s.bias then assert.is_true(rel_diff(d[3], r[3]) <= 1e-5, "bias grad") end
    end)
  end

  it("passes a finite-difference gradient check for weight and bias", function()
    lt.manual_seed(7)
    for _, p in ipairs { 0, 1, 2 } do
      local x, w, b = lt.randn(2, 1, 6, 7), lt.randn(3, 1, 3, 3), lt.randn(3)
      assert.is_true(gradcheck(function(xx, ww, bb) return F.conv2d(xx, ww, bb, { padding = p }) end, { x, w, b },
        { wrt = { 2, 3 } }))
    end
  end)

  it("keeps the im2col path, with its input gradient, when the input requires grad", function()
    lt.manual_seed(8)
    local x, w, b = lt.randn(2, 1, 6, 7), lt.randn(3, 1, 5, 5), lt.randn(3)
    assert.is_true(gradcheck(function(xx, ww, bb) return F.conv2d(xx, ww, bb, { padding = 2 }) end, { x, w, b }))
  end)

  it("reads a non-contiguous input and runs under no_grad", function()
    lt.manual_seed(9)
    local xt = lt.randn(3, 1, 17, 13):transpose(3, 4)
    local w, b = lt.randn(4, 1, 5, 5), lt.randn(4)
    local ref = F.conv2d(xt:clone():requires_grad(true), w, b, { padding = 2 })
    assert.is_true(rel_diff(F.conv2d(xt, w, b, { padding = 2 }), ref) <= 1e-5)
    local y = lt.no_grad(function() return F.conv2d(xt:clone(), w, b, { padding = 2 }) end)
    assert.is_true(rel_diff(y, ref) <= 1e-5)
  end)

  it("gives bitwise the same output and gradients on 1 and 2 threads", function()
    local saved = lt.get_num_threads()
    local res = {}
    for _, nt in ipairs { 1, 2 } do
      lt.set_num_threads(nt)
      local ok, d = pcall(both_paths, { n = 64, h = 28, w = 28, o = 6, kh = 5, kw = 5, ph = 2, pw = 2, bias = true,
        seed = 3 })
      lt.set_num_threads(saved)
      assert(ok, d)
      res[nt] = d
    end
    for i = 1, 3 do assert.are.same(res[1][i]:flatten():tolist(), res[2][i]:flatten():tolist()) end
  end)
end)
