-- nn/attention.lua — MultiheadAttention(embed_dim, num_heads[, {dropout=0, bias=true, add_bias_kv=false,
-- add_zero_attn=false, kdim=embed_dim, vdim=embed_dim, batch_first=false}]), PyTorch 1.13's layout:
--
--   local mha = lt.nn.MultiheadAttention(64, 4, {batch_first = true})
--   local out, w = mha(x, x, x, {attn_mask = mask, key_padding_mask = pad})   -- w [B x L x S], head mean
--
-- Parameters: in_proj_weight [3E x E] (q, k, v rows in that order; q_proj_weight [E x E], k_proj_weight
-- [E x kdim], v_proj_weight [E x vdim] instead when kdim or vdim differ from E), in_proj_bias [3E], bias_k and
-- bias_v [1 x 1 x E] (add_bias_kv), out_proj (a Linear E -> E). Init as PyTorch: xavier_uniform_ on the input
-- projections, xavier_normal_ on bias_k/bias_v, zero biases, out_proj.weight Linear's default.
--
-- Masks (attn_mask [L x S] or [B*num_heads x L x S], key_padding_mask [B x S]): a float mask holding other
-- values than 0 and 1 is added to the scores (0 / -inf); an int64 mask, or a float mask of only 0s and 1s
-- (what x:gt(0) gives), means 1 = masked. Both masks are turned into one additive mask before the scores.
-- The work runs batch first, [B x heads x L x head_dim]: with need_weights the weights are computed as
-- PyTorch 1.13 does (softmax, then dropout, averaged over heads unless average_attn_weights=false), as tensors
-- that carry gradients; without, the fused kernel lt.F.scaled_dot_product_attention does it (lua/lutra/F/attention.lua),
-- which never builds them (its dropout draws differ from the explicit path's).
local lt = require "lutra"
local H = require "lutra.nn.helpers"
local F = require "lutra.F"
local init = require "lutra.nn.initializers"
local Linear = require "lutra.nn.linear"

local MHA = H.class("MultiheadAttention")

function MHA:init(embed_dim, num_heads, opts)
  H.check_int("MultiheadAttention", "embed_dim", embed_dim, 1, 3)
  H.check_int("MultiheadAttention", "num_heads", num_heads, 1, 3)
  opts = H.check_opts("MultiheadAttention", opts, { dropout = "number", bias = "boolean", add_bias_kv = "boolean",
    add_zero_attn = "boolean", kdim = "number", vdim = "number", batch_first = "boolean" }, 3)
  if embed_dim % num_heads ~= 0 then
    error(string.format("MultiheadAttention: embed_dim %d is not divisible by num_heads %d", embed_dim, num_heads), 3)
  end
  local p = opts.dropout or 0
  if type(p) ~= "number" or not (p >= 0 and p <= 1) then
    error("MultiheadAttention: dropout must be a probability between 0 and 1, got " .. tostring(p), 3)
  end
  local E = embed_dim
  self.embed_dim, self.num_heads, self.head_dim, self.dropout = E, num_heads, math.floor(E / num_heads), p
  self.kdim = H.check_int("MultiheadAttention", "kdim", opts.kdim or E, 1, 3)
  self.vdim = H.check_int("MultiheadAttention", "vdim", opts.vdim or E, 1, 3)
  self.batch_first = opts.batch_first == true
  self.add_zero_attn = opts.add_zero_attn == true
  self._qkv_same_embed_dim = self.kdim == E and self.vdim == E
  local xavier = function(t) init.xavier_uniform_(t) end
  local params = {}
  if self._qkv_same_embed_dim then
    self.in_proj_weight = H.param({ 3 * E, E }, xavier)
    params[1] = "in_proj_weight"
  else
    self.q_proj_weight = H.param({ E, E }, xavier)
    self.k_proj_weight = H.param({ E, self.kdim }, xavier)
    self.v_proj_weight = H.param({ E, self.vdim }, xavier)
    params[1], params[2], params[3] = "q_proj_weight", "k_proj_weight", "v_proj_weight"
  end
  local bias = opts.bias ~= false
  if bias then
    self.in_proj_bias = H.param({ 3 * E }, function(t) t:zero_() end)
    params[#params + 1] = "in_proj_bias"
  end
  if opts.add_bias_kv then
    local xn = function(t) init.xavier_normal_(t) end
    self.bias_k, self.bias_v = H.param({ 1, 1, E }, xn), H.param({ 1, 1, E }, xn)
    params[#params + 1], params[#params + 2] = "bias_k", "bias_v"
  end
  self._params = params
  self.out_proj = Linear(E, E, { bias = bias })
  if bias then lt.no_grad(function() self.out_proj.bias:zero_() end) end
end

function MHA:extra_repr()
  local s = self.embed_dim .. ", num_heads=" .. self.num_heads
  if self.dropout ~= 0 then s = s .. ", dropout=" .. self.dropout end
  if not self._qkv_same_embed_dim then s = s .. ", kdim=" .. self.kdim .. ", vdim=" .. self.vdim end
  if self.bias_k then s = s .. ", add_bias_kv=true" end
  if self.add_zero_attn then s = s .. ", add_zero_attn=true" end
  if self.batch_first then s = s .. ", batch_first=true" end
  return s
end

-- ---- masks ------------------------------------------------------------------------------------------------

local function is_zero_one(m)
  if m:dtype() == "int64" then return true end
  return m:numel() == 0 or m:eq(0):logical_or(m:eq(1)):all():item() ~= 0
end

--- The mask m as an additive float mask of the same shape (0 where attended, -inf where masked).
local function additive(m)
  if is_zero_one(m) then return lt.zeros(m:shape()):masked_fill(m, -math.huge) end
  return m
end

local function same_shape(t, want)
  local s = t:shape()
  if #s ~= #want then return false end
  for i = 1, #s do if s[i] ~= want[i] then return false end end
  return true
end

-- ---- the attention itself ---------------------------------------------------------------------------------

-- softmax(q k^T / sqrt(d) + mask) v on [B x H x L x d] with [B x H x S x d]; the weights [B x H x L x S] as
-- PyTorch 1.13 computes them when they are asked for (dropout applied to them, so the weights returned are
-- those that multiplied v).
local function attention_with_weights(q, k, v, mask, p)
  local scores = (q / math.sqrt(q:size(4))):matmul(k:transpose(3, 4))
  if mask then scores = scores + mask end
  local w = scores:softmax(4)
  if p > 0 then w = F.dropout(w, p, true) end
  return w:matmul(v), w
end

-- ---- forward ----------------------------------------------------------------------------------------------

local function check_tensor(self, what, x)
  if not lt.is_tensor(x) then self:fail(string.format("%s must be a tensor, got %s", what, type(x))) end
end

-- [B x n x features] views of query/key/value (batch first), and whether the input was unbatched
function MHA:_batch_first_inputs(query, key, value)
  check_tensor(self, "query", query)
  check_tensor(self, "key", key)
  check_tensor(self, "value", value)
  local d = query:dim()
  if d ~= 2 and d ~= 3 then
    self:fail("query must be [L x N x E], [N x L x E] with batch_first, or unbatched [L x E]; got " .. query:shape_str())
  end
  if key:dim() ~= d or value:dim() ~= d then
    self:fail(string.format("query %s is %d-D: key and value must be too, got key %s and value %s", query:shape_str(),
      d, key:shape_str(), value:shape_str()))
  end
  local function features(what, x, n)
    if x:size(d) ~= n then
      self:fail(string.format("%s has %d features, expected %d (%s %s)", what, x:size(d), n, what, x:shape_str()))
    end
  end
  features("query", query, self.embed_dim)
  features("key", key, self.kdim)
  features("value", value, self.vdim)
  local unbatched = d == 2
  local q, k, v
  if unbatched then q, k, v = query:unsqueeze(1), key:unsqueeze(1), value:unsqueeze(1)
  elseif self.batch_first then q, k, v = query, key, value
  else q, k, v = query:transpose(1, 2), key:transpose(1, 2), value:transpose(1, 2) end
  if k:size(1) ~= v:size(1) or k:size(2) ~= v:size(2) then
    self:fail(string.format("key %s and value %s must have the same batch and sequence sizes", key:shape_str(),
      value:shape_str()))
  end
  if k:size(2) == 0 and not (self.bias_k or self.add_zero_attn) then
    self:fail(string.format("key %s has no positions: attention needs at least one key", key:shape_str()))
  end
  if q:size(1) ~= k:size(1) then
    self:fail(string.format("query %s and key %s have different batch sizes", query:shape_str(), key:shape_str()))
  end
  return q, k, v, unbatched
end

-- the projections of q, k and v, each [B x n x E]; self-attention (one tensor for all three) is one GEMM
function MHA:_project(q, k, v, query, key, value)
  local E, b = self.embed_dim, self.in_proj_bias
  local function bias(i) return b and b:narrow(1, (i - 1) * E + 1, E) end
  if not self._qkv_same_embed_dim then
    return lt.linear(q, self.q_proj_weight, bias(1)), lt.linear(k, self.k_proj_weight, bias(2)),
      lt.linear(v, self.v_proj_weight, bias(3))
  end
  local w = self.in_proj_weight
  if rawequal(key, value) then
    if rawequal(query, key) then
      local qkv = lt.linear(q, w, b):chunk(3, 3)
      return qkv[1], qkv[2], qkv[3]
    end
    local kv = lt.linear(k, w:narrow(1, E + 1, 2 * E), b and b:narrow(1, E + 1, 2 * E)):chunk(2, 3)
    return lt.linear(q, w:narrow(1, 1, E), bias(1)), kv[1], kv[2]
  end
  return lt.linear(q, w:narrow(1, 1, E), bias(1)), lt.linear(k, w:narrow(1, E + 1, E), bias(2)),
    lt.linear(v, w:narrow(1, 2 * E + 1, E), bias(3))
end

-- One additive mask broadcastable to [B x heads x L x S] from attn_mask and key_padding_mask (nil if neither).
function MHA:_mask(attn_mask, kpm, B, L, S, unbatched)
  local Hn, mask = self.num_heads, nil
  if attn_mask ~= nil then
    check_tensor(self, "attn_mask", attn_mask)
    if attn_mask:dim() == 2 then
      if not same_shape(attn_mask, { L, S }) then
        self:fail(string.format("attn_mask is %s, expected [%d x %d] (target length x source length)",
          attn_mask:shape_str(), L, S))
      end
      mask = additive(attn_mask)
    elseif attn_mask:dim() == 3 then
      if not same_shape(attn_mask, { B * Hn, L, S }) then
        self:fail(string.format("attn_mask is %s, expected [%d x %d x %d] (batch*num_heads x target length x " ..
          "source length)", attn_mask:shape_str(), B * Hn, L, S))
      end
      mask = additive(attn_mask):reshape(B, Hn, L, S)
    else
      self:fail("attn_mask must be 2-D [L x S] or 3-D [N*num_heads x L x S], got " .. attn_mask:shape_str())
    end
  end
  if kpm ~= nil then
    check_tensor(self, "key_padding_mask", kpm)
    local want = unbatched and { S } or { B, S }
    if not same_shape(kpm, want) then
      self:fail(string.format("key_padding_mask is %s, expected %s (%s)", kpm:shape_str(), H.shape_str(want),
        unbatched and "source length" or "batch x source length"))
    end
    local m = additive(kpm):reshape(B, 1, 1, S)
    mask = mask and mask + m or m
  end
  return mask
end

local FORWARD_OPTS = { attn_mask = "tensor", key_padding_mask = "tensor", need_weights = "boolean",
  average_attn_weights = "boolean" }

--- mha(query, key, value[, {attn_mask, key_padding_mask, need_weights=true, average_attn_weights=true}])
--- -> output (the query's layout), weights ([N x L x S], [N x heads x L x S] per head, nil without need_weights)
function MHA:forward(query, key, value, opts)
  opts = H.check_opts("MultiheadAttention", opts, FORWARD_OPTS, 2)
  local q, k, v, unbatched = self:_batch_first_inputs(query, key, value)
  local B, L, S = q:size(1), q:size(2), k:size(2)
  local mask = self:_mask(opts.attn_mask, opts.key_padding_mask, B, L, S, unbatched)
  q, k, v = self:_project(q, k, v, query, key, value)
  local E, Hn, d = self.embed_dim, self.num_heads, self.head_dim
  if self.bias_k then -- one more key and value, never masked
    k = lt.cat({ k, self.bias_k:expand(B, 1, E) }, 2)
    v = lt.cat({ v, self.bias_v:expand(B, 1, E) }, 2)
    if mask then mask = F.pad(mask, { 0, 1 }) end
  end
  local function heads(t) return t:reshape(B, t:size(2), Hn, d):transpose(2, 3) end
  q, k, v = heads(q), heads(k), heads(v)
  if self.add_zero_attn then -- a zero key and value, never masked
    local z = lt.zeros(B, Hn, 1, d, k:dtype())
    k, v = lt.cat({ k, z }, 3), lt.cat({ v, z }, 3)
    if mask then mask = F.pad(mask, { 0, 1 }) end
  end
  local p = self.training and self.dropout or 0
  local need_weights = opts.need_weights ~= false
  local out, w
  if need_weights then out, w = attention_with_weights(q, k, v, mask, p)
  else out = F.scaled_dot_product_attention(q, k, v, { attn_mask = mask, dropout_p = p }) end
  out = self.out_proj(out:transpose(2, 3):reshape(B, L, E))
  if unbatched then out = out:squeeze(1)
  elseif not self.batch_first then out = out:transpose(1, 2) end
  if not need_weights then return out, nil end
  if opts.average_attn_weights ~= false then w = w:mean(2) end
  if unbatched then w = w:squeeze(1) end
  return out, w
end

return MHA
