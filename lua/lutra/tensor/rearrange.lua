-- tensor/rearrange.lua — PyTorch's names for moving, stacking, splitting and picking elements, composed of the
-- core's differentiable ops (expand, permute, cat, narrow, flip, index_select, gather), so autograd comes with
-- them: broadcast_to, repeat_interleave, movedim/moveaxis, swapaxes/swapdims, hstack, vstack/row_stack, dstack,
-- column_stack, tensor_split, hsplit, vsplit, ravel, rot90, take, take_along_dim, meshgrid, cartesian_prod,
-- block_diag. Dims and indices are 1-based; functions of several tensors take one Lua list, as lt.cat does.
--
--   local y = x:movedim(1, -1)                      -- channels last
--   local parts = x:tensor_split(3, 2)              -- three pieces along dim 2, sizes differing by at most 1
local core = require "lutra.core"
local util = require "lutra.utils.check"
local methods = core.Tensor.methods

local M = {}

local function tensor_list(fname, ts)
  if type(ts) ~= "table" or core.is_tensor(ts) then
    error(string.format("%s: expected a list of tensors, got %s", fname, core.is_tensor(ts) and "a tensor" or
      type(ts)), 3)
  end
  if #ts == 0 then error(fname .. ": expected a non-empty list of tensors", 3) end
  for i, t in ipairs(ts) do
    if not core.is_tensor(t) then error(string.format("%s: element %d must be a tensor, got %s", fname, i, type(t)), 3) end
  end
  return ts
end

local function int_list(fname, what, v)
  if type(v) == "number" then return { v } end
  if core.is_tensor(v) then return v:reshape(-1):tolist() end
  if type(v) == "table" then return v end
  error(string.format("%s: %s must be a number, a list or a tensor, got %s", fname, what, type(v)), 3)
end

--- x:broadcast_to(shape): x expanded to shape (a list or sizes; -1 keeps a size), as torch.broadcast_to.
function M.broadcast_to(x, ...)
  return util.call_as("broadcast_to", x.expand, x, ...)
end

-- x with each slice along dim repeated r times: x seen as [... x n x 1 x ...], expanded to [... x n x r x ...] and
-- merged (the core's checks of expand and of the copy refuse an r too large)
local function repeat_each(x, dim, r)
  local big, out = x:shape(), x:shape()
  table.insert(big, dim + 1, r)
  out[dim] = out[dim] * r
  return x:unsqueeze(dim + 1):expand(big):reshape(out)
end

-- The 1-based index of the slice each place of the result takes, for the int64 counts reps [n] summing to
-- total, with no loop over the total: a mark where each slice's run ends (several at one place when counts
-- are 0), their running sum + 1.
local function run_index(reps, total)
  local marks = core.zeros(total + 1):scatter_add(1, reps:cumsum(1) + 1, core.ones(reps:numel()))
  return marks:narrow(1, 1, total):long():cumsum(1) + 1
end

--- x:repeat_interleave(repeats[, dim]): each element (along dim; of the flattened x without dim) repeated
--- repeats times; repeats a number or one count per element (a list or an int64 tensor).
function M.repeat_interleave(x, repeats, dim)
  if dim == nil then
    x, dim = x:reshape(-1), 1
  elseif x:dim() == 0 then
    error("repeat_interleave: a 0-dim tensor has no dim to repeat along (leave dim out), got dim " .. tostring(dim), 2)
  else
    dim = util.check_dim("repeat_interleave", dim, x:dim(), 3)
  end
  local n = x:size(dim)
  local reps = int_list("repeat_interleave", "repeats", repeats)
  if #reps ~= n and #reps ~= 1 then
    error(string.format("repeat_interleave: repeats has %d counts for %d elements along dim %d of %s", #reps, n, dim,
      x:shape_str()), 2)
  end
  local total = 0
  for _, r in ipairs(reps) do
    if type(r) ~= "number" or r < 0 or r ~= math.floor(r) or r == math.huge then
      error(string.format("repeat_interleave: repeats must be non-negative integers, got %s", tostring(r)), 2)
    end
    total = total + r
  end
  if #reps == 1 then
    return util.call_as(string.format("repeat_interleave: repeats %.14g", reps[1]), repeat_each, x, dim, reps[1])
  end
  local idx = util.call_as(string.format("repeat_interleave: repeats summing to %.14g", total), run_index,
    core.tensor(reps, "int64"), total)
  return x:index_select(dim, idx)
end

