-- tensor/linalg.lua — addmm, baddbmm and einsum, composed of the core's differentiable ops (matmul, permute,
-- reshape, sum, mul), so autograd comes with them and the heavy work is one batched GEMM per contraction.
--
--   local y = lt.addmm(bias, x, w, {beta = 1, alpha = 1})           -- beta * M + alpha * (A @ B)
--   local s = lt.einsum("bhqd,bhkd->bhqk", q, k)                     -- attention scores
--   local o = lt.einsum("bi,oij,bj->bo", x1, W, x2)                  -- a bilinear layer
local core = require "lutra.core"
local util = require "lutra.utils.check"
local methods = core.Tensor.methods

local M = {}

local function shape_str(t) return t:shape_str() end

local function check_scale_opts(fname, opts)
  if opts == nil then return 1, 1 end
  if type(opts) ~= "table" then
    error(fname .. ": options must be a table {beta = 1, alpha = 1}, got " .. type(opts), 3)
  end
  for k, v in pairs(opts) do
    if (k ~= "beta" and k ~= "alpha") then
      error(string.format("%s: unknown option '%s' (known: alpha, beta)", fname, tostring(k)), 3)
    end
    if type(v) ~= "number" then
      error(string.format("%s: option '%s' must be a number, got %s", fname, k, type(v)), 3)
    end
  end
  return opts.beta or 1, opts.alpha or 1
end

-- beta * M + alpha * (A @ B)
local function scaled_sum(m, a, b, beta, alpha)
  local p = a:matmul(b)
  if alpha ~= 1 then p = p * alpha end
  if beta == 0 then return p end -- M is not read (its NaNs stay out, as torch)
  return beta == 1 and p + m or p + m * beta
end

-- addmm and baddbmm: one check of the operands, one formula. batched: A [b x n x k], B [b x k x m].
local function add_matmul(fname, m, a, b, opts, batched)
  local beta, alpha = check_scale_opts(fname, opts)
  util.check_arg(fname, 1, m, "tensor", 2)
  util.check_arg(fname, 2, a, "tensor", 2)
  util.check_arg(fname, 3, b, "tensor", 2)
  local nd, o = batched and 3 or 2, batched and 1 or 0
  if a:dim() ~= nd or b:dim() ~= nd or a:size(o + 2) ~= b:size(o + 1) or (batched and a:size(1) ~= b:size(1)) then
    error(string.format("%s: expected A %s and B %s, got %s and %s", fname, batched and "[b x n x k]" or "[n x k]",
      batched and "[b x k x m]" or "[k x m]", shape_str(a), shape_str(b)), 3)
  end
  return util.call_as(fname, scaled_sum, m, a, b, beta, alpha) -- (M that cannot be broadcast: named by fname)
end

--- lt.addmm(M, A, B[, {beta = 1, alpha = 1}]): beta * M + alpha * (A @ B); A [n x k], B [k x m], M broadcast
--- to [n x m].
function M.addmm(m, a, b, opts) return add_matmul("addmm", m, a, b, opts, false) end

--- lt.baddbmm(M, A, B[, {beta = 1, alpha = 1}]): beta * M + alpha * (A @ B) per batch; A [b x n x k],
--- B [b x k x m], M broadcast to [b x n x m].
function M.baddbmm(m, a, b, opts) return add_matmul("baddbmm", m, a, b, opts, true) end

-- ---- einsum --------------------------------------------------------------------------------------------

