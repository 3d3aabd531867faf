-- f64_rnn_spec.lua — the fused recurrent layers LSTM, GRU and RNN (tanh, relu) on float64 against torch 1.13
-- (tests/fixtures/f64_rnn.json, gen_f64_rnn.py: num_layers, bidirectional, batch_first, bias=false, proj_size,
-- dropout in eval mode, unbatched input): output, h_n, c_n and the gradients of the input, the initial state and
-- every weight to 1e-12; float64 finite-difference gradchecks through the fused node; forward-only (no_grad) runs
-- equal to recorded ones; a mix of float32 and float64 is an error naming both.
local lt = require "lutra"
local cjson = require "cjson"

local f64_ref = require "tests.helpers.f64_ref"
local gradcheck64 = require "tests.helpers.gradcheck64"
local tensor_of, check = f64_ref.tensor_of, f64_ref.check

local CASES = f64_ref.load("f64_rnn")

-- the layer of a case, float64, weights set from the fixture's formula (parameter j in PyTorch's order)
local function layer_of(c)
  local opts = {}
  for k, v in pairs(c.options) do
    if k ~= "unbatched" then opts[k] = v end
  end
  local m = lt.nn[c.layer](3, 4, next(opts) and opts or nil):double():eval()
  local named = m:named_parameters()
  for j, name in ipairs(c.param_order) do
    local p = assert(named[name], name)
    local w = {}
    for k = 0, p:numel() - 1 do w[k + 1] = ((k * 7919 + (j - 1) * 131) % 1001 - 500) / 1500 end
    lt.no_grad(function() p:copy_(lt.tensor(w, "float64"):reshape(p:shape())) end)
  end
  return m, named
end

local function run(m, lstm, x, h0, c0)
  if lstm then
    local out, st = m(x, { h0, c0 })
    return out, st[1], st[2]
  end
  local out, hn = m(x, h0)
  return out, hn
end

describe("float64 recurrent layers against torch 1.13 (f64_rnn.json)", function()
  for _, c in ipairs(CASES) do
    it(c.layer .. " " .. cjson.encode(c.options), function()
      local m, named = layer_of(c)
      local lstm = c.layer == "LSTM"
      local x, h0 = tensor_of(c.x):requires_grad(true), tensor_of(c.h0):requires_grad(true)
      local c0 = lstm and tensor_of(c.c0):requires_grad(true) or nil
      local out, hn, cn = run(m, lstm, x, h0, c0)
      check("out", out, c.out)
      check("h_n", hn, c.hn)
      if lstm then check("c_n", cn, c.cn) end
      local loss = (out * tensor_of(c.gout)):sum() + (hn * tensor_of(c.gh)):sum()
      if lstm then loss = loss + (cn * tensor_of(c.gc)):sum() end
      loss:backward()
      check("grad x", x.grad, c.grad_x)
      check("grad h0", h0.grad, c.grad_h0)
      if lstm then check("grad c0", c0.grad, c.grad_c0) end
      for name, ref in pairs(c.grad_params) do check("grad " .. name, named[name].grad, ref) end
      -- forward only (no workspace kept): the same numbers
      local out2, hn2, cn2 = lt.no_grad(function() return run(m, lstm, tensor_of(c.x), tensor_of(c.h0),
        lstm and tensor_of(c.c0) or nil) end)
      check("no_grad out", out2, c.out)
      check("no_grad h_n", hn2, c.hn)
      if lstm then check("no_grad c_n", cn2, c.cn) end
    end)
  end
end)

