-- f64_layers_spec.lua — the nn layers in float64 against torch 1.13 (tests/fixtures/f64_layers.json,
-- gen_f64_layers.py): an MLP of Embedding, Linear, BatchNorm1d, ReLU, Dropout and LayerNorm made float64 with
-- m:double() and trained 3 SGD steps; the adaptive pools, batch_norm, layer_norm, embedding and the activations
-- (leaky_relu, silu, elu, softplus, mish, hardtanh, hardswish, hardsigmoid, prelu) one by one (output
-- and gradients to 1e-12, float64 finite-difference gradchecks); dropout's float64 mask; the dtype mix refused.
local lt = require "lutra"
local nn, F = lt.nn, lt.F
local cjson = require "cjson"

local f64_ref = require "tests.helpers.f64_ref"
local tensor_of, check = f64_ref.tensor_of, f64_ref.check
local gradcheck64 = require "tests.helpers.gradcheck64"

local FX = f64_ref.load("f64_layers")

local function formula(n, j) -- gen_f64_layers.py's formula: the same doubles
  local w = {}
  for k = 0, n - 1 do w[k + 1] = ((k * 7919 + j * 131) % 1001 - 500) / 1500 end
  return lt.tensor(w, "float64")
end

describe("a float64 MLP (Embedding, Linear, BatchNorm1d, ReLU, Dropout, LayerNorm) against torch 1.13", function()
  it("trains 3 SGD steps to torch's losses, parameters and running statistics to 1e-12", function()
    local fx = FX.mlp
    local emb = nn.Embedding(7, 5):double()
    local net = nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5), nn.LayerNorm(8),
      nn.Linear(8, 3)):double()
    local params = { emb.weight, net[1].weight, net[1].bias, net[2].weight, net[2].bias, net[5].weight, net[5].bias,
      net[6].weight, net[6].bias }
    for j, p in ipairs(params) do
      assert.are.equal("float64", p:dtype())
      lt.no_grad(function() p:copy_(formula(p:numel(), j - 1):reshape(p:shape())) end)
    end
    assert.are.equal("float64", net[2].running_mean:dtype())
    local opt = lt.optim.SGD(params, 0.1, { momentum = 0.9 })
    net:train()
    net[4]:eval()
    local target = tensor_of(fx.target)
    for step = 1, 3 do
      local b = (step - 1) % 2 + 1
      local idx = lt.tensor(fx.idx[b], "int64") + 1
      opt:zero_grad()
      local loss = F.mse_loss(net(emb(idx)), target:select(1, b))
      loss:backward()
      opt:step()
      assert.are.equal("float64", loss:dtype())
      assert.is_true(math.abs(loss:item() - fx.losses[step]) <= 1e-12 * math.max(1, math.abs(fx.losses[step])),
        ("step %d: loss %.17g, torch %.17g"):format(step, loss:item(), fx.losses[step]))
    end
    for j, p in ipairs(params) do check("parameter " .. j, p, fx.params[j]) end
    check("running_mean", net[2].running_mean, fx.running_mean)
    check("running_var", net[2].running_var, fx.running_var)
  end)
end)

local RUN = {
  adaptive_avg_pool2d = function(c, x) return F.adaptive_avg_pool2d(x[1], c.size) end,
  adaptive_max_pool2d = function(c, x) return F.adaptive_max_pool2d(x[1], c.size) end,
  batch_norm = function(c, x)
    -- fresh running statistics for each call (batch_norm updates them in place when training)
    return F.batch_norm(x[1], tensor_of(c.running_mean0), tensor_of(c.running_var0), x[2], x[3], c.training, 0.2, 1e-4)
  end,
  layer_norm = function(_, x) return F.layer_norm(x[1], { 7, 5 }, x[2], x[3], 1e-5) end,
  embedding = function(c, x) return F.embedding(x[1], x[2], c.padding_idx) end,
  prelu = function(_, x) return F.prelu(x[1], x[2]) end,
}
for _, name in ipairs { "leaky_relu", "silu", "elu", "softplus", "mish", "hardtanh", "hardswish", "hardsigmoid" } do
  RUN[name] = function(c, x) return F[name](x[1], unpack(c.options)) end
