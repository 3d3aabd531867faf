-- tensor/indexed_writes.lua — PyTorch's index_copy and index_put (with accumulate), out of place and in place,
-- composed of the core's scatter and index_add so that their gradients are PyTorch's: index_copy's input gets
-- the gradient outside the copied slices and source the gradient's slices (index_select); index_put's values get
-- the gradient at their positions (summed over broadcast). Indices are int64 and 1-based, as everywhere in lutra.
-- The in-place forms (index_copy_, index_put_) write the result into x with copy_, which records no gradient.
local core = require "lutra.core"
local util = require "lutra.utils.check"
local A = require "lutra.tensor.args"

local M = {}
local fmt = string.format
local shape_str = util.shape_str

local function check_index(fname, what, idx)
  if not core.is_tensor(idx) then error(fmt("%s: %s must be an int64 tensor, got %s", fname, what, type(idx)), 4) end
  if idx:dtype() ~= "int64" then
    error(fmt("%s: %s must be an int64 tensor (1-based), got %s", fname, what, idx:dtype()), 4)
  end
end

local function same_dtype(fname, x, what, v)
  if v:dtype() ~= x:dtype() then
    error(fmt("%s: the input is %s and %s is %s: both must have the same dtype", fname, x:dtype(), what, v:dtype()), 4)
  end
end

-- out of place: x with the slices index[i] along dim replaced by source's slices i
local function index_copy(fname, x, dim, index, source)
  local d = A.norm_dim(fname, dim, x:dim())
  check_index(fname, "index", index)
  if not core.is_tensor(source) then error(fmt("%s: source must be a tensor, got %s", fname, type(source)), 3) end
  same_dtype(fname, x, "source", source)
  if index:dim() > 1 then
    error(fmt("%s: index must have 1 dim or none, got %s", fname, shape_str(index)), 3)
  end
  local n = index:numel()
  local xd, sd = math.max(x:dim(), 1), math.max(source:dim(), 1)
  local ssize = source:dim() == 0 and 1 or source:size(d <= sd and d or sd)
  if sd ~= xd or n ~= ssize then
    error(fmt("%s: %d indices for source %s along dim %d: source needs as many dims as the input %s and %d slices",
      fname, n, shape_str(source), d, shape_str(x), n), 3)
  end
  for k = 1, source:dim() do
    if k ~= d and source:size(k) ~= x:size(k) then
      error(fmt("%s: source %s and the input %s must have the same sizes outside dim %d", fname, shape_str(source),
        shape_str(x), d), 3)
    end
  end
  if x:dim() == 0 then
    return util.call_as(fname, function()
      return x:reshape({ 1 }):scatter(1, index:reshape({ 1 }), source:reshape({ 1 })):reshape({})
    end)
  end
  local view = {}
  for k = 1, x:dim() do view[k] = k == d and n or 1 end
  return util.call_as(fname, function() return x:scatter(d, index:reshape(view):expand(source:shape()), source) end)
end

--- x:index_copy(dim, index, source): a copy of x whose slices index[i] along dim are source's slices i
function M.index_copy(x, dim, index, source) return index_copy("index_copy", x, dim, index, source) end
--- x:index_copy_(dim, index, source): the same, written into x (returns x)
function M.index_copy_(x, dim, index, source)
  return util.call_as("index_copy_", x.copy_, x, index_copy("index_copy_", x, dim, index, source))
end

-- the broadcast shape of the index tensors, and each expanded to it
local function broadcast(fname, list)
  local shape = {}
  for _, t in ipairs(list) do
    local s = t:shape()
    if #s > #shape then
      local grown = {}
      for k = 1, #s - #shape do grown[k] = 1 end
      for k = 1, #shape do grown[#grown + 1] = shape[k] end
      shape = grown
    end
    local off = #shape - #s
    for k = 1, #s do
      local a, b = shape[off + k], s[k]
      if a ~= b and a ~= 1 and b ~= 1 then
        local strs = {}
        for i, u in ipairs(list) do strs[i] = shape_str(u) end
        error(fmt("%s: the indices %s cannot be broadcast together", fname, table.concat(strs, ", ")), 4)
      end
      if a == 1 then shape[off + k] = b end
    end
  end
  local out = {}
  for i, t in ipairs(list) do out[i] = t:expand(shape) end
  return out, shape
