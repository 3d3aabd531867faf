-- tensor/stats.lua — statistics composed of the core's ops, so autograd comes with them: nansum and nanmean (NaN
-- left out), quantile and nanquantile (sort, then the interpolation between the two nearest ranks), cov and corrcoef
-- (centred products through matmul). Tensor methods and lt.* functions, 1-based dims, PyTorch 1.13's rules.
local core = require "lutra.core"
local util = require "lutra.utils.check"
local methods = core.Tensor.methods
local A = require "lutra.tensor.args"

local M = {}
local fmt = string.format

local function check_float(fname, x, level)
  local dt = x:dtype()
  if dt ~= "float32" and dt ~= "float64" then
    error(fmt("%s: expects a float32 or float64 tensor, got %s (convert it with :float())", fname, dt), level + 1)
  end
end

-- x with NaN replaced by 0 (the gradient at a NaN is 0, as PyTorch's), and the 0/1 mask of the numbers
local function without_nan(x)
  if x:dtype() == "int64" then return x, nil end
  local nan = x:isnan()
  return x:masked_fill(nan, 0), nan
end

--- x:nansum([dim[, keepdim]]): the sum with NaN treated as 0
function M.nansum(x, dim, keepdim)
  if dim ~= nil then dim = util.check_dim("nansum", dim, x:dim(), 2) end
  local v = util.call_as("nansum", without_nan, x)
  if dim == nil then return util.call_as("nansum", v.sum, v) end
  return util.call_as("nansum", v.sum, v, dim, keepdim)
end

--- x:nanmean([dim[, keepdim]]): the mean of the numbers (NaN left out); NaN where there are none
function M.nanmean(x, dim, keepdim)
  check_float("nanmean", x, 2)
  if dim ~= nil then dim = util.check_dim("nanmean", dim, x:dim(), 2) end
  local v, nan = util.call_as("nanmean", without_nan, x)
  local count = 1 - nan
  if dim == nil then return util.call_as("nanmean", function() return v:sum() / count:sum() end) end
  return util.call_as("nanmean", function() return v:sum(dim, keepdim) / count:sum(dim, keepdim) end)
end

-- ---- quantile ---------------------------------------------------------------------------------------------------

local MODES = { linear = true, lower = true, higher = true, nearest = true, midpoint = true }

-- the rank positions (keepdim shape) below and above pos, and the weight of the one above
local function ranks(mode, pos)
  local lo, hi = pos:floor(), pos:ceil()
  if mode == "lower" then hi = lo
  elseif mode == "higher" then lo = hi
  elseif mode == "nearest" then
    lo = pos:round() -- halves to even, as torch's
    hi = lo
  end
  local w = mode == "midpoint" and (hi - lo) * 0.5 or pos - lo
  return lo, hi, w
end

local function quantile_of(fname, x, q, dim, keepdim, opts, ignore_nan)
  if not core.is_tensor(x) then util.check_arg(fname, 1, x, "tensor") end
  opts = util.check_options(fname, opts, { interpolation = "string" }, 3)
  local mode = opts.interpolation or "linear"
  if not MODES[mode] then
    error(fmt("%s: unknown interpolation '%s' (known: linear, lower, higher, midpoint, nearest)", fname, mode), 3)
  end
  check_float(fname, x, 3)
  local qs
  if type(q) == "number" then qs = { q }
  elseif core.is_tensor(q) and q:dim() <= 1 then qs = q:double():reshape(-1):tolist()
  else
    error(fmt("%s: q must be a number or a 0-D or 1-D tensor, got %s", fname,
      core.is_tensor(q) and "a tensor of shape " .. util.shape_str(q) or type(q)), 3)
  end
  if #qs == 0 then -- an empty q: an empty result of the shape that one q would have after its first dim
    return quantile_of(fname, x, core.zeros(1, x:dtype()), dim, keepdim, opts, ignore_nan):narrow(1, 1, 0)
  end
  for _, v in ipairs(qs) do
    if not (v >= 0 and v <= 1) then error(fmt("%s: q must be in [0, 1], got %s", fname, tostring(v)), 3) end
  end
  if x:numel() == 0 then error(fmt("%s: the input tensor must be non-empty", fname), 3) end
  local d = 1
  local xs = x
  if dim == nil then xs = x:reshape(-1) else d = util.check_dim(fname, dim, math.max(x:dim(), 1), 3) end
  if xs:dim() == 0 then xs = xs:reshape(1) end
  local sorted = util.call_as(fname, xs.sort, xs, d) -- NaN sorts last
  local n = sorted:size(d)
  local nan_count = xs:isnan():sum(d, true)
  local last = ignore_nan and nan_count * -1 + (n - 1) or nil -- per line: the rank of the last number
  local out = {}
  for i, qv in ipairs(qs) do
    local pos = last and last * qv or core.full(nan_count:shape(), qv * (n - 1), xs:dtype())
    local lo, hi, w = ranks(mode, pos:clamp(0, n - 1))
    local vlo = sorted:gather(d, lo:long() + 1)
    local vhi = sorted:gather(d, hi:long() + 1)
    local v = vlo + (vhi - vlo) * w:type_as(vlo)
    -- quantile: NaN where a line holds one; nanquantile: where a line holds nothing else
    local empty = ignore_nan and nan_count:eq(n) or nan_count:gt(0)
    v = v:masked_fill(empty, 0 / 0)
    if dim == nil then
      v = keepdim and v:reshape(x:dim() > 0 and core.full({ x:dim() }, 1, "int64"):tolist() or {}) or v:reshape({})
    elseif not keepdim and x:dim() > 0 then
      v = v:squeeze(d)
    end
    out[i] = v
  end
  if type(q) == "number" or q:dim() == 0 then return out[1] end
  return core.stack(out, 1)
end

--- x:quantile(q[, dim[, keepdim[, {interpolation = "linear"}]]]): the q-th quantiles (q a number or a 1-D tensor in
--- [0, 1]) over all elements or along dim; NaN where a line holds a NaN
function M.quantile(x, q, dim, keepdim, opts) return quantile_of("quantile", x, q, dim, keepdim, opts, false) end
--- x:nanquantile(...): the same with NaN left out (NaN only where a line holds nothing else)
function M.nanquantile(x, q, dim, keepdim, opts) return quantile_of("nanquantile", x, q, dim, keepdim, opts, true) end

-- ---- covariance --------------------------------------------------------------------------------------------------

local function cov_of(fname, x, opts)
  opts = util.check_options(fname, opts, { correction = "integer" }, 3)
  if x:dim() > 2 then
    error(fmt("%s: expects a 1-D or 2-D tensor (variables x observations), got %s", fname, util.shape_str(x)), 3)
  end
  if x:dtype() == "int64" then x = x:float() end
  local m = x:dim() < 2 and x:reshape(1, -1) or x
  local n = m:size(2)
  if n == 0 then error(fmt("%s: expects at least one observation, got %s", fname, util.shape_str(x)), 3) end
  local c = m - m:mean(2, true)
  local r = c:matmul(c:t()) / (n - (opts.correction or 1))
  return x:dim() < 2 and r:reshape({}) or r
end

--- x:cov([{correction = 1}]): the covariance matrix of the rows of x (variables) over its columns (observations);
--- a 1-D x is one variable (a 0-dim result)
function M.cov(x, opts) return cov_of("cov", x, opts) end

--- x:corrcoef(): Pearson's correlation coefficients of the rows of x, clipped to [-1, 1]
function M.corrcoef(x)
  local c = cov_of("corrcoef", x)
  if c:dim() == 0 then return c / c end
  return util.call_as("corrcoef", function()
    local sd = (c * core.eye(c:size(1)):type_as(c)):sum(2):sqrt()
    return (c / sd:unsqueeze(2) / sd:unsqueeze(1)):clamp(-1, 1)
  end)
end

A.register(M, { quantile = true, nanquantile = true })
assert(methods.quantile == M.quantile)

return M
