-- F/attention.lua — lt.F.scaled_dot_product_attention, the option layer over the C kernel
-- (core/src/nn_attention.c). Semantics of PyTorch's F.scaled_dot_product_attention (math path):
--
--   local y = lt.F.scaled_dot_product_attention(q, k, v, {is_causal = true})      -- q [B, H, L, E]
--   local y = lt.F.scaled_dot_product_attention(q, k, v, {attn_mask = pad_mask})  -- 1 = masked
--
-- attn_mask: a float32 tensor is added to the scaled scores (0 / -inf), except that a mask of only 0s and 1s
-- (what x:lt(0) or tril give) is a 0/1 mask where 1 = masked; an int64 mask is a 0/1 mask too. PyTorch's
-- boolean mask says True = attend: lutra's 0/1 mask m is torch's `~m`.
local core = require "lutra.core"
local H = require "lutra.nn.helpers"
local C = core._attention

local M = {}

local SPEC = { attn_mask = "tensor", dropout_p = "number", is_causal = "boolean", scale = "number",
  need_weights = "boolean" }

--- scaled_dot_product_attention(q, k, v[, {attn_mask, dropout_p=0, is_causal=false, scale, need_weights=false}])
--- -> out [.. x L x Ev] (and the weights [.. x L x S] used, without gradient, when need_weights)
function M.scaled_dot_product_attention(q, k, v, opts)
  local o = H.check_opts("scaled_dot_product_attention", opts, SPEC, 2)
  local p = o.dropout_p or 0
  if p ~= p or p < 0 or p > 1 then
    error("scaled_dot_product_attention: dropout_p must be between 0 and 1, got " .. tostring(p), 2)
  end
  local scale = o.scale
  if scale ~= nil and not (scale > 0 and scale < math.huge) then
    error("scaled_dot_product_attention: scale must be a finite number > 0, got " .. tostring(scale), 2)
  end
  return C.sdpa(q, k, v, o.attn_mask, p, o.is_causal == true, scale, o.need_weights == true)
end

return M
