-- sdpa_spec: lt.F.scaled_dot_product_attention (core/src/nn_attention.c) and LayerNorm{bias=false} against
-- PyTorch 1.13 (tests/fixtures/gpt.json from gen_gpt.py): values and gradients, masks (additive, 0/1, int64),
-- causal blocks, finite-difference gradchecks, dropout statistics and its backward, strided inputs, weights,
-- and the error texts of bad input.
local lt = require "lutra"
local X = require "tests.helpers.nn_fixtures"
local gradcheck = require "tests.helpers.gradcheck"
local F = lt.F
local sdpa = F.scaled_dot_product_attention

local function err_of(f)
  local ok, e = pcall(f)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

local ops = {
  sdpa_basic = function(q, k, v) return sdpa(q, k, v) end,
  sdpa_3d = function(q, k, v) return sdpa(q, k, v) end,
  sdpa_2d = function(q, k, v) return sdpa(q, k, v) end,
  sdpa_causal = function(q, k, v) return sdpa(q, k, v, { is_causal = true }) end,
  sdpa_causal_short_query = function(q, k, v) return sdpa(q, k, v, { is_causal = true }) end,
  sdpa_causal_long_query = function(q, k, v) return sdpa(q, k, v, { is_causal = true }) end,
  sdpa_causal_blocks = function(q, k, v) return sdpa(q, k, v, { is_causal = true }) end,
  sdpa_blocks = function(q, k, v) return sdpa(q, k, v) end,
  sdpa_float_mask = function(q, k, v, m) return sdpa(q, k, v, { attn_mask = m }) end,
  sdpa_binary_mask = function(q, k, v, m) return sdpa(q, k, v, { attn_mask = m }) end,
  sdpa_int64_mask = function(q, k, v, m) return sdpa(q, k, v, { attn_mask = m }) end,
  sdpa_causal_and_mask = function(q, k, v, m) return sdpa(q, k, v, { attn_mask = m, is_causal = true }) end,
  sdpa_scale = function(q, k, v) return sdpa(q, k, v, { scale = 0.3 }) end,
  layer_norm_no_bias = function(x, w)
    local m = lt.nn.LayerNorm(6, { bias = false })
    m.weight = w
    return m(x)
  end,
  layer_norm_no_bias_2d_shape = function(x, w)
    local m = lt.nn.LayerNorm({ 3, 4 }, { bias = false })
    m.weight = w
    return m(x)
  end,
}

describe("scaled_dot_product_attention against PyTorch 1.13 (gpt.json)", function()
  X.describe_cases(it, "gpt.json", ops)
end)

