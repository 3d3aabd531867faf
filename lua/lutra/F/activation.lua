-- F/activation.lua — lt.F.silu, elu, softplus, mish, hardtanh, hardswish, hardsigmoid, prelu (kernels in
-- core/src/ops_activation.c). PyTorch's positional arguments stay positional, and may also come as one options
-- table with PyTorch's names:
--
--   lt.F.softplus(x, 2, 10)   ==   lt.F.softplus(x, {beta = 2, threshold = 10})
--   lt.F.hardtanh(x, {min_val = -2, max_val = 2})
local lt = require "lutra"
local core = require "lutra.core"
local H = require "lutra.nn.helpers"

local A = {}

local function check_input(name, x)
  if not lt.is_tensor(x) then error(name .. ": expected a tensor input, got " .. type(x), 3) end
end

-- (x, a, b) or (x, {names[1] = a, names[2] = b}) -> a, b with defaults; each a finite number
local function args2(name, a, b, names, defaults)
  if type(a) == "table" then
    if b ~= nil then error(name .. ": options come as one table, got another argument after it", 3) end
    local spec = {}
    for _, n in ipairs(names) do spec[n] = "number" end
    local o = H.check_opts(name, a, spec, 3)
    a, b = o[names[1]], o[names[2]]
  end
  local v = { a, b }
  for i, n in ipairs(names) do
    if v[i] == nil then v[i] = defaults[i] end
    H.check_finite(name, n, v[i], nil, 3)
  end
  return v[1], v[2]
end

-- the activations without options
for _, name in ipairs { "silu", "mish", "hardswish", "hardsigmoid" } do
  A[name] = function(x)
    check_input(name, x)
    return core._activation(name, x)
  end
end

--- elu(x[, alpha = 1]) or elu(x, {alpha = 1})
function A.elu(x, alpha, ...)
  check_input("elu", x)
  if select("#", ...) > 0 then error("elu: takes (x[, alpha]) (PyTorch's inplace is not supported)", 2) end
  alpha = args2("elu", alpha, nil, { "alpha" }, { 1 })
  return core._activation("elu", x, alpha)
end

--- softplus(x[, beta = 1[, threshold = 20]]) or softplus(x, {beta, threshold})
function A.softplus(x, beta, threshold, ...)
  check_input("softplus", x)
  if select("#", ...) > 0 then error("softplus: takes (x[, beta[, threshold]])", 2) end
  beta, threshold = args2("softplus", beta, threshold, { "beta", "threshold" }, { 1, 20 })
  if beta == 0 then error("softplus: beta must not be 0", 2) end
  return core._activation("softplus", x, beta, threshold)
end

--- hardtanh(x[, min_val = -1[, max_val = 1]]) or hardtanh(x, {min_val, max_val})
function A.hardtanh(x, min_val, max_val, ...)
  check_input("hardtanh", x)
  if select("#", ...) > 0 then error("hardtanh: takes (x[, min_val[, max_val]]) (PyTorch's inplace is not supported)", 2) end
  min_val, max_val = args2("hardtanh", min_val, max_val, { "min_val", "max_val" }, { -1, 1 })
  if min_val > max_val then
    error(string.format("hardtanh: min_val %g must be less than or equal to max_val %g", min_val, max_val), 2)
  end
  return core._activation("hardtanh", x, min_val, max_val)
end

--- prelu(x, weight): weight [1] or [C], C the size of x's dim 2
function A.prelu(x, weight)
  check_input("prelu", x)
  if not lt.is_tensor(weight) then error("prelu: weight must be a tensor, got " .. type(weight), 2) end
  return core._prelu(x, weight)
end

return A
