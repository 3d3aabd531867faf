-- ops_masks_scatter_spec: masks (masked_fill, where), GELU (exact and tanh), the fast randn, the scatter family, addmm /
-- baddbmm / einsum and lt.F's one_hot / pad / normalize / cosine_similarity / interpolate: forward values and
-- gradients against PyTorch 1.13 (tests/fixtures/ops2.json from gen_ops2.py), finite-difference gradchecks,
-- statistics of the random ops and the error texts of bad input.
local lt = require "lutra"
local X = require "tests.helpers.nn_fixtures"
local gradcheck = require "tests.helpers.gradcheck"
local F = lt.F

local function err_of(f)
  local ok, e = pcall(f)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

-- fixture case name -> function of the case's inputs (as lutra tensors) returning the output
local ops = {
  gelu = function(x) return F.gelu(x) end,
  gelu_tanh = function(x) return F.gelu(x, { approximate = "tanh" }) end,
  masked_fill = function(x, m) return x:masked_fill(m, -2.5) end,
  masked_fill_broadcast = function(x, m) return lt.masked_fill(x, m, 7) end,
  where_broadcast = function(m, a, b) return lt.where(m, a, b) end,
  scatter = function(x, i, s) return x:scatter(2, i, s) end,
  scatter_value = function(x, i) return x:scatter(2, i, 4.5) end,
  scatter_add = function(x, i, s) return lt.scatter_add(x, 1, i, s) end,
  index_add = function(x, i, s) return x:index_add(1, i, s, { alpha = 2 }) end,
  index_fill = function(x, i) return x:index_fill(2, i, -1) end,
  masked_select = function(x, m) return x:masked_select(m) end,
  nonzero = function(m) return m:nonzero() end,
  addmm = function(m, a, b) return lt.addmm(m, a, b, { beta = 0.5, alpha = 2 }) end,
  baddbmm = function(m, a, b) return m:baddbmm(a, b, { beta = -1, alpha = 0.25 }) end,
  einsum_matmul = function(a, b) return lt.einsum("ij,jk->ik", a, b) end,
  einsum_bmm = function(a, b) return lt.einsum("bij,bjk->bik", a, b) end,
  einsum_scores = function(q, k) return lt.einsum("bhqd,bhkd->bhqk", q, k) end,
  einsum_context = function(s, v) return lt.einsum("bhqk,bhkd->bhqd", s, v) end,
  einsum_bilinear = function(a, w, b) return lt.einsum("bi,oij,bj->bo", a, w, b) end,
  einsum_transpose = function(a) return lt.einsum("ij->ji", a) end,
  einsum_trace = function(a) return lt.einsum("ii->", a) end,
  einsum_diag = function(a) return lt.einsum("ii->i", a) end,
  einsum_sum = function(a) return lt.einsum("ij->", a) end,
  einsum_outer = function(a, b) return lt.einsum("i,j->ij", a, b) end,
  one_hot = function(t) return F.one_hot(t, 5) end,
  pad_constant = function(x) return F.pad(x, { 1, 2, 0, 1 }, { mode = "constant", value = -3 }) end,
  pad_crop = function(x) return F.pad(x, { -1, 2 }) end,
  pad_reflect = function(x) return F.pad(x, { 2, 1, 3, 0 }, { mode = "reflect" }) end,
  pad_replicate = function(x) return F.pad(x, { 0, 3, 2, 2 }, { mode = "replicate" }) end,
  pad_reflect_1d = function(x) return F.pad(x, { 2, 3 }, { mode = "reflect" }) end,
  normalize = function(x) return F.normalize(x) end,
  normalize_p1_dim1 = function(x) return F.normalize(x, { p = 1, dim = 1 }) end,
  normalize_p3 = function(x) return F.normalize(x, { p = 3, dim = -1 }) end,
  cosine_similarity = function(a, b) return F.cosine_similarity(a, b) end,
  cosine_similarity_dim1_broadcast = function(a, b) return F.cosine_similarity(a, b, { dim = 1 }) end,
  interpolate_nearest_scale = function(x) return F.interpolate(x, { scale_factor = 2, mode = "nearest" }) end,
  interpolate_nearest_size = function(x) return F.interpolate(x, { size = { 5, 7 } }) end,
  interpolate_bilinear = function(x) return F.interpolate(x, { size = { 5, 7 }, mode = "bilinear", align_corners = false }) end,
  interpolate_bilinear_ac = function(x) return F.interpolate(x, { size = { 5, 7 }, mode = "bilinear", align_corners = true }) end,
  interpolate_bilinear_scale = function(x) return F.interpolate(x, { scale_factor = 1.5, mode = "bilinear" }) end,
  interpolate_bilinear_down = function(x) return F.interpolate(x, { size = { 2, 3 }, mode = "bilinear" }) end,
  interpolate_linear = function(x) return F.interpolate(x, { size = 7, mode = "linear" }) end,
  linspace = function() return lt.linspace(-1, 2.5, 8) end,
  linspace_odd = function() return lt.linspace(0.1, 0.7, 7) end,
  linspace_down = function() return lt.linspace(3, -3, 10) end,
  linspace_one = function() return lt.linspace(5, 9, 1) end,
}

