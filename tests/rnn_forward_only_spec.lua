-- rnn_forward_only_spec.lua — the recurrence's forward-only path (core/src/nn_rnn.c): when nothing needs a
-- gradient (lt.no_grad, or inputs without requires_grad) it keeps one step of workspace instead of every
-- step's, and its outputs are the same bits as the recorded forward's, in every mode and direction.
local lt = require "lutra"
local rnn_layer = require("lutra.core")._nn.rnn_layer

local G = { rnn_tanh = 1, rnn_relu = 1, gru = 3, lstm = 4 }

local function inputs(mode, T, B, H, P)
  lt.manual_seed(7)
  local ins = { lt.randn(T, B, G[mode] * H), lt.randn(G[mode] * H, P or H):mul(0.3), lt.randn(G[mode] * H),
    lt.randn(B, P or H) }
  if mode == "lstm" then ins[5] = lt.randn(B, H) end
  if P then ins[6] = lt.randn(P, H):mul(0.3) end
  return ins
end

local function run(mode, ins, rev)
  return rnn_layer(mode, ins[1], ins[2], ins[3], ins[4], ins[5], ins[6], rev)
end

describe("rnn_layer forward only", function()
  for _, mode in ipairs { "rnn_tanh", "rnn_relu", "gru", "lstm" } do
    for _, rev in ipairs { false, true } do
      it(mode .. (rev and " reversed" or "") .. ": no_grad gives the same bits as the recorded forward", function()
        local ins = inputs(mode, 6, 3, 5)
        for _, t in ipairs(ins) do t:requires_grad(true) end
        local with_grad = run(mode, ins, rev)
        assert.is_truthy(with_grad:grad_fn())
        local fwd = lt.no_grad(function() return run(mode, ins, rev) end)
        assert.is_nil(fwd:grad_fn())
        assert.are.same(with_grad:detach():totable(), fwd:totable())
      end)
    end
  end

  it("lstm with a projection, and inputs that need no gradient: the same bits", function()
    local ins = inputs("lstm", 5, 2, 4, 3)
    local plain = run("lstm", ins, false)
    for _, t in ipairs(ins) do t:requires_grad(true) end
    local with_grad = run("lstm", ins, false)
    assert.are.same(with_grad:detach():totable(), plain:totable())
    local b = lt.no_grad(function() return run("lstm", ins, true) end)
    assert.are.same(run("lstm", ins, true):detach():totable(), b:totable())
  end)

  it("keeps one step of workspace: a 64-step LSTM allocates a fraction of what the recorded one does", function()
    local ins = inputs("lstm", 64, 8, 32)
    for _, t in ipairs(ins) do t:requires_grad(true) end
    local function allocated(fn)
      collectgarbage()
      local a = lt.memory_stats().total_allocated
      local out = fn()
      local b = lt.memory_stats().total_allocated
      assert.is_truthy(out)
      return b - a
    end
    local recorded = allocated(function() return run("lstm", ins, false) end)
    local fwd = allocated(function() return lt.no_grad(function() return run("lstm", ins, false) end) end)
    -- recorded: outputs [64, 8, 32] + the workspace of every step (h, 4 gates, c, tanh c: 7 x 256 floats a
    -- step); forward only: the outputs and one step
    assert.is_true(fwd * 3 < recorded, ("forward only allocated %d bytes, recorded %d"):format(fwd, recorded))
  end)
end)
