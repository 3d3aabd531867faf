-- attention_spec.lua — lt.nn.MultiheadAttention and the transformer modules against PyTorch 1.13
-- (tests/fixtures/attn.json from gen_attn.py: forward, weights, input and parameter gradients, masks of both
-- kinds, key padding, batch_first, norm_first, gelu, a function activation, eval with dropout), a state dict
-- saved from PyTorch loaded strictly, the mask rules, dropout in training, PyTorch's init, deep-copied layers,
-- gradchecks and the error messages.
local lt = require "lutra"
local X = require "tests.helpers.nn_fixtures"
local gradcheck = require "tests.helpers.gradcheck"
local nn = lt.nn

local cases = X.load("attn.json")

local ACTIVATIONS = { ["function:tanh"] = function(x) return x:tanh() end }

-- the fixture's options as lutra's (an activation named "function:..." is that function), without `drop`
local function lutra_opts(o, drop)
  local r = {}
  for k, v in pairs(o) do
    if not drop[k] then r[k] = ACTIVATIONS[v] or v end
  end
  return r
end
local STACK_ONLY = { d_model = true, nhead = true, norm = true }
local function layer_opts(o) return lutra_opts(o, STACK_ONLY) end

local function build(c)
  local o, a = c.opts, c.args
  if c.module == "MultiheadAttention" then return nn.MultiheadAttention(a[1], a[2], o) end
  if c.module == "TransformerEncoderLayer" or c.module == "TransformerDecoderLayer" then
    return nn[c.module](a[1], a[2], layer_opts(o))
  end
  if c.module == "TransformerEncoder" or c.module == "TransformerDecoder" then
    local layer_class = c.module == "TransformerEncoder" and nn.TransformerEncoderLayer or nn.TransformerDecoderLayer
    local layer = layer_class(o.d_model, o.nhead, layer_opts(o))
    return nn[c.module](layer, a[1], o.norm and nn.LayerNorm(o.d_model) or nil)
  end
  assert(c.module == "Transformer", c.module)
  return nn.Transformer(a[1], a[2], a[3], a[4], lutra_opts(o, {}))
end