end

describe("float64 layers against torch 1.13", function()
  for _, c in ipairs(FX.layers) do
    local label = c.name .. (c.size and (" " .. cjson.encode(c.size)) or "")
      .. (c.training ~= nil and (c.training and " training" or " eval") or "")
    it(label .. ": output and gradients to 1e-12, and a float64 gradcheck", function()
      local inputs = {}
      for i, obj in ipairs(c.inputs) do
        local integer = c.name == "embedding" and i == 1
        inputs[i] = integer and lt.tensor(obj.data, "int64"):reshape(obj.shape) or tensor_of(obj)
      end
      local leaves = {}
      for i, x in ipairs(inputs) do leaves[i] = x:dtype() == "float64" and x:clone():requires_grad(true) or x end
      local y = RUN[c.name](c, leaves)
      check("y", y, c.y)
      local gout = tensor_of(c.gout)
      ;(y * gout):sum():backward()
      for i, g in ipairs(c.grads) do
        if g ~= cjson.null then check("gradient " .. i, leaves[i].grad, g) end
      end
      if c.indices then
        local _, ind = F.adaptive_max_pool2d(inputs[1], c.size, true)
        assert.are.same(c.indices, ind:flatten():tolist())
      end
      if c.running_mean then -- the running statistics, float64, updated (training) or kept (eval) as torch's
        local rm, rv = tensor_of(c.running_mean0), tensor_of(c.running_var0)
        F.batch_norm(inputs[1], rm, rv, inputs[2], inputs[3], c.training, 0.2, 1e-4)
        check("running_mean", rm, c.running_mean)
        check("running_var", rv, c.running_var)
      end
      -- (the padding row gets no gradient by definition, not by the differences: checked without it)
      local cg = c.padding_idx and { name = c.name } or c
      gradcheck64(function(p) return RUN[c.name](cg, p) end, inputs, gout)
    end)
  end
end)

describe("float64 dropout", function()
  it("scales kept elements by 1/(1-p) in float64 and routes the gradient through the same mask", function()
    lt.manual_seed(3)
    local x = (lt.rand(1000):double() + 0.5):requires_grad(true)
    local y = F.dropout(x, 0.3, true)
    assert.are.equal("float64", y:dtype())
    y:sum():backward()
    local xs, ys, gs = x:tolist(), y:tolist(), x.grad:tolist()
    local kept = 0
    for i = 1, #xs do
      if ys[i] ~= 0 then
        kept = kept + 1
        assert.are.equal(xs[i] * (1 / 0.7), ys[i]) -- the scale exact in double (float32's 1/0.7 is not)
        assert.are.equal(1 / 0.7, gs[i])
      else
        assert.are.equal(0, gs[i])
      end
    end
    assert.is_true(kept > 600 and kept < 800, "kept " .. kept)
    -- eval and p = 0 return the input itself
    assert.are.same(x:tolist(), F.dropout(x, 0.3, false):tolist())
  end)
end)

describe("float64 layers refuse a dtype mix", function()
  it("names both dtypes", function()
    local x = lt.randn(4, 3):double()
    assert.has_error(function() F.layer_norm(x, 3, lt.ones(3)) end,
      "layer_norm: input is float64 and weight is float32: both must have the same float dtype")
    assert.has_error(function() F.batch_norm(x, lt.zeros(3), lt.ones(3), nil, nil, true) end,
      "batch_norm: input is float64 and running_mean is float32: both must have the same float dtype")
    assert.has_error(function() nn.BatchNorm1d(3)(x) end,
      "batch_norm: input is float64 and weight is float32: both must have the same float dtype")
  end)
end)
