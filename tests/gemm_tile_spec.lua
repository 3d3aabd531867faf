-- gemm_tile_spec.lua — float32 GEMMs that lutra's AVX-512 tile runs instead of OpenBLAS (core/src/blas.c):
-- tile_pays (B as stored, A as stored or transposed with k <= 512, C = A B or C += A B, m >= 16, n >= 128,
-- k >= 32) and tile_pays_nt (C = A B^T as C^T = B A^T when the batch A is the smaller to pack: a Linear's x W^T).
-- Checked: the values of the same products in float64, on shapes with partial register tiles (m not a multiple of
-- 8, n not of 32), k past the tile's 256-row blocks, operands that are slices of wider matrices; the same bits on
-- 1 and 2 threads; C never read when it is overwritten; accumulation into an existing gradient. On a CPU without
-- AVX-512 the same products run on OpenBLAS and the spec checks those.
local lt = require "lutra"

-- largest |got - want| / (1 + |want|), got float32 and want float64 (float32's rounding grows with k: a wrong
-- product or a missed tap is off by ~1)
local rel_err = require "tests.helpers.rel_err"

local function with_threads(n, fn)
  local old = lt.get_num_threads()
  lt.set_num_threads(n)
  local ok, r = pcall(fn)
  lt.set_num_threads(old)
  if not ok then error(r, 0) end
  return r
end

-- x [m x k] as stored, or as the transpose of a stored [k x m] (A read transposed); sliced out of wider storage
-- when `slice` (row strides larger than the rows)
local function operand(rows, cols, transposed, slice)
  local t
  if transposed then
    t = lt.randn(cols, rows + (slice and 5 or 0))
    if slice then t = t:narrow(2, 3, rows) end
    return t:t()
  end
  t = lt.randn(rows, cols + (slice and 7 or 0))
  return slice and t:narrow(2, 2, cols) or t
end

describe("GEMMs on lutra's tile", function()
  it("match float64 on partial tiles, long k, transposed and sliced operands", function()
    lt.manual_seed(11)
    local shapes = { -- m, n, k
      { 16, 128, 32 }, { 21, 130, 37 }, { 64, 512, 256 }, { 67, 200, 300 }, { 120, 400, 64 }, { 33, 1000, 520 },
      { 256, 161, 129 },
    }
    for _, s in ipairs(shapes) do
      local m, n, k = s[1], s[2], s[3]
      for _, ta in ipairs({ false, true }) do
        for _, slice in ipairs({ false, true }) do
          local a, b = operand(m, k, ta, slice), operand(k, n, false, slice)
          local want = a:double():matmul(b:double())
          local err = rel_err(a:matmul(b), want)
          assert.is_true(err < 4e-7 * k, ("m=%d n=%d k=%d transposed A %s slices %s: rel err %g"):format(m, n, k,
            tostring(ta), tostring(slice), err))
        end
      end
    end
  end)

  it("x W^T (B transposed) matches float64, with and without a bias added into C, sliced operands", function()
    lt.manual_seed(15)
    for _, s in ipairs({ { 32, 64, 64 }, { 33, 130, 100 }, { 40, 300, 200 }, { 64, 512, 784 }, { 77, 257, 520 } }) do
      local m, n, k = s[1], s[2], s[3]
      for _, slice in ipairs({ false, true }) do
        local x, w = operand(m, k, false, slice), operand(n, k, false, slice)
        local bias = lt.randn(n)
        local want = x:double():matmul(w:double():t())
        local e1, e2 = rel_err(x:matmul(w:t()), want), rel_err(lt.linear(x, w, bias), want + bias:double())
        assert.is_true(e1 < 4e-7 * k and e2 < 4e-7 * k, ("m=%d n=%d k=%d slices %s: rel err %g, with bias %g"):format(
          m, n, k, tostring(slice), e1, e2))
      end
    end
  end)

  it("applies a Linear's bias and ReLU as x W^T is written: the bits of the product, + bias, then relu", function()
    lt.manual_seed(16)
    -- ragged rows (m not a multiple of the transpose's 8-row blocks), ragged columns, long k, sliced operands; every
    -- shape one where the plain product runs on the tile too (m (k + n) < n k), so both are the tile's sums
    for _, s in ipairs({ { 32, 64, 96 }, { 33, 130, 100 }, { 64, 512, 784 }, { 77, 257, 520 }, { 45, 99, 300 } }) do
      local m, n, k = s[1], s[2], s[3]
      for _, slice in ipairs({ false, true }) do
        local lin = lt.nn.Linear(k, n)
        local x = operand(m, k, false, slice)
        local where = ("m=%d n=%d k=%d slices %s"):format(m, n, k, tostring(slice))
        local product = x:matmul(lin.weight:detach():t()) -- the product alone (the tile, C = x W^T)
        local biased = product + lin.bias:detach()
        assert.is_true(lin:forward(x):equal(biased), where .. ": bias")
        assert.is_true(lin:forward_relu(x):equal(biased:relu()), where .. ": bias and relu")
        assert.is_true(lt.nn.Sequential { lin, lt.nn.ReLU() }(x):equal(biased:relu()), where .. ": Sequential")
        assert.is_true(lt.linear(x, lin.weight):equal(product), where .. ": no bias")
      end
    end
  end)

  it("runs a Linear with a bias on the tile up to twice the plain product's packing, to float64's values", function()
    lt.manual_seed(18)
    -- m (k + n) between 1 and 2 times n k: the plain x W^T stays on OpenBLAS, the Linear with a bias takes the tile
    for _, s in ipairs({ { 256, 256, 512 }, { 100, 200, 150 }, { 384, 512, 512 } }) do
      local m, n, k = s[1], s[2], s[3]
      local lin, x = lt.nn.Linear(k, n), lt.randn(m, k)
      local want = x:double():matmul(lin.weight:detach():double():t()) + lin.bias:detach():double()
      local y = lin:forward(x)
      local err = rel_err(y, want)
      assert.is_true(err < 4e-7 * k, ("m=%d n=%d k=%d: rel err %g"):format(m, n, k, err))
      assert.is_true(lin:forward_relu(x):equal(y:relu()), ("m=%d n=%d k=%d: relu"):format(m, n, k))
      local one = with_threads(1, function() return lin:forward_relu(x) end)
      assert.is_true(one:equal(with_threads(2, function() return lin:forward_relu(x) end)))
      -- without a bias the forward is the plain product, and the fused ReLU keeps its bits
      local plain = lt.nn.Linear(k, n, { bias = false })
      assert.is_true(plain:forward_relu(x):equal(plain:forward(x):relu()), ("m=%d n=%d k=%d: no bias"):format(m, n, k))
    end
  end)

  it("keeps NaN through the fused ReLU and clamps to +0, as ReLU alone does, on whole blocks and ragged edges", function()
    lt.manual_seed(17)
    local m, n, k = 40, 200, 128 -- rows 33-40 and columns 193-200 are the transpose's ragged edges
    local lin = lt.nn.Linear(k, n)
    local x = lt.randn(m, k)
    for _, r in ipairs({ 3, 37 }) do x[r][5] = 0 / 0 end -- every output of these rows is NaN
    lin.bias:detach()[7] = 0 / 0 -- and of this column
    lin.bias:detach()[198] = 0 / 0
    local fused = lin:forward_relu(x)
    local want = lt.linear(x, lin.weight, lin.bias):relu()
    assert.is_true(fused:isnan():equal(want:isnan()))
    assert.are.equal(2 * n + 2 * (m - 2), fused:isnan():sum():item())
    local finite = want:isnan():logical_not()
    local got, exp = fused:masked_select(finite), want:masked_select(finite)
    assert.is_true(got:equal(exp))
    assert.is_true((1 / got):equal(1 / exp)) -- each zero's sign too (1 / -0 is -inf)
    assert.is_true(exp:eq(0):sum():item() > 1000) -- the clamped half of the outputs
  end)

  it("gives the same bits on 1 and 2 threads (C's column panels split, each summed along k in order)", function()
    lt.manual_seed(12)
    for _, s in ipairs({ { 64, 512, 256, false }, { 512, 784, 64, true }, { 100, 333, 300, false } }) do
      local a, b = operand(s[1], s[3], s[4], false), operand(s[3], s[2], false, false)
      local one = with_threads(1, function() return a:matmul(b) end)
      local two = with_threads(2, function() return a:matmul(b) end)
      assert.is_true(one:equal(two), ("m=%d n=%d k=%d"):format(s[1], s[2], s[3]))
    end
    local x, w, bias = lt.randn(64, 784), lt.randn(512, 784), lt.randn(512) -- x W^T + b, as C^T = W x^T
    local one = with_threads(1, function() return lt.linear(x, w, bias) end)
    assert.is_true(one:equal(with_threads(2, function() return lt.linear(x, w, bias) end)))
  end)

  it("does not read an overwritten C: a freed buffer of NaN reused for the result leaves no NaN", function()
    lt.manual_seed(13)
    local a, b = lt.randn(64, 256), lt.randn(256, 512)
    -- eight freed buffers of the result's size, full of NaN, for the allocator to hand out again
    for _ = 1, 8 do lt.full({ 64, 512 }, 0 / 0) end
    collectgarbage()
    collectgarbage()
    local w = lt.randn(512, 256)
    local results = {}
    for i = 1, 8 do results[i] = i % 2 == 0 and a:matmul(b) or a:matmul(w:t()) end
    for i = 1, 8 do assert.are.equal(0, results[i]:isnan():sum():item()) end
  end)

  it("accumulates a weight gradient in place (C += A^T B) as two separate gradients add", function()
    lt.manual_seed(14)
    local w = lt.randn(300, 160):requires_grad(true)
    local x1, x2 = lt.randn(48, 160), lt.randn(48, 160)
    local g1, g2 = lt.randn(48, 300), lt.randn(48, 300)
    lt.linear(x1, w):backward(g1)
    lt.linear(x2, w):backward(g2)
    local want = g1:double():t():matmul(x1:double()) + g2:double():t():matmul(x2:double())
    assert.is_true(rel_err(w.grad, want) < 2e-5)
  end)
end)
