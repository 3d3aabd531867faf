-- nn/utils.lua — lt.nn.utils: gradient clipping.
--   local total = lt.nn.utils.clip_grad_norm_(model:parameters(), 1.0)   -- returns the total norm
--   lt.nn.utils.clip_grad_value_(model:parameters(), 0.5)
-- params: a list of tensors, one tensor, or a module / model table (its parameters). Tensors without
-- a gradient are skipped.
local lt = require "lutra"
local MM = require "lutra.nn.module"

local U = {}

local function grads(params, where)
  if lt.is_tensor(params) then params = { params }
  elseif type(params) ~= "table" then
    error(where .. ": expected a list of tensors or a module, got " .. type(params), 3)
  elseif params[1] == nil or not lt.is_tensor(params[1]) then
    params = MM.parameters(params)
  end
  local gs = {}
  for i, p in ipairs(params) do
    if not lt.is_tensor(p) then error(string.format("%s: element %d is a %s, expected a tensor", where, i, type(p)), 3) end
    local g = p.grad
    if g then gs[#gs + 1] = g end
  end
  return gs
end

--- Scales the gradients so that their joint norm is at most max_norm (PyTorch's rule:
--- coef = max_norm / (total + 1e-6), applied only when < 1). norm_type: a number >= 1 or math.huge.
--- Returns the total norm (before clipping) as a number.
function U.clip_grad_norm_(params, max_norm, norm_type)
  if type(max_norm) ~= "number" then error("clip_grad_norm_: max_norm must be a number, got " .. type(max_norm), 2) end
  norm_type = norm_type or 2
  if type(norm_type) ~= "number" or norm_type <= 0 then
    error("clip_grad_norm_: norm_type must be a positive number or math.huge, got " .. tostring(norm_type), 2)
  end
  local gs = grads(params, "clip_grad_norm_")
  if #gs == 0 then return 0 end
  local total
  if norm_type == math.huge then
    total = 0
    for _, g in ipairs(gs) do total = math.max(total, g:abs():max():item()) end
  elseif norm_type == 2 then
    total = 0
    for _, g in ipairs(gs) do total = total + (g * g):sum():item() end
    total = math.sqrt(total)
  else
    total = 0
    for _, g in ipairs(gs) do total = total + g:abs():pow(norm_type):sum():item() end
    total = total ^ (1 / norm_type)
  end
  local coef = max_norm / (total + 1e-6)
  -- `not (coef >= 1)` rather than `coef < 1`: a NaN total gives a NaN coef, which torch multiplies in
  -- (every grad NaN, so the step visibly fails) instead of leaving the grads unclipped
  if not (coef >= 1) then
    for _, g in ipairs(gs) do g:mul_(coef) end
  end
  return total
end

--- Clamps every gradient element into [-clip_value, clip_value].
function U.clip_grad_value_(params, clip_value)
  if type(clip_value) ~= "number" then
    error("clip_grad_value_: clip_value must be a number, got " .. type(clip_value), 2)
  end
  for _, g in ipairs(grads(params, "clip_grad_value_")) do g:clamp_(-clip_value, clip_value) end
end

--- The parameters' total element count.
function U.num_parameters(params)
  local n = 0
  for _, p in ipairs(lt.is_tensor(params) and { params } or (params[1] and params or MM.parameters(params))) do
    n = n + p:numel()
  end
  return n
end

return U
