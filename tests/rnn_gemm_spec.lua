-- rnn_gemm_spec.lua — the recurrent products at a size where they split over lutra's pool (core/src/
-- gemm_small_m.c: [32 x 256] x W_hh^T [256 x 1024] per step forward, [32 x 1024] x W_hh [1024 x 256] backward,
-- W_hh packed once per sequence): the same bits on 1 and 2 threads, and the values of the same recurrence
-- written with lutra's matmul (OpenBLAS), forward and backward. The small shapes are PyTorch fixtures
-- (tests/fixtures/rnn.json).
local lt = require "lutra"
local rnn_layer = require("lutra.core")._nn.rnn_layer

local T, B, H = 3, 32, 256

local function inputs()
  lt.manual_seed(5)
  local ins = { lt.randn(T, B, 4 * H), lt.randn(4 * H, H):mul(0.06), lt.randn(4 * H), lt.randn(B, H),
    lt.randn(B, H) }
  for _, t in ipairs(ins) do t:requires_grad(true) end
  return ins
end

-- outputs [T x B x H] then the last cell state, and every input's gradient for a fixed weighting of them
local function run(threads, layer)
  local old = lt.get_num_threads()
  lt.set_num_threads(threads)
  local ins = inputs()
  local out = layer(ins)
  lt.manual_seed(9)
  out:backward(lt.randn(out:shape()))
  lt.set_num_threads(old)
  local r = { out = out:detach():flatten() }
  for k, t in ipairs(ins) do r[k] = t.grad:flatten() end
  return r
end

local function kernel(ins) return rnn_layer("lstm", ins[1], ins[2], ins[3], ins[4], ins[5], nil, false) end

-- the same LSTM recurrence (PyTorch's gate order i, f, g, o) from lutra's tensor ops
local function composed(ins)
  local h, c, outs = ins[4], ins[5], {}
  for t = 1, T do
    local gates = ins[1][t] + ins[3] + h:matmul(ins[2]:t())
    local i, f, gg, o = gates:narrow(2, 1, H):sigmoid(), gates:narrow(2, H + 1, H):sigmoid(),
      gates:narrow(2, 2 * H + 1, H):tanh(), gates:narrow(2, 3 * H + 1, H):sigmoid()
    c = f * c + i * gg
    h = o * c:tanh()
    outs[t] = h:flatten()
  end
  outs[T + 1] = c:flatten()
  return lt.cat(outs, 1)
end

local rel_err = require "tests.helpers.rel_err"

local NAMES = { "xg", "w_hh", "b_hh", "h0", "c0" }

describe("rnn_layer's recurrent GEMM split over threads", function()
  it("gives the same bits on 1 and 2 threads, forward and backward", function()
    local one, two = run(1, kernel), run(2, kernel)
    assert.are.equal(0, (one.out - two.out):abs():max():item())
    -- w_hh's gradient is one GEMM over all steps by OpenBLAS, whose sums follow its split: compared to rounding
    for k = 1, 5 do
      local d = rel_err(two[k], one[k])
      if k == 2 then assert.is_true(d < 1e-5, NAMES[k] .. ": " .. d)
      else assert.are.equal(0, d, "gradient of " .. NAMES[k]) end
    end
  end)

  it("agrees with the recurrence written with matmul", function()
    local got, want = run(2, kernel), run(2, composed)
    local d = rel_err(got.out, want.out)
    assert.is_true(d < 1e-5, "output: " .. d)
    for k = 1, 5 do
      d = rel_err(got[k], want[k])
      assert.is_true(d < 1e-4, "gradient of " .. NAMES[k] .. ": " .. d)
    end
  end)
end)
