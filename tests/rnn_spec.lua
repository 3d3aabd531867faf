-- rnn_spec.lua — the recurrent layers (lua/lutra/nn/rnn.lua, core/src/nn_rnn.c): PyTorch 1.13 fixtures for
-- every module and option (tests/fixtures/rnn.json), a state dict written from torch loaded strictly, files in
-- lutra's earlier LSTM layout, finite-difference gradchecks of the C recurrence in every mode, dropout between
-- layers, and the error texts.
local lt = require "lutra"
local nn = lt.nn
local X = require "tests.helpers.nn_fixtures"
local gradcheck = require "tests.helpers.gradcheck"
local rnn_layer = require("lutra.core")._nn.rnn_layer

local function err_of(fn, ...)
  local ok, e = pcall(fn, ...)
  assert(not ok, "expected an error")
  return tostring(e)
end

local function tensors(t)
  local r = {}
  for k, v in pairs(t) do r[k] = X.tensor(v) end
  return r
end

-- float32 through a recurrence against torch in float64: a little above the one-op tolerance
local RTOL, ATOL = 1e-4, 1e-5

describe("recurrent modules against PyTorch 1.13 (tests/fixtures/rnn.json)", function()
  for _, case in ipairs(X.load("rnn.json")) do
    it("matches " .. case.name .. ": outputs, final states, gradients of input, parameters, initial states", function()
      local m = nn[case.module](case.args[1], case.args[2], case.opts)
      if case.mode == "eval" then m:eval() else m:train() end
      -- torch's named_parameters are exactly lutra's state_dict: strict-clean
      m:load_state_dict(tensors(case.params))
      local x = X.tensor(case.input):requires_grad(true)
      local h0 = case.h0 and X.tensor(case.h0):requires_grad(true)
      local c0 = case.c0 and X.tensor(case.c0):requires_grad(true)
      local lstm = case.module == "LSTM" or case.module == "LSTMCell"
      local state = h0 and (lstm and { h0, c0 } or h0) or nil
      local got = {}
      if case.module:match("Cell$") then
        got.output, got.c = m(x, state)
      else
        local s
        got.output, s = m(x, state)
        if lstm then got.h_n, got.c_n = s[1], s[2] else got.h_n = s end
      end
      local loss
      for _, k in ipairs { "output", "h_n", "c", "c_n" } do
        if case[k] then
          X.check(k, got[k], case[k], RTOL, ATOL)
          local term = (got[k] * X.tensor(case["grad_" .. k])):sum()
          loss = loss and loss + term or term
        end
      end
      loss:backward()
      X.check("grad_input", x.grad, case.grad_input, RTOL, ATOL)
      local named = m:named_parameters()
      for name, g in pairs(case.grad_params) do X.check("grad of " .. name, named[name].grad, g, RTOL, ATOL) end
      if h0 then X.check("grad_h0", h0.grad, case.grad_h0, RTOL, ATOL) end
      if c0 then X.check("grad_c0", c0.grad, case.grad_c0, RTOL, ATOL) end
    end)
  end
end)