describe("float64 recurrent layers: gradchecks through the fused node", function()
  local function rnd(...) return lt.randn(...):double() end
  for _, spec in ipairs {
    { "LSTM", { num_layers = 2, bidirectional = true, proj_size = 2 } },
    { "GRU", { bidirectional = true } },
    { "RNN", { nonlinearity = "tanh", num_layers = 2 } },
  } do
    it(spec[1] .. " " .. cjson.encode(spec[2]) .. ": input, initial state and one weight", function()
      lt.manual_seed(7)
      local m = lt.nn[spec[1]](2, 3, spec[2]):double()
      local D, L = spec[2].bidirectional and 2 or 1, spec[2].num_layers or 1
      local P = spec[2].proj_size or 3
      local lstm = spec[1] == "LSTM"
      local x, h0, c0 = rnd(4, 2, 2), rnd(L * D, 2, P), rnd(L * D, 2, 3)
      local w = m.weight_hh_l0:detach():clone()
      local rout = rnd(4, 2, P * D)
      gradcheck64(function(p) return (run(m, lstm, p[1], p[2], lstm and p[3] or nil)) end, { x, h0, c0 }, rout)
      -- the weight itself, through the parameter's gradient
      m:zero_grad()
      lt.no_grad(function() m.weight_hh_l0:copy_(w) end)
      local loss = (run(m, lstm, x, h0, lstm and c0 or nil) * rout):sum()
      loss:backward()
      local g = m.weight_hh_l0.grad:flatten():tolist()
      local flat = w:flatten():tolist()
      for k = 1, #flat, 3 do
        local function at(v)
          local q = lt.tensor(flat, "float64")
          q[k] = v
          lt.no_grad(function() m.weight_hh_l0:copy_(q:reshape(w:shape())) end)
          return lt.no_grad(function() return (run(m, lstm, x, h0, lstm and c0 or nil) * rout):sum():item() end)
        end
        local num = (at(flat[k] + 1e-6) - at(flat[k] - 1e-6)) / 2e-6
        assert(math.abs(num - g[k]) <= 1e-7 * math.max(1, math.abs(num)),
          string.format("weight_hh_l0[%d]: autograd %.12g, differences %.12g", k, g[k], num))
      end
    end)
  end
end)

describe("float64 recurrent layers: dtypes", function()
  it("keep float64 through training mode, zero initial states and unbatched input", function()
    lt.manual_seed(1)
    local m = lt.nn.LSTM(3, 4, { num_layers = 2, bidirectional = true }):double():train()
    local out, st = m(lt.randn(5, 2, 3):double())
    assert.are.equal("float64", out:dtype())
    assert.are.equal("float64", st[1]:dtype())
    assert.are.equal("float64", st[2]:dtype())
    out:sum():backward()
    assert.are.equal("float64", m.weight_ih_l0.grad:dtype())
    local g = lt.nn.GRU(3, 4):double()
    local y, hn = g(lt.randn(5, 3):double())
    assert.are.same({ 5, 4 }, y:shape())
    assert.are.equal("float64", hn:dtype())
  end)

  it("keep float64 through dropout between layers in training mode", function()
    lt.manual_seed(3)
    local m = lt.nn.GRU(3, 4, { num_layers = 3, dropout = 0.5 }):double():train()
    local x = lt.randn(5, 2, 3):double():requires_grad(true)
    local out = m(x)
    assert.are.equal("float64", out:dtype())
    out:sum():backward()
    assert.are.equal("float64", x.grad:dtype())
    assert.are.equal("float64", m.weight_hh_l0.grad:dtype())
    -- eval mode drops nothing: the same as a layer without dropout
    local plain = lt.nn.GRU(3, 4, { num_layers = 3 }):double()
    plain:load_state_dict(m:state_dict())
    m:eval()
    local a, b = lt.no_grad(function() return m(x), plain(x) end)
    assert.are.same(b:tolist(), a:tolist())
  end)

  it("refuse a float32 input to a float64 layer, and a float64 state to a float32 layer, naming both", function()
    local m = lt.nn.GRU(3, 4):double()
    local ok, err = pcall(m, lt.randn(5, 2, 3))
    assert.is_false(ok)
    assert.matches("float32", tostring(err))
    assert.matches("float64", tostring(err))
    local m32 = lt.nn.RNN(3, 4)
    ok, err = pcall(m32, lt.randn(5, 2, 3), lt.randn(1, 2, 4):double())
    assert.is_false(ok)
    assert.matches("rnn_layer: xg is float32 and h0 is float64: both must have the same float dtype", tostring(err),
      1, true)
  end)
end)
