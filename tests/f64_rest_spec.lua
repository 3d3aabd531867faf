-- f64_rest_spec.lua — the pools, group_norm, instance_norm and scaled_dot_product_attention in float64 against torch
-- 1.13 (tests/fixtures/f64_rest.json, gen_f64_rest.py): outputs and every input's gradient to 1e-12, float64
-- gradchecks; nn.InstanceNorm2d's running statistics in float64 after m:double(); nn.MultiheadAttention with torch's
-- weights (output, averaged weights, input and parameter gradients); dtype mixes refused naming both dtypes.
local lt = require "lutra"
local F = lt.F

local f64_ref = require "tests.helpers.f64_ref"
local tensor_of, check = f64_ref.tensor_of, f64_ref.check
local gradcheck64 = require "tests.helpers.gradcheck64"

local FX = f64_ref.load("f64_rest")

-- gen_f64_rest.py's CASES, as a PyTorch user writes them in lutra (p: the inputs)
local MASK = tensor_of(FX.cases["sdpa float mask"].mask)
local BOOL_MASK = lt.tensor({ { 0, 0, 1, 0, 0, 1 } }, "int64"):expand(4, 6)
local CALLS = {
  ["max_pool2d k3 s2 p1 ceil"] = function(p) return F.max_pool2d(p[1], 3, { stride = 2, padding = 1, ceil_mode = true }) end,
  ["max_pool2d 2x2"] = function(p) return F.max_pool2d(p[1], 2) end,
  ["max_pool2d dilation"] = function(p)
    return F.max_pool2d(p[1], { 3, 2 }, { stride = { 1, 2 }, padding = { 1, 0 }, dilation = { 2, 3 } })
  end,
  ["max_pool1d"] = function(p) return F.max_pool1d(p[1], 3, 2, 1) end,
  ["avg_pool2d count_include_pad"] = function(p) return F.avg_pool2d(p[1], 3, { stride = 2, padding = 1, ceil_mode = true }) end,
  ["avg_pool2d exclude pad"] = function(p)
    return F.avg_pool2d(p[1], { 3, 2 }, { stride = 2, padding = 1, count_include_pad = false })
  end,
  ["avg_pool1d"] = function(p) return F.avg_pool1d(p[1], 4, 3, 2) end,
  ["group_norm affine"] = function(p) return F.group_norm(p[1], 3, p[2], p[3], 1e-5) end,
  ["group_norm plain"] = function(p) return F.group_norm(p[1], 2) end,
  ["instance_norm"] = function(p) return F.instance_norm(p[1], { weight = p[2], bias = p[3], eps = 1e-4 }) end,
  ["sdpa"] = function(p) return F.scaled_dot_product_attention(p[1], p[2], p[3]) end,
  ["sdpa causal scale"] = function(p)
    return F.scaled_dot_product_attention(p[1], p[2], p[3], { is_causal = true, scale = 0.3 })
  end,
  ["sdpa float mask"] = function(p) return F.scaled_dot_product_attention(p[1], p[2], p[3], { attn_mask = MASK }) end,
  ["sdpa bool mask"] = function(p) return F.scaled_dot_product_attention(p[1], p[2], p[3], { attn_mask = BOOL_MASK }) end,
}

