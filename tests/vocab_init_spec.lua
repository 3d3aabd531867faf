-- vocab_init_spec.lua — lt.nn.init.orthogonal_, trunc_normal_, sparse_, dirac_, eye_ and calculate_gain
-- (lua/lutra/nn/initializers.lua), checked structurally (orthogonality, the identity convolution, zeros per
-- column, bounds) and statistically (truncated-normal moments from the closed form), and their errors.
local lt = require "lutra"
local init = lt.nn.init

local function errmsg(fn, ...)
  local ok, e = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

local function max_abs_diff(a, b) return (a - b):abs():max():item() end
local function flat(t) return t:contiguous():view(-1):tolist() end

describe("lt.nn.init.orthogonal_", function()
  for _, shape in ipairs { { 6, 6 }, { 4, 9 }, { 10, 3 }, { 4, 2, 3, 3 } } do
    it("gives orthonormal rows or columns for " .. table.concat(shape, " x "), function()
      lt.manual_seed(1)
      local w = lt.param(lt.zeros(unpack(shape)))
      assert.equals(w, init.orthogonal_(w))
      local rows = shape[1]
      local m = w:view(rows, -1)
      local cols = m:size(2)
      local gram = rows <= cols and m:matmul(m:t()) or m:t():matmul(m)
      assert.is_true(max_abs_diff(gram, lt.eye(math.min(rows, cols))) < 1e-5)
      assert.is_true(w:is_leaf() and w:requires_grad())
    end)
  end

  it("scales by the gain and draws from lt's RNG (reproducible with manual_seed)", function()
    lt.manual_seed(2)
    local a = init.orthogonal_(lt.zeros(5, 5), 3)
    lt.manual_seed(2)
    local b = init.orthogonal_(lt.zeros(5, 5))
    assert.is_true(max_abs_diff(a, b * 3) < 1e-6)
    assert.is_true(max_abs_diff(a:matmul(a:t()), lt.eye(5) * 9) < 1e-4)
    lt.manual_seed(3)
    assert.is_true(max_abs_diff(init.orthogonal_(lt.zeros(5, 5)), b) > 1e-2)
  end)

  it("refuses a 1-D tensor", function()
    assert.matches("orthogonal_: only tensors with 2 or more dimensions are supported, got %[3%]",
      errmsg(init.orthogonal_, lt.zeros(3)))
  end)
end)

describe("lt.nn.init.trunc_normal_", function()
  -- mean and variance of normal(mean, std) truncated to [a, b], from the closed form (computed with Python)
  local CASES = {
    { 0, 1, -2, 2, 0.0, 0.7737413035499232 },
    { 0.5, 2, -1, 3, 0.8549027639677396, 1.1533678400475518 },
    { 0, 0.02, -0.04, 0.04, 0.0, 0.0003094965214199693 },
  }
  for _, cs in ipairs(CASES) do
    it(string.format("stays in [%g, %g] with the truncated moments (mean %g, std %g)", cs[3], cs[4], cs[1], cs[2]),
      function()
        lt.manual_seed(4)
        local n = 200000
        local w = init.trunc_normal_(lt.zeros(400, 500), cs[1], cs[2], cs[3], cs[4])
        assert.is_true(w:min():item() >= cs[3] and w:max():item() <= cs[4])
        local mean = w:mean():item()
        local var = ((w - mean) * (w - mean)):sum():item() / (n - 1)
        -- 5 standard errors of the sample mean; the sample variance within 2%
        assert.is_true(math.abs(mean - cs[5]) < 5 * math.sqrt(cs[6] / n), "mean " .. mean)
        assert.is_true(math.abs(var / cs[6] - 1) < 0.02, "variance " .. var)
      end)
  end

  it("has PyTorch's defaults (mean 0, std 1, a = -2, b = 2) and checks its arguments", function()
    lt.manual_seed(5)
    local w = init.trunc_normal_(lt.zeros(1000))
    assert.is_true(w:min():item() >= -2 and w:max():item() <= 2 and w:abs():max():item() > 1.5)
    assert.matches("trunc_normal_: std must be > 0, got 0", errmsg(init.trunc_normal_, lt.zeros(3), 0, 0))
    assert.matches("trunc_normal_: the bounds need a < b, got a = 1, b = %-1",
      errmsg(init.trunc_normal_, lt.zeros(3), 0, 1, 1, -1))
    assert.matches("trunc_normal_: mean must be a number, got x", errmsg(init.trunc_normal_, lt.zeros(3), "x"))
  end)
end)

