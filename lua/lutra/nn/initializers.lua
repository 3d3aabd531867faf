-- nn/initializers.lua — lt.nn.init: in-place initialisers with PyTorch's formulas, drawing from lt's
-- RNG (lt.manual_seed), with gradient recording off. Each returns the tensor.
--   lt.nn.init.kaiming_uniform_(w, {a = math.sqrt(5)})     lt.nn.init.xavier_uniform_(w)
--   lt.nn.init.zeros_(b)   ones_   constant_(t, v)   normal_(t, mean, std)   uniform_(t, a, b)
--   lt.nn.init.orthogonal_(w, gain)   trunc_normal_(w, mean, std, a, b)   sparse_(w, sparsity, std)
--   lt.nn.init.dirac_(w, groups)   eye_(w)   calculate_gain(nonlinearity, param)
local lt = require "lutra"

local I = {}

--- fan_in, fan_out of a weight [out, in, k...]
function I.calculate_fan_in_and_fan_out(t)
  local d = t:dim()
  if d < 2 then
    error("init: fan in and fan out need a tensor with at least 2 dims, got " .. t:shape_str(), 3)
  end
  local rf = 1
  for i = 3, d do rf = rf * t:size(i) end
  return t:size(2) * rf, t:size(1) * rf
end

local GAIN_ONE = { linear = true, sigmoid = true, conv1d = true, conv2d = true, conv3d = true,
  conv_transpose1d = true, conv_transpose2d = true, conv_transpose3d = true }

-- the gain of a nonlinearity; an unknown name is an error that blames the given stack level (the user's call)
local function gain(nonlinearity, param, level)
  nonlinearity = nonlinearity or "leaky_relu"
  if GAIN_ONE[nonlinearity] then return 1 end
  if nonlinearity == "tanh" then return 5 / 3 end
  if nonlinearity == "relu" then return math.sqrt(2) end
  if nonlinearity == "selu" then return 3 / 4 end
  if nonlinearity == "leaky_relu" then
    if param ~= nil and (type(param) ~= "number" or param ~= param) then
      error("init: negative_slope " .. tostring(param) .. " is not a valid number", level)
    end
    local slope = param or 0.01
    return math.sqrt(2 / (1 + slope * slope))
  end
  error("init: unsupported nonlinearity '" .. tostring(nonlinearity) .. "'", level)
end

--- calculate_gain(nonlinearity[, param]): PyTorch's recommended gain (param: leaky_relu's negative slope)
function I.calculate_gain(nonlinearity, param)
  local g = gain(nonlinearity, param, 3) -- not a tail call: level 3 is the caller
  return g
end

local function inplace(t, fn)
  lt.no_grad(fn, t)
  return t
end

local function kaiming_args(t, a, mode, nonlinearity)
  if type(a) == "table" then a, mode, nonlinearity = a.a, a.mode, a.nonlinearity end
  a, mode, nonlinearity = a or 0, mode or "fan_in", nonlinearity or "leaky_relu"
  if mode ~= "fan_in" and mode ~= "fan_out" then
    error("init: mode must be \"fan_in\" or \"fan_out\", got " .. tostring(mode), 3)
  end
  local fi, fo = I.calculate_fan_in_and_fan_out(t)
  local fan = mode == "fan_in" and fi or fo
  return gain(nonlinearity, a, 4) / math.sqrt(fan) -- 4: gain, kaiming_args, kaiming_*_, the caller
end

--- kaiming_uniform_(t[, a=0[, mode="fan_in"[, nonlinearity="leaky_relu"]]]) or (t, {a, mode, nonlinearity})
function I.kaiming_uniform_(t, a, mode, nonlinearity)
  local bound = math.sqrt(3) * kaiming_args(t, a, mode, nonlinearity)
  return inplace(t, function(x) x:uniform_(-bound, bound) end)
end

function I.kaiming_normal_(t, a, mode, nonlinearity)
  local std = kaiming_args(t, a, mode, nonlinearity)
  return inplace(t, function(x) x:normal_(0, std) end)
end

function I.xavier_uniform_(t, g)
  local fi, fo = I.calculate_fan_in_and_fan_out(t)
  local bound = (g or 1) * math.sqrt(6 / (fi + fo))
  return inplace(t, function(x) x:uniform_(-bound, bound) end)
end

function I.xavier_normal_(t, g)
  local fi, fo = I.calculate_fan_in_and_fan_out(t)
  local std = (g or 1) * math.sqrt(2 / (fi + fo))
  return inplace(t, function(x) x:normal_(0, std) end)
end