describe("pools, group/instance norm and attention in float64 against torch 1.13", function()
  local names = {}
  for name in pairs(FX.cases) do names[#names + 1] = name end
  table.sort(names)
  assert(#names == 14, "fixture cases")
  for _, name in ipairs(names) do
    it(name .. ": output and every input's gradient to 1e-12, float64 gradcheck", function()
      local c, call = FX.cases[name], assert(CALLS[name], name)
      local leaves, plain = {}, {}
      for i, t in ipairs(c.inputs) do
        plain[i] = tensor_of(t)
        leaves[i] = tensor_of(t):requires_grad(true)
      end
      local y = call(leaves)
      check(name .. " y", y, c.y)
      ;(y * tensor_of(c.gout)):sum():backward()
      for i, g in ipairs(c.grads) do check(name .. " grad " .. i, leaves[i].grad, g) end
      gradcheck64(call, plain, tensor_of(c.gout))
    end)
  end

  it("InstanceNorm2d after m:double(): training outputs, float64 running statistics, eval output", function()
    local c = FX.modules.InstanceNorm2d
    local m = lt.nn.InstanceNorm2d(3, { affine = true, track_running_stats = true }):double()
    -- the weight and bias are the generator's formula([3], 1) and formula([3], 2): recomputed here exactly
    local function formula(n, j)
      local t = {}
      for k = 0, n - 1 do t[#t + 1] = ((k * 7919 + j * 131) % 1001 - 500) / 1500 end
      return lt.tensor(t, "float64")
    end
    lt.no_grad(function()
      m.weight:copy_(formula(3, 1))
      m.bias:copy_(formula(3, 2))
    end)
    for i = 1, 2 do check("training y " .. i, m(tensor_of(c.x[i])), c.y[i]) end
    check("running_mean", m.running_mean, c.running_mean)
    check("running_var", m.running_var, c.running_var)
    m:eval()
    check("eval y", m(tensor_of(c.x[3])), c.y[3])
  end)

  it("MultiheadAttention after m:double() with torch's weights: output, weights, input and parameter gradients", function()
    local c = FX.modules.MultiheadAttention
    local m = lt.nn.MultiheadAttention(6, 2, { batch_first = true }):double()
    local params = m:named_parameters()
    lt.no_grad(function()
      for n, ref in pairs(c.params) do assert(params[n], n):copy_(tensor_of(ref)) end
    end)
    local q, kv = tensor_of(c.q):requires_grad(true), tensor_of(c.kv):requires_grad(true)
    local kpm = lt.tensor({ { 0, 0, 0, 0, 1 }, { 0, 1, 0, 0, 0 } }, "int64")
    local y, w = m(q, kv, kv, { key_padding_mask = kpm })
    check("y", y, c.y)
    check("weights", w, c.w)
    ;(y * tensor_of(c.gout)):sum():backward()
    check("grad q", q.grad, c.gq)
    check("grad kv", kv.grad, c.gkv)
    for n, ref in pairs(c.pgrads) do check("grad " .. n, params[n].grad, ref) end
  end)

  it("Transformer layers run in float64 after m:double(); a dtype mix is refused naming both dtypes", function()
    local enc = lt.nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0, batch_first = true }):double()
    local x = lt.randn(2, 5, 8):double()
    local y = enc(x, { src_mask = lt.nn.Transformer.generate_square_subsequent_mask(5) })
    assert.are.equal("float64", y:dtype())
    y:sum():backward()
    assert.are.equal("float64", enc.self_attn.in_proj_weight.grad:dtype())
    local q = lt.randn(2, 3, 4):double()
    assert.has_error(function() F.scaled_dot_product_attention(q, q:float(), q) end,
      "scaled_dot_product_attention: query is float64 and key is float32: both must have the same float dtype")
    assert.has_error(function() F.group_norm(lt.randn(2, 4, 3):double(), 2, lt.ones(4)) end,
      "group_norm: input is float64 and weight is float32: both must have the same float dtype")
    local m = lt.nn.GroupNorm(2, 4) -- float32 parameters, float64 input: PyTorch refuses the mix too
    assert.has_error(function() m(lt.randn(2, 4, 3):double()) end,
      "group_norm: input is float64 and weight is float32: both must have the same float dtype")
  end)

  it("attention masks of either float dtype (0/1 or additive, broadcast) act as the float32 and int64 ones", function()
    local q, k, v = lt.randn(2, 4, 5):double(), lt.randn(2, 6, 5):double(), lt.randn(2, 6, 3):double()
    local sdpa = F.scaled_dot_product_attention
    local binary = lt.tensor({ { 0, 1, 0, 0, 1, 0 } }, "float64"):expand(4, 6)
    local bias = lt.tensor({ { 0.5, -1, 2, 0.25, -0.75, 3 } }, "float64"):expand(4, 6)
    for _, dt in ipairs { "float64", "float32" } do
      local qq, kk, vv = q:to(dt), k:to(dt), v:to(dt)
      local want = sdpa(qq, kk, vv, { attn_mask = binary:long() }):double():tolist()
      assert.are.same(want, sdpa(qq, kk, vv, { attn_mask = binary }):double():tolist())
      assert.are.same(want, sdpa(qq, kk, vv, { attn_mask = binary:float() }):double():tolist())
      assert.are.same(sdpa(qq, kk, vv, { attn_mask = bias:to(dt) }):tolist(),
        sdpa(qq, kk, vv, { attn_mask = bias }):tolist())
    end
  end)

  it("a float64 dataset through DataLoader and the Trainer (the batches and the logged loss stay float64)", function()
    local X = lt.tensor({ { 0.1, 0.2, 0.3 }, { 1 / 3, -0.5, 0.25 }, { 0.7, -1.1, 2 }, { -0.3, 0.9, 1 / 7 } }, "float64")
    local Y = lt.tensor({ { 1 / 3 }, { -2 / 3 }, { 0.1 }, { 0.2 } }, "float64")
    local dl = lt.data.DataLoader(lt.data.TensorDataset(X, Y), { batch_size = 2, shuffle = true })
    local seen = 0
    for b in dl:iter() do
      assert.are.equal("float64", b[1]:dtype())
      seen = seen + b[1]:size(1)
    end
    assert.are.equal(4, seen)
    local net = lt.nn.Linear(3, 1):double()
    local m, losses = { net = net }, {}
    function m:training_step(b)
      local l = F.mse_loss(self.net(b[1]), b[2])
      losses[#losses + 1] = l:dtype()
      return l
    end
    function m:configure_optimizers() return lt.optim.SGD(self.net:parameters(), { lr = 0.1 }) end
    local t = lt.Trainer(require("helpers.quiet")({ max_epochs = 2, accumulate_grad_batches = 2, gradient_clip_val = 1 }))
    t:fit(m, dl)
    assert.are.equal(2, t.global_step)
    assert.are.same({ "float64", "float64", "float64", "float64" }, losses)
    assert.are.equal("float64", net.weight:dtype())
  end)

  it("float32 stays float32 (the pools, group_norm, attention)", function()
    local x = lt.randn(1, 2, 6, 6)
    assert.are.equal("float32", F.max_pool2d(x, 2):dtype())
    assert.are.equal("float32", F.avg_pool2d(x, 3, { padding = 1 }):dtype())
    assert.are.equal("float32", F.group_norm(x, 2):dtype())
    assert.are.equal("float32", F.scaled_dot_product_attention(x, x, x):dtype())
  end)
end)
