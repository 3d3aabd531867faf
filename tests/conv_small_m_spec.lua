-- tests/conv_small_m_spec.lua — conv2d's wide layers on lutra's small-M GEMM (nn_conv.c: K = C*kh*kw >= 256 and
-- O >= 64, AVX-512; the forward over 64 positions in all, the weight gradient over 64 an item, the input gradient
-- over 64 an item: at stride 1 as the forward of the flipped convolution, strided by phases): the output and the
-- gradients against the same call on two threads (OpenBLAS's GEMMs over the whole batch, or each thread's range of
-- a batch split as in tests/conv_split_spec.lua), against float64 (nn_conv_general.c with dgemm), and a
-- finite-difference check of both gradients. Wide layers over fewer positions take OpenBLAS's path for their
-- gradients, in chunks of items.
-- Shapes cover odd sizes (P not a multiple of the 32-column tile, O not a multiple of the 8-row tile), the
-- channel blocks of 256 col rows (a ragged last block), strides 1, 2 and 3, 1-D rows, no bias, wide output rows;
-- the kernel rows that meet only padding (the forward and the weight gradient read the input in place and skip them),
-- and the stride-2 im2col/col2im rows (AVX-512) that both GEMM paths use.
local lt = require "lutra"
local F = lt.F

local rel_diff = require "tests.helpers.rel_diff"

