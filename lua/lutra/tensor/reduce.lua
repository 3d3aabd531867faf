-- tensor/reduce.lua — reductions composed of the core's ops (autograd comes with them): var, std, argmin,
-- logsumexp, any, all, and norm over several dims. Tensor methods and lt.* functions, 1-based dims.
local core = require "lutra.core"
local util = require "lutra.utils.check"
local A = require "lutra.tensor.args"
local methods = core.Tensor.methods

local M = {}
local norm_dim, dim_list = A.norm_dim, A.dim_list

local function var_of(fname, x, dim, keepdim, opts)
  opts = util.check_options(fname, opts, { unbiased = "boolean" }, 3)
  local unbiased = opts.unbiased ~= false
  if dim ~= nil then dim = util.check_dim(fname, dim, x:dim(), 3) end
  local n = dim == nil and x:numel() or x:size(dim)
  local centred = x - (dim == nil and x:mean() or x:mean(dim, true))
  local ss = dim == nil and centred:square():sum() or centred:square():sum(dim, keepdim)
  return ss / (unbiased and n - 1 or n) -- one element, unbiased: 0/0 = NaN, as torch.var
end

--- x:var([dim[, keepdim[, {unbiased = true}]]]): the variance over all elements or along dim (1-based),
--- Bessel-corrected unless unbiased = false (torch.var's default).
function M.var(x, dim, keepdim, opts) return var_of("var", x, dim, keepdim, opts) end

--- x:std(...): the square root of x:var(...).
function M.std(x, dim, keepdim, opts) return var_of("std", x, dim, keepdim, opts):sqrt() end

--- x:argmin([dim[, keepdim]]): 1-based index of the minimum (the first one), over all elements (flat) or along dim.
function M.argmin(x, dim, keepdim)
  if dim == nil then return select(2, x:reshape(-1):min(1)) end
  return select(2, x:min(util.check_dim("argmin", dim, x:dim()), keepdim))
end

--- x:logsumexp(dim[, keepdim = false]): log(sum(exp(x))) along dim, computed without overflow
function M.logsumexp(x, dim, keepdim)
  if dim == nil then error("logsumexp: dim is required (as in torch.logsumexp)", 2) end
  local d = norm_dim("logsumexp", dim, math.max(x:dim(), 1))
  if x:dim() > 0 and x:size(d) == 0 then -- the log of an empty sum: -inf, as torch.logsumexp
    local shape = x:shape()
    shape[d] = 1
    local r = core.full(shape, -math.huge)
    if keepdim then return r end
    return r:squeeze(d)
  end
  local m = x:max(d, true):detach()
  -- an infinite max: exp(x - m) would be NaN (isinf's refusals, of float64 say, named as logsumexp's)
  m = util.call_as("logsumexp", function(v) return core.where(v:isinf(), 0, v) end, m)
  local r = (x - m):exp():sum(d, true):log() + m
  if keepdim or x:dim() == 0 then return r end
  return r:squeeze(d)
end

--- x:any([dim[, keepdim]]) / x:all(...): 0/1 float tensors (1 where any / all elements are non-zero)
function M.any(x, dim, keepdim)
  if dim == nil then return x:ne(0):sum():gt(0) end
  return x:ne(0):sum(norm_dim("any", dim, x:dim()), keepdim):gt(0)
end
function M.all(x, dim, keepdim)
  if dim == nil then return x:eq(0):sum():eq(0) end
  return x:eq(0):sum(norm_dim("all", dim, x:dim()), keepdim):eq(0)
end

local norm_one_dim = methods.norm -- the C kernel: all elements or one dim

--- x:norm([p = 2][, dim[, keepdim]]): dim may also be a list of dims (the norm over all of them, as torch's
--- dim=(1, 2)); those dims are moved last and merged, then normed as one
function M.norm(x, p, dim, keepdim)
  if type(dim) ~= "table" then return norm_one_dim(x, p, dim, keepdim) end
  if #dim == 0 or x:dim() == 0 then return norm_one_dim(x, p, nil, keepdim) end
  local ds, inside = dim_list("norm", dim, x:dim()), {}
  for _, d in ipairs(ds) do inside[d] = true end
  local shape, perm, kept, keep_shape = x:shape(), {}, {}, {}
  for d = 1, #shape do
    if not inside[d] then perm[#perm + 1], kept[#kept + 1] = d, shape[d] end
    keep_shape[d] = inside[d] and 1 or shape[d]
  end
  local merged = 1 -- the normed dims' sizes multiplied, not -1: -1 cannot be inferred when x has no elements
  for _, d in ipairs(ds) do perm[#perm + 1], merged = d, merged * shape[d] end
  kept[#kept + 1] = merged
  local r = norm_one_dim(x:permute(perm):reshape(kept), p, #kept, false)
  if keepdim then return r:view(keep_shape) end
  return r
end

A.register(M)
-- it replaces the C form it wraps
core.norm = util.tensor_function("norm", M.norm)

return M