--- x:movedim(source, destination): the dims in source (a number or a list) moved to the places in destination,
--- the others keeping their order. moveaxis is the same.
local function movedim(fname, x, src, dst)
  local s, d = int_list(fname, "source", src), int_list(fname, "destination", dst)
  if #s ~= #d then
    error(string.format("%s: source and destination have %d and %d dims", fname, #s, #d), 3)
  end
  local nd = x:dim()
  local perm, used = {}, {}
  for i = 1, #s do
    local a, b = util.check_dim(fname, s[i], nd, 4), util.check_dim(fname, d[i], nd, 4)
    if used[a] or perm[b] then error(fname .. ": a dim is repeated in source or destination", 3) end
    perm[b], used[a] = a, true
  end
  local rest = 1
  for p = 1, nd do
    if not perm[p] then
      while used[rest] do rest = rest + 1 end
      perm[p], used[rest] = rest, true
    end
  end
  return nd == 0 and x or x:permute(perm)
end
function M.movedim(x, src, dst) return movedim("movedim", x, src, dst) end
function M.moveaxis(x, src, dst) return movedim("moveaxis", x, src, dst) end

--- x:swapaxes(dim1, dim2): x:transpose(dim1, dim2); swapdims is the same.
function M.swapaxes(x, a, b) return util.call_as("swapaxes", x.transpose, x, a, b) end
function M.swapdims(x, a, b) return util.call_as("swapdims", x.transpose, x, a, b) end

local function at_least(t, n)
  local s = t:shape()
  if #s >= n then return t end
  if n == 1 then return t:reshape(1) end
  if n == 2 then return t:reshape(1, #s == 0 and 1 or s[1]) end
  if #s == 0 then return t:reshape(1, 1, 1) end
  if #s == 1 then return t:reshape(1, s[1], 1) end
  return t:reshape(s[1], s[2], 1)
end

local function stack_along(fname, ts, n, dim_of)
  tensor_list(fname, ts)
  local xs = {}
  for i, t in ipairs(ts) do xs[i] = at_least(t, n) end
  return util.call_as(fname, core.cat, xs, dim_of(xs))
end

--- lt.hstack(tensors): joined along dim 2 (along dim 1 when they are 1-D).
function M.hstack(ts)
  return stack_along("hstack", ts, 1, function(xs) return xs[1]:dim() == 1 and 1 or 2 end)
end
--- lt.vstack(tensors): joined along dim 1, 1-D ones as rows; row_stack is the same.
function M.vstack(ts) return stack_along("vstack", ts, 2, function() return 1 end) end
function M.row_stack(ts) return stack_along("row_stack", ts, 2, function() return 1 end) end
--- lt.dstack(tensors): joined along dim 3 ([n] as [1 x n x 1], [m x n] as [m x n x 1]).
function M.dstack(ts) return stack_along("dstack", ts, 3, function() return 3 end) end

--- lt.column_stack(tensors): 0-dim and 1-D tensors as columns, joined along dim 2.
function M.column_stack(ts)
  tensor_list("column_stack", ts)
  local xs = {}
  for i, t in ipairs(ts) do xs[i] = t:dim() <= 1 and t:reshape(-1, 1) or t end
  return util.call_as("column_stack", core.cat, xs, 2)
end

-- the pieces of x along dim starting at the 1-based places in starts (plus the first)
local function split_at(x, dim, starts)
  local out, from = {}, 1
  local n = x:size(dim)
  for i = 1, #starts + 1 do
    local to = i <= #starts and math.min(math.max(starts[i], 1), n + 1) or n + 1
    to = math.max(to, from)
    out[i] = x:narrow(dim, from, to - from)
    from = to
  end
  return out
end

-- The most pieces a split into a number of sections returns beyond the size of the dim (each piece is a tensor
-- of its own, about 2 microseconds and 350 bytes: 2^20 of them take seconds; past the size they are all empty).
local MAX_SECTIONS = 2 ^ 20

local function tensor_split(fname, x, what, dim, even)
  if type(what) == "number" then
    if what < 1 or what ~= math.floor(what) then
      error(string.format("%s: the number of sections must be a positive integer, got %s", fname, tostring(what)), 3)
    end
    local n = x:size(dim)
    if what > math.max(n, MAX_SECTIONS) then
      error(string.format("%s: %.14g sections of dim %d of %s is too many: at most %d, or the size of the dim",
        fname, what, dim, x:shape_str(), MAX_SECTIONS), 3)
    end
    if even and n % what ~= 0 then
      error(string.format("%s: dim %d of %s (size %d) does not split into %d equal parts", fname, dim, x:shape_str(),
        n, what), 3)
    end
    local starts, at = {}, 1
    for i = 1, what - 1 do
      at = at + math.floor(n / what) + (i <= n % what and 1 or 0)
      starts[i] = at
    end
    return split_at(x, dim, starts)
  end
  local starts = int_list(fname, "sections or indices", what)
  for i, s in ipairs(starts) do
    if type(s) ~= "number" or s ~= math.floor(s) then
      error(string.format("%s: index %d must be an integer, got %s", fname, i, tostring(s)), 3)
    end
  end
  return split_at(x, dim, starts)
end

--- x:tensor_split(sections_or_indices[, dim = 1]): a Lua list of pieces along dim: n pieces whose sizes differ by
--- at most 1 (the first ones larger), or pieces starting at the given 1-based indices (torch's 0-based split
--- points + 1: {2, 5} gives x[1], x[2..4], x[5..]).
function M.tensor_split(x, what, dim)
  if x:dim() == 0 then error("tensor_split: expected at least 1 dim, got a 0-dim tensor", 2) end
  dim = util.check_dim("tensor_split", dim or 1, x:dim(), 3)
  return tensor_split("tensor_split", x, what, dim, false)
end

--- x:hsplit(sections_or_indices): tensor_split along dim 2 (dim 1 for 1-D x); a number must divide the size.
function M.hsplit(x, what)
  if x:dim() == 0 then error("hsplit: expected at least 1 dim, got a 0-dim tensor", 2) end
  return tensor_split("hsplit", x, what, x:dim() == 1 and 1 or 2, true)
end

--- x:vsplit(sections_or_indices): tensor_split along dim 1 of an x of 2 or more dims; a number must divide it.
function M.vsplit(x, what)
  if x:dim() < 2 then error("vsplit: expected at least 2 dims, got " .. x:shape_str(), 2) end
  return tensor_split("vsplit", x, what, 1, true)
end

--- x:ravel(): x flattened to 1-D.
function M.ravel(x) return x:reshape(-1) end

--- x:rot90([k = 1[, dims = {1, 2}]]): rotated by 90 degrees k times, from the first dim towards the second.
function M.rot90(x, k, dims)
  k = k or 1
  if type(k) ~= "number" or k ~= math.floor(k) or math.abs(k) == math.huge then
    error("rot90: k must be an integer, got " .. tostring(k), 2)
  end
  dims = dims or { 1, 2 }
  if type(dims) ~= "table" or #dims ~= 2 then error("rot90: dims must be a list of 2 dims", 2) end
  if x:dim() < 2 then error("rot90: expected at least 2 dims, got " .. x:shape_str(), 2) end
  local a, b = util.check_dim("rot90", dims[1], x:dim(), 3), util.check_dim("rot90", dims[2], x:dim(), 3)
  if a == b then error(string.format("rot90: the two dims are both %d", a), 2) end
  k = k % 4
  if k == 1 then return x:flip(b):transpose(a, b) end
  if k == 2 then return x:flip({ a, b }) end
  if k == 3 then return x:flip(a):transpose(a, b) end
  return x
end

local function check_index(fname, idx, n)
  util.check_arg(fname, 2, idx, "tensor", 3)
  if idx:dtype() ~= "int64" then error(string.format("%s: indices must be int64, got %s", fname, idx:dtype()), 3) end
  if idx:numel() > 0 then
    local lo, hi = idx:min():item(), idx:max():item()
    if lo < 1 or hi > n then
      error(string.format("%s: index %d is out of range 1..%d", fname, lo < 1 and lo or hi, n), 3)
    end
  end
end

--- x:take(indices): the elements of the flattened x at the 1-based int64 indices, in their shape.
local function take(fname, x, idx)
  check_index(fname, idx, x:numel())
  if idx:dim() == 0 then return x:reshape(-1):index_select(1, idx:reshape(1)):reshape({}) end
  return x:reshape(-1):index_select(1, idx:reshape(-1)):reshape(idx:shape())
end
function M.take(x, idx) return take("take", x, idx) end

--- x:take_along_dim(indices[, dim]): x:gather(dim, indices) with x and indices broadcast but along dim; without
--- dim, take on the flattened x of the flattened indices.
function M.take_along_dim(x, idx, dim)
  util.check_arg("take_along_dim", 2, idx, "tensor", 2)
  if dim == nil then return take("take_along_dim", x, idx:reshape(-1)) end
  dim = util.check_dim("take_along_dim", dim, x:dim(), 3)
  check_index("take_along_dim", idx, x:size(dim))
  if idx:dim() ~= x:dim() then
    error(string.format("take_along_dim: indices %s and x %s must have the same number of dims", idx:shape_str(),
      x:shape_str()), 2)
  end
  local sx, si = x:shape(), idx:shape()
  for d = 1, #sx do
    if d ~= dim then
      local s = math.max(sx[d], si[d])
      if (sx[d] ~= s and sx[d] ~= 1) or (si[d] ~= s and si[d] ~= 1) then
        error(string.format("take_along_dim: x %s and indices %s cannot be broadcast outside dim %d", x:shape_str(),
          idx:shape_str(), dim), 2)
      end
      sx[d], si[d] = s, s
    end
  end
  return x:expand(sx):gather(dim, idx:expand(si))
end

--- lt.meshgrid(tensors[, {indexing = "ij"}]): a list of grids, one per 1-D tensor, each of the shape of all
--- sizes ("ij"; "xy" swaps the first two, as numpy). "ij" is PyTorch 1.13's default.
function M.meshgrid(ts, opts)
  tensor_list("meshgrid", ts)
  opts = util.check_options("meshgrid", opts, { indexing = function(v)
    if v ~= "ij" and v ~= "xy" then return "must be \"ij\" or \"xy\", got " .. tostring(v) end
  end })
  local xy = opts.indexing == "xy" and #ts >= 2
  local sizes = {}
  for i, t in ipairs(ts) do
    if t:dim() > 1 then error(string.format("meshgrid: element %d must be 0-dim or 1-D, got %s", i, t:shape_str()), 2) end
    sizes[i] = t:numel()
  end
  local order = {}
  for i = 1, #ts do order[i] = i end
  if xy then order[1], order[2] = 2, 1 end
  local shape = {}
  for p, i in ipairs(order) do shape[p] = sizes[i] end
  local out = {}
  for p, i in ipairs(order) do
    local view = {}
    for q = 1, #ts do view[q] = q == p and sizes[i] or 1 end
    out[i] = ts[i]:reshape(view):expand(shape)
  end
  return out
end

--- lt.cartesian_prod(tensors): the [n x k] tensor of all k-tuples of elements of the k 1-D tensors, the last
--- varying fastest (a single tensor is returned as it is).
function M.cartesian_prod(ts)
  tensor_list("cartesian_prod", ts)
  for i, t in ipairs(ts) do
    if t:dim() ~= 1 then error(string.format("cartesian_prod: element %d must be 1-D, got %s", i, t:shape_str()), 2) end
  end
  if #ts == 1 then return ts[1] end
  local grids = M.meshgrid(ts)
  for i, g in ipairs(grids) do grids[i] = g:reshape(-1) end
  return core.stack(grids, 2)
end

--- lt.block_diag(tensors): the block-diagonal matrix of the 2-D tensors (1-D as a row, 0-dim as [1 x 1]).
function M.block_diag(ts)
  tensor_list("block_diag", ts)
  local blocks, cols = {}, 0
  for i, t in ipairs(ts) do
    if t:dim() > 2 then
      error(string.format("block_diag: element %d must have at most 2 dims, got %s", i, t:shape_str()), 2)
    end
    blocks[i] = at_least(t, 2)
    cols = cols + blocks[i]:size(2)
  end
  local rows, left = {}, 0
  for i, b in ipairs(blocks) do
    local r, c = b:size(1), b:size(2)
    rows[i] = core.cat({ core.zeros({ r, left }, b:dtype()), b, core.zeros({ r, cols - left - c }, b:dtype()) }, 2)
    left = left + c
  end
  return core.cat(rows, 1)
end

local method_names = { "broadcast_to", "repeat_interleave", "movedim", "moveaxis", "swapaxes", "swapdims",
  "tensor_split", "hsplit", "vsplit", "ravel", "rot90", "take", "take_along_dim" }
for _, name in ipairs(method_names) do
  local f = util.named(name, M[name])
  methods[name] = f
  if rawget(core, name) == nil then core[name] = util.tensor_function(name, f) end
end
for _, name in ipairs { "hstack", "vstack", "row_stack", "dstack", "column_stack", "meshgrid", "cartesian_prod",
  "block_diag" } do
  if rawget(core, name) == nil then core[name] = util.named(name, M[name]) end
end

return M