describe("lt.nn.init.sparse_", function()
  it("zeroes ceil(sparsity * rows) entries of every column and draws the rest from normal(0, std)", function()
    lt.manual_seed(6)
    local w = init.sparse_(lt.zeros(10, 300), 0.25, 0.5)
    local zeros_per_col = flat(w:eq(0):sum(1))
    for c = 1, 300 do assert.equals(3, zeros_per_col[c]) end
    local nz = lt.where(w:ne(0), w, w * 0)
    local n = 7 * 300
    local var = (nz * nz):sum():item() / n
    assert.is_true(math.abs(var / 0.25 - 1) < 0.1, "variance of the non-zeros " .. var)
    -- the zero rows differ between columns (chosen at random)
    local z = flat(w:eq(0))
    local differ = false
    for r = 0, 9 do if z[r * 300 + 1] ~= z[r * 300 + 2] or z[r * 300 + 1] ~= z[r * 300 + 3] then differ = true end end
    assert.is_true(differ)
  end)

  it("refuses tensors that are not 2-D and bad sparsities", function()
    assert.matches("sparse_: only tensors with 2 dimensions are supported, got %[2 x 2 x 2%]",
      errmsg(init.sparse_, lt.zeros(2, 2, 2), 0.1))
    assert.matches("sparse_: sparsity must be a number in %[0, 1%], got 1.5", errmsg(init.sparse_, lt.zeros(2, 2), 1.5))
  end)
end)

describe("lt.nn.init.dirac_ and eye_", function()
  it("makes a convolution that passes its input through (same channels, padding k//2)", function()
    lt.manual_seed(7)
    local w = init.dirac_(lt.randn(3, 3, 3, 3))
    local x = lt.randn(2, 3, 5, 5)
    assert.is_true(max_abs_diff(lt.F.conv2d(x, w, nil, { padding = 1 }), x) < 1e-6)
    assert.equals(3, w:sum():item())
  end)

  it("keeps the identity per group and for more outputs than inputs", function()
    local w = init.dirac_(lt.zeros(4, 2, 3), 2) -- two groups of 2 outputs over 2 inputs, kernel 3
    local v = flat(w)
    for o = 1, 4 do
      for i = 1, 2 do
        for k = 1, 3 do
          local want = (k == 2 and ((o - 1) % 2) + 1 == i) and 1 or 0
          assert.equals(want, v[((o - 1) * 2 + (i - 1)) * 3 + k])
        end
      end
    end
    local w5 = init.dirac_(lt.ones(2, 3, 3, 3, 3))
    assert.equals(2, w5:sum():item())
    assert.equals(1, w5[2][2][2][2][2]:item())
  end)

  it("eye_ writes the identity into rectangular matrices", function()
    assert.same({ 1, 0, 0, 0, 1, 0 }, flat(init.eye_(lt.ones(2, 3))))
    assert.same({ 1, 0, 0, 1, 0, 0 }, flat(init.eye_(lt.ones(3, 2))))
  end)

  it("refuse wrong dims and groups", function()
    assert.matches("dirac_: only tensors with 3, 4, or 5 dimensions are supported, got %[2 x 2%]",
      errmsg(init.dirac_, lt.zeros(2, 2)))
    assert.matches("dirac_: dim 1 %(3%) must be divisible by groups %(2%)", errmsg(init.dirac_, lt.zeros(3, 1, 3), 2))
    assert.matches("eye_: only tensors with 2 dimensions are supported, got %[2 x 2 x 2%]",
      errmsg(init.eye_, lt.zeros(2, 2, 2)))
  end)
end)

describe("lt.nn.init.calculate_gain", function()
  it("returns PyTorch's gains", function()
    for _, n in ipairs { "linear", "conv1d", "conv2d", "conv3d", "conv_transpose2d", "sigmoid" } do
      assert.equals(1, init.calculate_gain(n))
    end
    assert.equals(5 / 3, init.calculate_gain("tanh"))
    assert.equals(math.sqrt(2), init.calculate_gain("relu"))
    assert.equals(0.75, init.calculate_gain("selu"))
    assert.equals(math.sqrt(2 / (1 + 0.01 ^ 2)), init.calculate_gain("leaky_relu"))
    assert.equals(math.sqrt(2 / (1 + 0.2 ^ 2)), init.calculate_gain("leaky_relu", 0.2))
  end)

  it("refuses unknown nonlinearities and bad slopes", function()
    assert.matches("init: unsupported nonlinearity 'gelu'", errmsg(init.calculate_gain, "gelu"))
    assert.matches("init: unsupported nonlinearity 'convolution'", errmsg(init.calculate_gain, "convolution"))
    assert.matches("init: negative_slope x is not a valid number",
      errmsg(init.calculate_gain, "leaky_relu", "x"))
  end)
end)