local shapes = {
  { n = 2, c = 128, h = 16, w = 16, o = 256, k = { 4, 4 }, s = { 2, 2 }, p = { 1, 1 }, bias = true }, -- DCGAN
  { n = 3, c = 64, h = 9, w = 11, o = 64, k = { 3, 3 }, s = { 1, 1 }, p = { 1, 1 }, bias = true }, -- P = 99
  { n = 2, c = 40, h = 13, w = 15, o = 70, k = { 4, 4 }, s = { 2, 2 }, p = { 1, 1 }, bias = true }, -- P = 56
  { n = 2, c = 40, h = 17, w = 19, o = 70, k = { 4, 4 }, s = { 2, 2 }, p = { 1, 1 }, bias = true }, -- 16+16+8 ch
  -- a large weight over few output positions (DCGAN's 256->512 on 8x8, smaller): OpenBLAS's path on any thread
  -- count, 16 items a chunk (P = 16: the weight packed once per 256 columns), a ragged last chunk of 4
  { n = 20, c = 64, h = 8, w = 8, o = 128, k = { 4, 4 }, s = { 2, 2 }, p = { 1, 1 }, bias = true },
  { n = 2, c = 48, h = 10, w = 12, o = 65, k = { 3, 5 }, s = { 3, 3 }, p = { 2, 2 }, bias = false }, -- stride 3
  { n = 3, c = 128, h = 1, w = 37, o = 65, k = { 1, 5 }, s = { 1, 1 }, p = { 0, 2 }, bias = true }, -- 1-D rows
  { n = 1, c = 64, h = 5, w = 70, o = 64, k = { 3, 3 }, s = { 1, 1 }, p = { 1, 1 }, bias = true }, -- rows of 70
  { n = 2, c = 600, h = 3, w = 3, o = 64, k = { 1, 1 }, s = { 1, 1 }, p = { 0, 0 }, bias = true }, -- 1x1, 600 ch
  -- K between 256 and 512: a conv1d-like k11 s2 (K = 440), and a 3x3 whose flipped input gradient would have
  -- 32 output channels (too narrow: W^T + col2im instead)
  { n = 3, c = 40, h = 1, w = 50, o = 64, k = { 1, 11 }, s = { 1, 2 }, p = { 0, 5 }, bias = true },
  { n = 2, c = 32, h = 10, w = 9, o = 64, k = { 3, 3 }, s = { 1, 1 }, p = { 1, 1 }, bias = false },
  -- a 9x9 kernel (81 taps: the forward's weight repacked in blocks of 64 taps, then 17) into 70 channels (a last
  -- panel of 6)
  { n = 2, c = 32, h = 12, w = 11, o = 70, k = { 9, 9 }, s = { 1, 1 }, p = { 4, 4 }, bias = true },
  -- the strided input gradient by phases: unequal strides, a kernel row count below the stride (a phase of input
  -- rows that no tap reaches) and odd sizes
  { n = 2, c = 64, h = 25, w = 20, o = 64, k = { 2, 5 }, s = { 3, 2 }, p = { 1, 2 }, bias = true },
  -- the input read in place: kernel rows skipped where they meet only padding (rows of taps 1-2, 0-1 at stride 2),
  -- and a padding wider than the kernel, whose first and last output rows meet no input row at all (bias alone)
  { n = 3, c = 64, h = 15, w = 17, o = 96, k = { 3, 3 }, s = { 2, 2 }, p = { 1, 1 }, bias = true }, -- P = 72
  { n = 2, c = 64, h = 6, w = 10, o = 64, k = { 3, 3 }, s = { 1, 1 }, p = { 4, 1 }, bias = true }, -- 12 rows
  -- narrower layers (OpenBLAS's GEMM) through the stride-2 im2col/col2im rows: rows of 8 with an odd row count,
  -- a 5-wide kernel (taps of both parities), a padding wider than the stride
  { n = 2, c = 36, h = 13, w = 16, o = 5, k = { 3, 3 }, s = { 2, 2 }, p = { 1, 1 }, bias = true },
  { n = 2, c = 8, h = 9, w = 20, o = 6, k = { 5, 5 }, s = { 2, 2 }, p = { 2, 2 }, bias = false },
  { n = 1, c = 3, h = 6, w = 31, o = 4, k = { 2, 7 }, s = { 2, 2 }, p = { 0, 3 }, bias = true },
  -- dilated: the wide layer read in place with its taps DH rows and DW columns apart (the vision bench's 64 k3 d2),
  -- strided and unequal dilations, kernel rows that meet only padding at dilation 3, and a narrow layer through
  -- the plain im2col/col2im rows (the AVX-512 rows take no dilation)
  { n = 2, c = 64, h = 12, w = 13, o = 64, k = { 3, 3 }, s = { 1, 1 }, p = { 2, 2 }, d = { 2, 2 }, bias = true },
  { n = 3, c = 64, h = 15, w = 17, o = 70, k = { 3, 3 }, s = { 2, 1 }, p = { 2, 1 }, d = { 2, 3 }, bias = true },
  { n = 2, c = 64, h = 5, w = 14, o = 64, k = { 3, 3 }, s = { 1, 1 }, p = { 4, 1 }, d = { 3, 1 }, bias = false },
  { n = 2, c = 8, h = 11, w = 20, o = 6, k = { 3, 2 }, s = { 2, 1 }, p = { 1, 0 }, d = { 2, 4 }, bias = true },
}

local function name_of(s)
  return string.format("[%d x %d x %d x %d] -> %d, kernel %dx%d stride %d,%d padding %d,%d%s%s", s.n, s.c, s.h, s.w,
    s.o, s.k[1], s.k[2], s.s[1], s.s[2], s.p[1], s.p[2], s.d and (" dilation %d,%d"):format(s.d[1], s.d[2]) or "",
    s.bias and ", bias" or "")
end

local function data(s)
  lt.manual_seed(7)
  local x, w = lt.randn(s.n, s.c, s.h, s.w), lt.randn(s.o, s.c, s.k[1], s.k[2]) * 0.05
  local b = s.bias and lt.randn(s.o) or nil
  local d = s.d or { 1, 1 }
  local ho = math.floor((s.h + 2 * s.p[1] - d[1] * (s.k[1] - 1) - 1) / s.s[1]) + 1
  local wo = math.floor((s.w + 2 * s.p[2] - d[2] * (s.k[2] - 1) - 1) / s.s[2]) + 1
  return x, w, b, lt.randn(s.n, s.o, ho, wo)
end

-- y, gx, gw, gb of conv2d(x, w, b) with the output gradient g, on `threads` threads
local function run(threads, x, w, b, g, s)
  local was = lt.get_num_threads()
  lt.set_num_threads(threads)
  local ok, res = pcall(function()
    local xl, wl = x:clone():requires_grad(true), w:clone():requires_grad(true)
    local bl = b and b:clone():requires_grad(true)
    local y = F.conv2d(xl, wl, bl, { stride = s.s, padding = s.p, dilation = s.d })
    y:backward(g)
    return { y, xl.grad, wl.grad, bl and bl.grad }
  end)
  lt.set_num_threads(was)
  assert(ok, res)
  return res
end

describe("conv2d on the small-M GEMM", function()
  for _, s in ipairs(shapes) do
    it("matches OpenBLAS's path and float64: " .. name_of(s), function()
      local x, w, b, g = data(s)
      local one, two = run(1, x, w, b, g, s), run(2, x, w, b, g, s)
      local d = run(1, x:double(), w:double(), b and b:double(), g:double(), s)
      for i, what in ipairs { "output", "input grad", "weight grad", "bias grad" } do
        if one[i] then
          assert.is_true(rel_diff(one[i], two[i]) <= 1e-5, what .. " against two threads")
          assert.is_true(rel_diff(one[i], d[i]:float()) <= 1e-5, what .. " against float64")
        end
      end
    end)
  end

  -- conv2d is linear in x and in w: the central difference of sum(y * g) along a random direction equals the
  -- directional derivative up to float32 rounding of the sums
  for _, i in ipairs { 1, 3, 5, 15, 16 } do
    local s = shapes[i]
    it("gradients agree with finite differences: " .. name_of(s), function()
      local x, w, b, g = data(s)
      local r = run(1, x, w, b, g, s)
      local was = lt.get_num_threads()
      lt.set_num_threads(1)
      local function L(xx, ww) return (F.conv2d(xx, ww, b, { stride = s.s, padding = s.p, dilation = s.d }) * g):sum():item() end
      local vx, vw = lt.randn(x:shape()), lt.randn(w:shape()) * 0.05
      local h = 0.5
      local fx = (L(x + vx * h, w) - L(x - vx * h, w)) / (2 * h)
      local fw = (L(x, w + vw * h) - L(x, w - vw * h)) / (2 * h)
      lt.set_num_threads(was)
      local ax, aw = (r[2] * vx):sum():item(), (r[3] * vw):sum():item()
      assert.is_true(math.abs(fx - ax) <= 2e-3 * math.max(1, math.abs(ax)), ("input: fd %g, grad %g"):format(fx, ax))
      assert.is_true(math.abs(fw - aw) <= 2e-3 * math.max(1, math.abs(aw)), ("weight: fd %g, grad %g"):format(fw, aw))
    end)
  end
end)

-- autocast's products are lutra's bf16 GEMM (lt_gemm): a wide layer on one thread keeps them, as on two
describe("conv2d on one thread under autocast", function()
  local it_bf16 = lt._bf16_info().active and it or pending
  it_bf16("computes in bf16 as on two threads", function()
    local s = shapes[1]
    local x, w, b = data(s)
    local function fwd(threads, ac)
      local was = lt.get_num_threads()
      lt.set_num_threads(threads)
      local f = function() return F.conv2d(x, w, b, { stride = s.s, padding = s.p, dilation = s.d }) end
      local ok, y = pcall(function() return ac and lt.autocast("bfloat16", f) or f() end)
      lt.set_num_threads(was)
      assert(ok, y)
      return y
    end
    local one, two = fwd(1, true), fwd(2, true)
    assert.is_true(rel_diff(one, two) <= 1e-5)
    assert.is_true(rel_diff(one, fwd(1, false)) > 1e-4) -- bf16 operands: not the fp32 result
  end)
end)