describe("ops against PyTorch 1.13 (ops2.json)", function()
  X.describe_cases(it, "ops2.json", ops)
end)

describe("gelu", function()
  it("passes gradchecks in both forms", function()
    lt.manual_seed(1)
    gradcheck(function(x) return F.gelu(x) end, { lt.randn(4, 3) * 2 })
    gradcheck(function(x) return F.gelu(x, { approximate = "tanh" }) end, { lt.randn(4, 3) * 2 })
  end)
  it("rejects unknown options and values", function()
    local x = lt.randn(2)
    assert.matches("gelu: unknown option 'approx'", err_of(function() return F.gelu(x, { approx = "tanh" }) end))
    assert.matches('gelu: approximate must be "none" or "tanh", got "fast"',
      err_of(function() return F.gelu(x, { approximate = "fast" }) end), 1, true)
    assert.matches("option 'approximate' must be a string", err_of(function() return F.gelu(x, { approximate = 1 }) end))
  end)
end)

describe("masked_fill and where", function()
  it("pass gradchecks", function()
    lt.manual_seed(2)
    local m = lt.rand(3, 4):lt(0.5)
    gradcheck(function(x) return x:masked_fill(m, 3) end, { lt.randn(3, 4) })
    gradcheck(function(a, b) return lt.where(m, a, b) end, { lt.randn(3, 4), lt.randn(1, 4) })
  end)
  it("accept int64 masks and non-contiguous inputs", function()
    local x = lt.tensor{ { 1, 2 }, { 3, 4 } }:t()
    local m = lt.tensor({ { 1, 0 }, { 0, 1 } }, "int64")
    assert.are.same({ 9, 3, 2, 9 }, x:masked_fill(m, 9):flatten():tolist())
    assert.are.same({ 0, 3, 2, 0 }, lt.where(m, lt.zeros(2, 2), x):flatten():tolist())
  end)
  it("broadcast the input with the mask (as torch), and name the shapes when they cannot be", function()
    local x = lt.tensor{ 1, 2, 3 }:requires_grad(true)
    local y = x:masked_fill(lt.tensor{ { 1, 0, 0 }, { 0, 0, 1 } }, -1)
    assert.are.same({ -1, 2, 3, 1, 2, -1 }, y:flatten():tolist())
    y:sum():backward()
    assert.are.same({ 1, 2, 1 }, x.grad:flatten():tolist())
    gradcheck(function(v) return v:masked_fill(lt.tensor{ { 1, 0 }, { 0, 0 } }, 2) end, { lt.randn(2) })
    assert.matches("masked_fill: shapes [3] and [2 x 2] cannot be broadcast",
      err_of(function() return lt.zeros(3):masked_fill(lt.ones(2, 2), 1) end), 1, true)
    assert.matches("masked_fill: value must be a number, got string",
      err_of(function() return lt.zeros(3):masked_fill(lt.ones(3), "x") end), 1, true)
  end)
end)