local function parse(eq, n)
  local lhs, rhs = eq:gsub("%s", ""):match("^([^%-]*)%->(.*)$")
  if not lhs then
    lhs = eq:gsub("%s", "")
    -- implicit output: the letters that appear once, in alphabetical order (as torch)
    local count, letters = {}, {}
    for ch in lhs:gmatch("%a") do count[ch] = (count[ch] or 0) + 1 end
    for ch, k in pairs(count) do if k == 1 then letters[#letters + 1] = ch end end
    table.sort(letters)
    rhs = table.concat(letters)
  end
  local terms = {}
  for term in (lhs .. ","):gmatch("([^,]*),") do terms[#terms + 1] = term end
  if #terms ~= n then
    error(string.format("einsum: the equation '%s' has %d operand(s), got %d tensor(s)", eq, #terms, n), 3)
  end
  for _, s in ipairs(terms) do
    if not s:match("^%a*$") then
      error(string.format("einsum: '%s' is not a subscript (letters only, no '...')", s), 3)
    end
  end
  if not rhs:match("^%a*$") then error(string.format("einsum: '%s' is not an output subscript", rhs), 3) end
  return terms, rhs
end

local function chars(s)
  local t = {}
  for ch in s:gmatch(".") do t[#t + 1] = ch end
  return t
end

-- A repeated letter within one operand is its diagonal: x * eye over the two dims, summed over one of them.
local function take_diagonals(x, sub)
  local letters = chars(sub)
  local i = 1
  while i <= #letters do
    local j = nil
    for k = i + 1, #letters do if letters[k] == letters[i] then j = k; break end end
    if j then
      local n = x:size(i)
      if x:size(j) ~= n then
        error(string.format("einsum: subscript '%s' repeats '%s' over sizes %d and %d", sub, letters[i], n,
          x:size(j)), 4)
      end
      local shape = {}
      for d = 1, x:dim() do shape[d] = (d == i or d == j) and n or 1 end
      x = (x * core.eye(n):reshape(shape)):sum(j)
      table.remove(letters, j)
    else
      i = i + 1
    end
  end
  return x, letters
end

-- Sums x over the letters not in keep (a set); returns x and its remaining letters.
local function sum_out(x, letters, keep)
  local out = {}
  for d = #letters, 1, -1 do
    if not keep[letters[d]] then x = x:sum(d) else table.insert(out, 1, letters[d]) end
  end
  return x, out
end

local function index_of(list)
  local t = {}
  for i, v in ipairs(list) do t[v] = i end
  return t
end

-- Contracts x (letters la) with y (letters lb), keeping the letters in keep: one batched matmul over
-- [batch, left, sum] x [batch, sum, right].
local function contract(x, la, y, lb, keep, size)
  local ia, ib = index_of(la), index_of(lb)
  local batch, left, right, summed = {}, {}, {}, {}
  for _, l in ipairs(la) do
    if ib[l] then
      if keep[l] then batch[#batch + 1] = l else summed[#summed + 1] = l end
    else
      left[#left + 1] = l
    end
  end
  for _, l in ipairs(lb) do if not ia[l] then right[#right + 1] = l end end
  local function prod(ls)
    local p = 1
    for _, l in ipairs(ls) do p = p * size[l] end
    return p
  end
  local function perm_of(idx, groups)
    local p = {}
    for _, g in ipairs(groups) do for _, l in ipairs(g) do p[#p + 1] = idx[l] end end
    return p
  end
  local xa = #la > 0 and x:permute(perm_of(ia, { batch, left, summed })) or x
  local yb = #lb > 0 and y:permute(perm_of(ib, { batch, summed, right })) or y
  local B, L, S, R = prod(batch), prod(left), prod(summed), prod(right)
  local z = xa:reshape(B, L, S):matmul(yb:reshape(B, S, R))
  local letters, shape = {}, {}
  for _, g in ipairs { batch, left, right } do
    for _, l in ipairs(g) do letters[#letters + 1] = l; shape[#shape + 1] = size[l] end
  end
  z = #shape > 0 and z:reshape(shape) or z:reshape(1):sum()
  return z, letters
end

--- lt.einsum(equation, a[, b, ...]): Einstein summation over the operands (letters only; "->" optional).
function M.einsum(eq, ...)
  if type(eq) ~= "string" then error("einsum: the first argument must be the equation string, got " .. type(eq), 2) end
  local ops = { ... }
  if #ops == 1 and type(ops[1]) == "table" and not core.is_tensor(ops[1]) then ops = ops[1] end
  for i, t in ipairs(ops) do
    if not core.is_tensor(t) then
      error(string.format("einsum: operand %d must be a tensor, got %s", i, type(t)), 2)
    end
  end
  local terms, rhs = parse(eq, #ops)
  local out_letters = chars(rhs)
  local size = {}
  local xs, ls = {}, {}
  for i, t in ipairs(ops) do
    if #terms[i] ~= t:dim() then
      error(string.format("einsum: subscript '%s' has %d letters for operand %d of shape %s", terms[i], #terms[i], i,
        shape_str(t)), 2)
    end
    for d, l in ipairs(chars(terms[i])) do
      if size[l] and size[l] ~= t:size(d) then
        error(string.format("einsum: '%s' is size %d in one operand and %d in operand %d", l, size[l], t:size(d), i), 2)
      end
      size[l] = t:size(d)
    end
    xs[i], ls[i] = take_diagonals(t, terms[i])
  end
  for _, l in ipairs(out_letters) do
    if not size[l] then error(string.format("einsum: output letter '%s' is in no operand", l), 2) end
  end
  -- which letters are still needed after operand i: the output's and those of later operands
  local function needed_after(i)
    local keep = {}
    for _, l in ipairs(out_letters) do keep[l] = true end
    for k = i + 1, #ls do for _, l in ipairs(ls[k]) do keep[l] = true end end
    return keep
  end
  -- left to right: sum out what no later operand nor the output needs, then contract with the next operand
  local x, lx = sum_out(xs[1], ls[1], needed_after(1))
  for i = 2, #xs do
    local keep = needed_after(i)
    local keep_y = needed_after(i)
    for _, l in ipairs(lx) do keep_y[l] = true end
    local y, ly = sum_out(xs[i], ls[i], keep_y)
    x, lx = contract(x, lx, y, ly, keep, size)
  end
  local keep = {}
  for _, l in ipairs(out_letters) do keep[l] = true end
  x, lx = sum_out(x, lx, keep)
  if #out_letters == 0 then return x:dim() == 0 and x or x:sum() end
  local idx = index_of(lx)
  local perm, identity = {}, true
  for i, l in ipairs(out_letters) do perm[i] = idx[l]; if perm[i] ~= i then identity = false end end
  return identity and x or x:permute(perm)
end

methods.addmm = M.addmm
methods.baddbmm = M.baddbmm
for _, name in ipairs { "addmm", "baddbmm", "einsum" } do
  if rawget(core, name) == nil then core[name] = M[name] end
end

return M