function I.uniform_(t, a, b) return inplace(t, function(x) x:uniform_(a or 0, b or 1) end) end
function I.normal_(t, mean, std) return inplace(t, function(x) x:normal_(mean or 0, std or 1) end) end
function I.constant_(t, v) return inplace(t, function(x) x:fill_(v) end) end
function I.zeros_(t) return inplace(t, function(x) x:zero_() end) end
function I.ones_(t) return inplace(t, function(x) x:fill_(1) end) end

-- ---- structured initialisers (orthogonal_, trunc_normal_, sparse_, dirac_, eye_) ---------------------------
-- They build the values in a Lua list (row-major) and copy them in once: the tensors they fill are weights,
-- made once per model.

local function check_tensor(name, t)
  if not lt.is_tensor(t) then error(string.format("%s: expected a tensor, got %s", name, type(t)), 3) end
end

local function set_values(t, flat)
  return inplace(t, function(x) x:copy_(lt.tensor(flat):view(x:shape())) end)
end

--- orthogonal_(t[, gain = 1]): a (semi-)orthogonal matrix from the QR decomposition of a normal draw (PyTorch's
--- sign convention: R's diagonal positive); t of 2 or more dims is seen as [size(1) x rest].
function I.orthogonal_(t, gain_)
  check_tensor("orthogonal_", t)
  if t:dim() < 2 then
    error("orthogonal_: only tensors with 2 or more dimensions are supported, got " .. t:shape_str(), 2)
  end
  if t:numel() == 0 then return t end
  local rows = t:size(1)
  local cols = t:numel() / rows
  local draw = lt.randn(rows * cols):tolist() -- row-major [rows x cols]
  -- A is m x n with m >= n: its columns get orthonormalised (Gram-Schmidt, twice for float-safe orthogonality)
  local transposed = rows < cols
  local m, n = rows, cols
  if transposed then m, n = cols, rows end
  local A = {}
  for j = 1, n do
    local col = {}
    for i = 1, m do col[i] = transposed and draw[(j - 1) * cols + i] or draw[(i - 1) * cols + j] end
    A[j] = col
  end
  for j = 1, n do
    local v = A[j]
    for _ = 1, 2 do
      for k = 1, j - 1 do
        local q, d = A[k], 0
        for i = 1, m do d = d + q[i] * v[i] end
        for i = 1, m do v[i] = v[i] - d * q[i] end
      end
    end
    local nrm = 0
    for i = 1, m do nrm = nrm + v[i] * v[i] end
    nrm = math.sqrt(nrm)
    for i = 1, m do v[i] = v[i] / nrm end
  end
  local g = gain_ or 1
  local flat = {}
  for r = 1, rows do
    for c = 1, cols do
      flat[(r - 1) * cols + c] = g * (transposed and A[r][c] or A[c][r])
    end
  end
  return set_values(t, flat)
end

-- erf with |error| < 1.2e-7 (Numerical Recipes' erfc Chebyshev fit)
local function erf(x)
  local z = math.abs(x)
  local u = 1 / (1 + 0.5 * z)
  local r = u * math.exp(-z * z - 1.26551223 + u * (1.00002368 + u * (0.37409196 + u * (0.09678418 +
    u * (-0.18628806 + u * (0.27886807 + u * (-1.13520398 + u * (1.48851587 + u * (-0.82215223 +
    u * 0.17087277)))))))))
  return x >= 0 and 1 - r or r - 1
end

local function norm_cdf(x) return (1 + erf(x / math.sqrt(2))) / 2 end

-- inverse of norm_cdf (Acklam's rational approximation, then one Halley step on norm_cdf)
local function norm_ppf(p)
  local a = { -3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
    -3.066479806614716e+01, 2.506628277459239e+00 }
  local b = { -5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
    -1.328068155288572e+01 }
  local c = { -7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
    4.374664141464968e+00, 2.938163982698783e+00 }
  local d = { 7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00 }
  local x
  if p < 0.02425 then
    local q = math.sqrt(-2 * math.log(p))
    x = (((((c[1] * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) * q + c[6]) /
      ((((d[1] * q + d[2]) * q + d[3]) * q + d[4]) * q + 1)
  elseif p > 1 - 0.02425 then
    local q = math.sqrt(-2 * math.log(1 - p))
    x = -(((((c[1] * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) * q + c[6]) /
      ((((d[1] * q + d[2]) * q + d[3]) * q + d[4]) * q + 1)
  else
    local q = p - 0.5
    local r = q * q
    x = (((((a[1] * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * r + a[6]) * q /
      (((((b[1] * r + b[2]) * r + b[3]) * r + b[4]) * r + b[5]) * r + 1)
  end
  local e = norm_cdf(x) - p
  local u = e * math.sqrt(2 * math.pi) * math.exp(x * x / 2)
  return x - u / (1 + x * u / 2)
end

--- trunc_normal_(t[, mean = 0[, std = 1[, a = -2[, b = 2]]]]): normal(mean, std) truncated to [a, b] (absolute
--- bounds, as PyTorch), by inverting the CDF of uniform draws between the bounds' CDF values.
function I.trunc_normal_(t, mean, std, a, b)
  check_tensor("trunc_normal_", t)
  mean, std, a, b = mean or 0, std or 1, a or -2, b or 2
  for k, v in pairs { mean = mean, std = std, a = a, b = b } do
    if type(v) ~= "number" or v ~= v then
      error(string.format("trunc_normal_: %s must be a number, got %s", k, tostring(v)), 2)
    end
  end
  if std <= 0 then error("trunc_normal_: std must be > 0, got " .. std, 2) end
  if a >= b then error(string.format("trunc_normal_: the bounds need a < b, got a = %g, b = %g", a, b), 2) end
  if t:numel() == 0 then return t end
  local lo, hi = norm_cdf((a - mean) / std), norm_cdf((b - mean) / std)
  local u = lt.rand(t:numel()):tolist()
  local flat = {}
  for i = 1, #u do
    local p = lo + (hi - lo) * u[i]
    p = math.min(math.max(p, 1e-300), 1 - 1e-16)
    local x = mean + std * norm_ppf(p)
    flat[i] = math.min(math.max(x, a), b)
  end
  return set_values(t, flat)
end

--- sparse_(t [rows x cols], sparsity[, std = 0.01]): normal(0, std) with ceil(sparsity*rows) zeros in each column
--- (rows chosen at random)
function I.sparse_(t, sparsity, std)
  check_tensor("sparse_", t)
  if t:dim() ~= 2 then error("sparse_: only tensors with 2 dimensions are supported, got " .. t:shape_str(), 2) end
  if type(sparsity) ~= "number" or not (sparsity >= 0 and sparsity <= 1) then
    error("sparse_: sparsity must be a number in [0, 1], got " .. tostring(sparsity), 2)
  end
  local rows, cols = t:size(1), t:size(2)
  local num_zeros = math.ceil(sparsity * rows)
  local v = lt.randn(rows * cols):mul(std or 0.01):tolist()
  for c = 1, cols do
    local perm = lt.randperm(rows):tolist()
    for k = 1, num_zeros do v[(perm[k] - 1) * cols + c] = 0 end
  end
  return set_values(t, v)
end

--- dirac_(t [out, in, k...] (3 to 5 dims)[, groups = 1]): the identity convolution (per group)
function I.dirac_(t, groups)
  check_tensor("dirac_", t)
  local nd = t:dim()
  if nd < 3 or nd > 5 then
    error("dirac_: only tensors with 3, 4, or 5 dimensions are supported, got " .. t:shape_str(), 2)
  end
  groups = groups or 1
  if type(groups) ~= "number" or groups < 1 or groups ~= math.floor(groups) then
    error("dirac_: groups must be a positive integer, got " .. tostring(groups), 2)
  end
  local shape = t:shape()
  if shape[1] % groups ~= 0 then
    error(string.format("dirac_: dim 1 (%d) must be divisible by groups (%d)", shape[1], groups), 2)
  end
  local per = shape[1] / groups
  local flat = {}
  for i = 1, t:numel() do flat[i] = 0 end
  -- row-major strides
  local stride = {}
  local s = 1
  for d = nd, 1, -1 do stride[d] = s; s = s * shape[d] end
  for g = 0, groups - 1 do
    for d = 0, math.min(per, shape[2]) - 1 do
      local off = (g * per + d) * stride[1] + d * stride[2]
      for k = 3, nd do off = off + math.floor(shape[k] / 2) * stride[k] end
      flat[off + 1] = 1
    end
  end
  return set_values(t, flat)
end

--- eye_(t [n x m]): the identity matrix (ones on the main diagonal)
function I.eye_(t)
  check_tensor("eye_", t)
  if t:dim() ~= 2 then error("eye_: only tensors with 2 dimensions are supported, got " .. t:shape_str(), 2) end
  local rows, cols = t:size(1), t:size(2)
  local flat = {}
  for r = 1, rows do
    for c = 1, cols do flat[(r - 1) * cols + c] = r == c and 1 or 0 end
  end
  return set_values(t, flat)
end

return require("lutra.names").strict(I, "lt.nn.init")
