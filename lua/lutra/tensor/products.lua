-- tensor/products.lua — PyTorch's named products and diagonals (mm, bmm, mv, dot, vdot, inner, outer/ger, addmv,
-- addbmm, addr, kron, tensordot, chain_matmul, cross, trace, diagonal, diag, diag_embed), composed of the core's
-- differentiable ops (matmul, reshape, permute, index_select, cat), so autograd comes with them. Each checks its
-- operands' shapes as PyTorch does, more strictly than matmul (mm refuses 3-D, dot refuses 2-D), and its error
-- names the op and the shapes. Dims are 1-based.
--
--   local c = lt.mm(a, b)                          -- [n x k] @ [k x m]
--   local t = lt.tensordot(a, b, { { 2, 3 }, { 1, 2 } })
--   local d = x:diagonal(1)                        -- the first superdiagonal
local core = require "lutra.core"
local util = require "lutra.utils.check"
local methods = core.Tensor.methods
local unpack = require("lutra._compat").unpack

local M = {}

local function shape_str(t) return t:shape_str() end

local function check_tensors(fname, ...)
  for i = 1, select("#", ...) do util.check_arg(fname, i, (select(i, ...)), "tensor", 4) end
end

local function shape_error(fname, want, ...)
  local got = {}
  for i = 1, select("#", ...) do got[i] = shape_str((select(i, ...))) end
  error(string.format("%s: expected %s, got %s", fname, want, table.concat(got, " and ")), 3)
end

-- beta * M + alpha * P, with M not read when beta is 0 (its NaNs stay out, as torch)
local function check_scale_opts(fname, opts)
  opts = util.check_options(fname, opts, { beta = "number", alpha = "number" }, 4)
  return opts.beta or 1, opts.alpha or 1
end
local function scaled_add(fname, m, p, beta, alpha)
  if alpha ~= 1 then p = p * alpha end
  if beta == 0 then return p end
  return util.call_as(fname, function() return beta == 1 and p + m or p + m * beta end)
end

--- lt.mm(a, b): matrix product of a [n x k] and b [k x m] (2-D only, no broadcasting, as torch.mm).
function M.mm(a, b)
  check_tensors("mm", a, b)
  if a:dim() ~= 2 or b:dim() ~= 2 or a:size(2) ~= b:size(1) then shape_error("mm", "[n x k] and [k x m]", a, b) end
  return a:matmul(b)
end

--- lt.bmm(a, b): batched matrix product of a [b x n x k] and b [b x k x m] (equal batch, no broadcasting).
function M.bmm(a, b)
  check_tensors("bmm", a, b)
  if a:dim() ~= 3 or b:dim() ~= 3 or a:size(1) ~= b:size(1) or a:size(3) ~= b:size(2) then
    shape_error("bmm", "[b x n x k] and [b x k x m]", a, b)
  end
  return a:matmul(b)
end

--- lt.mv(a, v): matrix-vector product of a [n x m] and v [m], giving [n].
function M.mv(a, v)
  check_tensors("mv", a, v)
  if a:dim() ~= 2 or v:dim() ~= 1 or a:size(2) ~= v:size(1) then shape_error("mv", "[n x m] and [m]", a, v) end
  return a:matmul(v)
end

local function dot_of(fname, a, b)
  check_tensors(fname, a, b)
  if a:dim() ~= 1 or b:dim() ~= 1 or a:size(1) ~= b:size(1) then
    shape_error(fname, "two 1-D tensors of the same size", a, b)
  end
  return (a * b):sum()
end

--- lt.dot(a, b): the 0-dim sum of a * b for 1-D a and b of the same size.
function M.dot(a, b) return dot_of("dot", a, b) end

--- lt.vdot(a, b): dot with a conjugated; lutra's tensors are real, so the same as dot.
function M.vdot(a, b) return dot_of("vdot", a, b) end

