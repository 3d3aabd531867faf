-- tensor/pointwise.lua — PyTorch's elementwise names composed of the core's ops (where, exp, log, sqrt, narrow),
-- so autograd comes with them: nan_to_num, lerp, hypot, atan2/arctan2, logaddexp, xlogy, isclose, equal, diff. Operands
-- broadcast as the core's arithmetic does; comparisons give 0/1 float tensors as the core's do.
--
--   local y = x:nan_to_num(0, 1e4, -1e4)
--   local d = x:diff(1, 2)                     -- differences along dim 2
local core = require "lutra.core"
local util = require "lutra.utils.check"
local methods = core.Tensor.methods

local M = {}

-- the largest finite value of each floating dtype (nan_to_num's default replacements for the infinities)
local FINITE_MAX = { float32 = 3.4028234663852886e38, float64 = 1.7976931348623157e308 }

local function as_tensor(v) return core.is_tensor(v) and v or core.tensor(v) end

--- x:nan_to_num([nan = 0[, posinf[, neginf]]]): NaN, +inf and -inf replaced (by default with 0 and the dtype's
--- largest and lowest finite values); the gradient flows where x was finite. An int64 x (no NaN, no infinity)
--- comes back as a copy.
function M.nan_to_num(x, nan, posinf, neginf)
  for i, v in ipairs { nan or 0, posinf or 0, neginf or 0 } do util.check_arg("nan_to_num", i + 1, v, "number") end
  local big = FINITE_MAX[x:dtype()]
  if not big then return x:clone() end
  local y = core.where(x:ne(x), nan or 0, x) -- (x ~= x: NaN)
  y = core.where(x:eq(math.huge), posinf or big, y)
  return core.where(x:eq(-math.huge), neginf or -big, y)
end

--- lt.lerp(start, end, weight): start + weight * (end - start); weight a number or a tensor (broadcast).
function M.lerp(a, b, w)
  util.check_arg("lerp", 2, b, "tensor", 2)
  util.check_arg("lerp", 3, w, "tensor|number", 2)
  return util.call_as("lerp", function() return a + (b - a) * w end)
end

--- lt.hypot(a, b): sqrt(a^2 + b^2), elementwise with broadcasting.
function M.hypot(a, b)
  util.check_arg("hypot", 2, b, "tensor", 2)
  return util.call_as("hypot", function() return (a:square() + b:square()):sqrt() end)
end

--- lt.logaddexp(a, b): log(exp(a) + exp(b)) without overflow (the larger is taken out first).
function M.logaddexp(a, b)
  util.check_arg("logaddexp", 2, b, "tensor", 2)
  return util.call_as("logaddexp", function()
    local m = a:detach():maximum(b:detach())
    m = core.where(m:isinf(), 0, m) -- both -inf (or an inf): exp(a - m) would be NaN
    return ((a - m):exp() + (b - m):exp()):log() + m
  end)
end

--- lt.xlogy(x, y): x * log(y), and 0 where x is 0 (unless y is NaN); either may be a number. The gradient is
--- torch's (log(y) for x, x / y for y), except 0 rather than NaN for y where x and y are both 0.
function M.xlogy(x, y)
  util.check_arg("xlogy", 1, x, "tensor|number", 2)
  util.check_arg("xlogy", 2, y, "tensor|number", 2)
  x, y = as_tensor(x), as_tensor(y)
  return util.call_as("xlogy", function()
    -- where x is 0 and log(y) infinite, log(y) counts as 0 (a 1 under the log keeps its backward finite)
    local drop = (x:eq(0) * (y:eq(0) + y:eq(math.huge))):ne(0)
    return x * core.where(drop, 1, y):log()
  end)
end

-- atan of |t| <= 1: two half-angle steps (atan t = 2 atan(t / (1 + sqrt(1 + t^2)))) bring |t| under 0.2, where
-- 8 terms of the series leave an error under 1e-12; every step is a differentiable op.
local function atan_unit(t)
  for _ = 1, 2 do t = t / ((t:square() + 1):sqrt() + 1) end
  local t2 = t:square()
  local p = t2 * 0 + (-1 / 15)
  for k = 6, 0, -1 do p = p * t2 + (k % 2 == 0 and 1 or -1) / (2 * k + 1) end
  return t * p * 4
end

-- atan of any z: for |z| > 1, sign(z) * pi / 2 - atan(1 / z) (the unused branch kept finite for the gradient)
local function atan(z)
  local big = z:abs():gt(1)
  local a = atan_unit(core.where(big, 1 / core.where(big, z, 1), z))
  return core.where(big, z:sign() * (math.pi / 2) - a, a)
end

local function atan2_of(fname, y, x)
  util.check_arg(fname, 2, x, "tensor", 3)
  return util.call_as(fname, function()
    local zero = x:eq(0)
    local base = atan(y / core.where(zero, 1, x))
    local shift = core.where(y:ge(0), math.pi, -math.pi) * x:lt(0) -- x < 0: the other half-plane
    return core.where(zero, y:sign() * (math.pi / 2), base + shift)
  end)
end

--- lt.atan2(y, x): the angle of the point (x, y) in (-pi, pi], elementwise with broadcasting; arctan2 is the same.
--- Composed of differentiable ops (a range-reduced series, accurate to float32's rounding).
function M.atan2(y, x) return atan2_of("atan2", y, x) end
function M.arctan2(y, x) return atan2_of("arctan2", y, x) end

--- lt.isclose(a, b[, rtol = 1e-5[, atol = 1e-8[, equal_nan = false]]]): a 0/1 tensor of |a - b| <= atol + rtol *
--- |b| (equal infinities are close, NaN only to NaN with equal_nan).
function M.isclose(a, b, rtol, atol, equal_nan)
  util.check_arg("isclose", 2, b, "tensor", 2)
  rtol, atol = rtol or 1e-5, atol or 1e-8
  util.check_arg("isclose", 3, rtol, "number", 2)
  util.check_arg("isclose", 4, atol, "number", 2)
  return util.call_as("isclose", function()
    local fa, fb = a:detach():float(), b:detach():float()
    local d = (fa - fb):abs()
    local close = fa:eq(fb):maximum(d:le(fb:abs() * rtol + atol) * d:lt(math.huge))
    if equal_nan then close = close:maximum(fa:isnan() * fb:isnan()) end
    return close
  end)
end

--- lt.equal(a, b): true when a and b have the same shape and the same elements (a Lua boolean).
function M.equal(a, b)
  util.check_arg("equal", 2, b, "tensor", 2)
  if a:shape_str() ~= b:shape_str() then return false end
  if a:numel() == 0 then return true end
  return a:float():eq(b:float()):min():item() == 1
end

--- x:diff([n = 1[, dim = -1[, prepend[, append]]]]): the n-th forward difference along dim, with prepend and
--- append (tensors of x's shape except along dim) joined first; each pass is one element shorter.
function M.diff(x, n, dim, prepend, append)
  n = n or 1
  if type(n) ~= "number" or n ~= math.floor(n) or n < 0 then
    error("diff: n must be a non-negative integer, got " .. tostring(n), 2)
  end
  if x:dim() == 0 then error("diff: expected at least 1 dim, got a 0-dim tensor", 2) end
  dim = util.check_dim("diff", dim or -1, x:dim(), 3)
  if prepend ~= nil or append ~= nil then
    local parts = {}
    if prepend ~= nil then parts[#parts + 1] = util.check_arg("diff", 4, prepend, "tensor", 2) end
    parts[#parts + 1] = x
    if append ~= nil then parts[#parts + 1] = util.check_arg("diff", 5, append, "tensor", 2) end
    x = util.call_as("diff", core.cat, parts, dim)
  end
  for _ = 1, n do
    local len = x:size(dim)
    if len <= 1 then
      local shape = x:shape()
      shape[dim] = 0
      return core.zeros(shape, x:dtype())
    end
    x = x:narrow(dim, 2, len - 1) - x:narrow(dim, 1, len - 1)
  end
  return x
end

local as_methods = { "nan_to_num", "lerp", "hypot", "atan2", "arctan2", "logaddexp", "xlogy", "isclose", "equal", "diff" }
for _, name in ipairs(as_methods) do
  local f = util.named(name, M[name])
  methods[name] = f
  if rawget(core, name) == nil then core[name] = (name == "xlogy") and f or util.tensor_function(name, f) end
end

return M