describe("recurrent state dicts", function()
  it("loads a state dict written from torch (LSTM proj/bidir/2 layers, GRU bidir, RNN relu) strictly, same outputs", function()
    local model = {
      lstm = nn.LSTM(3, 5, { num_layers = 2, bidirectional = true, proj_size = 2, batch_first = true }),
      gru = nn.GRU(4, 3, { bidirectional = true }), rnn = nn.RNN(3, 2, { nonlinearity = "relu" }),
    }
    lt.load("tests/fixtures/rnn_torch_state.safetensors", model)
    local io = lt.load("tests/fixtures/rnn_torch_io.safetensors")
    local lo, ls = model.lstm(io.x)
    local go, gh = model.gru(lo:transpose(1, 2))
    local ro, rh = model.rnn(io.x:transpose(1, 2))
    for k, t in pairs { lstm_out = lo, lstm_h_n = ls[1], lstm_c_n = ls[2], gru_out = go, gru_h_n = gh, rnn_out = ro,
      rnn_h_n = rh } do
      assert.is_true(t:allclose(io[k], 1e-4, 1e-5), k)
    end
    -- and lutra's own state_dict has exactly torch's names
    local mine, theirs = {}, {}
    for k in pairs(nn.state_dict(model)) do mine[#mine + 1] = k end
    for k in pairs(lt.load("tests/fixtures/rnn_torch_state.safetensors")) do theirs[#theirs + 1] = k end
    table.sort(mine)
    table.sort(theirs)
    assert.are.same(theirs, mine)
  end)

  it("loads files saved with lutra's earlier LSTM names (weight_ih, weight_ih_l2 ...) and computes as before", function()
    local m = nn.LSTM(3, 4, { num_layers = 2, batch_first = true })
    local model = { lstm = m, head = nn.Linear(4, 2) }
    local old = lt.load("tests/fixtures/rnn_legacy_lstm.safetensors")
    assert.is_not_nil(old["lstm.weight_ih_l2"]) -- the file really is in the old layout
    lt.load("tests/fixtures/rnn_legacy_lstm.safetensors", model)
    assert.is_true(m.weight_ih_l1:allclose(old["lstm.weight_ih_l2"], 0, 0))
    assert.is_true(m.bias_hh_l0:allclose(old["lstm.bias_hh"], 0, 0))
    assert.is_nil(old["lstm.weight_ih_l0"]) -- the caller's table is left as it was
    local io = lt.load("tests/fixtures/rnn_legacy_lstm_io.safetensors")
    local out, st = m(io.x)
    assert.is_true(out:allclose(io.out, 1e-5, 1e-6))
    assert.is_true(st[1]:allclose(io.h_n, 1e-5, 1e-6) and st[2]:allclose(io.c_n, 1e-5, 1e-6))
    -- a three-layer file: old _l2/_l3 become _l1/_l2 at once (no old name is mistaken for a new one)
    local l3 = nn.LSTM(2, 2, { num_layers = 3 })
    local sd = {}
    for l = 1, 3 do
      local sfx = l == 1 and "" or ("_l" .. l)
      for _, b in ipairs { "weight_ih", "weight_hh", "bias_ih", "bias_hh" } do
        sd[b .. sfx] = lt.full(l3[b .. "_l" .. (l - 1)]:shape(), l * 10)
      end
    end
    l3:load_state_dict(sd)
    assert.are.equal(30, l3.weight_hh_l2[1][1]:item())
    assert.are.equal(20, l3.bias_ih_l1[1]:item())
  end)
end)

describe("gradcheck of the fused recurrence (lt._nn.rnn_layer)", function()
  before_each(function() lt.manual_seed(5) end)
  local T, B, Hd = 3, 2, 3
  for _, mode in ipairs { "rnn_tanh", "rnn_relu", "gru", "lstm" } do
    for _, rev in ipairs { false, true } do
      it(mode .. (rev and " reversed" or "") .. ": xg, w_hh, b_hh, h0" .. (mode == "lstm" and ", c0" or ""), function()
        local G = ({ rnn_tanh = 1, rnn_relu = 1, gru = 3, lstm = 4 })[mode]
        local ins = { lt.randn(T, B, G * Hd), lt.randn(G * Hd, Hd):mul(0.5), lt.randn(G * Hd), lt.randn(B, Hd) }
        if mode == "lstm" then ins[5] = lt.randn(B, Hd) end
        assert.is_true(gradcheck(function(xg, w, b, h, c) return rnn_layer(mode, xg, w, b, h, c, nil, rev) end, ins,
          { rtol = 1e-2, atol = 2e-3 }))
      end)
    end
  end
  it("lstm with a projection, reversed: xg, w_hh, b_hh, h0, c0, w_hr; and without b_hh", function()
    local P = 2
    local ins = { lt.randn(T, B, 4 * Hd), lt.randn(4 * Hd, P), lt.randn(4 * Hd), lt.randn(B, P), lt.randn(B, Hd),
      lt.randn(P, Hd) }
    assert.is_true(gradcheck(function(xg, w, b, h, c, r) return rnn_layer("lstm", xg, w, b, h, c, r, true) end, ins,
      { rtol = 1e-2, atol = 2e-3 }))
    assert.is_true(gradcheck(function(xg, w, h, c, r) return rnn_layer("lstm", xg, w, nil, h, c, r, false) end,
      { ins[1], ins[2], ins[4], ins[5], ins[6] }, { rtol = 1e-2, atol = 2e-3 }))
  end)
end)

describe("dropout between layers", function()
  -- layer 1 and 2 pass their input through (identity input weights, no recurrence, relu of positive values),
  -- so the output is exactly dropout(x) in training: zeros at rate p, the rest x / (1 - p)
  local function passthrough(p, layers)
    local n = 8
    local m = nn.RNN(n, n, { nonlinearity = "relu", num_layers = layers, dropout = p, bias = false })
    for l = 0, layers - 1 do
      m["weight_ih_l" .. l] = lt.eye(n):requires_grad(true)
      m["weight_hh_l" .. l] = lt.zeros(n, n):requires_grad(true)
    end
    return m, lt.rand(50, 20, n):add(0.5)
  end

  it("drops at rate p and scales by 1/(1-p) in training, only between layers; identity in eval", function()
    lt.manual_seed(3)
    local m, x = passthrough(0.3, 2)
    local out = m(x)
    local o, xs = out:flatten():tolist(), x:flatten():tolist()
    local zeros = 0
    for i = 1, #o do
      if o[i] == 0 then zeros = zeros + 1
      else assert(math.abs(o[i] - xs[i] / 0.7) < 1e-5, "kept values are scaled by 1/(1-p)") end
    end
    assert.is_true(math.abs(zeros / #o - 0.3) < 0.03, "dropped fraction " .. zeros / #o)
    m:eval()
    assert.is_true(m(x):allclose(x, 0, 0))
    -- one layer: nothing follows it, so nothing is dropped even in training
    local one, x1 = passthrough(0.5, 1)
    assert.is_true(one(x1):allclose(x1, 0, 0))
  end)
end)

describe("recurrent module errors", function()
  local function z(...) return lt.zeros(...) end
  local cases = {
    { "unknown option", function() return nn.GRU(3, 4, { dropuot = 0.1 }) end, "GRU: unknown option 'dropuot'" },
    { "proj_size on GRU", function() return nn.GRU(3, 4, { proj_size = 2 }) end, "GRU: unknown option 'proj_size'" },
    { "proj_size too big", function() return nn.LSTM(3, 4, { proj_size = 4 }) end,
      "LSTM: proj_size must be smaller than hidden_size (4), got 4" },
    { "bad nonlinearity", function() return nn.RNN(3, 4, { nonlinearity = "gelu" }) end,
      "RNN: nonlinearity must be \"tanh\" or \"relu\", got gelu" },
    { "dropout out of range", function() return nn.LSTM(3, 4, { dropout = 1.5 }) end,
      "LSTM: dropout must be a probability between 0 and 1, got 1.5" },
    { "wrong input size", function() return nn.GRU(3, 4)(z(5, 2, 7)) end,
      "GRU(3 -> 4): input has 7 features, expected 3 (input [5 x 2 x 7])" },
    { "4-D input", function() return nn.RNN(3, 4)(z(5, 2, 3, 1)) end,
      "RNN(3 -> 4): input must be [seq x batch x 3] or unbatched [seq x 3], got [5 x 2 x 3 x 1]" },
    { "wrong h0 shape", function() return nn.GRU(3, 4, { num_layers = 2 })(z(5, 2, 3), z(1, 2, 4)) end,
      "GRU(3 -> 4, num_layers=2): h0 is [1 x 2 x 4], expected [2 x 2 x 4]" },
    { "wrong c0 shape", function() return nn.LSTM(3, 4, { proj_size = 2 })(z(5, 2, 3), { z(1, 2, 2), z(1, 2, 2) }) end,
      "LSTM(3 -> 4, proj_size=2): c0 is [1 x 2 x 2], expected [1 x 2 x 4]" },
    { "unbatched with a batched h0", function() return nn.RNN(3, 4)(z(5, 3), z(1, 1, 4)) end,
      "RNN(3 -> 4): h0 is [1 x 1 x 4], expected [1 x 4] (the input is unbatched)" },
    { "LSTM state as one tensor", function() return nn.LSTM(3, 4)(z(5, 2, 3), z(1, 2, 4)) end,
      "LSTM(3 -> 4): the initial state must be a table {h0, c0} of tensors, got a tensor [1 x 2 x 4]" },
    { "cell input size", function() return nn.GRUCell(3, 4)(z(2, 5)) end,
      "GRUCell(3 -> 4): input must be [batch x 3] or unbatched [3], got [2 x 5]" },
    { "cell state shape", function() return nn.LSTMCell(3, 4)(z(2, 3), { z(2, 4), z(3, 4) }) end,
      "LSTMCell(3 -> 4): c is [3 x 4], expected [2 x 4]" },
    { "cell unknown option", function() return nn.RNNCell(3, 4, { num_layers = 2 }) end,
      "RNNCell: unknown option 'num_layers'" },
    { "kernel mode", function() return rnn_layer("elman", z(1, 1, 2), z(2, 2), nil, z(1, 2)) end,
      "rnn_layer: unknown mode 'elman'" },
    { "kernel shapes", function() return rnn_layer("gru", z(2, 1, 6), z(6, 3), nil, z(1, 2)) end,
      "rnn_layer: w_hh must be [6 x 2], got [6 x 3]" },
    { "kernel LSTM without c0", function() return rnn_layer("lstm", z(2, 1, 8), z(8, 2), nil, z(1, 2)) end,
      "rnn_layer: LSTM needs the initial cell state c0" },
  }
  for _, c in ipairs(cases) do
    it(c[1], function() assert.matches(c[3], err_of(c[2]), 1, true) end)
  end
end)