--- lt.inner(a, b): the sum over the last dim of both; the result has a's leading dims then b's. A 0-dim
--- operand multiplies the other.
function M.inner(a, b)
  check_tensors("inner", a, b)
  if a:dim() == 0 or b:dim() == 0 then return a * b end
  local k = a:size(a:dim())
  if b:size(b:dim()) ~= k then shape_error("inner", "the same last dim", a, b) end
  local shape = a:shape()
  shape[#shape] = nil
  local bs = b:shape()
  for i = 1, #bs - 1 do shape[#shape + 1] = bs[i] end
  local p = a:reshape(-1, k):matmul(b:reshape(-1, k):t())
  return #shape == 0 and p:reshape(1):sum() or p:reshape(shape)
end

local function outer_of(fname, a, b)
  check_tensors(fname, a, b)
  if a:dim() ~= 1 or b:dim() ~= 1 then shape_error(fname, "two 1-D tensors", a, b) end
  return a:reshape(a:size(1), 1) * b:reshape(1, b:size(1))
end

--- lt.outer(a, b): the outer product [n x m] of 1-D a [n] and b [m]. lt.ger is its (deprecated in torch) alias.
function M.outer(a, b) return outer_of("outer", a, b) end
function M.ger(a, b) return outer_of("ger", a, b) end

--- lt.addmv(M, A, v[, {beta = 1, alpha = 1}]): beta * M + alpha * (A @ v); A [n x m], v [m], M broadcast to [n].
function M.addmv(m, a, v, opts)
  local beta, alpha = check_scale_opts("addmv", opts)
  check_tensors("addmv", m, a, v)
  if a:dim() ~= 2 or v:dim() ~= 1 or a:size(2) ~= v:size(1) then shape_error("addmv", "A [n x m] and v [m]", a, v) end
  return scaled_add("addmv", m, a:matmul(v), beta, alpha)
end

--- lt.addbmm(M, A, B[, {beta = 1, alpha = 1}]): beta * M + alpha * sum over b of A[b] @ B[b]; A [b x n x k],
--- B [b x k x m], M broadcast to [n x m]. One GEMM of A as [n x b*k] with B as [b*k x m].
function M.addbmm(m, a, b, opts)
  local beta, alpha = check_scale_opts("addbmm", opts)
  check_tensors("addbmm", m, a, b)
  if a:dim() ~= 3 or b:dim() ~= 3 or a:size(1) ~= b:size(1) or a:size(3) ~= b:size(2) then
    shape_error("addbmm", "A [b x n x k] and B [b x k x m]", a, b)
  end
  local nb, n, k = a:size(1), a:size(2), a:size(3)
  local p = a:permute(2, 1, 3):reshape(n, nb * k):matmul(b:reshape(nb * k, b:size(3)))
  return scaled_add("addbmm", m, p, beta, alpha)
end

--- lt.addr(M, u, v[, {beta = 1, alpha = 1}]): beta * M + alpha * outer(u, v); M broadcast to [n x m].
function M.addr(m, u, v, opts)
  local beta, alpha = check_scale_opts("addr", opts)
  check_tensors("addr", m, u, v)
  if u:dim() ~= 1 or v:dim() ~= 1 then shape_error("addr", "1-D u and v", u, v) end
  return scaled_add("addr", m, u:reshape(u:size(1), 1) * v:reshape(1, v:size(1)), beta, alpha)
end

--- lt.kron(a, b): the Kronecker product; the operand with fewer dims gets leading dims of size 1, and each
--- result dim is a:size(d) * b:size(d).
function M.kron(a, b)
  check_tensors("kron", a, b)
  local nd = math.max(a:dim(), b:dim())
  local sa, sb = a:shape(), b:shape()
  while #sa < nd do table.insert(sa, 1, 1) end
  while #sb < nd do table.insert(sb, 1, 1) end
  local ra, rb, out = {}, {}, {}
  for d = 1, nd do
    ra[2 * d - 1], ra[2 * d] = sa[d], 1
    rb[2 * d - 1], rb[2 * d] = 1, sb[d]
    out[d] = sa[d] * sb[d]
  end
  if nd == 0 then return a * b end
  return (a:reshape(ra) * b:reshape(rb)):reshape(out)
end

-- The dims of a tensordot: n (a's last n with b's first n) or {{dims of a}, {dims of b}} (1-based, negative from
-- the end), checked (each pair of the same size) and normalised to two lists.
local function tensordot_dims(a, b, dims)
  local da, db = {}, {}
  if type(dims) == "number" then
    if dims ~= math.floor(dims) or dims < 0 or dims > a:dim() or dims > b:dim() then
      error(string.format("tensordot: dims must be an integer in 0..%d for %s and %s, got %s",
        math.min(a:dim(), b:dim()), shape_str(a), shape_str(b), tostring(dims)), 3)
    end
    for i = 1, dims do da[i], db[i] = a:dim() - dims + i, i end
  else
    if type(dims) ~= "table" or type(dims[1]) ~= "table" or type(dims[2]) ~= "table" or #dims[1] ~= #dims[2] then
      error("tensordot: dims must be a number or two lists of the same length {{dims of a}, {dims of b}}", 3)
    end
    for i = 1, #dims[1] do
      da[i] = util.check_dim("tensordot", dims[1][i], a:dim(), 4)
      db[i] = util.check_dim("tensordot", dims[2][i], b:dim(), 4)
    end
  end
  for i = 1, #da do
    if a:size(da[i]) ~= b:size(db[i]) then
      error(string.format("tensordot: contracted dims differ in size: dim %d of a %s is %d, dim %d of b %s is %d",
        da[i], shape_str(a), a:size(da[i]), db[i], shape_str(b), b:size(db[i])), 3)
    end
  end
  return da, db
end

--- lt.tensordot(a, b, dims): contracts a's dims with b's: dims = n (a's last n with b's first n, default 2) or
--- {{dims of a}, {dims of b}}. The result has a's free dims then b's. One matmul.
function M.tensordot(a, b, dims)
  check_tensors("tensordot", a, b)
  if dims == nil then dims = 2 end
  local da, db = tensordot_dims(a, b, dims)
  local ca, cb = {}, {}
  for i = 1, #da do
    if ca[da[i]] or cb[db[i]] then error("tensordot: a dim is listed twice in dims", 2) end
    ca[da[i]], cb[db[i]] = true, true
  end
  local pa, pb, shape, k = {}, {}, {}, 1
  for d = 1, a:dim() do if not ca[d] then pa[#pa + 1] = d; shape[#shape + 1] = a:size(d) end end
  for i = 1, #da do pa[#pa + 1] = da[i]; k = k * a:size(da[i]) end
  for i = 1, #db do pb[#pb + 1] = db[i] end
  for d = 1, b:dim() do if not cb[d] then pb[#pb + 1] = d; shape[#shape + 1] = b:size(d) end end
  local na = 1
  for d = 1, a:dim() do if not ca[d] then na = na * a:size(d) end end
  local xa = a:dim() > 0 and a:permute(pa) or a
  local xb = b:dim() > 0 and b:permute(pb) or b
  local p = xa:reshape(na, k):matmul(xb:reshape(k, -1))
  return #shape == 0 and p:reshape(1):sum() or p:reshape(shape)
end

-- The product of matrices in the cheapest order (the textbook dynamic programme over the chain's sizes).
local function chain_product(ms)
  local n = #ms
  if n == 1 then return ms[1] end
  local dims = { ms[1]:size(1) }
  for i = 1, n do dims[i + 1] = ms[i]:size(2) end
  local cost, split = {}, {}
  for i = 1, n do cost[i] = { [i] = 0 }; split[i] = {} end
  for len = 2, n do
    for i = 1, n - len + 1 do
      local j = i + len - 1
      cost[i][j] = math.huge
      for s = i, j - 1 do
        local c = cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1]
        if c < cost[i][j] then cost[i][j], split[i][j] = c, s end
      end
    end
  end
  local function prod(i, j)
    if i == j then return ms[i] end
    return prod(i, split[i][j]):matmul(prod(split[i][j] + 1, j))
  end
  return prod(1, n)
end

-- The operands m1, m2, ... or one list of them; a nil among them (a hole in the list) is named as a non-tensor.
local function tensor_list(fname, ...)
  local ts, n = { ... }, select("#", ...)
  if n == 1 and type(ts[1]) == "table" and not core.is_tensor(ts[1]) then
    ts = ts[1]
    n = 0
    for k in pairs(ts) do
      if type(k) ~= "number" or k < 1 or k ~= math.floor(k) then
        error(string.format("%s: expected a list of tensors, got a table with the key %s", fname, tostring(k)), 3)
      end
      n = math.max(n, k)
    end
  end
  if n == 0 then error(fname .. ": expected at least one tensor", 3) end
  for i = 1, n do
    if not core.is_tensor(ts[i]) then
      error(string.format("%s: operand %d must be a tensor, got %s", fname, i, type(ts[i])), 3)
    end
  end
  return { unpack(ts, 1, n) }
end

local function check_chain(fname, ms)
  for i = 2, #ms do
    if ms[i - 1]:size(2) ~= ms[i]:size(1) then
      error(string.format("%s: operands %d and %d cannot be multiplied (%s and %s)", fname, i - 1, i,
        shape_str(ms[i - 1]), shape_str(ms[i])), 3)
    end
  end
end

--- lt.chain_matmul(m1, m2, ...) (or one list): the product of 2-D matrices, in the cheapest order.
function M.chain_matmul(...)
  local ms = tensor_list("chain_matmul", ...)
  for i, m in ipairs(ms) do
    if m:dim() ~= 2 then
      error(string.format("chain_matmul: operand %d must be 2-D, got %s", i, shape_str(m)), 2)
    end
  end
  check_chain("chain_matmul", ms)
  return chain_product(ms)
end

--- lt.linalg.multi_dot({a, b, ...}): the product of two or more tensors, in the cheapest order; the first may be
--- 1-D (a row vector) and the last 1-D (a column vector), all others 2-D; 1-D ends drop out of the result.
function M.multi_dot(ts)
  if type(ts) ~= "table" or core.is_tensor(ts) then
    error("multi_dot: expected a list of tensors, got " .. (core.is_tensor(ts) and "a tensor" or type(ts)), 2)
  end
  local ms = tensor_list("multi_dot", ts)
  if #ms < 2 then error(string.format("multi_dot: expected at least 2 tensors, got %d", #ms), 2) end
  local n = #ms
  local first_vec, last_vec = ms[1]:dim() == 1, ms[n]:dim() == 1
  local xs = {}
  for i, m in ipairs(ms) do
    local ok = m:dim() == 2 or ((i == 1 or i == n) and m:dim() == 1)
    if not ok then
      error(string.format("multi_dot: operand %d must be 2-D%s, got %s", i,
        (i == 1 or i == n) and " or 1-D" or "", shape_str(m)), 2)
    end
    xs[i] = m
  end
  if first_vec then xs[1] = ms[1]:reshape(1, ms[1]:size(1)) end
  if last_vec then xs[n] = ms[n]:reshape(ms[n]:size(1), 1) end
  check_chain("multi_dot", xs)
  local p = chain_product(xs)
  if first_vec and last_vec then return p:reshape(1):sum() end
  if first_vec then return p:reshape(p:size(2)) end
  if last_vec then return p:reshape(p:size(1)) end
  return p
end

--- lt.cross(a, b[, dim]): the 3-D cross product along dim (size 3 in both; a and b broadcast); without dim the
--- first dim of size 3, as torch.cross.
function M.cross(a, b, dim)
  check_tensors("cross", a, b)
  if a:dim() ~= b:dim() then shape_error("cross", "tensors with the same number of dims", a, b) end
  if dim == nil then
    for d = 1, a:dim() do
      if a:size(d) == 3 and b:size(d) == 3 then dim = d; break end
    end
    if dim == nil then shape_error("cross", "a dim of size 3 in both", a, b) end
  else
    dim = util.check_dim("cross", dim, a:dim(), 3)
    if a:size(dim) ~= 3 or b:size(dim) ~= 3 then
      error(string.format("cross: dim %d must be of size 3 in both, got %s and %s", dim, shape_str(a), shape_str(b)), 2)
    end
  end
  local function c(x, i) return x:narrow(dim, i, 1) end
  local a1, a2, a3, b1, b2, b3 = c(a, 1), c(a, 2), c(a, 3), c(b, 1), c(b, 2), c(b, 3)
  return util.call_as("cross", core.cat, { a2 * b3 - a3 * b2, a3 * b1 - a1 * b3, a1 * b2 - a2 * b1 }, dim)
end

-- The flat indices (as an int64 tensor) of the elements (i, i + offset) of an [n x m] matrix, and their count.
local function diagonal_index(n, m, offset)
  local r0, c0 = offset >= 0 and 0 or -offset, offset >= 0 and offset or 0
  local len = math.max(0, math.min(n - r0, m - c0))
  local idx = {}
  for i = 0, len - 1 do idx[i + 1] = (r0 + i) * m + c0 + i + 1 end
  return core.tensor(idx, "int64"), len
end

local function check_offset(fname, offset)
  if offset == nil then return 0 end
  if type(offset) ~= "number" or offset ~= math.floor(offset) or math.abs(offset) == math.huge then
    error(string.format("%s: offset must be an integer, got %s", fname, tostring(offset)), 3)
  end
  return offset
end

--- x:diagonal([offset = 0[, dim1 = 1[, dim2 = 2]]]): the diagonal of the matrices over dim1 and dim2 (offset > 0
--- above the main one), as a last dim; a copy (torch's is a view), differentiable.
function M.diagonal(x, offset, dim1, dim2)
  offset = check_offset("diagonal", offset)
  local nd = x:dim()
  if nd < 2 then error("diagonal: expected at least 2 dims, got " .. shape_str(x), 2) end
  dim1 = util.check_dim("diagonal", dim1 or 1, nd, 3)
  dim2 = util.check_dim("diagonal", dim2 or 2, nd, 3)
  if dim1 == dim2 then error(string.format("diagonal: dim1 and dim2 are both %d", dim1), 2) end
  local perm, shape = {}, {}
  for d = 1, nd do if d ~= dim1 and d ~= dim2 then perm[#perm + 1] = d; shape[#shape + 1] = x:size(d) end end
  local n, m = x:size(dim1), x:size(dim2)
  perm[#perm + 1], perm[#perm + 2] = dim1, dim2
  local idx, len = diagonal_index(n, m, offset)
  shape[#shape + 1] = n * m
  local flat = x:permute(perm):reshape(shape)
  shape[#shape] = len
  if len == 0 then return core.zeros(shape, x:dtype()) end
  return flat:index_select(#shape, idx)
end

--- x:trace(): the sum of the main diagonal of a 2-D x (of min(n, m) elements), 0-dim.
function M.trace(x)
  if x:dim() ~= 2 then error("trace: expected a 2-D tensor, got " .. shape_str(x), 2) end
  return M.diagonal(x):sum()
end

-- x's shape without its last dim, then the sizes ...
local function lead_then(x, ...)
  local shape = x:shape()
  shape[#shape] = nil
  for i = 1, select("#", ...) do shape[#shape + 1] = select(i, ...) end
  return shape
end

-- The [... x n x n] matrices (n = k + |offset|) whose diagonal `offset` holds x's last dim (of size k), without a
-- loop over their n * n places. Flattened, the diagonal is x_i at start + i * (n + 1): x with n zeros after each
-- element, after `start` zeros, cut (or padded with zeros) to n * n. The larger block of zeros (about the size of
-- the result when |offset| is large) is made first, so the core's size checks refuse a huge offset before
-- anything else is built.
local function embed_last(x, offset)
  local k, axis = x:size(x:dim()), x:dim()
  local n = k + math.abs(offset)
  local start = offset >= 0 and offset or -offset * n
  local pad = n * n - start - k * (n + 1)
  local before, after
  if pad > start then
    after = core.zeros(lead_then(x, pad), x:dtype())
    before = core.zeros(lead_then(x, start), x:dtype())
  else
    before = core.zeros(lead_then(x, start), x:dtype())
    if pad > 0 then after = core.zeros(lead_then(x, pad), x:dtype()) end
  end
  local spaced = core.cat({ x:unsqueeze(-1), core.zeros(lead_then(x, k, n), x:dtype()) }, axis + 1)
  local flat = core.cat({ before, spaced:reshape(lead_then(x, k * (n + 1))), after }, axis)
  if pad < 0 then flat = flat:narrow(axis, 1, n * n) end
  return flat:reshape(lead_then(x, n, n))
end

local function diag_embed(fname, x, offset, dim1, dim2)
  offset = check_offset(fname, offset)
  local nd = x:dim() + 1
  dim1 = util.check_dim(fname, dim1 or -2, nd, 4)
  dim2 = util.check_dim(fname, dim2 or -1, nd, 4)
  if dim1 == dim2 then error(string.format("%s: dim1 and dim2 are both %d", fname, dim1), 3) end
  if x:dim() == 0 then x = x:reshape(1) end
  local y = util.call_as(string.format("%s: offset %.14g", fname, offset), embed_last, x, offset)
  -- y has the matrix at its last two dims; move them to dim1 and dim2
  local perm, rest = {}, 1
  for d = 1, nd do
    if d == dim1 then perm[d] = nd - 1 elseif d == dim2 then perm[d] = nd else perm[d] = rest; rest = rest + 1 end
  end
  return y:permute(perm)
end
--- x:diag_embed([offset = 0[, dim1 = -2[, dim2 = -1]]]): matrices whose diagonal (offset) holds x's last dim,
--- placed at dims dim1 and dim2 of a result with one dim more; zeros elsewhere.
function M.diag_embed(x, offset, dim1, dim2) return diag_embed("diag_embed", x, offset, dim1, dim2) end

--- x:diag([offset = 0]): for 1-D x the square matrix with x on that diagonal; for 2-D x its diagonal (1-D).
function M.diag(x, offset)
  offset = check_offset("diag", offset)
  if x:dim() == 1 then return diag_embed("diag", x, offset) end
  if x:dim() == 2 then return M.diagonal(x, offset) end
  error("diag: expected a 1-D or 2-D tensor, got " .. shape_str(x), 2)
end

local method_names = { "mm", "bmm", "mv", "dot", "vdot", "inner", "outer", "ger", "addmv", "addbmm", "addr", "kron",
  "tensordot", "cross", "trace", "diagonal", "diag", "diag_embed" }
local self_checked = { trace = true, diagonal = true, diag = true, diag_embed = true }
for _, name in ipairs(method_names) do
  local f = util.named(name, M[name])
  methods[name] = f
  if rawget(core, name) == nil then core[name] = self_checked[name] and util.tensor_function(name, f) or f end
end
if rawget(core, "chain_matmul") == nil then core.chain_matmul = util.named("chain_matmul", M.chain_matmul) end

return M
