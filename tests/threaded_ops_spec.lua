-- threaded_ops_spec: elementwise and softmax kernels large enough to be split over lutra's thread pool give
-- bitwise the results of one thread (each element or row is computed by the same code whatever the split),
-- for contiguous, broadcast, strided and in-place operands; softmax's NaN and infinity rows behave as
-- PyTorch's. The sizes are above the split thresholds (ops_ew_internal.h EW_PAR_MIN, ops_softmax.c
-- SM_PAR_MIN) and not multiples of 16, so split points fall inside rows.
local skip = require("helpers.puc").needs_luajit("compares tensor memory bit by bit through LuaJIT's ffi")
if skip then describe("threaded ops", function() pending(skip) end) return end
local lt = require "lutra"
local ffi = require "ffi"

local nan, inf = 0 / 0, math.huge

-- Bitwise equality of two contiguous float32 tensors of the same shape.
local function same_bits(a, b)
  assert.same(a:shape(), b:shape())
  a, b = a:contiguous(), b:contiguous()
  local n = a:numel()
  local pa, pb = ffi.cast("const uint32_t *", a:data_ptr()), ffi.cast("const uint32_t *", b:data_ptr())
  for i = 0, n - 1 do
    if pa[i] ~= pb[i] then
      error(("element %d differs: %08x vs %08x"):format(i + 1, pa[i], pb[i]), 2)
    end
  end
  return true
end

