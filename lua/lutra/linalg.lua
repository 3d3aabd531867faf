-- linalg.lua — lt.linalg, PyTorch's torch.linalg names that compose from the core's differentiable ops:
-- multi_dot, vector_norm, matrix_norm (the norms that need no singular values), norm and cross.
--
--   local y = lt.linalg.multi_dot({ a, b, c })       -- in the cheapest order
--   local n = lt.linalg.vector_norm(x, 1, 2)         -- L1 along dim 2
--   local f = lt.linalg.matrix_norm(w)               -- Frobenius
local util = require "lutra.utils.check"
local names = require "lutra.names"
local products = require "lutra.tensor.products"

local M = {}

M.multi_dot = products.multi_dot

--- lt.linalg.cross(a, b[, dim = -1]): the cross product along dim (torch.linalg.cross's default is the last dim).
function M.cross(a, b, dim) return products.cross(a, b, dim or -1) end

local dim_list = util.dim_list

-- reduce(x, d, keepdim) over each dim of ds (sorted), from the last so the earlier dims keep their numbers
local function over(x, ds, keepdim, reduce)
  if x:dim() == 0 then return reduce(x:reshape(1), 1, false) end
  for i = #ds, 1, -1 do x = reduce(x, ds[i], keepdim) end
  return x
end

local function vector_norm(fname, x, ord, dim, keepdim)
  util.check_arg(fname, 1, x, "tensor", 3)
  ord = ord == nil and 2 or ord
  if type(ord) ~= "number" then error(string.format("%s: ord must be a number, got %s", fname, tostring(ord)), 3) end
  local ds = dim_list(fname, x, dim)
  local a = x:abs()
  if ord == math.huge then return over(a, ds, keepdim, function(t, d, k) return (t:max(d, k)) end) end
  if ord == -math.huge then return over(a, ds, keepdim, function(t, d, k) return (t:min(d, k)) end) end
  local function sum(t) return over(t, ds, keepdim, function(u, d, k) return u:sum(d, k) end) end
  if ord == 0 then return sum(x:ne(0):float()) end
  if ord == 1 then return sum(a) end
  if ord == 2 then return sum(x:square()):sqrt() end
  return sum(a:pow(ord)):pow(1 / ord)
end

--- lt.linalg.vector_norm(x[, ord = 2[, dim[, keepdim = false]]]): (sum |x|^ord)^(1/ord) over all elements or the
--- dims (a number or a list); ord inf / -inf: the max / min of |x|; ord 0: the count of non-zeros.
function M.vector_norm(x, ord, dim, keepdim) return vector_norm("vector_norm", x, ord, dim, keepdim) end

local function matrix_norm(fname, x, ord, dim, keepdim)
  util.check_arg(fname, 1, x, "tensor", 3)
  ord = ord == nil and "fro" or ord
  if x:dim() < 2 then error(string.format("%s: expected at least 2 dims, got %s", fname, x:shape_str()), 3) end
  dim = dim or { -2, -1 }
  if type(dim) ~= "table" or #dim ~= 2 then error(fname .. ": dim must be a list of 2 dims", 3) end
  local d1, d2 = util.check_dim(fname, dim[1], x:dim(), 4), util.check_dim(fname, dim[2], x:dim(), 4)
  if d1 == d2 then error(string.format("%s: the two dims are both %d", fname, d1), 3) end
  if ord == "fro" then return vector_norm(fname, x, 2, { d1, d2 }, keepdim) end
  local by = { [1] = { d1, d2, "max" }, [-1] = { d1, d2, "min" }, [math.huge] = { d2, d1, "max" },
    [-math.huge] = { d2, d1, "min" } }
  local how = by[ord]
  if not how then
    error(string.format("%s: ord %s is not supported (known: 'fro', 1, -1, inf, -inf; 'nuc', 2 and -2 need "
      .. "singular values, which lutra does not compute)", fname, tostring(ord)), 3)
  end
  -- the max (min) over one dim of the sums of |x| over the other
  local s = x:abs():sum(how[1], true)
  local r = s[how[3]](s, how[2], true)
  if keepdim then return r end
  return r:squeeze(math.max(d1, d2)):squeeze(math.min(d1, d2))
end

--- lt.linalg.matrix_norm(x[, ord = "fro"[, dim = {-2, -1}[, keepdim = false]]]): the norm of the matrices over
--- the two dims: "fro", 1 / -1 (max / min column sum of |x|), inf / -inf (max / min row sum).
function M.matrix_norm(x, ord, dim, keepdim) return matrix_norm("matrix_norm", x, ord, dim, keepdim) end

--- lt.linalg.norm(x[, ord[, dim[, keepdim]]]): a vector norm when dim is a number (or x is 1-D), a matrix norm
--- when dim is two dims (or x is 2-D and ord is given); without ord and dim the 2-norm of all elements.
function M.norm(x, ord, dim, keepdim)
  util.check_arg("norm", 1, x, "tensor", 2)
  if type(dim) == "table" and #dim == 2 then return matrix_norm("norm", x, ord, dim, keepdim) end
  if dim ~= nil or ord == nil or x:dim() == 1 then return vector_norm("norm", x, ord, dim, keepdim) end
  if x:dim() == 2 then return matrix_norm("norm", x, ord, nil, keepdim) end
  error("norm: with ord, x must be 1-D or 2-D unless dim is given, got " .. x:shape_str(), 2)
end

-- every error names the function called, an inner op's too (util.named)
for name, f in pairs(M) do M[name] = util.named(name, f) end

return names.strict(M, "lt.linalg")
