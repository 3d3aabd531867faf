-- tensor/index.lua — Torch7's table indexing of tensors: x[{1}], x[{{1, 2}, 3}], x[{{}, {2, -1}}] = v. The C
-- __index / __newindex (core/bind/l_tensor.c) hand every key that is neither a name nor a row number here.
--
-- Each entry of the table indexes one dim, from the first: a number selects (that dim goes away), {first, last}
-- keeps the range first..last (inclusive; negative counts from the end), {i} the one row i, {} the whole dim. As in
-- Torch7, a number for every dim gives the element as a Lua number (x[i][j] gives a 0-dim tensor view); otherwise
-- the result is a view. Assignment fills the view with a number or copies a tensor into it.
local core = require "lutra.core"
local methods = core.Tensor.methods

local fmt = string.format

local function describe(idx)
  local parts = {}
  for i = 1, #idx do
    local e = idx[i]
    parts[i] = type(e) == "table" and "{" .. table.concat(e, ", ") .. "}" or tostring(e)
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

local function position(what, x, d, v, size)
  if type(v) ~= "number" or v ~= math.floor(v) then
    error(fmt("index: %s of dim %d must be an integer, got %s", what, d, tostring(v)), 4)
  end
  local p = v < 0 and v + size + 1 or v
  if p < 1 or p > size then
    error(fmt("index: %s %d is out of range for dim %d of size %d (tensor %s)", what, v, d, size, x:shape_str()), 4)
  end
  return p
end

-- the view that idx names, and whether every dim was selected by a number
local function view_of(x, idx)
  local n = x:dim()
  for k in pairs(idx) do
    if type(k) ~= "number" or k < 1 or k > #idx or k ~= math.floor(k) then
      error(fmt("index: a Torch7 index is a list {i, {first, last}, ...}, got the key %s", tostring(k)), 4)
    end
  end
  if #idx > n then
    error(fmt("index: %s has %d entries for a %d-dim tensor %s", describe(idx), #idx, n, x:shape_str()), 4)
  end
  local v, dim, all_numbers = x, 1, #idx == n
  for i = 1, #idx do
    local e = idx[i]
    local size = v:size(dim)
    if type(e) == "number" then
      v = v:select(dim, position("index", x, i, e, size))
    elseif type(e) == "table" and not core.is_tensor(e) then
      all_numbers = false
      if #e > 2 then
        error(fmt("index: entry %d of %s is a range {first, last} (or {i}, or {}), got %d numbers", i, describe(idx),
          #e), 4)
      end
      if #e > 0 then
        local first = position("first", x, i, e[1], size)
        local last = position("last", x, i, e[2] or e[1], size)
        if last < first then
          error(fmt("index: the range {%d, %d} of dim %d is empty (last before first)", e[1], e[2], i), 4)
        end
        v = v:narrow(dim, first, last - first + 1)
      end
      dim = dim + 1
    else
      error(fmt("index: entry %d of a Torch7 index must be a number or a {first, last} range, got %s", i,
        core.is_tensor(e) and "a tensor" or type(e)), 4)
    end
  end
  return v, all_numbers
end

local function other_key(key)
  if core.is_tensor(key) then
    error("index: a tensor is not a key here (Torch7's x[mask]): use x:masked_select(mask) to read, "
      .. "x:masked_fill(mask, v) to write", 3)
  end
  error(fmt("index: a tensor is indexed by a row number x[i] or a Torch7 list x[{i, {first, last}}], got a %s",
    type(key)), 3)
end

function methods._index_key(x, key)
  if type(key) ~= "table" then other_key(key) end
  local v, all_numbers = view_of(x, key)
  if all_numbers then return v:item() end
  return v
end

function methods._newindex_key(x, key, value)
  if type(key) ~= "table" then other_key(key) end
  local v = view_of(x, key)
  if core.is_tensor(value) then
    v:copy_(value)
  elseif type(value) == "number" then
    v:fill_(value)
  else
    error(fmt("index: x[%s] = v takes a number or a tensor, got %s", describe(key), type(value)), 2)
  end
end
