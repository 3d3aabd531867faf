-- tensor_ops_a.lua — tensor ops composed of the core's ops (their gradients come with them): sort and topk
-- (values gathered at argsort's indices), logsumexp, any/all, logical ops, repeat/tile, flip, roll, unbind
-- and unflatten. Each is a tensor method and an lt.* function, with torch's names, 1-based dims.
local core = require "lutra.core"
local util = require "lutra.utils.check"
local methods = core.Tensor.methods

local M = {}

-- lo nil: any integer
local function int_arg(fname, what, v, lo)
  if type(v) ~= "number" or v ~= math.floor(v) or math.abs(v) == math.huge or (lo and v < lo) then
    error(string.format("%s: %s must be an integer%s, got %s", fname, what, lo and " >= " .. lo or "", tostring(v)), 3)
  end
  return v
end

-- checks an options table: only the names in `known` (a {name = "type"} map) with values of those types
local function options(fname, opts, known)
  if opts == nil then return {} end
  if type(opts) ~= "table" then error(fname .. ": options must be a table, got " .. type(opts), 3) end
  local names = {}
  for k in pairs(known) do names[#names + 1] = k end
  table.sort(names)
  for k, v in pairs(opts) do
    if known[k] == nil then
      error(string.format("%s: unknown option '%s' (known: %s)", fname, tostring(k), table.concat(names, ", ")), 3)
    end
    if type(v) ~= known[k] then
      error(string.format("%s: option %s must be a %s, got %s", fname, k, known[k], type(v)), 3)
    end
  end
  return opts
end

-- a 1-based dim (negative counts from the end) of a tensor with n dims, as a positive one
local function norm_dim(fname, d, n) return util.check_dim(fname, d, n, 3) end

-- sizes given as varargs or as one table
local function size_list(fname, ...)
  local s = select("#", ...) == 1 and type((...)) == "table" and (...) or { ... }
  for i = 1, #s do int_arg(fname, "size " .. i, s[i], 0) end
  return s
end

--- x:sort([dim = -1][, {descending = false, stable = false}]) -> values, 1-based int64 indices (always stable)
function M.sort(x, dim, opts)
  if type(dim) == "table" then dim, opts = nil, dim end
  opts = options("sort", opts, { descending = "boolean", stable = "boolean" })
  local d = norm_dim("sort", dim or -1, x:dim())
  if x:dim() == 0 then return x:clone(), core.tensor(1, "int64") end
  local i = x:argsort(d, { descending = opts.descending == true })
  return x:gather(d, i), i
end

--- x:topk(k[, dim = -1][, {largest = true, sorted = true}]) -> values, 1-based int64 indices
function M.topk(x, k, dim, opts)
  if type(dim) == "table" then dim, opts = nil, dim end
  opts = options("topk", opts, { largest = "boolean", sorted = "boolean" })
  int_arg("topk", "k", k, 0)
  local d = norm_dim("topk", dim or -1, math.max(x:dim(), 1))
  local n = x:dim() == 0 and 1 or x:size(d)
  if k > n then error(string.format("topk: k (%d) is larger than the size of dim %d (%d)", k, d, n), 2) end
  if x:dim() == 0 then return x:clone(), core.tensor(1, "int64") end
  -- the first k of the stable sort (ties give the lowest indices), found by selection
  local i = core._topk_indices(x, k, d, opts.largest ~= false)
  return x:gather(d, i), i
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
  m = core.where(m:isinf(), 0, m) -- an infinite max: exp(x - m) would be NaN
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

local function as_tensor(fname, n, v) return util.check_arg(fname, n, v, "tensor", 2) end
-- (a and b that cannot be broadcast: the error names the logical op, then the product or sum that found it)
local function mul(x, y) return x * y end
local function add_gt0(x, y) return (x + y):gt(0) end
function M.logical_and(a, b)
  return util.call_as("logical_and", mul, as_tensor("logical_and", 1, a):ne(0), as_tensor("logical_and", 2, b):ne(0))
end
function M.logical_or(a, b)
  return util.call_as("logical_or", add_gt0, as_tensor("logical_or", 1, a):ne(0), as_tensor("logical_or", 2, b):ne(0))
end
function M.logical_not(a) return as_tensor("logical_not", 1, a):eq(0) end

-- x repeated sizes[i] times along dim i (x's dims aligned to the last sizes): x seen as [1, s1, 1, s2, ...],
-- expanded to [r1, s1, r2, s2, ...], then merged pairwise
local function repeat_of(x, sizes)
  local k, shape = #sizes, x:shape()
  local pad = k - #shape
  local view, big, out = {}, {}, {}
  for i = 1, k do
    local s = i > pad and shape[i - pad] or 1
    view[2 * i - 1], view[2 * i] = 1, s
    big[2 * i - 1], big[2 * i] = sizes[i], s
    out[i] = sizes[i] * s
  end
  if k == 0 then return x:clone() end
  return x:reshape(view):expand(big):reshape(out)
end
local function repeat_as(fname, x, sizes) return util.call_as(fname, repeat_of, x, sizes) end

--- x["repeat"](x, sizes...): as torch's Tensor.repeat (at least x:dim() sizes)
M["repeat"] = function(x, ...)
  local sizes = size_list("repeat", ...)
  if #sizes < x:dim() then
    error(string.format("repeat: the number of sizes (%d) can not be smaller than the number of dims of the tensor "
      .. "(%d)", #sizes, x:dim()), 2)
  end
  return repeat_as("repeat", x, sizes)
end

--- x:tile(sizes...): as torch.tile (fewer sizes than dims are padded with leading 1s)
function M.tile(x, ...)
  local sizes = size_list("tile", ...)
  local full = {}
  for i = 1, x:dim() - #sizes do full[i] = 1 end
  for i = 1, #sizes do full[#full + 1] = sizes[i] end
  return repeat_as("tile", x, full)
end

local function dim_list(fname, dims, n)
  if type(dims) == "number" then dims = { dims } end
  if type(dims) ~= "table" then
    error(fname .. ": dims must be a number or a list of numbers, got " .. type(dims), 3)
  end
  local seen, out = {}, {}
  for i = 1, #dims do
    local d = norm_dim(fname, dims[i], n)
    if seen[d] then error(string.format("%s: dim %d appears more than once in dims", fname, d), 3) end
    seen[d], out[i] = true, d
  end
  return out
end

--- x:flip(dims): x reversed along each of dims (a number or a list)
function M.flip(x, dims, ...)
  if type(dims) == "number" and select("#", ...) > 0 then dims = { dims, ... } end
  local ds = dim_list("flip", dims, math.max(x:dim(), 1))
  if x:dim() == 0 then return x:clone() end
  local r = x
  for _, d in ipairs(ds) do
    local n = x:size(d)
    if n > 1 then r = r:index_select(d, core.arange(n, 0, -1, "int64")) end
  end
  return r == x and x:clone() or r
end

--- x:roll(shifts[, dims]): elements shifted along dims (wrapping round); no dims: over the flattened tensor
function M.roll(x, shifts, dims)
  if type(shifts) == "number" then shifts = { shifts } end
  if type(shifts) ~= "table" then
    error("roll: shifts must be a number or a list of numbers, got " .. type(shifts), 2)
  end
  for i = 1, #shifts do int_arg("roll", "shift", shifts[i]) end
  if dims == nil then
    if #shifts ~= 1 then error(string.format("roll: %d shifts given without dims (expected one)", #shifts), 2) end
    return M.roll(x:reshape(-1), shifts, { 1 }):view(x:shape())
  end
  local ds = dim_list("roll", dims, math.max(x:dim(), 1))
  if #ds ~= #shifts then
    error(string.format("roll: %d shifts and %d dims given (expected as many of each)", #shifts, #ds), 2)
  end
  local r = x:dim() == 0 and x:clone() or x
  for j, d in ipairs(ds) do
    local n = x:dim() == 0 and 1 or x:size(d)
    local s = n > 0 and shifts[j] % n or 0
    if s ~= 0 then
      local idx = {}
      for i = 0, n - 1 do idx[i + 1] = (i - s) % n + 1 end
      r = r:index_select(d, core.tensor(idx, "int64"))
    end
  end
  return r == x and x:clone() or r
end

local round_whole = methods.round -- the C kernel: to integers, halves to even

--- x:round([{decimals = 0}]): as torch.round: x * 10^decimals rounded (halves to even), then scaled back
function M.round(x, opts)
  opts = options("round", opts, { decimals = "number" })
  local d = opts.decimals and int_arg("round", "decimals", opts.decimals) or 0
  if d == 0 then return round_whole(x) end
  if d > 0 then return round_whole(x * 10 ^ d) / 10 ^ d end
  return round_whole(x / 10 ^ -d) * 10 ^ -d
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

--- x:unbind([dim = 1]): the slices of x along dim, as a Lua list of views
function M.unbind(x, dim)
  if x:dim() == 0 then error("unbind: a 0-dim tensor has no dim to unbind", 2) end
  local d = norm_dim("unbind", dim or 1, x:dim())
  local out = {}
  for i = 1, x:size(d) do out[i] = x:select(d, i) end
  return out
end

--- x:unflatten(dim, sizes): dim split into sizes (one may be -1), as a view
function M.unflatten(x, dim, sizes)
  if x:dim() == 0 then error("unflatten: a 0-dim tensor has no dim to unflatten", 2) end
  local d = norm_dim("unflatten", dim, x:dim())
  if type(sizes) ~= "table" or #sizes == 0 then
    error("unflatten: sizes must be a non-empty list of sizes, got " .. type(sizes), 2)
  end
  local prod, infer = 1, false
  for i = 1, #sizes do
    local s = sizes[i]
    if s == -1 and not infer then infer = true
    else prod = prod * int_arg("unflatten", "size " .. i, s, 0) end
  end
  local n = x:size(d)
  if (infer and (prod == 0 or n % prod ~= 0)) or (not infer and prod ~= n) then
    error(string.format("unflatten: sizes {%s} don't multiply up to the size of dim %d (%d)",
      table.concat(sizes, ", "), d, n), 2)
  end
  local shape, out = x:shape(), {}
  for i = 1, d - 1 do out[#out + 1] = shape[i] end
  for i = 1, #sizes do out[#out + 1] = sizes[i] end
  for i = d + 1, #shape do out[#out + 1] = shape[i] end
  return x:view(out)
end

-- (logical_* take tensors in every position and check them all themselves)
local plain = { logical_and = true, logical_or = true, logical_not = true }
for name, f in pairs(M) do
  methods[name] = f
  if rawget(core, name) == nil then core[name] = plain[name] and f or util.tensor_function(name, f) end
end
-- they replace the C forms they wrap
core.norm, core.round = util.tensor_function("norm", M.norm), util.tensor_function("round", M.round)

return M
