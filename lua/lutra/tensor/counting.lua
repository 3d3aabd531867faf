-- tensor/counting.lua — PyTorch's counting and searching names (bincount, histc, searchsorted, bucketize,
-- unique: no autograd, as in PyTorch) and the distances (dist, cdist: differentiable, composed of the core's ops).
-- Positions are 1-based: searchsorted's and bucketize's results are PyTorch's + 1; bincount's entry i counts the
-- value i - 1 (values stay values).
--
--   local counts = lt.bincount(labels)                  -- counts[1] is how many 0s
--   local values, inverse, counts = lt.unique(x, { return_inverse = true, return_counts = true })
local core = require "lutra.core"
local util = require "lutra.utils.check"
local methods = core.Tensor.methods

local M = {}

--- lt.bincount(x[, weights[, minlength = 0]]): for the non-negative int64 1-D x, entry i counts the occurrences
--- of the value i - 1 (int64), or sums their weights (float32); max(x) + 1 entries at least, minlength at least.
function M.bincount(x, weights, minlength)
  minlength = minlength or 0
  if x:dim() ~= 1 or x:dtype() ~= "int64" then
    error(string.format("bincount: expected a 1-D int64 tensor, got %s %s", x:dtype(), x:shape_str()), 2)
  end
  if weights ~= nil then
    util.check_arg("bincount", 2, weights, "tensor", 2)
    if weights:shape_str() ~= x:shape_str() then
      error(string.format("bincount: weights %s must have x's shape %s", weights:shape_str(), x:shape_str()), 2)
    end
  end
  if type(minlength) ~= "number" or minlength < 0 or minlength ~= math.floor(minlength) then
    error("bincount: minlength must be a non-negative integer, got " .. tostring(minlength), 2)
  end
  local n = minlength
  if x:numel() > 0 then
    if x:min():item() < 0 then error("bincount: the values must be non-negative, got " .. x:min():item(), 2) end
    n = math.max(n, x:max():item() + 1)
  end
  if x:numel() == 0 then return core.zeros({ n }, weights and "float32" or "int64") end
  local w = weights and weights:detach():float() or core.ones(x:numel())
  local out = core.zeros(n):scatter_add(1, x + 1, w)
  return weights and out or out:long()
end

local function finite(v) return v == v and math.abs(v) ~= math.huge end

--- lt.histc(x[, bins = 100[, min = 0[, max = 0]]]): the float32 histogram of x in bins equal bins over
--- [min, max] (the data's range when min = max: then a NaN in x is an error, as in torch); elements outside and
--- NaNs are left out, max falls in the last bin.
function M.histc(x, bins, lo, hi)
  bins, lo, hi = bins or 100, lo or 0, hi or 0
  if type(bins) ~= "number" or bins < 1 or bins ~= math.floor(bins) or bins == math.huge then
    error("histc: bins must be a positive integer, got " .. tostring(bins), 2)
  end
  util.check_arg("histc", 3, lo, "number", 2)
  util.check_arg("histc", 4, hi, "number", 2)
  if lo > hi then error(string.format("histc: max %.14g must not be less than min %.14g", hi, lo), 2) end
  local counts = util.call_as(string.format("histc: bins %.14g", bins), core.zeros, bins)
  local v = x:detach():float():reshape(-1)
  local nan = v:ne(v) -- (v ~= v: NaN)
  if lo == hi and v:numel() > 0 then
    if nan:max():item() > 0 then lo, hi = 0 / 0, 0 / 0 else lo, hi = v:min():item(), v:max():item() end
  end
  if not (finite(lo) and finite(hi)) then
    error(string.format("histc: range of [%.14g, %.14g] is not finite", lo, hi), 2)
  end
  if lo == hi then lo, hi = lo - 1, hi + 1 end
  local inside = v:ge(lo) * v:le(hi)
  local bin = ((core.where(nan, lo, v) - lo) * (bins / (hi - lo))):floor():clamp(0, bins - 1)
  return counts:scatter_add(1, bin:long() + 1, inside)
end

-- the 1-based insertion places of values in the sorted last dim of seq: 1 + how many are < v (<= v with right)
local function insertion(fname, seq, values, right)
  if seq:dim() == 0 then error(fname .. ": the sorted sequence must have at least 1 dim", 3) end
  local v = core.is_tensor(values) and values or core.tensor(values)
  local scalar = v:dim() == 0
  if scalar then v = v:reshape(1) end
  local s, x = seq:detach():float(), v:detach():float()
  if seq:dim() > 1 then
    local ss, sv = seq:shape(), v:shape()
    local same = #ss == #sv
    for d = 1, #ss - 1 do same = same and ss[d] == sv[d] end
    if not same then
      error(string.format("%s: the sorted sequence %s and the values %s must have the same leading dims", fname,
        seq:shape_str(), v:shape_str()), 3)
    end
    s = s:unsqueeze(-2) -- [... x 1 x n] against [... x m x 1]
  end
  local below = right and s:le(x:unsqueeze(-1)) or s:lt(x:unsqueeze(-1))
  local out = below:sum(-1):long() + 1
  return scalar and out:reshape({}) or out
end

local function side_of(fname, opts)
  opts = util.check_options(fname, opts, { right = "boolean", side = function(s)
    if s ~= "left" and s ~= "right" then return "must be \"left\" or \"right\", got " .. tostring(s) end
  end }, 3)
  if opts.side and opts.right ~= nil and (opts.side == "right") ~= opts.right then
    error(fname .. ": options 'side' and 'right' disagree", 3)
  end
  return opts.right or opts.side == "right"
end

--- lt.searchsorted(sorted, values[, {right = false, side = "left"}]): the 1-based places at which values would
--- be inserted into the last dim of sorted to keep it sorted (before equal elements; after them with right).
--- sorted is 1-D, or has values' leading dims. int64, values' shape.
function M.searchsorted(seq, values, opts)
  util.check_arg("searchsorted", 1, seq, "tensor", 2)
  util.check_arg("searchsorted", 2, values, "tensor|number", 2)
  return insertion("searchsorted", seq, values, side_of("searchsorted", opts))
end

--- lt.bucketize(x, boundaries[, {right = false}]): the 1-based bucket of each element: i where
--- boundaries[i - 1] < x <= boundaries[i] (<= and < with right); boundaries 1-D and sorted.
function M.bucketize(x, boundaries, opts)
  util.check_arg("bucketize", 1, x, "tensor|number", 2)
  util.check_arg("bucketize", 2, boundaries, "tensor", 2)
  if boundaries:dim() ~= 1 then
    error("bucketize: boundaries must be 1-D, got " .. boundaries:shape_str(), 2)
  end
  opts = util.check_options("bucketize", opts, { right = "boolean" })
  return insertion("bucketize", boundaries, x, opts.right)
end

-- unique along dim: the distinct slices (lexicographic order) through Lua tables; returns the sorted positions
-- of the first of each and the group of each slice.
local function unique_slices(x, dim)
  local moved = x:detach():transpose(1, dim)
  local n = moved:size(1)
  local rows = moved:reshape(n, -1):totable()
  local order = {}
  for i = 1, n do order[i] = i end
  local function less(a, b)
    local ra, rb = rows[a], rows[b]
    for k = 1, #ra do if ra[k] ~= rb[k] then return ra[k] < rb[k] end end
    return a < b
  end
  table.sort(order, less)
  local firsts, group, counts = {}, {}, {}
  for p, i in ipairs(order) do
    local prev = order[p - 1]
    local new = p == 1 or less(prev, i) and (function()
      for k = 1, #rows[i] do if rows[i][k] ~= rows[prev][k] then return true end end
      return false
    end)()
    if new then firsts[#firsts + 1] = i; counts[#firsts] = 0 end
    group[i] = #firsts
    counts[#firsts] = counts[#firsts] + 1
  end
  return firsts, group, counts
end

--- lt.unique(x[, {sorted = true, return_inverse = false, return_counts = false, dim}]): the distinct elements
--- (sorted; of the flattened x), or the distinct slices along dim; then, as asked, the inverse (the 1-based place
--- in the result of each element or slice, int64) and the counts (int64).
function M.unique(x, opts)
  util.check_arg("unique", 1, x, "tensor", 2)
  opts = util.check_options("unique", opts, { sorted = "boolean", return_inverse = "boolean",
    return_counts = "boolean", dim = "integer" })
  local values, inverse, counts
  if opts.dim ~= nil then
    local dim = util.check_dim("unique", opts.dim, x:dim(), 3)
    local firsts, group, cnt = unique_slices(x, dim)
    values = x:detach():index_select(dim, core.tensor(firsts, "int64"))
    inverse, counts = core.tensor(group, "int64"), core.tensor(cnt, "int64")
  else
    local flat = x:detach():reshape(-1)
    local n = flat:numel()
    if n == 0 then
      values, inverse, counts = flat, core.zeros(x:shape(), "int64"), core.zeros({ 0 }, "int64")
    else
      local s, si = flat:sort(1)
      local starts = n == 1 and core.ones(1)
        or core.cat({ core.ones(1), s:narrow(1, 2, n - 1):ne(s:narrow(1, 1, n - 1)) }, 1)
      local gid = starts:cumsum(1) -- the group of each sorted element, 1-based
      values = s:index_select(1, starts:nonzero():reshape(-1)) -- int64 stays exact
      counts = core.zeros(values:numel()):scatter_add(1, gid:long(), core.ones(n)):long()
      inverse = core.zeros(n):scatter(1, si, gid):long():reshape(x:shape())
    end
  end
  if opts.return_inverse and opts.return_counts then return values, inverse, counts end
  if opts.return_inverse then return values, inverse end
  if opts.return_counts then return values, counts end
  return values
end

local function check_p(fname, p)
  p = p == nil and 2 or p
  if type(p) ~= "number" or p < 0 then error(string.format("%s: p must be a number >= 0, got %s", fname, tostring(p)), 3) end
  return p
end

-- the p-norm over the last dim (p = 0: the count of non-zeros, inf: the max of |d|)
local function p_norm(d, p)
  if p == math.huge then return (d:abs():max(-1)) end
  if p == 0 then return d:ne(0):float():sum(-1) end
  if p == 1 then return d:abs():sum(-1) end
  if p == 2 then return d:square():sum(-1):sqrt() end
  return d:abs():pow(p):sum(-1):pow(1 / p)
end

--- lt.dist(a, b[, p = 2]): the p-norm of a - b (broadcast), 0-dim.
function M.dist(a, b, p)
  util.check_arg("dist", 2, b, "tensor", 2)
  p = check_p("dist", p)
  local d = util.call_as("dist", function() return a - b end)
  return p_norm(d:reshape(-1), p)
end

--- lt.cdist(x1, x2[, p = 2]): the p-norm distances between the rows of x1 [... x P x M] and x2 [... x R x M],
--- [... x P x R] (batch dims equal). p = 2 goes through one matmul (|a|^2 + |b|^2 - 2 a.b).
function M.cdist(x1, x2, p)
  util.check_arg("cdist", 2, x2, "tensor", 2)
  p = check_p("cdist", p)
  local n1, n2 = x1:dim(), x2:dim()
  local ok = n1 >= 2 and n1 == n2 and x1:size(n1) == x2:size(n2)
  for d = 1, n1 - 2 do ok = ok and x1:size(d) == x2:size(d) end
  if not ok then
    error(string.format("cdist: expected x1 [... x P x M] and x2 [... x R x M] with the same batch dims, got %s and %s",
      x1:shape_str(), x2:shape_str()), 2)
  end
  if p == 2 then
    local sq1 = x1:square():sum(-1, true) -- [... x P x 1]
    local sq2 = x2:square():sum(-1, true):transpose(-2, -1) -- [... x 1 x R]
    return (sq1 + sq2 - x1:matmul(x2:transpose(-2, -1)) * 2):clamp(0):sqrt()
  end
  return p_norm(x1:unsqueeze(-2) - x2:unsqueeze(-3), p)
end

local named = {}
for _, name in ipairs { "bincount", "histc", "searchsorted", "bucketize", "unique", "dist", "cdist" } do
  named[name] = util.named(name, M[name])
end
for _, name in ipairs { "bincount", "histc", "unique", "dist", "cdist", "bucketize" } do
  methods[name] = named[name]
end
for name, f in pairs(named) do
  if rawget(core, name) == nil then
    local self_checked = name == "bincount" or name == "histc" or name == "dist" or name == "cdist"
    core[name] = self_checked and util.tensor_function(name, f) or f
  end
end

return M