-- module, leaves (by input name), the output and the weights
local function run(c)
  local m = build(c)
  if c.mode == "eval" then m:eval() else m:train() end
  local sd = {}
  for k, t in pairs(c.params) do sd[k] = X.tensor(t) end
  m:load_state_dict(sd) -- strict: PyTorch's names
  local leaves, pos = {}, {}
  for i, name in ipairs(c.order) do
    leaves[name] = X.tensor(c.inputs[name]):requires_grad(true)
    pos[i] = leaves[name]
  end
  if c.same_qkv then pos = { pos[1], pos[1], pos[1] } end
  local opts = {}
  for k, t in pairs(c.masks) do opts[k] = X.tensor(t) end
  for k, v in pairs(c.call or {}) do opts[k] = v end
  pos[#pos + 1] = opts
  local out, w = m(unpack(pos, 1, #pos))
  return m, leaves, out, w
end

describe("attention modules match PyTorch 1.13", function()
  for _, c in ipairs(cases) do
    it(c.name .. ": output, weights, input and parameter gradients", function()
      local m, leaves, out, w = run(c)
      X.check(c.name .. " output", out, c.output)
      local loss = (out * X.tensor(c.grad_output)):sum()
      if c.weights then
        X.check(c.name .. " weights", w, c.weights)
        loss = loss + (w * X.tensor(c.grad_weights)):sum()
      else
        assert.is_nil(w)
      end
      loss:backward()
      -- gradients through whole transformer stacks sum in float32 over many GEMMs whose order depends on
      -- OpenBLAS's kernel (the Prescott fallback differs from the tuned one by ~3e-5 relative): 1e-4 here
      local RTOL, ATOL = 1e-4, 3e-6
      for name, g in pairs(c.grad_inputs) do X.check(c.name .. " grad " .. name, leaves[name].grad, g, RTOL, ATOL) end
      local named = m:named_parameters()
      local n = 0
      for name, g in pairs(c.grad_params) do
        assert(named[name], c.name .. ": no parameter " .. name)
        X.check(c.name .. " grad " .. name, named[name].grad, g, RTOL, ATOL)
        n = n + 1
      end
      assert.are.equal(n, #m:parameters())
    end)
  end

  it("loads the state dict that PyTorch's TransformerEncoder saved (safetensors) strictly and computes as it", function()
    local c
    for _, x in ipairs(cases) do if x.name == "encoder_2_layers_norm" then c = x end end
    local enc = build(c)
    lt.load("tests/fixtures/attn_encoder.safetensors", enc)
    local sd = lt.load("tests/fixtures/attn_encoder.safetensors")
    local keys, own = {}, nn.state_dict_keys(enc)
    for k in pairs(sd) do keys[#keys + 1] = k end
    table.sort(keys)
    table.sort(own)
    assert.are.same(own, keys)
    assert.is_truthy(sd["layers.1.self_attn.in_proj_weight"])
    local out = enc(X.tensor(c.inputs.src), { mask = X.tensor(c.masks.mask),
      src_key_padding_mask = X.tensor(c.masks.src_key_padding_mask) })
    X.check("encoder from safetensors", out, c.output)
  end)
end)

describe("MultiheadAttention", function()
  before_each(function() lt.manual_seed(3) end)

  it("gives the same output with and without need_weights, and a 0/1 mask of either dtype as its -inf form", function()
    local m = nn.MultiheadAttention(8, 2)
    local q, k = lt.randn(3, 2, 8), lt.randn(4, 2, 8)
    local bin = lt.tensor { { 0, 1, 0, 0 }, { 0, 0, 1, 1 }, { 1, 0, 0, 0 } }
    local inf = lt.zeros(3, 4):masked_fill(bin, -math.huge)
    local kpm = lt.tensor { { 0, 0, 0, 1 }, { 0, 0, 0, 0 } }
    local a, wa = m(q, k, k, { attn_mask = bin, key_padding_mask = kpm })
    local b = m(q, k, k, { attn_mask = inf, key_padding_mask = kpm:long(), need_weights = false })
    local c2 = m(q, k, k, { attn_mask = bin:long(), key_padding_mask = lt.zeros(2, 4):masked_fill(kpm, -math.huge) })
    assert.is_true(a:allclose(b, 1e-5, 1e-6))
    assert.is_true(a:allclose(c2, 1e-5, 1e-6))
    -- masked keys get no weight; each row of the head mean sums to 1
    assert.are.equal(0, wa:select(1, 1):select(2, 4):abs():sum():item())
    assert.are.equal(0, wa:select(1, 1):select(1, 1):select(1, 2):item())
    assert.is_true(wa:sum(3):allclose(lt.ones(2, 3), 1e-5, 1e-6))
  end)

  it("adds a float mask that holds other values than 0 and 1 to the scores", function()
    local m = nn.MultiheadAttention(4, 1)
    local x = lt.randn(2, 1, 4)
    local bias = lt.tensor { { 0, -2.5 }, { 0.75, 0 } }
    local _, w = m(x, x, x, { attn_mask = bias })
    local _, w0 = m(x, x, x)
    -- the softmax of scores + bias: w[i][j] / w0[i][j] is exp(bias[i][j]) / (a row constant)
    local r = (w / w0):squeeze(1):totable()
    assert.is_true(math.abs(r[1][1] / r[1][2] / math.exp(2.5) - 1) < 1e-4)
    assert.is_true(math.abs(r[2][1] / r[2][2] / math.exp(0.75) - 1) < 1e-4)
  end)

  it("drops attention weights in training (kept ones scaled by 1/(1-p)) and not in eval", function()
    local m = nn.MultiheadAttention(8, 2, { dropout = 0.5 })
    local x = lt.randn(6, 3, 8)
    m:eval()
    local e_out, e_w = m(x, x, x, { average_attn_weights = false })
    m:train()
    lt.manual_seed(5)
    local t_out, t_w = m(x, x, x, { average_attn_weights = false })
    local kept = t_w:ne(0):float()
    local frac = kept:mean():item()
    assert.is_true(frac > 0.35 and frac < 0.65, "kept fraction " .. frac)
    assert.is_true((t_w - e_w * 2 * kept):abs():max():item() < 1e-5)
    assert.is_false(t_out:allclose(e_out, 1e-3, 1e-3))
    -- the fused path (no weights): its own draws, reproducible with the seed; none in eval
    lt.manual_seed(6)
    local f1 = m(x, x, x, { need_weights = false })
    lt.manual_seed(6)
    local f2 = m(x, x, x, { need_weights = false })
    assert.is_true(f1:allclose(f2, 0, 0))
    assert.is_false(f1:allclose(e_out, 1e-3, 1e-3))
    m:eval()
    assert.is_true(m(x, x, x, { need_weights = false }):allclose(e_out, 1e-5, 1e-6))
  end)

  it("initialises as PyTorch: xavier_uniform_ in_proj_weight, zero biases, xavier_normal_ bias_k/bias_v", function()
    local E = 32
    local m = nn.MultiheadAttention(E, 4, { add_bias_kv = true })
    local bound = math.sqrt(6 / (E + 3 * E))
    local w = m.in_proj_weight
    assert.are.same({ 3 * E, E }, w:shape())
    assert.is_true(w:abs():max():item() <= bound)
    local std = w:std():item()
    assert.is_true(math.abs(std - bound / math.sqrt(3)) < 0.1 * std, "std " .. std)
    assert.are.equal(0, m.in_proj_bias:abs():sum():item())
    assert.are.equal(0, m.out_proj.bias:abs():sum():item())
    assert.is_true(m.out_proj.weight:abs():max():item() <= 1 / math.sqrt(E))
    assert.are.same({ 1, 1, E }, m.bias_k:shape())
    assert.is_true(m.bias_k:abs():sum():item() > 0)
    local sep = nn.MultiheadAttention(8, 2, { kdim = 3, vdim = 5, bias = false })
    local keys = nn.state_dict_keys(sep)
    table.sort(keys)
    assert.are.same({ "k_proj_weight", "out_proj.weight", "q_proj_weight", "v_proj_weight" }, keys)
    assert.are.same({ 8, 3 }, sep.k_proj_weight:shape())
  end)

  it("passes a finite-difference gradcheck with both masks (with and without the weights)", function()
    local m = nn.MultiheadAttention(4, 2, { add_bias_kv = true })
    local am = lt.tensor { { 0, -1, 0 }, { -math.huge, 0, 0.5 } }
    local kpm = lt.tensor { { 0, 0, 1 }, { 0, 0, 0 } }
    for _, need in ipairs { true, false } do
      assert.is_true(gradcheck(function(q, k, v, w, bk)
        m.in_proj_weight, m.bias_k = w, bk
        return (m(q, k, v, { attn_mask = am, key_padding_mask = kpm, need_weights = need }))
      end, { lt.randn(2, 2, 4), lt.randn(3, 2, 4), lt.randn(3, 2, 4), m.in_proj_weight:detach(),
        m.bias_k:detach() }))
    end
  end)

  it("names the wrong sizes, options and masks", function()
    assert.has_error(function() nn.MultiheadAttention(10, 3) end,
      "MultiheadAttention: embed_dim 10 is not divisible by num_heads 3")
    assert.has_error(function() nn.MultiheadAttention(8, 2, { dropuot = 0.1 }) end,
      "MultiheadAttention: unknown option 'dropuot' (known options: add_bias_kv, add_zero_attn, batch_first, bias, " ..
      "dropout, kdim, vdim)")
    assert.has_error(function() nn.MultiheadAttention(8, 2, { dropout = 2 }) end,
      "MultiheadAttention: dropout must be a probability between 0 and 1, got 2")
    local m = nn.MultiheadAttention(8, 2)
    local q, k = lt.randn(3, 2, 8), lt.randn(4, 2, 8)
    local pre = "MultiheadAttention(8, num_heads=2): "
    assert.has_error(function() m(q, k, k, { attn_mask = lt.zeros(3, 3) }) end,
      pre .. "attn_mask is [3 x 3], expected [3 x 4] (target length x source length)")
    assert.has_error(function() m(q, k, k, { attn_mask = lt.zeros(2, 3, 4) }) end,
      pre .. "attn_mask is [2 x 3 x 4], expected [4 x 3 x 4] (batch*num_heads x target length x source length)")
    assert.has_error(function() m(q, k, k, { key_padding_mask = lt.zeros(4, 2) }) end,
      pre .. "key_padding_mask is [4 x 2], expected [2 x 4] (batch x source length)")
    assert.has_error(function() m(q, k, k, { need_weight = false }) end,
      "MultiheadAttention: unknown option 'need_weight' (known options: attn_mask, average_attn_weights, " ..
      "key_padding_mask, need_weights)")
    assert.has_error(function() m(lt.randn(3, 2, 6), k, k) end, pre .. "query has 6 features, expected 8 (query [3 x 2 x 6])")
    assert.has_error(function() m(q, k, lt.randn(5, 2, 8)) end,
      pre .. "key [4 x 2 x 8] and value [5 x 2 x 8] must have the same batch and sequence sizes")
    assert.has_error(function() m(q, lt.randn(4, 3, 8), lt.randn(4, 3, 8)) end,
      pre .. "query [3 x 2 x 8] and key [4 x 3 x 8] have different batch sizes")
    assert.has_error(function() m(q, k) end, pre .. "value must be a tensor, got nil")
    assert.has_error(function() m(q, lt.randn(0, 2, 8), lt.randn(0, 2, 8)) end,
      pre .. "key [0 x 2 x 8] has no positions: attention needs at least one key")
    assert.has_error(function() m(lt.randn(3, 2, 2, 8), k, k) end,
      pre .. "query must be [L x N x E], [N x L x E] with batch_first, or unbatched [L x E]; got [3 x 2 x 2 x 8]")
    assert.has_error(function() m(q, k, k, { attn_mask = lt.zeros(3) }) end,
      pre .. "attn_mask must be 2-D [L x S] or 3-D [N*num_heads x L x S], got [3]")
  end)
end)

describe("transformer modules", function()
  before_each(function() lt.manual_seed(4) end)

  it("an encoder holds deep copies of its layer: equal at first, separate tensors, named layers.0, layers.1", function()
    local layer = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16 })
    local enc = nn.TransformerEncoder(layer, 2, { norm = nn.LayerNorm(8) })
    local n = 0
    for i, l in ipairs(enc.layers) do
      n = i
      assert.are_not.equal(layer, l)
      assert.is_true(l.self_attn.in_proj_weight:allclose(layer.self_attn.in_proj_weight, 0, 0))
    end
    assert.are.equal(2, n)
    lt.no_grad(function() enc.layers[1].linear1.weight:fill_(0) end)
    assert.is_true(enc.layers[2].linear1.weight:abs():sum():item() > 0)
    assert.is_true(layer.linear1.weight:abs():sum():item() > 0)
    local named = enc:named_parameters()
    assert.are.equal(enc.layers[2].self_attn.out_proj.weight, named["layers.1.self_attn.out_proj.weight"])
    assert.is_truthy(named["norm.weight"])
    assert.are.equal(2 * 12 + 2, #enc:parameters())
    -- the paths in error messages are the state_dict names
    assert.has_error(function() enc(lt.randn(3, 2, 8), { src_key_padding_mask = lt.zeros(2, 2) }) end,
      "in layers.0.self_attn MultiheadAttention(8, num_heads=2, dropout=0.1): key_padding_mask is [2 x 2], " ..
      "expected [2 x 3] (batch x source length)")
  end)

  it("Transformer: PyTorch's names, xavier_uniform_ on every matrix, the final norms, a causal mask", function()
    local tr = nn.Transformer { d_model = 8, nhead = 2, num_encoder_layers = 2, num_decoder_layers = 1,
      dim_feedforward = 16 }
    local named = tr:named_parameters()
    assert.is_truthy(named["encoder.layers.1.linear2.bias"])
    assert.is_truthy(named["decoder.layers.0.multihead_attn.in_proj_weight"])
    assert.is_truthy(named["decoder.norm.weight"])
    local w = named["encoder.layers.0.linear1.weight"] -- [16 x 8]
    assert.is_true(w:abs():max():item() <= math.sqrt(6 / 24))
    assert.is_true(w:abs():max():item() > 1 / math.sqrt(8)) -- beyond Linear's own bound: xavier was applied
    local mask = nn.Transformer.generate_square_subsequent_mask(3)
    assert.are.same({ { 0, -math.huge, -math.huge }, { 0, 0, -math.huge }, { 0, 0, 0 } }, mask:totable())
    assert.are.same(mask:totable(), tr:generate_square_subsequent_mask(3):totable())
    -- causal: changing a later tgt position leaves earlier outputs unchanged
    tr:eval()
    local src, tgt = lt.randn(4, 1, 8), lt.randn(3, 1, 8)
    local a = tr(src, tgt, { tgt_mask = mask })
    local tgt2 = tgt:clone()
    lt.no_grad(function() tgt2:narrow(1, 3, 1):fill_(5) end)
    local b = tr(src, tgt2, { tgt_mask = mask })
    assert.is_true(a:narrow(1, 1, 2):allclose(b:narrow(1, 1, 2), 1e-5, 1e-6))
    assert.is_false(a:narrow(1, 3, 1):allclose(b:narrow(1, 3, 1), 1e-3, 1e-3))
  end)

  it("dropout in training: reproducible with the seed, absent in eval", function()
    local l = nn.TransformerDecoderLayer(8, 2, 16, 0.3)
    local tgt, mem = lt.randn(3, 2, 8), lt.randn(4, 2, 8)
    lt.manual_seed(9)
    local a = l(tgt, mem)
    lt.manual_seed(9)
    local b = l(tgt, mem)
    assert.is_true(a:allclose(b, 0, 0))
    l:eval()
    local e1, e2 = l(tgt, mem), l(tgt, mem)
    assert.is_true(e1:allclose(e2, 0, 0))
    assert.is_false(a:allclose(e1, 1e-3, 1e-3))
  end)

  it("trains: a tiny Transformer learns to copy its source (PyTorch's same recipe: 1.96 -> 0.85 in 400 steps)", function()
    lt.manual_seed(1)
    local V, T, D, B = 6, 5, 16, 8
    local model = { emb = nn.Embedding(V, D), head = nn.Linear(D, V), tr = nn.Transformer { d_model = D, nhead = 2,
      num_encoder_layers = 1, num_decoder_layers = 1, dim_feedforward = 32, dropout = 0, batch_first = true } }
    local opt = lt.optim.Adam(nn.parameters(model), { lr = 0.01 })
    local mask = nn.Transformer.generate_square_subsequent_mask(T)
    local first, tail = nil, 0
    for step = 1, 400 do
      local src = lt.randint(1, V + 1, { B, T })
      local tgt_in = lt.cat({ lt.ones(B, 1, "int64"), src:narrow(2, 1, T - 1) }, 2) -- shifted right
      opt:zero_grad()
      local y = model.head(model.tr(model.emb(src), model.emb(tgt_in), { tgt_mask = mask }))
      local loss = lt.F.cross_entropy(y:reshape(B * T, V), src:reshape(B * T))
      loss:backward()
      opt:step()
      first = first or loss:item()
      if step > 380 then tail = tail + loss:item() / 20 end
    end
    assert.is_true(first > 1.6, "first loss " .. first)
    assert.is_true(tail < 1.3, "mean loss of the last 20 steps " .. tail)
  end)

  it("names the wrong arguments and options", function()
    assert.has_error(function() nn.TransformerEncoderLayer(10, 4) end,
      "TransformerEncoderLayer: d_model 10 is not divisible by nhead 4")
    assert.has_error(function() nn.TransformerEncoderLayer(8, 2, { activation = "swish" }) end,
      "TransformerEncoderLayer: option 'activation' must be \"relu\", \"gelu\" or a function, got \"swish\"")
    assert.has_error(function() nn.TransformerDecoderLayer(8, 2, { norm_frist = true }) end,
      "TransformerDecoderLayer: unknown option 'norm_frist' (known options: activation, batch_first, d_model, " ..
      "dim_feedforward, dropout, layer_norm_eps, nhead, norm_first)")
    assert.has_error(function() nn.TransformerEncoderLayer(8, 2, 16, { dim_feedforward = 32 }) end,
      "TransformerEncoderLayer: option 'dim_feedforward' given both as argument #3 and in the options table")
    assert.has_error(function() nn.TransformerEncoderLayer(8, 2, { dropout = 0 / 0 }) end,
      "TransformerEncoderLayer: dropout must be a probability between 0 and 1, got " .. tostring(0 / 0))
    assert.has_error(function() nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2), 0) end,
      "TransformerEncoder: num_layers must be an integer >= 1, got 0")
    assert.has_error(function() nn.TransformerEncoder("layer", 2) end,
      "TransformerEncoder: the first argument must be a layer module, got string")
    local l = nn.TransformerEncoderLayer(8, 2, 16)
    assert.has_error(function() l(lt.randn(3, 2, 8), { mask = lt.zeros(3, 3) }) end,
      "TransformerEncoderLayer: unknown option 'mask' (known options: src_key_padding_mask, src_mask)")
    local tr = nn.Transformer(8, 2, 1, 1, 16)
    assert.has_error(function() tr(lt.randn(4, 2, 8), lt.randn(3, 3, 8)) end,
      "Transformer(d_model=8, nhead=2): the batch sizes of src [4 x 2 x 8] and tgt [3 x 3 x 8] must be equal (dim 2)")
    assert.has_error(function() tr(lt.randn(4, 2, 6), lt.randn(3, 2, 6)) end,
      "Transformer(d_model=8, nhead=2): the feature number of src [4 x 2 x 6] and tgt [3 x 2 x 6] must be equal to " ..
      "d_model 8")
    assert.has_error(function() nn.Transformer.generate_square_subsequent_mask(0) end,
      "Transformer.generate_square_subsequent_mask: size must be an integer >= 1, got 0")
  end)
end)
