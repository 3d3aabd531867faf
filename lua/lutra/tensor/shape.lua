-- tensor/shape.lua — shape ops composed of the core's views and index_select (autograd comes with them):
-- split, chunk, repeat, tile, flip, roll, unbind, unflatten, view_as / reshape_as / expand_as / type_as. Tensor
-- methods and lt.* functions, 1-based dims.
local core = require "lutra.core"
local util = require "lutra.utils.check"
local A = require "lutra.tensor.args"
local methods = core.Tensor.methods

local M = {}
local int_arg, norm_dim, size_list, dim_list = A.int_arg, A.norm_dim, A.size_list, A.dim_list

--- x:split(size[, dim = 1]): views of x along dim in pieces of `size` (the last may be shorter), as a list.
function M.split(x, size, dim)
  if x:dim() == 0 then error("split: a 0-dim tensor has no dim to split", 2) end
  dim = util.check_dim("split", dim or 1, x:dim())
  if type(size) ~= "number" or size < 1 or size ~= math.floor(size) then
    error("split: size must be a positive integer, got " .. tostring(size), 2)
  end
  local n, parts = x:size(dim), {}
  for start = 1, n, size do parts[#parts + 1] = x:narrow(dim, start, math.min(size, n - start + 1)) end
  return parts
end

--- x:chunk(n[, dim = 1]): x split into n pieces of ceil(size / n) (fewer when it does not divide), as torch.chunk.
function M.chunk(x, n, dim)
  if type(n) ~= "number" or n < 1 or n ~= math.floor(n) then
    error("chunk: the number of chunks must be a positive integer, got " .. tostring(n), 2)
  end
  if x:dim() == 0 then error("chunk: a 0-dim tensor has no dim to split", 2) end
  dim = util.check_dim("chunk", dim or 1, x:dim())
  return methods.split(x, math.max(1, math.ceil(x:size(dim) / n)), dim)
end

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

--- x:flip(dims): x reversed along each of dims (a number or a list)
function M.flip(x, dims, ...)
  if type(dims) == "number" and select("#", ...) > 0 then dims = { dims, ... } end
  local ds = dim_list("flip", dims, math.max(x:dim(), 1))
  if x:dim() == 0 then return x:clone() end
  local r = x
  for _, d in ipairs(ds) do
    local n = x:size(d)
    if n > 1 then r = util.call_as("flip", r.index_select, r, d, core.arange(n, 0, -1, "int64")) end
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
      r = util.call_as("roll", r.index_select, r, d, core.tensor(idx, "int64"))
    end
  end
  return r == x and x:clone() or r
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

-- ---- view_as, reshape_as, expand_as, type_as: PyTorch's "*_as(other)" forms, other's shape or dtype ----------

local function other_tensor(fname, other)
  if not core.is_tensor(other) then util.check_arg(fname, 2, other, "tensor", 3) end
  return other
end

--- x:view_as(other): x:view(other:shape()) (a view: the layout must allow it)
function M.view_as(x, other) return util.call_as("view_as", x.view, x, other_tensor("view_as", other):shape()) end
--- x:reshape_as(other): x:reshape(other:shape()) (a view when the layout allows, a copy otherwise)
function M.reshape_as(x, other)
  return util.call_as("reshape_as", x.reshape, x, other_tensor("reshape_as", other):shape())
end
--- x:expand_as(other): x:expand(other:shape()) (size-1 dims broadcast; no copy)
function M.expand_as(x, other)
  return util.call_as("expand_as", x.expand, x, other_tensor("expand_as", other):shape())
end
--- x:type_as(other): x in other's dtype (x:type(other:dtype()))
function M.type_as(x, other)
  return util.call_as("type_as", x.type, x, other_tensor("type_as", other):dtype())
end

A.register(M)

return M
