-- tensor_products_spec: the named products and diagonals of lua/lutra/tensor/products.lua and lt.linalg (mm, bmm,
-- mv, dot, vdot, inner, outer, ger, addmv, addbmm, addr, kron, tensordot, chain_matmul, multi_dot, cross, trace,
-- diagonal, diag, diag_embed, vector_norm, matrix_norm, norm): values and gradients against PyTorch 1.13
-- (tests/fixtures/products.json from gen_products.py), finite-difference gradchecks, and the errors of bad shapes.
local lt = require "lutra"
local X = require "tests.helpers.nn_fixtures"
local gradcheck = require "tests.helpers.gradcheck"
local bounded_err = require "tests.helpers.bounded_err"
local L = lt.linalg
local inf = math.huge

local function err_of(f)
  local ok, e = pcall(f)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

-- fixture case name -> the lutra call (the fixture's dims and offsets made 1-based)
local ops = {
  mm = lt.mm,
  bmm = function(a, b) return a:bmm(b) end,
  mv = lt.mv,
  dot = function(a, b) return a:dot(b) end,
  vdot = lt.vdot,
  inner_3d_2d = lt.inner,
  inner_1d = lt.inner,
  inner_scalar = lt.inner,
  outer = lt.outer,
  ger = function(a, b) return a:ger(b) end,
  addmv = function(m, a, v) return lt.addmv(m, a, v, { beta = 0.5, alpha = 2 }) end,
  addmv_broadcast = function(m, a, v) return m:addmv(a, v) end,
  addbmm = function(m, a, b) return lt.addbmm(m, a, b, { beta = -1, alpha = 0.25 }) end,
  addr = function(m, u, v) return m:addr(u, v, { beta = 2, alpha = -1.5 }) end,
  addr_broadcast = lt.addr,
  kron_2d = lt.kron,
  kron_mixed = function(a, b) return a:kron(b) end,
  tensordot_n = function(a, b) return lt.tensordot(a, b, 2) end,
  tensordot_lists = function(a, b) return lt.tensordot(a, b, { { 1, 3 }, { 3, 2 } }) end,
  tensordot_zero = function(a, b) return lt.tensordot(a, b, 0) end,
  chain_matmul = lt.chain_matmul,
  multi_dot_vectors = function(a, b, c) return L.multi_dot({ a, b, c }) end,
  multi_dot_row = function(a, b, c) return L.multi_dot({ a, b, c }) end,
  cross_dim = function(a, b) return lt.cross(a, b, 2) end,
  cross_default = function(a, b) return a:cross(b) end,
  linalg_cross = L.cross,
  trace = function(x) return x:trace() end,
  trace_rect = lt.trace,
  diagonal = function(x) return x:diagonal() end,
  diagonal_offset = function(x) return lt.diagonal(x, 2) end,
  diagonal_negative = function(x) return x:diagonal(-1) end,
  diagonal_dims = function(x) return x:diagonal(1, 3, 1) end,
  diag_vector = lt.diag,
  diag_vector_offset = function(x) return x:diag(-2) end,
  diag_matrix = function(x) return lt.diag(x, 1) end,
  diag_embed = function(x) return x:diag_embed() end,
  diag_embed_dims = function(x) return lt.diag_embed(x, 1, 1, 3) end,
  vector_norm = L.vector_norm,
  vector_norm_l1_dim = function(x) return L.vector_norm(x, 1, 2) end,
  vector_norm_p3_keepdim = function(x) return L.vector_norm(x, 3, 1, true) end,
  vector_norm_inf = function(x) return L.vector_norm(x, inf, { 1, 2 }) end,
  matrix_norm_fro = L.matrix_norm,
  matrix_norm_1 = function(x) return L.matrix_norm(x, 1) end,
  matrix_norm_ninf_keepdim = function(x) return L.matrix_norm(x, -inf, nil, true) end,
  norm_default = L.norm,
  norm_matrix_inf = function(x) return L.norm(x, inf) end,
}

describe("products against PyTorch 1.13 (products.json)", function()
  X.describe_cases(it, "products.json", ops)
end)

describe("products: finite-difference gradients", function()
  local r = lt.randn
  local checks = {
    mm = { lt.mm, { r(3, 4), r(4, 2) } },
    bmm = { lt.bmm, { r(2, 3, 4), r(2, 4, 2) } },
    mv = { lt.mv, { r(3, 4), r(4) } },
    dot = { lt.dot, { r(5), r(5) } },
    vdot = { lt.vdot, { r(5), r(5) } },
    inner = { lt.inner, { r(2, 3), r(4, 3) } },
    outer = { lt.outer, { r(3), r(2) } },
    ger = { lt.ger, { r(3), r(2) } },
    addmv = { function(m, a, v) return lt.addmv(m, a, v, { beta = 0.5, alpha = 2 }) end, { r(3), r(3, 4), r(4) } },
    addbmm = { function(m, a, b) return lt.addbmm(m, a, b, { alpha = 0.5 }) end, { r(3, 2), r(2, 3, 4), r(2, 4, 2) } },
    addr = { function(m, u, v) return lt.addr(m, u, v, { beta = 3 }) end, { r(3, 2), r(3), r(2) } },
    kron = { lt.kron, { r(2, 2), r(3, 1) } },
    tensordot = { function(a, b) return lt.tensordot(a, b, { { 1 }, { 2 } }) end, { r(3, 2), r(4, 3) } },
    chain_matmul = { lt.chain_matmul, { r(2, 3), r(3, 4), r(4, 2) } },
    multi_dot = { function(a, b, c) return L.multi_dot({ a, b, c }) end, { r(3), r(3, 4), r(4, 2) } },
    cross = { function(a, b) return lt.cross(a, b, 1) end, { r(3, 2), r(3, 2) } },
    trace = { lt.trace, { r(3, 3) } },
    diagonal = { function(x) return x:diagonal(-1, 2, 3) end, { r(2, 4, 3) } },
    diag = { function(x) return lt.diag(x, 1) end, { r(3) } },
    diag_embed = { function(x) return lt.diag_embed(x, -1, 1, 2) end, { r(2, 3) } },
    vector_norm = { function(x) return L.vector_norm(x, 3, 2) end, { r(3, 4) } },
    matrix_norm = { function(x) return L.matrix_norm(x) end, { r(3, 4) } },
  }
  for name, c in pairs(checks) do
    it(name, function()
      lt.manual_seed(7)
      assert.is_true(gradcheck(c[1], c[2], { eps = 1e-2, rtol = 2e-2, atol = 2e-3 }))
    end)
  end
end)

describe("products: shapes PyTorch refuses", function()
  local r = lt.randn
  it("name the op and the shapes", function()
    assert.matches("mm: expected %[n x k%] and %[k x m%], got %[2 x 3 x 4%] and %[4 x 5%]",
      err_of(function() return lt.mm(r(2, 3, 4), r(4, 5)) end))
    assert.matches("mm: expected .* got %[2 x 3%] and %[2 x 3%]", err_of(function() return lt.mm(r(2, 3), r(2, 3)) end))
    assert.matches("bmm: expected %[b x n x k%] and %[b x k x m%], got %[2 x 3 x 4%] and %[3 x 4 x 5%]",
      err_of(function() return lt.bmm(r(2, 3, 4), r(3, 4, 5)) end))
    assert.matches("mv: expected %[n x m%] and %[m%], got %[2 x 3%] and %[2%]",
      err_of(function() return lt.mv(r(2, 3), r(2)) end))
    assert.matches("dot: expected two 1%-D tensors of the same size, got %[3%] and %[4%]",
      err_of(function() return lt.dot(r(3), r(4)) end))
    assert.matches("dot: expected .* got %[1 x 3%] and %[3%]", err_of(function() return lt.dot(r(1, 3), r(3)) end))
    assert.matches("inner: expected the same last dim, got %[2 x 3%] and %[2 x 4%]",
      err_of(function() return lt.inner(r(2, 3), r(2, 4)) end))
    assert.matches("outer: expected two 1%-D tensors, got %[2 x 2%] and %[3%]",
      err_of(function() return lt.outer(r(2, 2), r(3)) end))
    assert.matches("addbmm: expected A %[b x n x k%] and B %[b x k x m%], got %[2 x 3 x 4%] and %[3 x 4 x 2%]",
      err_of(function() return lt.addbmm(r(3, 2), r(2, 3, 4), r(3, 4, 2)) end))
    assert.matches("addmv: unknown option 'gamma'",
      err_of(function() return lt.addmv(r(2), r(2, 3), r(3), { gamma = 1 }) end))
    assert.matches("^[^\n]*addr", err_of(function() return lt.addr(r(4, 4), r(3), r(2)) end))
    assert.matches("tensordot: contracted dims differ in size: dim 2 of a %[2 x 3%] is 3, dim 1 of b %[4 x 2%] is 4",
      err_of(function() return lt.tensordot(r(2, 3), r(4, 2), { { 2 }, { 1 } }) end))
    assert.matches("tensordot: dims must be an integer in 0..2", err_of(function() return lt.tensordot(r(2, 3), r(3, 2), 3) end))
    assert.matches("chain_matmul: operand 2 must be 2%-D, got %[3%]",
      err_of(function() return lt.chain_matmul(r(2, 3), r(3)) end))
    assert.matches("chain_matmul: operands 1 and 2 cannot be multiplied %(%[2 x 3%] and %[4 x 2%]%)",
      err_of(function() return lt.chain_matmul(r(2, 3), r(4, 2)) end))
    assert.matches("multi_dot: expected at least 2 tensors, got 1", err_of(function() return L.multi_dot({ r(2, 2) }) end))
    assert.matches("multi_dot: operand 2 must be 2%-D, got %[3%]",
      err_of(function() return L.multi_dot({ r(3), r(3), r(3) }) end))
    assert.matches("cross: dim 1 must be of size 3 in both, got %[2 x 3%] and %[2 x 3%]",
      err_of(function() return lt.cross(r(2, 3), r(2, 3), 1) end))
    assert.matches("cross: expected a dim of size 3 in both, got %[2 x 2%] and %[2 x 2%]",
      err_of(function() return lt.cross(r(2, 2), r(2, 2)) end))
    assert.matches("trace: expected a 2%-D tensor, got %[2 x 2 x 2%]", err_of(function() return lt.trace(r(2, 2, 2)) end))
    assert.matches("diag: expected a 1%-D or 2%-D tensor, got %[2 x 2 x 2%]", err_of(function() return lt.diag(r(2, 2, 2)) end))
    assert.matches("diagonal: dim1 and dim2 are both 2", err_of(function() return r(2, 2):diagonal(0, 2, -1) end))
    assert.matches("matrix_norm: ord nuc is not supported", err_of(function() return L.matrix_norm(r(2, 2), "nuc") end))
    assert.matches("bad argument #2 to 'mm' %(tensor expected, got number%)", err_of(function() return lt.mm(r(2, 2), 3) end))
    assert.matches("lt.linalg has no 'svd'", err_of(function() return L.svd end))
  end)

  it("diagonal out of range is empty, diag of an offset vector is square", function()
    assert.are.equal("[0]", r(2, 3):diagonal(5):shape_str())
    assert.are.equal("[5 x 5]", lt.diag(r(3), 2):shape_str())
    assert.are.equal(0, lt.dot(lt.zeros(0), lt.zeros(0)):item())
  end)
end)

-- an error message without its "file:line: " position
local function msg(e) return (e:gsub("^[^\n]-:%d+: ", "")) end

describe("products: every error names the function called", function()
  local r = lt.randn
  it("its own checks and its inner ops' errors", function()
    -- dims = n: the contracted sizes are compared (reshape failed inside before)
    assert.matches("^tensordot: contracted dims differ in size: dim 2 of a %[3 x 4%] is 4, dim 2 of b %[3 x 1 x 4%] is 1",
      msg(err_of(function() return lt.tensordot(r(3, 4), r(3, 1, 4)) end)))
    assert.matches("^cross: mul: shapes %[1 x 2%] and %[1 x 4%] cannot be broadcast",
      msg(err_of(function() return lt.cross(r(3, 2), r(3, 4), 1) end)))
    assert.matches("^chain_matmul: operand 2 must be a tensor, got nil",
      msg(err_of(function() return lt.chain_matmul(r(2, 2), nil, r(2, 2)) end)))
    assert.matches("^chain_matmul: operand 2 must be a tensor, got nil",
      msg(err_of(function() return lt.chain_matmul({ r(2, 2), nil, r(2, 2) }) end)))
    assert.matches("^diag: offset must be an integer, got inf", msg(err_of(function() return lt.diag(r(3), inf) end)))
  end)
  it("a huge offset is refused by the core's size checks before any work", function()
    assert.matches("^diag: offset 2147483648: zeros: ", msg(bounded_err(lt.diag, r(3), 2 ^ 31)))
    assert.matches("^diag_embed: offset %-2147483648: zeros: ",
      msg(bounded_err(function() return r(2, 3):diag_embed(-2 ^ 31) end)))
  end)
end)