end

-- out of place: x with x[indices[1][j], indices[2][j], ...] set to (or, accumulate, increased by) values[j]
local function index_put(fname, x, indices, values, accumulate)
  if type(indices) ~= "table" or core.is_tensor(indices) then
    error(fmt("%s: indices must be a list of int64 tensors, one per indexed dim, got %s", fname,
      core.is_tensor(indices) and "a tensor (wrap it in a table: {index})" or type(indices)), 3)
  end
  local k = #indices
  if k == 0 then error(fmt("%s: indices must list at least one index tensor", fname), 3) end
  if k > x:dim() then
    error(fmt("%s: %d index tensors for the input %s of %d dims", fname, k, shape_str(x), x:dim()), 3)
  end
  for i, t in ipairs(indices) do check_index(fname, "index " .. i, t) end
  if accumulate ~= nil and type(accumulate) ~= "boolean" then
    error(fmt("%s: accumulate must be a boolean, got %s", fname, type(accumulate)), 3)
  end
  if type(values) == "number" then
    if x:dtype() == "int64" and not (values == math.floor(values) and values >= -2 ^ 63 and values < 2 ^ 63) then
      error(fmt("%s: value %.14g is not an int64 value (the tensor is int64)", fname, values), 3)
    end
    values = core.full({}, values, x:dtype())
  end
  if not core.is_tensor(values) then error(fmt("%s: values must be a tensor or a number, got %s", fname, type(values)), 3) end
  same_dtype(fname, x, "values", values)
  local idx, bshape = broadcast(fname, indices)
  -- the 0-based position in x's first k dims, from the 1-based indices (each checked against its dim's size)
  local lin, stride = nil, 1
  for i = k, 1, -1 do
    local size, t = x:size(i), idx[i]
    if t:numel() > 0 then
      local lo, hi = t:min():item(), t:max():item()
      if lo < 1 or hi > size then
        error(fmt("%s: index %d is out of range for dim %d of size %d (indices are 1-based)", fname,
          lo < 1 and lo or hi, i, size), 3)
      end
    end
    local term = (t - 1) * stride
    lin = lin and lin + term or term
    stride = stride * size
  end
  local rest = {}
  for d = k + 1, x:dim() do rest[#rest + 1] = x:size(d) end
  local n = 1
  for _, s in ipairs(bshape) do n = n * s end
  local full, flat = {}, { n }
  for _, s in ipairs(bshape) do full[#full + 1] = s end
  for _, s in ipairs(rest) do
    full[#full + 1] = s
    flat[#flat + 1] = s
  end
  local xr = { stride }
  for _, s in ipairs(rest) do xr[#xr + 1] = s end
  return util.call_as(fname, function()
    local v = values:expand(full):reshape(flat)
    local pos = lin:reshape({ n }) + 1
    local xv = x:reshape(xr)
    local out = accumulate and xv:index_add(1, pos, v) or index_copy(fname, xv, 1, pos, v)
    return out:reshape(x:shape())
  end)
end

--- x:index_put(indices, values[, accumulate = false]): PyTorch's x.index_put((i1, i2, ...), values, accumulate),
--- indices a list of 1-based int64 tensors (broadcast together) indexing x's first dims
function M.index_put(x, indices, values, accumulate) return index_put("index_put", x, indices, values, accumulate) end
--- x:index_put_(indices, values[, accumulate = false]): the same, written into x (returns x)
function M.index_put_(x, indices, values, accumulate)
  return util.call_as("index_put_", x.copy_, x, index_put("index_put_", x, indices, values, accumulate))
end

A.register(M)
return M
