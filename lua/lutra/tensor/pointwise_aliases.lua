-- tensor/pointwise_aliases.lua — PyTorch's other names for elementwise ops lutra has under one name (fix: trunc,
-- sgn: sign, clip: clamp), clamp_min / clamp_max (a number, or a tensor bound with broadcasting), and float_power
-- (pow computed in float64). The kernels are the core's; errors name the function called.
local core = require "lutra.core"
local util = require "lutra.utils.check"
local A = require "lutra.tensor.args"
local methods = core.Tensor.methods

local M = {}
local call_as = util.call_as

-- x:name(...) as methods[target](x, ...), its errors named `name`
local function alias(name, target)
  local f = methods[target]
  return function(x, ...) return call_as(name, f, x, ...) end
end

M.fix = alias("fix", "trunc")
M.sgn = alias("sgn", "sign")
M.sgn_ = alias("sgn_", "sign_")
M.clip = alias("clip", "clamp")
M.clip_ = alias("clip_", "clamp_")

local function check_bound(name, v)
  if not (type(v) == "number" or core.is_tensor(v)) then
    error(string.format("%s: the bound must be a number or a tensor, got %s", name, type(v)), 3)
  end
end

--- x:clamp_min(lo): max(x, lo), lo a number or a tensor (broadcast; a NaN in either gives NaN)
function M.clamp_min(x, lo)
  check_bound("clamp_min", lo)
  if type(lo) == "number" then return call_as("clamp_min", methods.clamp, x, lo, nil) end
  return call_as("clamp_min", methods.maximum, x, lo)
end
--- x:clamp_max(hi): min(x, hi)
function M.clamp_max(x, hi)
  check_bound("clamp_max", hi)
  if type(hi) == "number" then return call_as("clamp_max", methods.clamp, x, nil, hi) end
  return call_as("clamp_max", methods.minimum, x, hi)
end
--- x:clamp_min_(lo) and x:clamp_max_(hi): in place, number bounds
function M.clamp_min_(x, lo)
  if type(lo) ~= "number" then error("clamp_min_: the bound must be a number, got " .. type(lo), 2) end
  return call_as("clamp_min_", methods.clamp_, x, lo, nil)
end
function M.clamp_max_(x, hi)
  if type(hi) ~= "number" then error("clamp_max_: the bound must be a number, got " .. type(hi), 2) end
  return call_as("clamp_max_", methods.clamp_, x, nil, hi)
end

local function as_double(v) return core.is_tensor(v) and v:double() or v end

--- lt.float_power(a, b): a ^ b in float64 whatever the operands' dtypes (tensors or numbers, broadcast)
function M.float_power(a, b)
  if not (core.is_tensor(a) or core.is_tensor(b)) or not (core.is_tensor(a) or type(a) == "number")
    or not (core.is_tensor(b) or type(b) == "number") then
    error(string.format("float_power: expected tensors or numbers (at least one tensor), got %s and %s",
      core.is_tensor(a) and "tensor" or type(a), core.is_tensor(b) and "tensor" or type(b)), 2)
  end
  return call_as("float_power", core.pow, as_double(a), as_double(b))
end
--- x:float_power_(b): in place; x must be float64 (the result's dtype), as PyTorch's
function M.float_power_(x, b)
  if x:dtype() ~= "float64" then
    error("float_power_: the tensor updated in place must be float64 (the result's dtype), got " .. x:dtype(), 2)
  end
  return call_as("float_power_", methods.pow_, x, as_double(b))
end

A.register(M, { float_power = true })

return M