-- Runs fn with 1 thread, then with 2 and 3 (3 parts split at other points even on a 2-core machine), and
-- checks every result is bitwise the 1-thread one. fn returns a tensor or a list of tensors.
local function threads_agree(fn)
  local function run(nt)
    lt.set_num_threads(nt)
    lt.manual_seed(11)
    local r = fn()
    return type(r) == "table" and r or { r }
  end
  local one = run(1)
  for _, nt in ipairs { 2, 3 } do
    local many = run(nt)
    assert.equals(#one, #many)
    for i = 1, #one do same_bits(one[i], many[i]) end
  end
end

describe("threaded elementwise ops", function()
  local saved
  before_each(function() saved = lt.get_num_threads() end)
  after_each(function() lt.set_num_threads(saved) end)

  local R, C = 257, 509 -- 130,813 elements

  it("binary ops on contiguous, broadcast and strided operands match one thread bitwise", function()
    threads_agree(function()
      local a, b = lt.randn(R, C), lt.randn(R, C)
      local row, col = lt.randn(C), lt.randn(R, 1)
      local bt = lt.randn(C, R):t() -- a transposed (strided) operand
      local out = {}
      for _, name in ipairs { "add", "sub", "mul", "div", "maximum", "minimum", "pow", "lt", "ge", "eq" } do
        local x = name == "pow" and a:abs() or a
        out[#out + 1] = x[name](x, b)
        out[#out + 1] = x[name](x, row)
        out[#out + 1] = x[name](x, col)
        out[#out + 1] = x[name](x, bt)
      end
      -- 3-d broadcast on both sides: [3 x 1 x 509] op [1 x 90 x 509]
      out[#out + 1] = lt.randn(3, 1, C) * lt.randn(1, 90, C)
      return out
    end)
  end)

  it("scalar ops and in-place updates match one thread bitwise", function()
    threads_agree(function()
      local a, b = lt.randn(R, C), lt.randn(R, C)
      local out = { a * 2.5, a + 1, 3 - a, 1 / a, a ^ 2, a:abs() ^ 0.5, a:gt(0.1) }
      local c = a:clone(); c:add_(b); out[#out + 1] = c
      local d = a:clone(); d:mul_(b:narrow(2, 1, C)); out[#out + 1] = d -- a view of other storage
      local e = a:clone(); e:mul_(3); out[#out + 1] = e
      local f = a:clone(); f:add_(b, 0.5); out[#out + 1] = f
      local g = a:clone(); g:clamp_(-0.5, 0.7); out[#out + 1] = g
      local h = a:t():clone():t(); h:add_(b); out[#out + 1] = h -- a strided tensor updated in place
      return out
    end)
  end)

  it("an in-place update from an overlapping view of the same tensor gives the one-thread result", function()
    threads_agree(function()
      local a = lt.randn(R, R)
      a:add_(a:t()) -- reads what it writes: stays on one thread
      return a
    end)
  end)

  it("unary ops, leaky_relu and clamp match one thread bitwise, forward and backward", function()
    threads_agree(function()
      local out = {}
      local names = { "neg", "exp", "log", "sqrt", "abs", "tanh", "sigmoid", "relu", "sin", "cos", "gelu",
                      "rsqrt", "sign", "log1p", "square" }
      local base = lt.randn(R, C)
      local g = lt.randn(R, C)
      for _, name in ipairs(names) do
        local positive = name == "log" or name == "sqrt" or name == "rsqrt" or name == "log1p"
        local x = (positive and base:abs() + 0.1 or base * 3):requires_grad(true)
        local y = x[name](x)
        y:backward(g)
        out[#out + 1] = y:detach()
        out[#out + 1] = x.grad
        out[#out + 1] = lt.no_grad(function() return (base * 3):t()[name]((base * 3):t()) end) -- strided
      end
      local x = base:clone():requires_grad(true)
      local y = x:leaky_relu(0.1) + x:clamp(-0.5, 0.5)
      y:backward(g)
      out[#out + 1] = y:detach()
      out[#out + 1] = x.grad
      return out
    end)
  end)

  -- h has two or three consumers. The add hands one gradient to both its inputs, so the sum of h's gradients
  -- cannot be taken in place: the engine adds them into a new tensor (lt_add_f32); the transposed consumer's
  -- gradient is a strided view. x's gradient is then added into x.grad, which exists from the first backward
  -- (lt_axpy_f32).
  it("gradients summed from several consumers match one thread bitwise and equal the sum of each", function()
    local function grads(transposed)
      local x = lt.randn(R, C):requires_grad(true)
      local w, wt, v = lt.randn(R, C), lt.randn(C, R), lt.randn(R, C)
      for _ = 1, 2 do
        local h = x * 1
        local y = h + h * w
        if transposed then y = y + (h:t() * wt):t() end
        local loss = (y * v):sum()
        loss:backward()
      end
      return x.grad, v, w, wt
    end
    threads_agree(function() return { (grads(false)), (grads(true)) } end)
    lt.set_num_threads(2)
    for _, transposed in ipairs { false, true } do
      local g, v, w, wt = grads(transposed)
      local want = v + v * w
      if transposed then want = want + (v:t() * wt):t() end
      assert.is_true(g:allclose(want * 2, 1e-5, 1e-6))
    end
  end)
end)

describe("threaded sums along a dim", function()
  local saved
  before_each(function() saved = lt.get_num_threads() end)
  after_each(function() lt.set_num_threads(saved) end)

  it("sum and mean along each dim match one thread bitwise (split by output elements)", function()
    threads_agree(function()
      local out = {}
      for _, shape in ipairs { { 301, 517 }, { 5, 77, 301 }, { 2, 70000 } } do
        local x = lt.randn(unpack(shape))
        for d = 1, #shape do
          out[#out + 1] = x:sum(d)
          out[#out + 1] = x:mean(d, true)
        end
      end
      out[#out + 1] = lt.randn(301, 517):sum() -- all elements: one thread, one order
      return out
    end)
  end)

  it("a split sum equals the sum of the same rows taken one at a time", function()
    lt.set_num_threads(2)
    local x = lt.randn(1000, 257)
    local s = x:sum(1):flatten():tolist()
    local s2 = x:sum(2):flatten():tolist()
    local xt = x:t():contiguous()
    for _, k in ipairs { 1, 17, 128, 257 } do
      assert.is_true(math.abs(s[k] - xt[k]:sum():item()) < 1e-3)
    end
    for _, r in ipairs { 1, 333, 1000 } do assert.equals(x[r]:sum():item(), s2[r]) end
  end)
end)

describe("threaded softmax", function()
  local saved
  before_each(function() saved = lt.get_num_threads() end)
  after_each(function() lt.set_num_threads(saved) end)

  it("softmax and log_softmax match one thread bitwise over the last dim and a strided dim, with backward", function()
    threads_agree(function()
      local out = {}
      for _, case in ipairs { { { 301, 517 }, 2 }, { { 301, 517 }, 1 }, { { 5, 77, 301 }, 2 }, { { 3, 40, 1100 }, 3 },
                              { { 5000, 10 }, 2 } } do
        for _, fn in ipairs { "softmax", "log_softmax" } do
          local x = lt.randn(unpack(case[1])):requires_grad(true)
          local y = x[fn](x, case[2])
          y:backward(lt.randn(unpack(case[1])))
          out[#out + 1] = y:detach()
          out[#out + 1] = x.grad
        end
      end
      return out
    end)
  end)

  it("a strided softmax equals the contiguous one over the transposed tensor", function()
    local x = lt.randn(300, 7, 40)
    local a = x:softmax(1)
    local b = x:permute(2, 3, 1):contiguous():softmax(3):permute(3, 1, 2)
    assert.is_true(((a - b):abs():max():item()) < 1e-6)
  end)

  -- softmax and log_softmax of t along dim as lists of rows (flattened), rows along the softmax dim
  local function rows_of(t, dim)
    local function nest(m)
      local flat, r = m:flatten():tolist(), {}
      local nr, nc = m:size(1), m:size(2)
      for i = 1, nr do
        r[i] = {}
        for j = 1, nc do r[i][j] = flat[(i - 1) * nc + j] end
      end
      return r
    end
    local s, ls = t:softmax(dim), t:log_softmax(dim)
    if dim == 1 then s, ls = s:t(), ls:t() end
    return nest(s), nest(ls)
  end

  it("a NaN in a row makes that row NaN and leaves the other rows alone (as PyTorch)", function()
    for _, nt in ipairs { 1, 2 } do
      lt.set_num_threads(nt)
      local x = lt.randn(400, 300)
      x[7][123] = nan
      local s = x:softmax(2)
      local ls = x:log_softmax(2)
      local srow, lrow = s[7]:flatten():tolist(), ls[7]:flatten():tolist()
      for j = 1, 300 do
        assert.is_true(srow[j] ~= srow[j], "softmax element " .. j)
        assert.is_true(lrow[j] ~= lrow[j], "log_softmax element " .. j)
      end
      local other = s[8]:sum():item()
      assert.is_true(math.abs(other - 1) < 1e-5)
      -- NaN as the very last element (the scalar tail of the lane max) and in a strided column
      local y = lt.tensor { { 1, 2, 3 }, { 4, 5, nan } }
      local sy = y:softmax(2):flatten():tolist() -- flat, row-major
      assert.is_true(sy[4] ~= sy[4] and sy[6] ~= sy[6])
      assert.is_true(math.abs(sy[1] + sy[2] + sy[3] - 1) < 1e-6)
      local sc = y:softmax(1):flatten():tolist()
      assert.is_true(sc[3] ~= sc[3] and sc[6] ~= sc[6])
      assert.is_true(math.abs(sc[1] + sc[4] - 1) < 1e-6)
    end
  end)

  it("-inf entries get exact zeros, a row of -inf or with +inf is NaN (as PyTorch)", function()
    local rows = lt.tensor {
      { -inf, 0, 1 },
      { -inf, -inf, -inf },
      { inf, 0, 1 },
      { -100, 0, -inf },
    }
    for _, dimcase in ipairs { { rows, 2 }, { rows:t():contiguous(), 1 } } do
      local s, ls = rows_of(dimcase[1], dimcase[2])
      assert.equals(0, s[1][1])
      assert.is_true(math.abs(s[1][2] - 0.2689414322376251) < 1e-6)
      assert.equals(-inf, ls[1][1])
      for j = 1, 3 do
        assert.is_true(s[2][j] ~= s[2][j] and ls[2][j] ~= ls[2][j])
        assert.is_true(s[3][j] ~= s[3][j] and ls[3][j] ~= ls[3][j])
      end
      assert.equals(0, s[4][1]) -- exp(-100) is below FLT_MIN: flushed, as lutra flushes denormals
      assert.equals(1, s[4][2])
      assert.equals(0, s[4][3])
      assert.equals(-100, ls[4][1])
    end
  end)

  it("the gradient through a -inf mask is exactly zero at the masked entries", function()
    local x = lt.tensor { { -inf, 0.5, 1 }, { 2, -inf, 0 } }:requires_grad(true)
    x:softmax(2):backward(lt.tensor { { 1, 2, 3 }, { -1, 4, 2 } })
    local g = x.grad:flatten():tolist() -- flat
    assert.equals(0, g[1])
    assert.equals(0, g[5])
    x.grad = nil
    x:log_softmax(2):backward(lt.tensor { { 1, 2, 3 }, { -1, 4, 2 } })
    g = x.grad:flatten():tolist()
    assert.equals(1, g[1]) -- g - exp(-inf) * sum(g)
    assert.equals(4, g[5])
  end)

  it("exp underflows to 0 and overflows to inf (as PyTorch under flush-to-zero)", function()
    local e = lt.tensor { -inf, -200, -88, 0, 89, inf, nan }:exp():flatten():tolist()
    assert.same({ 0, 0, 0, 1, inf, inf }, { e[1], e[2], e[3], e[4], e[5], e[6] })
    assert.is_true(e[7] ~= e[7])
  end)
end)
