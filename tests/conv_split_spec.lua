-- tests/conv_split_spec.lua — conv2d's batch split over the pool's threads (core/src/nn_conv.c, "the batch split
-- over the pool's threads"): on two threads each thread takes a range of the batch with its own scratch and
-- one-thread GEMMs, and the weight gradient is summed per range. Every shape here has at least 4M multiply-adds
-- per range (the split's threshold) and more items than threads: ranges of unequal length (5 items: 3 + 2), the
-- small-M GEMM inside each range (K >= 512, O >= 64, P >= 64) and OpenBLAS's chunks (O < 64, or P < 64), a gradient
-- accumulated into an existing one, only one of the two gradients asked for. Each result is checked against the
-- same call on one thread and in float64 (nn_conv_general.c on dgemm). The general path (nn_conv_general.c:
-- dilated, grouped and transposed convolutions, float64) splits its passes the same way: its forward, input and
-- weight gradients (a transposed convolution's backward runs its forward pass with the weight gradient fused) on two
-- threads against one, in float32 and float64.
local lt = require "lutra"
local F = lt.F

local rel_diff = require "tests.helpers.rel_diff"

local shapes = {
  -- small-M GEMM per range: K = 576, O = 64, P = 256; 5 x 64 x 576 x 256 = 47M multiply-adds
  { n = 5, c = 64, h = 16, w = 16, o = 64, k = 3, s = 1, p = 1 },
  -- OpenBLAS's chunks (O = 48 < 64): K = 1024, P = 64; 7 items (4 + 3), 22M
  { n = 7, c = 64, h = 16, w = 16, o = 48, k = 4, s = 2, p = 1 },
  -- DCGAN's wide layer over few positions (P = 16: OpenBLAS's chunks of 256 columns), 128 x 2048 x 16 x 6 = 25M
  { n = 6, c = 128, h = 8, w = 8, o = 128, k = 4, s = 2, p = 1 },
  -- DCGAN's 128 -> 256 k4 s2 on 16x16 (small-M GEMM), 3 items: 3 x 256 x 2048 x 64 = 100M
  { n = 3, c = 128, h = 16, w = 16, o = 256, k = 4, s = 2, p = 1 },
  -- a weight of 1M floats over 16 positions an item (as DCGAN's 256 -> 512 on 8x8): its gradient in one GEMM over
  -- the whole batch unfolded, the input gradient by ranges; 5 x 256 x 4096 x 16 = 84M
  { n = 5, c = 256, h = 8, w = 8, o = 256, k = 4, s = 2, p = 1 },
}

local function name_of(s)
  return string.format("[%d x %d x %d x %d] -> %d, kernel %d stride %d padding %d", s.n, s.c, s.h, s.w, s.o, s.k, s.s,
    s.p)
end

local function data(s)
  lt.manual_seed(11)
  local ho = math.floor((s.h + 2 * s.p - s.k) / s.s) + 1
  return lt.randn(s.n, s.c, s.h, s.w), lt.randn(s.o, s.c, s.k, s.k) * 0.05, lt.randn(s.o), lt.randn(s.n, s.o, ho, ho)
end

-- f(x, w, b) on `threads` threads: y and the gradients asked for (want: "x", "w" or "both"); `twice` runs the
-- backward twice (the second one accumulating into the gradients of the first)
local function run_f(threads, f, x, w, b, g, want, twice)
  local was = lt.get_num_threads()
  lt.set_num_threads(threads)
  local ok, res = pcall(function()
    local xl = x:clone():requires_grad(want ~= "w")
    local wl = w:clone():requires_grad(want ~= "x")
    local bl = b:clone():requires_grad(true)
    local y
    for _ = 1, twice and 2 or 1 do
      y = f(xl, wl, bl)
      y:backward(g)
    end
    return { y = y, gx = xl.grad, gw = wl.grad, gb = bl.grad }
  end)
  lt.set_num_threads(was)
  assert(ok, res)
  return res
end

-- conv2d at shape s's stride and padding
local function run(threads, s, x, w, b, g, want, twice)
  return run_f(threads, function(xx, ww, bb) return F.conv2d(xx, ww, bb, { stride = s.s, padding = s.p }) end, x, w,
    b, g, want, twice)
end

local function check(s, want, twice)
  local x, w, b, g = data(s)
  local one, two = run(1, s, x, w, b, g, want, twice), run(2, s, x, w, b, g, want, twice)
  local d = run(1, s, x:double(), w:double(), b:double(), g:double(), want, twice)
  for _, k in ipairs { "y", "gx", "gw", "gb" } do
    assert.are.equal(one[k] == nil, two[k] == nil, k)
    if two[k] then
      assert.is_true(rel_diff(two[k], one[k]) <= 1e-5, k .. " on two threads against one: " .. rel_diff(two[k], one[k]))
      assert.is_true(rel_diff(two[k], d[k]:float()) <= 1e-5, k .. " on two threads against float64")
    end
  end
  return two
end

describe("conv2d's batch split over two threads", function()
  for _, s in ipairs(shapes) do
    it("matches one thread and float64: " .. name_of(s), function() check(s, "both") end)
  end

  it("accumulates a second backward into the first one's gradients", function()
    for _, i in ipairs { 1, 3, 5 } do
      local s = shapes[i]
      local once, twice = check(s, "both"), check(s, "both", true)
      assert.is_true(rel_diff(twice.gw, once.gw * 2) <= 1e-6, name_of(s))
      assert.is_true(rel_diff(twice.gx, once.gx * 2) <= 1e-6, name_of(s))
    end
  end)

  it("gives a large weight's gradient over few positions the bits of one thread (one product over the batch)", function()
    local s = shapes[5]
    local x, w, b, g = data(s)
    local one, two = run(1, s, x, w, b, g, "both"), run(2, s, x, w, b, g, "both")
    assert.are.equal(0, (two.gw - one.gw):abs():max():item())
  end)

  it("gives the input gradient alone, and the weight gradient alone", function()
    for _, i in ipairs { 1, 2, 5 } do
      local s = shapes[i]
      local only_x, only_w = check(s, "x"), check(s, "w")
      assert.is_nil(only_x.gw)
      assert.is_nil(only_w.gx)
      local both = check(s, "both")
      assert.is_true(rel_diff(only_x.gx, both.gx) == 0, name_of(s))
      assert.is_true(rel_diff(only_w.gw, both.gw) == 0, name_of(s))
    end
  end)
end)

-- x, weight, out channels of the output gradient, and the layer; every one above 4M multiply-adds per range
local general = {
  { what = "dilated 3x3, dilation 2, 5 items", x = { 5, 64, 20, 20 }, w = { 64, 64, 3, 3 },
    f = function(x, w, b) return F.conv2d(x, w, b, { padding = 2, dilation = 2 }) end },
  { what = "grouped 3x3, 4 groups, 3 items", x = { 3, 64, 20, 20 }, w = { 128, 16, 3, 3 },
    f = function(x, w, b) return F.conv2d(x, w, b, { padding = 1, groups = 4 }) end },
  { what = "1-d, dilation 4, 5 items", x = { 5, 64, 256 }, w = { 64, 64, 3 },
    f = function(x, w, b) return F.conv1d(x, w, b, { padding = 4, dilation = 4 }) end },
  { what = "transposed k4 s2, 128 -> 64, 5 items", x = { 5, 128, 12, 12 }, w = { 128, 64, 4, 4 },
    f = function(x, w, b) return F.conv_transpose2d(x, w, b, { stride = 2, padding = 1 }) end },
}

describe("the general convolutions' batch split over two threads", function()
  for _, c in ipairs(general) do
    for _, dt in ipairs { "float32", "float64" } do
      it(c.what .. ", " .. dt .. ": matches one thread", function()
        lt.manual_seed(5)
        local x, w = lt.randn(c.x), lt.randn(c.w) * 0.05
        local f64 = dt == "float64"
        local probe = c.f(x, w, nil)
        local b = lt.randn(probe:size(2))
        local g = lt.randn(probe:shape())
        if f64 then x, w, b, g = x:double(), w:double(), b:double(), g:double() end
        local one, two = run_f(1, c.f, x, w, b, g), run_f(2, c.f, x, w, b, g)
        local tol = f64 and 1e-12 or 1e-5
        for _, k in ipairs { "y", "gx", "gw", "gb" } do
          assert.are.equal(dt, two[k]:dtype(), k)
          assert.is_true(rel_diff(two[k], one[k]) <= tol, k .. " on two threads against one: " .. rel_diff(two[k], one[k]))
        end
        if not f64 then -- and against float64 on one thread
          local d = run_f(1, c.f, x:double(), w:double(), b:double(), g:double())
          for _, k in ipairs { "y", "gx", "gw", "gb" } do
            assert.is_true(rel_diff(two[k], d[k]:float()) <= 1e-5, k .. " against float64")
          end
        end
      end)
    end
  end
end)