describe("scaled_dot_product_attention", function()
  it("passes gradchecks: plain, causal over several blocks, masked, scaled", function()
    lt.manual_seed(3)
    gradcheck(function(q, k, v) return sdpa(q, k, v) end, { lt.randn(2, 3, 4), lt.randn(2, 5, 4), lt.randn(2, 5, 3) })
    gradcheck(function(q, k, v) return sdpa(q, k, v, { is_causal = true }) end,
      { lt.randn(1, 66, 2), lt.randn(1, 66, 2), lt.randn(1, 66, 2) })
    local m = lt.tensor{ { 0, 1, 0 }, { 1, 0, 0 } }
    gradcheck(function(q, k, v) return sdpa(q, k, v, { attn_mask = m, scale = 0.7 }) end,
      { lt.randn(2, 2, 4), lt.randn(2, 3, 4), lt.randn(2, 3, 2) })
  end)

  it("passes a gradcheck with dropout (the backward regenerates the forward's mask)", function()
    lt.manual_seed(4)
    gradcheck(function(q, k, v) return sdpa(q, k, v, { dropout_p = 0.3, is_causal = true }) end,
      { lt.randn(2, 6, 3), lt.randn(2, 6, 3), lt.randn(2, 6, 2) })
  end)

  it("drops weights with probability dropout_p and scales the kept ones by 1/(1-p)", function()
    lt.manual_seed(5)
    local q, k, v = lt.zeros(4, 64, 8), lt.zeros(4, 64, 8), lt.ones(4, 64, 1)
    -- equal scores: every weight is 1/64; the output row is (kept count) / 64 / (1 - p)
    local _, w = sdpa(q, k, v, { dropout_p = 0.25, need_weights = true })
    local kept = w:gt(0):sum():item() / w:numel()
    assert.is_true(math.abs(kept - 0.75) < 0.02, "kept fraction " .. kept)
    local nz = w:masked_select(w:gt(0))
    assert.is_true((nz - 1 / 64 / 0.75):abs():max():item() < 1e-6)
    -- a second call draws a different mask; the same seed the same one
    local _, w2 = sdpa(q, k, v, { dropout_p = 0.25, need_weights = true })
    assert.is_true((w - w2):abs():max():item() > 0)
    lt.manual_seed(5)
    local _, w3 = sdpa(q, k, v, { dropout_p = 0.25, need_weights = true })
    assert.are.equal(0, (w - w3):abs():max():item())
    local y = sdpa(q, k, v, { dropout_p = 1 })
    assert.are.equal(0, y:abs():max():item())
  end)

  it("returns the weights on request, rows summing to 1 and zero above the diagonal when causal", function()
    lt.manual_seed(6)
    local q, k, v = lt.randn(2, 5, 3), lt.randn(2, 5, 3), lt.randn(2, 5, 4)
    local y, w = sdpa(q, k, v, { is_causal = true, need_weights = true })
    assert.are.same({ 2, 5, 5 }, w:shape())
    assert.is_true((w:sum(3) - 1):abs():max():item() < 1e-6)
    assert.are.equal(0, (w * lt.ones(5, 5):triu(1)):abs():max():item())
    assert.is_true((w:matmul(v) - y):abs():max():item() < 1e-6)
  end)

  it("reads strided heads of a fused projection in place, with the same values and gradients", function()
    lt.manual_seed(7)
    local B, T, H, D = 2, 5, 3, 4
    local qkv = lt.randn(B, T, 3 * H * D):requires_grad(true)
    local function heads(t) return t:view(B, T, H, D):transpose(2, 3) end
    local q, k, v = heads(qkv:narrow(3, 1, H * D)), heads(qkv:narrow(3, H * D + 1, H * D)),
      heads(qkv:narrow(3, 2 * H * D + 1, H * D))
    local y = sdpa(q, k, v, { is_causal = true })
    local g = lt.randn(B, H, T, D)
    y:backward(g)
    local ref = qkv:detach():clone():requires_grad(true)
    local q2, k2, v2 = heads(ref:narrow(3, 1, H * D)):contiguous(), heads(ref:narrow(3, H * D + 1, H * D)):contiguous(),
      heads(ref:narrow(3, 2 * H * D + 1, H * D)):contiguous()
    local y2 = sdpa(q2, k2, v2, { is_causal = true })
    y2:backward(g)
    assert.is_true((y - y2):abs():max():item() < 1e-6)
    assert.is_true((qkv.grad - ref.grad):abs():max():item() < 1e-6)
  end)

  it("takes a strided output gradient (the head split undone by a transpose) with the same gradients", function()
    lt.manual_seed(8)
    local B, T, H, D = 2, 6, 2, 3
    local qkv = lt.randn(B, T, 3 * H * D):requires_grad(true)
    local ref = qkv:detach():clone():requires_grad(true)
    local function heads(t, i) return t:narrow(3, i * H * D + 1, H * D):view(B, T, H, D):transpose(2, 3) end
    local w = lt.randn(B, T, H * D)
    -- as models/gpt.lua: the output's heads back to [B x T x C]; its gradient reaches the kernel transposed
    local y = sdpa(heads(qkv, 0), heads(qkv, 1), heads(qkv, 2), { is_causal = true })
    ;(y:transpose(2, 3):contiguous():view(B, T, H * D) * w):sum():backward()
    local y2 = sdpa(heads(ref, 0):contiguous(), heads(ref, 1):contiguous(), heads(ref, 2):contiguous(),
      { is_causal = true })
    y2:backward(w:view(B, T, H, D):transpose(2, 3):contiguous())
    assert.is_true((qkv.grad - ref.grad):abs():max():item() < 1e-6)
  end)

  it("takes an empty batch or no queries: empty output, and zero gradients for the keys", function()
    local q = lt.randn(0, 2, 4, 8):requires_grad(true)
    local y = sdpa(q, q, q)
    assert.are.same({ 0, 2, 4, 8 }, y:size())
    y:sum():backward()
    assert.are.same({ 0, 2, 4, 8 }, q.grad:size())
    local q2, k2 = lt.randn(2, 0, 8):requires_grad(true), lt.randn(2, 3, 8):requires_grad(true)
    local y2 = sdpa(q2, k2, k2)
    assert.are.same({ 2, 0, 8 }, y2:size())
    y2:sum():backward()
    assert.are.equal(0, k2.grad:abs():sum():item())
  end)

  it("gives NaN for a query row whose keys are all masked, as PyTorch", function()
    local m = lt.tensor{ { 0, 0 }, { 1, 1 } }
    local y = sdpa(lt.randn(2, 3), lt.randn(2, 3), lt.randn(2, 3), { attn_mask = m })
    local t = y:totable()
    assert.is_true(t[1][1] == t[1][1])
    assert.is_true(t[2][1] ~= t[2][1])
  end)

  it("sends gradients only to the inputs that require them", function()
    local q, k, v = lt.randn(3, 2):requires_grad(true), lt.randn(4, 2), lt.randn(4, 2):requires_grad(true)
    sdpa(q, k, v):sum():backward()
    assert.is_not_nil(q.grad)
    assert.is_nil(k.grad)
    assert.is_not_nil(v.grad)
  end)

  it("names the shapes, dtypes and options of bad calls", function()
    local q, k, v = lt.randn(2, 3, 4), lt.randn(2, 5, 4), lt.randn(2, 5, 6)
    assert.matches("scaled_dot_product_attention: key [2 x 5 x 3] must have query's feature size 4",
      err_of(function() return sdpa(q, lt.randn(2, 5, 3), v) end), 1, true)
    assert.matches("scaled_dot_product_attention: value [2 x 4 x 6] must have key's length 5",
      err_of(function() return sdpa(q, k, lt.randn(2, 4, 6)) end), 1, true)
    assert.matches("must have the same batch dims (dims 1..1)",
      err_of(function() return sdpa(q, lt.randn(3, 5, 4), lt.randn(3, 5, 6)) end), 1, true)
    assert.matches("must have the same number of dims",
      err_of(function() return sdpa(q, lt.randn(5, 4), lt.randn(5, 6)) end), 1, true)
    assert.matches("query must have at least 2 dims",
      err_of(function() return sdpa(lt.randn(4), k, v) end), 1, true)
    assert.matches("scaled_dot_product_attention: query must be float32 or float64, got int64",
      err_of(function() return sdpa(lt.zeros(2, 3, 4):long(), k, v) end), 1, true)
    assert.matches("attn_mask [3 x 4] cannot be broadcast to the weights' shape [2 x 3 x 5]",
      err_of(function() return sdpa(q, k, v, { attn_mask = lt.zeros(3, 4) }) end), 1, true)
    assert.matches("scaled_dot_product_attention: unknown option 'causal'",
      err_of(function() return sdpa(q, k, v, { causal = true }) end), 1, true)
    assert.matches("dropout_p must be between 0 and 1, got 1.5",
      err_of(function() return sdpa(q, k, v, { dropout_p = 1.5 }) end), 1, true)
    assert.matches("scale must be a finite number > 0, got -1",
      err_of(function() return sdpa(q, k, v, { scale = -1 }) end), 1, true)
    assert.matches("key [2 x 0 x 4] has no positions",
      err_of(function() return sdpa(q, lt.zeros(2, 0, 4), lt.zeros(2, 0, 6)) end), 1, true)
    assert.matches("bad argument #2 to 'scaled_dot_product_attention' (tensor expected, got number)",
      err_of(function() return sdpa(q, 3, v) end), 1, true)
  end)
end)

describe("LayerNorm{bias=false}", function()
  it("has a weight and no bias parameter, in state_dict and parameters", function()
    local m = lt.nn.LayerNorm(8, { bias = false })
    local sd = m:state_dict()
    assert.is_not_nil(sd.weight)
    assert.is_nil(sd.bias)
    assert.are.equal(1, #m:parameters())
    assert.are.equal("LayerNorm([8], eps=1e-05, bias=false)", tostring(m))
    local strict_err = err_of(function() m:load_state_dict({ weight = lt.ones(8), bias = lt.zeros(8) }) end)
    assert.matches('unexpected key(s) in state_dict: "bias"', strict_err, 1, true)
    assert.matches("option 'bias' must be a boolean",
      err_of(function() return lt.nn.LayerNorm(8, { bias = 0 }) end), 1, true)
  end)
  it("passes a gradcheck", function()
    lt.manual_seed(8)
    gradcheck(function(x, w) return F.layer_norm(x, 5, w) end, { lt.randn(3, 5), lt.randn(5) })
  end)
end)