describe("randn", function()
  it("is standard normal on a large sample (mean, std, tails, normality)", function()
    lt.manual_seed(123)
    local n = 1000000
    local x = lt.randn(n)
    local mean, std = x:mean():item(), x:std():item()
    assert(math.abs(mean) < 5 * 1 / math.sqrt(n), "mean " .. mean)
    assert(math.abs(std - 1) < 5 * 1 / math.sqrt(2 * n), "std " .. std)
    -- skewness and excess kurtosis near 0 (standard errors ~ sqrt(6/n), sqrt(24/n))
    local z = (x - mean) / std
    local skew, kurt = (z ^ 3):mean():item(), (z ^ 4):mean():item() - 3
    assert(math.abs(skew) < 0.015, "skew " .. skew)
    assert(math.abs(kurt) < 0.03, "excess kurtosis " .. kurt)
    -- the fraction beyond 1, 2 and 3 sigma as the normal law says (5 standard errors)
    for _, cut in ipairs { { 1, 0.31731 }, { 2, 0.04550 }, { 3, 0.0026998 } } do
      local frac = x:abs():gt(cut[1]):mean():item()
      local se = math.sqrt(cut[2] * (1 - cut[2]) / n)
      assert(math.abs(frac - cut[2]) < 5 * se, ("P(|x| > %d) = %g, expected %g"):format(cut[1], frac, cut[2]))
    end
    -- Kolmogorov-Smirnov distance on a sorted subsample of 20000 against the normal cdf
    local s = x:narrow(1, 1, 20000):flatten():tolist()
    table.sort(s)
    local function phi(v) -- Abramowitz & Stegun 26.2.17, |error| < 7.5e-8
      local t = 1 / (1 + 0.2316419 * math.abs(v))
      local d = 0.3989422804014327 * math.exp(-v * v / 2)
      local p = d * t * (0.319381530 + t * (-0.356563782 + t * (1.781477937 + t * (-1.821255978 + t * 1.330274429))))
      return v >= 0 and 1 - p or p
    end
    local dmax = 0
    for i, v in ipairs(s) do dmax = math.max(dmax, math.abs(phi(v) - i / #s), math.abs(phi(v) - (i - 1) / #s)) end
    assert(dmax < 1.63 / math.sqrt(#s), "KS distance " .. dmax) -- the 1% critical value
  end)
  it("is reproducible for a seed, whatever the thread count, and strided normal_ gets the same values", function()
    lt.manual_seed(7)
    local a = lt.randn(100003)
    local threads = lt.get_num_threads()
    lt.set_num_threads(1)
    lt.manual_seed(7)
    local b = lt.randn(100003)
    lt.set_num_threads(threads)
    assert.is_true(a:eq(b):min():item() == 1)
    lt.manual_seed(7)
    local c = lt.randn(100003)
    assert.is_true(a:eq(c):min():item() == 1)
    lt.manual_seed(9)
    local d = lt.randn(3, 5)
    lt.manual_seed(9)
    local e = lt.zeros(5, 3):t():normal_()
    assert.are.same(d:flatten():tolist(), e:contiguous():flatten():tolist())
    assert.is_false(lt.randn(1000):eq(lt.randn(1000)):min():item() == 1)
  end)
  it("scales with normal_(mean, std)", function()
    lt.manual_seed(3)
    local x = lt.empty(200000):normal_(5, 0.5)
    assert(math.abs(x:mean():item() - 5) < 0.01)
    assert(math.abs(x:std():item() - 0.5) < 0.01)
  end)
end)

describe("scatter, scatter_add, index_add, index_fill, masked_select, nonzero", function()
  local I = function(t) return lt.tensor(t, "int64") end
  it("pass gradchecks", function()
    lt.manual_seed(4)
    local idx = I{ { 2, 1 }, { 3, 2 } }
    gradcheck(function(x, s) return x:scatter(2, idx, s) end, { lt.randn(2, 4), lt.randn(2, 3) })
    gradcheck(function(x, s) return x:scatter_add(1, I{ { 1, 2, 1 }, { 1, 1, 2 } }, s) end, { lt.randn(2, 3), lt.randn(2, 3) })
    gradcheck(function(x, s) return x:index_add(2, I{ 3, 1, 3 }, s, { alpha = -0.5 }) end, { lt.randn(2, 4), lt.randn(2, 3) })
    gradcheck(function(x) return x:index_fill(1, I{ 2 }, 0.5) end, { lt.randn(3, 2) })
    local m = lt.rand(1, 4):lt(0.5)
    gradcheck(function(x) return x:masked_select(m) end, { lt.randn(3, 4) })
    gradcheck(function(x) return x:masked_select(lt.ones(2, 3)) end, { lt.randn(1, 3) }) -- x broadcast to the mask
  end)
  it("gives nonzero as [n x dim] int64, 1-based", function()
    local nz = lt.tensor{ { 0, 2, 0 }, { 3, 0, 4 } }:nonzero()
    assert.are.equal("int64", nz:dtype())
    assert.are.same({ 3, 2 }, nz:shape())
    assert.are.same({ 1, 2, 2, 1, 2, 3 }, nz:flatten():tolist())
    assert.are.same({ 0, 1 }, lt.zeros(3):nonzero():shape())
  end)
  it("name the op, the index and the shapes on bad input", function()
    local x = lt.zeros(2, 3)
    assert.matches("scatter: index 4 is out of range for dim 2 of size 3 (indices are 1-based)",
      err_of(function() return x:scatter(2, I{ { 4 } }, 1) end), 1, true)
    assert.matches("scatter: index 0 is out of range (indices are 1-based)",
      err_of(function() return x:scatter(2, I{ { 0 } }, 1) end), 1, true)
    assert.matches("scatter_add: index [3 x 1] is larger than the input in dim 1",
      err_of(function() return x:scatter_add(2, I{ { 1 }, { 1 }, { 1 } }, lt.ones(3, 1)) end), 1, true)
    assert.matches("scatter_add: src must be a tensor, got number",
      err_of(function() return x:scatter_add(2, I{ { 1 } }, 1) end), 1, true)
    assert.matches("scatter: index must be int64, got float32",
      err_of(function() return x:scatter(2, lt.ones(1, 1), 1) end), 1, true)
    assert.matches("index_add: source [2 x 2] must be the input [2 x 3] with dim 1 of the index's size 1",
      err_of(function() return x:index_add(1, I{ 1 }, lt.ones(2, 2)) end), 1, true)
    assert.matches("index_add: unknown option 'beta' (known options: alpha)",
      err_of(function() return x:index_add(1, I{ 1 }, lt.ones(1, 3), { beta = 1 }) end), 1, true)
    assert.matches("index_fill: index must be 1-D, got [1 x 1]",
      err_of(function() return x:index_fill(1, I{ { 1 } }, 0) end), 1, true)
    assert.matches("index_fill: value must be a number, got no value",
      err_of(function() return x:index_fill(1, I{ 1 }) end), 1, true)
    assert.matches("masked_select: shapes [2 x 3] and [4] cannot be broadcast",
      err_of(function() return x:masked_select(lt.ones(4)) end), 1, true)
  end)
end)

describe("addmm, baddbmm, einsum", function()
  it("pass gradchecks", function()
    lt.manual_seed(5)
    gradcheck(function(m, a, b) return lt.addmm(m, a, b, { beta = 0.3, alpha = -2 }) end,
      { lt.randn(1, 4), lt.randn(2, 3), lt.randn(3, 4) })
    gradcheck(function(m, a, b) return lt.baddbmm(m, a, b) end, { lt.randn(2, 2, 3), lt.randn(2, 2, 4), lt.randn(2, 4, 3) })
    gradcheck(function(q, k) return lt.einsum("bhqd,bhkd->bhqk", q, k) end, { lt.randn(1, 2, 3, 2), lt.randn(1, 2, 4, 2) })
    gradcheck(function(a, w, b) return lt.einsum("bi,oij,bj->bo", a, w, b) end,
      { lt.randn(2, 3), lt.randn(2, 3, 2), lt.randn(2, 2) })
    gradcheck(function(a) return lt.einsum("ii->", a) end, { lt.randn(3, 3) })
  end)
  it("does not read M when beta = 0", function()
    local m = lt.full({ 2, 2 }, 0 / 0)
    assert.are.same({ 2, 2, 2, 2 }, lt.addmm(m, lt.ones(2, 1), lt.ones(1, 2) * 2, { beta = 0 }):flatten():tolist())
  end)
  it("takes the implicit output (letters once, in order) and a list of operands", function()
    local a, b = lt.randn(2, 3), lt.randn(3, 4)
    assert.is_true(lt.einsum("ij,jk", a, b):allclose(a:matmul(b)))
    assert.is_true(lt.einsum("ij,jk->ik", { a, b }):allclose(a:matmul(b)))
    assert.is_true(lt.einsum("ba", a):allclose(a:t()))
  end)
  it("names the problem on bad input", function()
    local a = lt.randn(2, 3)
    assert.matches("addmm: expected A [n x k] and B [k x m], got [2 x 3] and [2 x 3]",
      err_of(function() return lt.addmm(lt.zeros(3), a, a) end), 1, true)
    assert.matches("addmm: unknown option 'gamma' (known: alpha, beta)",
      err_of(function() return lt.addmm(lt.zeros(3), a, a:t(), { gamma = 1 }) end), 1, true)
    assert.matches("baddbmm: expected A [b x n x k] and B [b x k x m], got [2 x 3] and [2 x 3]",
      err_of(function() return lt.baddbmm(lt.zeros(3), a, a) end), 1, true)
    assert.matches("einsum: subscript 'ijk' has 3 letters for operand 1 of shape [2 x 3]",
      err_of(function() return lt.einsum("ijk->i", a) end), 1, true)
    assert.matches("einsum: 'j' is size 3 in one operand and 2 in operand 2",
      err_of(function() return lt.einsum("ij,jk->ik", a, a) end), 1, true)
    assert.matches("einsum: the equation 'ij,jk->ik' has 2 operand(s), got 1 tensor(s)",
      err_of(function() return lt.einsum("ij,jk->ik", a) end), 1, true)
    assert.matches("einsum: output letter 'z' is in no operand", err_of(function() return lt.einsum("ij->z", a) end), 1, true)
    assert.matches("einsum: '...' is not a subscript", err_of(function() return lt.einsum("...->", a) end), 1, true)
  end)
end)

describe("F.one_hot, pad, normalize, cosine_similarity, interpolate", function()
  it("pass gradchecks", function()
    lt.manual_seed(6)
    gradcheck(function(x) return F.pad(x, { 1, 2, -1, 1 }, { value = 2 }) end, { lt.randn(2, 3, 4) })
    gradcheck(function(x) return F.pad(x, { 2, 1, 1, 2 }, { mode = "reflect" }) end, { lt.randn(1, 3, 4) })
    gradcheck(function(x) return F.pad(x, { 3, 1 }, { mode = "replicate" }) end, { lt.randn(2, 3) })
    gradcheck(function(x) return F.normalize(x, { p = 2, dim = 1 }) end, { lt.randn(3, 2) })
    gradcheck(function(a, b) return F.cosine_similarity(a, b) end, { lt.randn(3, 4), lt.randn(3, 4) })
    gradcheck(function(x) return F.interpolate(x, { size = { 3, 5 }, mode = "bilinear" }) end, { lt.randn(1, 2, 2, 3) })
    gradcheck(function(x) return F.interpolate(x, { scale_factor = 2 }) end, { lt.randn(1, 1, 2, 2) })
  end)
  it("gives a zero row torch's gradient 1 / eps in normalize (not NaN)", function()
    local x = lt.zeros(2, 3):requires_grad(true)
    F.normalize(x):sum():backward()
    for _, g in ipairs(x.grad:flatten():tolist()) do assert(math.abs(g - 1e12) < 1e6, "grad " .. g) end
  end)
  it("infers one_hot's num_classes from the largest class", function()
    local y = F.one_hot(lt.tensor({ 3, 1 }, "int64"))
    assert.are.equal("int64", y:dtype())
    assert.are.same({ 0, 0, 1, 1, 0, 0 }, y:flatten():tolist())
  end)
  it("names the problem on bad input", function()
    local x = lt.randn(1, 1, 3, 3)
    local I = function(t) return lt.tensor(t, "int64") end
    assert.matches("one_hot: class 0 is out of range 1..3 (classes are 1-based)",
      err_of(function() return F.one_hot(I{ 0, 2 }, 3) end), 1, true)
    assert.matches("one_hot: classes must be int64 (1-based), got float32",
      err_of(function() return F.one_hot(lt.ones(2), 3) end), 1, true)
    assert.matches('pad: mode must be "constant", "reflect" or "replicate", got "circular"',
      err_of(function() return F.pad(x, { 1, 1 }, { mode = "circular" }) end), 1, true)
    assert.matches("pad: unknown option 'fill'", err_of(function() return F.pad(x, { 1, 1 }, { fill = 1 }) end), 1, true)
    assert.matches("pad: reflect padding (3, 0) must be smaller than the size 3 of dim 4",
      err_of(function() return F.pad(x, { 3, 0 }, { mode = "reflect" }) end), 1, true)
    assert.matches("pad: 3 pairs of padding for a 2-dim input [2 x 2]",
      err_of(function() return F.pad(lt.zeros(2, 2), { 1, 1, 1, 1, 1, 1 }) end), 1, true)
    assert.matches("normalize: dim 3 is out of range for a 2-dim tensor",
      err_of(function() return F.normalize(lt.zeros(2, 2), { dim = 3 }) end), 1, true)
    assert.matches("cosine_similarity: shapes [2 x 3] and [4] cannot be broadcast",
      err_of(function() return F.cosine_similarity(lt.zeros(2, 3), lt.zeros(4)) end), 1, true)
    assert.matches("interpolate: give exactly one of size and scale_factor",
      err_of(function() return F.interpolate(x, { mode = "nearest" }) end), 1, true)
    assert.matches("interpolate: mode bilinear takes a [N x C x H x W] input, got [1 x 1 x 3]",
      err_of(function() return F.interpolate(lt.zeros(1, 1, 3), { size = 2, mode = "bilinear" }) end), 1, true)
    assert.matches("interpolate: align_corners is only for the linear modes",
      err_of(function() return F.interpolate(x, { size = 2, align_corners = true }) end), 1, true)
    assert.matches('interpolate: mode must be "nearest", "linear" or "bilinear", got "bicubic"',
      err_of(function() return F.interpolate(x, { size = 2, mode = "bicubic" }) end), 1, true)
  end)
end)

describe("random tensors", function()
  local function counts(t, k)
    local c = {}
    for i = 1, k do c[i] = 0 end
    for _, v in ipairs(t:reshape(-1):flatten():tolist()) do c[v] = c[v] + 1 end
    return c
  end
  -- chi-square statistic of observed counts against expected probabilities
  local function chi2(c, p, n)
    local s = 0
    for i = 1, #p do s = s + (c[i] - n * p[i]) ^ 2 / (n * p[i]) end
    return s
  end
  it("randint is uniform over [low, high), int64, with the given size", function()
    lt.manual_seed(11)
    local x = lt.randint(-2, 3, { 100, 500 })
    assert.are.equal("int64", x:dtype())
    assert.are.same({ 100, 500 }, x:shape())
    assert.are.equal(-2, x:min():item())
    assert.are.equal(2, x:max():item())
    local c = counts(x + 3, 5)
    assert(chi2(c, { 0.2, 0.2, 0.2, 0.2, 0.2 }, 50000) < 18.5, "chi2") -- 4 dof, p = 0.001
    assert.are.same({ 4 }, lt.randint(10, { 4 }):shape())
    assert.is_true(lt.randint(10, { 1000 }):min():item() >= 0)
  end)
  it("multinomial draws 1-based categories with the given weights", function()
    lt.manual_seed(12)
    local p = lt.tensor{ 1, 0, 2, 5 }
    local x = lt.multinomial(p, 40000, { replacement = true })
    assert.are.equal("int64", x:dtype())
    local c = counts(x, 4)
    assert.are.equal(0, c[2])
    assert(chi2({ c[1], c[3], c[4] }, { 1 / 8, 2 / 8, 5 / 8 }, 40000) < 13.8, "chi2") -- 2 dof, p = 0.001
    -- without replacement: distinct categories, the likelier ones first more often
    local rows = lt.tensor{ { 1, 1, 1, 1, 1 }, { 0, 0, 3, 1, 0 } }
    local y = lt.multinomial(rows, 2)
    assert.are.same({ 2, 2 }, y:shape())
    local r1, r2 = y[1]:flatten():tolist(), y[2]:flatten():tolist()
    assert.are_not.equal(r1[1], r1[2])
    table.sort(r2)
    assert.are.same({ 3, 4 }, r2)
    local first3 = 0
    for _ = 1, 2000 do if p:multinomial(1):item() == 4 then first3 = first3 + 1 end end
    assert(math.abs(first3 / 2000 - 5 / 8) < 0.05)
  end)
  it("bernoulli draws 0/1 with probability p", function()
    lt.manual_seed(13)
    local p = lt.full({ 200000 }, 0.3)
    local x = lt.bernoulli(p)
    assert.are.same({ 0, 1 }, { x:min():item(), x:max():item() })
    assert(math.abs(x:mean():item() - 0.3) < 5 * math.sqrt(0.3 * 0.7 / 200000))
    assert.are.same({ 0, 1, 1 }, lt.tensor{ 0, 1, 1 }:bernoulli():flatten():tolist())
  end)
  it("randn_like, rand_like and full_like take the shape (and dtype) of x", function()
    local x = lt.zeros(300, 400)
    lt.manual_seed(14)
    local a = lt.randn_like(x)
    assert.are.same({ 300, 400 }, a:shape())
    assert(math.abs(a:mean():item()) < 0.01 and math.abs(a:std():item() - 1) < 0.01)
    local u = lt.rand_like(x)
    assert(u:min():item() >= 0 and u:max():item() < 1 and math.abs(u:mean():item() - 0.5) < 0.01)
    local f = lt.full_like(lt.zeros({ 2 }, "int64"), 7)
    assert.are.equal("int64", f:dtype())
    assert.are.same({ 7, 7 }, f:flatten():tolist())
    assert.are.equal("float32", lt.full_like(lt.zeros({ 2 }, "int64"), 1.5, "float32"):dtype())
  end)
  it("is reproducible under lt.manual_seed", function()
    local function draw()
      return { lt.randint(0, 100, { 20 }):flatten():tolist(), lt.multinomial(lt.ones(10), 5):flatten():tolist(),
        lt.bernoulli(lt.full({ 20 }, 0.5)):flatten():tolist(), lt.randn_like(lt.zeros(5)):flatten():tolist(),
        lt.rand_like(lt.zeros(5)):flatten():tolist() }
    end
    lt.manual_seed(99)
    local a = draw()
    lt.manual_seed(99)
    assert.are.same(a, draw())
  end)
  it("names the problem on bad input", function()
    assert.matches("randint: expected low < high, got low=3, high=3 (high is exclusive)",
      err_of(function() return lt.randint(3, 3, { 2 }) end), 1, true)
    assert.matches("randint: expected the size as a table, randint(low, high, {size}), got number",
      err_of(function() return lt.randint(0, 3, 2) end), 1, true)
    assert.matches("multinomial: cannot draw 3 samples without replacement from 2 categories with positive probability (row 1)",
      err_of(function() return lt.multinomial(lt.tensor{ 1, 0, 1 }, 3) end), 1, true)
    assert.matches("multinomial: probabilities must be finite and >= 0, got -1 in row 1",
      err_of(function() return lt.multinomial(lt.tensor{ 1, -1 }, 1) end), 1, true)
    assert.matches("multinomial: row 2 has no positive probability",
      err_of(function() return lt.multinomial(lt.tensor{ { 1, 1 }, { 0, 0 } }, 1) end), 1, true)
    assert.matches("multinomial: unknown option 'replace' (known options: replacement)",
      err_of(function() return lt.multinomial(lt.ones(2), 1, { replace = true }) end), 1, true)
    assert.matches("multinomial: probabilities must be 1-D or 2-D, got [1 x 1 x 2]",
      err_of(function() return lt.multinomial(lt.ones(1, 1, 2), 1) end), 1, true)
    assert.matches("bernoulli: probability 1.5 at element 2 is not in [0, 1]",
      err_of(function() return lt.bernoulli(lt.tensor{ 0, 1.5 }) end), 1, true)
    assert.matches("linspace: steps -1 is out of range (expected 0..",
      err_of(function() return lt.linspace(0, 1, -1) end), 1, true)
    assert.matches("full_like: value 1.5 is not an int64 value",
      err_of(function() return lt.full_like(lt.zeros({ 1 }, "int64"), 1.5) end), 1, true)
  end)
end)
