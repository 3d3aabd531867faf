-- tensor/statistics.lua — PyTorch's order statistics and reductions over several dims, composed of the core's
-- ops (sort, gather, max, sum), so the values carry gradients: amax, amin, aminmax, var_mean, std_mean, median,
-- kthvalue, mode, msort, count_nonzero. Dims are 1-based; index results are 1-based int64, returned as a second
-- value as max(dim) returns them.
--
--   local m, i = x:median(2)          -- the lower median of each row and where it is
--   local lo, hi = x:aminmax()
local core = require "lutra.core"
local util = require "lutra.utils.check"
local methods = core.Tensor.methods

local M = {}

local dim_list = util.dim_list

local function reduce_dims(fname, x, dim, keepdim, how)
  if x:numel() == 0 then error(string.format("%s: the %s of an empty tensor %s is not defined", fname, how,
    x:shape_str()), 3) end
  if x:dim() == 0 then return x end
  local ds = dim_list(fname, x, dim)
  for i = #ds, 1, -1 do x = (x[how](x, ds[i], keepdim)) end
  return x
end

--- x:amax([dim[, keepdim = false]]) / x:amin(...): the max / min over all elements or over dim (a number or a
--- list of dims); values only.
function M.amax(x, dim, keepdim) return reduce_dims("amax", x, dim, keepdim, "max") end
function M.amin(x, dim, keepdim) return reduce_dims("amin", x, dim, keepdim, "min") end

--- x:aminmax([{dim = nil, keepdim = false}]) -> min, max (torch.aminmax's keyword arguments as options).
function M.aminmax(x, opts)
  opts = util.check_options("aminmax", opts, { dim = "integer", keepdim = "boolean" })
  return reduce_dims("aminmax", x, opts.dim, opts.keepdim, "min"), reduce_dims("aminmax", x, opts.dim, opts.keepdim,
    "max")
end

--- x:var_mean([dim[, keepdim[, {unbiased = true}]]]) -> var, mean (x:var's arguments).
local function var_mean(fname, x, dim, keepdim, opts)
  local v = util.call_as(fname, x.var, x, dim, keepdim, opts)
  if dim == nil then return v, x:mean() end
  return v, x:mean(dim, keepdim)
end
function M.var_mean(x, dim, keepdim, opts) return var_mean("var_mean", x, dim, keepdim, opts) end

--- x:std_mean(...) -> std, mean.
function M.std_mean(x, dim, keepdim, opts)
  local v, m = var_mean("std_mean", x, dim, keepdim, opts)
  return v:sqrt(), m
end

-- values and indices of the k-th smallest along dim (stable sort: among equal values, the first)
local function kth_along(x, k, dim, keepdim)
  local _, idx = x:detach():sort(dim)
  local at = idx:narrow(dim, k, 1)
  local v = x:gather(dim, at)
  if keepdim then return v, at end
  return v:squeeze(dim), at:squeeze(dim)
end

--- x:median() -> the lower median of all elements; x:median(dim[, keepdim]) -> values, indices along dim.
function M.median(x, dim, keepdim)
  if dim == nil then
    if x:numel() == 0 then return core.full({}, 0 / 0) end
    return (kth_along(x:reshape(-1), math.floor((x:numel() + 1) / 2), 1))
  end
  dim = util.check_dim("median", dim, x:dim(), 3)
  if x:dim() == 0 then return x, core.zeros({}, "int64") end
  if x:size(dim) == 0 then error(string.format("median: dim %d of %s is empty", dim, x:shape_str()), 2) end
  return kth_along(x, math.floor((x:size(dim) + 1) / 2), dim, keepdim)
end

--- x:kthvalue(k[, dim = -1[, keepdim = false]]) -> values, indices: the k-th smallest along dim.
function M.kthvalue(x, k, dim, keepdim)
  local nd = math.max(x:dim(), 1)
  dim = util.check_dim("kthvalue", dim or -1, nd, 3)
  local n = x:dim() == 0 and 1 or x:size(dim)
  if type(k) ~= "number" or k ~= math.floor(k) or k < 1 or k > n then
    error(string.format("kthvalue: k must be an integer in 1..%d for dim %d of %s, got %s", n, dim, x:shape_str(),
      tostring(k)), 2)
  end
  if x:dim() == 0 then return x, core.zeros({}, "int64") end
  return kth_along(x, k, dim, keepdim)
end

--- x:mode([dim = -1[, keepdim = false]]) -> values, indices: the most frequent value along dim (the smallest of
--- equally frequent ones) and the index of its last occurrence, as torch.mode. Compares all pairs along dim:
--- memory n * n per slice.
function M.mode(x, dim, keepdim)
  local nd = math.max(x:dim(), 1)
  dim = util.check_dim("mode", dim or -1, nd, 3)
  if x:dim() == 0 then return x, core.zeros({}, "int64") end
  local n = x:size(dim)
  if n == 0 then error(string.format("mode: dim %d of %s is empty", dim, x:shape_str()), 2) end
  local nd_ = x:dim()
  local s, si = x:detach():transpose(dim, nd_):sort(-1)
  local counts = s:unsqueeze(-1):eq(s:unsqueeze(-2)):sum(-1) -- how often each sorted value occurs
  local _, first = counts:max(-1, true) -- the first (smallest) of the most frequent values
  local last = first + counts:gather(-1, first):long() - 1 -- its last place in the stable sort
  local idx = si:gather(-1, last):transpose(dim, nd_)
  local v = x:gather(dim, idx)
  if keepdim then return v, idx end
  return v:squeeze(dim), idx:squeeze(dim)
end

--- x:msort(): x sorted along dim 1 (values only).
function M.msort(x) return (x:sort(1)) end

--- x:count_nonzero([dim]): the int64 count of non-zero elements over all or over dim (a number or a list).
function M.count_nonzero(x, dim)
  local nz = x:ne(0):float()
  if x:dim() == 0 then return nz:long() end
  local ds = dim_list("count_nonzero", x, dim)
  for i = #ds, 1, -1 do nz = nz:sum(ds[i]) end
  return nz:long()
end

for _, name in ipairs { "amax", "amin", "aminmax", "var_mean", "std_mean", "median", "kthvalue", "mode", "msort",
  "count_nonzero" } do
  local f = util.named(name, M[name])
  methods[name] = f
  if rawget(core, name) == nil then core[name] = util.tensor_function(name, f) end
end

return M
