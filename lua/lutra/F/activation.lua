-- F/activation.lua — lt.F.relu, leaky_relu, silu, elu, softplus, mish, hardtanh, hardswish, hardsigmoid, prelu
-- (kernels in core/src/ops_activation.c). PyTorch's positional arguments stay positional, and may also come as
-- one options table with PyTorch's names, inplace where PyTorch has it (lua/lutra/F/args.lua):
--
--   lt.F.softplus(x, 2, 10)   ==   lt.F.softplus(x, {beta = 2, threshold = 10})
--   lt.F.hardtanh(x, {min_val = -2, max_val = 2})
--   lt.F.relu(x, true)        ==   lt.F.relu(x, {inplace = true})
local lt = require "lutra"
local core = require "lutra.core"
local F = require "lutra.F.args"

local A = {}

local function check_input(name, x)
  if not lt.is_tensor(x) then error(name .. ": expected a tensor input, got " .. type(x), 3) end
end

local INPLACE = { "inplace", "boolean", false }

--- relu(x[, inplace = false]) or relu(x, {inplace = false})
function A.relu(x, ...)
  check_input("relu", x)
  local inplace = F.args("relu", { INPLACE }, ...)
  return F.result(inplace, x, x:relu(), "relu")
end

--- leaky_relu(x[, negative_slope = 0.01[, inplace = false]]) or leaky_relu(x, {negative_slope, inplace})
function A.leaky_relu(x, ...)
  check_input("leaky_relu", x)
  local slope, inplace = F.args("leaky_relu", { { "negative_slope", "number", 0.01 }, INPLACE }, ...)
  return F.result(inplace, x, x:leaky_relu(slope), "leaky_relu")
end

-- the activations without options but inplace: silu(x[, inplace]), mish, hardswish, hardsigmoid
for _, name in ipairs { "silu", "mish", "hardswish", "hardsigmoid" } do
  A[name] = function(x, ...)
    check_input(name, x)
    local inplace = F.args(name, { INPLACE }, ...)
    return F.result(inplace, x, core._activation(name, x), name)
  end
end

--- elu(x[, alpha = 1[, inplace = false]]) or elu(x, {alpha, inplace})
function A.elu(x, ...)
  check_input("elu", x)
  local alpha, inplace = F.args("elu", { { "alpha", "number", 1 }, INPLACE }, ...)
  return F.result(inplace, x, core._activation("elu", x, alpha), "elu")
end

--- softplus(x[, beta = 1[, threshold = 20]]) or softplus(x, {beta, threshold}) (PyTorch's has no inplace)
function A.softplus(x, ...)
  check_input("softplus", x)
  local beta, threshold = F.args("softplus", { { "beta", "number", 1 }, { "threshold", "number", 20 } }, ...)
  if beta == 0 then error("softplus: beta must not be 0", 2) end
  return core._activation("softplus", x, beta, threshold)
end

--- hardtanh(x[, min_val = -1[, max_val = 1[, inplace = false]]]) or hardtanh(x, {min_val, max_val, inplace})
function A.hardtanh(x, ...)
  check_input("hardtanh", x)
  local min_val, max_val, inplace = F.args("hardtanh", { { "min_val", "number", -1 }, { "max_val", "number", 1 },
    INPLACE }, ...)
  if min_val > max_val then
    error(string.format("hardtanh: min_val %g must be less than or equal to max_val %g", min_val, max_val), 2)
  end
  return F.result(inplace, x, core._activation("hardtanh", x, min_val, max_val), "hardtanh")
end

--- prelu(x, weight): weight [1] or [C], C the size of x's dim 2
function A.prelu(x, weight)
  check_input("prelu", x)
  if not lt.is_tensor(weight) then error("prelu: weight must be a tensor, got " .. type(weight), 2) end
  return core._prelu(x, weight)
end

return A
