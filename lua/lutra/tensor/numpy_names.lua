-- tensor/numpy_names.lua — the shape and index names PyTorch took from NumPy, composed of lutra's ops:
-- fliplr / flipud, atleast_1d / 2d / 3d, argwhere, triu_indices / tril_indices and logspace. Indices are
-- 1-based, as everywhere in lutra.
local core = require "lutra.core"
local util = require "lutra.utils.check"
local A = require "lutra.tensor.args"
local methods = core.Tensor.methods

local M = {}
local fmt = string.format

--- x:fliplr(): x reversed along dim 2 (x has at least 2 dims)
function M.fliplr(x)
  if x:dim() < 2 then error(fmt("fliplr: expects a tensor with at least 2 dims, got %s", util.shape_str(x)), 2) end
  return util.call_as("fliplr", methods.flip, x, 2)
end
--- x:flipud(): x reversed along dim 1 (x has at least 1 dim)
function M.flipud(x)
  if x:dim() < 1 then error("flipud: expects a tensor with at least 1 dim, got a 0-dim tensor", 2) end
  return util.call_as("flipud", methods.flip, x, 1)
end

-- the view of x with at least n dims, as torch.atleast_nd: 0-d -> [1] / [1 x 1] / [1 x 1 x 1]; [k] -> [1 x k] (2-D)
-- or [1 x k x 1] (3-D); [m x k] -> [m x k x 1] (3-D)
local function atleast(n, x)
  local d = x:dim()
  if d >= n then return x end
  if d == 0 then
    local s = {}
    for i = 1, n do s[i] = 1 end
    return x:reshape(s)
  end
  if n == 2 then return x:unsqueeze(1) end
  if d == 1 then return x:unsqueeze(1):unsqueeze(3) end
  return x:unsqueeze(3)
end

local function atleast_all(fname, n, ...)
  local first = ...
  if select("#", ...) == 1 and type(first) == "table" and not core.is_tensor(first) then
    local out = {}
    for i, t in ipairs(first) do
      if not core.is_tensor(t) then error(fmt("%s: element %d of the list is a %s, not a tensor", fname, i, type(t)), 3) end
      out[i] = atleast(n, t)
    end
    return out
  end
  local out = { ... }
  for i = 1, select("#", ...) do
    if not core.is_tensor(out[i]) then util.check_arg(fname, i, out[i], "tensor", 3) end
    out[i] = atleast(n, out[i])
  end
  return unpack(out, 1, select("#", ...))
end

--- lt.atleast_1d(x, ...) / atleast_2d / atleast_3d: each tensor with at least that many dims (a view); a list of
--- tensors gives a list
function M.atleast_1d(...) return atleast_all("atleast_1d", 1, ...) end
function M.atleast_2d(...) return atleast_all("atleast_2d", 2, ...) end
function M.atleast_3d(...) return atleast_all("atleast_3d", 3, ...) end

--- x:argwhere(): the 1-based indices of the non-zero elements, one row each ([n x x:dim()] int64), as nonzero
function M.argwhere(x) return util.call_as("argwhere", methods.nonzero, x) end

-- the 1-based (row, col) pairs of a row x col matrix's upper (upper) or lower triangle with diagonal offset: the
-- non-zeros of its mask, row by row (tensor ops, so a huge size is an allocation error, not a long Lua loop)
local function tri_indices(fname, row, col, offset, upper)
  A.int_arg(fname, "row", row, 0)
  A.int_arg(fname, "col", col, 0)
  A.int_arg(fname, "offset", offset or 0)
  offset = offset or 0
  if row == 0 or col == 0 then return core.zeros({ 2, 0 }, "int64") end
  return util.call_as(fname, function()
    -- k = col index - row index, allocated first: a size too large fails there, before the row- and col-long
    -- aranges (for 1e9 x 1e9 those were 16 GB, filled before the [row x col] difference failed: OOM-killed)
    local k = core.empty({ row, col }, "int64")
    k:copy_(core.arange(1, col + 1, 1, "int64"):view(1, col))
    k:sub_(core.arange(1, row + 1, 1, "int64"):view(row, 1))
    local mask = upper and k:ge(offset) or k:le(offset)
    local nz = mask:nonzero()
    if nz:size(1) == 0 then return core.zeros({ 2, 0 }, "int64") end
    return nz:t():contiguous()
  end)
end

--- lt.triu_indices(row, col[, offset = 0]) / lt.tril_indices: a [2 x n] int64 tensor of the 1-based row and column
--- indices of the upper (lower) triangle, row by row, as torch's (which are 0-based)
function M.triu_indices(row, col, offset) return tri_indices("triu_indices", row, col, offset, true) end
function M.tril_indices(row, col, offset) return tri_indices("tril_indices", row, col, offset, false) end

--- lt.logspace(a, b, n[, base = 10]): n values base^v (of the default dtype) for v evenly spaced in [a, b]
function M.logspace(a, b, n, base)
  if type(a) ~= "number" then util.check_arg("logspace", 1, a, "number") end
  if type(b) ~= "number" then util.check_arg("logspace", 2, b, "number") end
  A.int_arg("logspace", "n", n, 0)
  if base ~= nil and type(base) ~= "number" then util.check_arg("logspace", 4, base, "number") end
  base = base or 10
  -- tensor ops, so a huge n is an allocation error, not a long Lua loop
  return util.call_as("logspace", function() return core.pow(base, core.linspace(a, b, n)) end)
end

-- fliplr, flipud and argwhere are also tensor methods; the others are lt.* functions only, as in PyTorch
local as_methods = { fliplr = true, flipud = true, argwhere = true }
for name, f in pairs(M) do
  if as_methods[name] then methods[name] = f end
  if rawget(core, name) == nil then core[name] = as_methods[name] and util.tensor_function(name, f) or f end
end

return M
