-- tensor_pointwise_spec: nan_to_num, lerp, hypot, atan2/arctan2, logaddexp, xlogy, isclose, equal and diff
-- (lua/lutra/tensor/pointwise.lua): values and gradients against PyTorch 1.13 (tests/fixtures/pointwise.json from
-- gen_statistics.py), finite-difference gradchecks, and bad input.
local lt = require "lutra"
local X = require "tests.helpers.nn_fixtures"
local gradcheck = require "tests.helpers.gradcheck"

local function err_of(f)
  local ok, e = pcall(f)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

local ops = {
  nan_to_num = function(x) return x:nan_to_num() end,
  nan_to_num_values = function(x) return lt.nan_to_num(x, 1, 100, -50) end,
  lerp_scalar = function(a, b) return a:lerp(b, 0.3) end,
  lerp_tensor = lt.lerp,
  hypot = lt.hypot,
  atan2 = lt.atan2,
  arctan2_broadcast_edges = function(y, x) return y:arctan2(x) end,
  atan2_axes = function(y, x) return y:atan2(x) end,
  logaddexp = function(a, b) return a:logaddexp(b) end,
  logaddexp_inf = lt.logaddexp,
  xlogy = lt.xlogy,
  xlogy_zeros = function(x, y) return x:xlogy(y) end,
  xlogy_scalar = function(y) return lt.xlogy(2, y) end,
  isclose = lt.isclose,
  isclose_tol_nan = function(a, b) return a:isclose(b, 1e-3, 1e-6, true) end,
  diff = function(x) return x:diff() end,
  diff_n2_dim0 = function(x) return lt.diff(x, 2, 1) end,
  diff_prepend_append = function(x, p, a) return x:diff(1, 2, p, a) end,
}

describe("pointwise against PyTorch 1.13 (pointwise.json)", function()
  X.describe_cases(it, "pointwise.json", ops)
end)

describe("pointwise: finite-difference gradients", function()
  local r = lt.randn
  local checks = {
    nan_to_num = { function(x) return x:nan_to_num() end, { r(3, 4) } },
    lerp = { lt.lerp, { r(3, 4), r(3, 4), lt.rand(3, 4) } },
    hypot = { lt.hypot, { r(3, 4), r(4) } },
    logaddexp = { lt.logaddexp, { r(3, 4), r(3, 4) } },
    atan2 = { lt.atan2, { r(3, 4), r(3, 4) } },
    xlogy = { lt.xlogy, { r(3, 4), lt.rand(3, 4) + 0.5 } },
    diff = { function(x, p) return x:diff(2, 1, p) end, { r(4, 3), r(1, 3) } },
  }
  for name, c in pairs(checks) do
    it(name, function()
      lt.manual_seed(5)
      assert.is_true(gradcheck(c[1], c[2], { eps = 1e-2, rtol = 2e-2, atol = 2e-3 }))
    end)
  end
end)

describe("pointwise: equal and bad input", function()
  it("equal compares shapes and elements", function()
    assert.is_true(lt.equal(lt.ones(2, 3), lt.ones(2, 3)))
    assert.is_false(lt.equal(lt.ones(2, 3), lt.ones(3, 2)))
    assert.is_false(lt.ones(2):equal(lt.tensor{1, 2}))
    assert.is_false(lt.equal(lt.tensor{0 / 0}, lt.tensor{0 / 0}))
  end)
  it("names the function and what is wrong", function()
    assert.matches("lerp: sub: shapes %[3%] and %[2%] cannot be broadcast",
      err_of(function() return lt.lerp(lt.ones(2), lt.ones(3), 0.5) end))
    assert.matches("bad argument #3 to 'lerp' %(tensor or number expected, got string%)",
      err_of(function() return lt.lerp(lt.ones(2), lt.ones(2), "a") end))
    assert.matches("diff: n must be a non%-negative integer, got %-1", err_of(function() return lt.ones(3):diff(-1) end))
    assert.matches("diff: expected at least 1 dim", err_of(function() return lt.tensor(1):diff() end))
    assert.matches("bad argument #2 to 'hypot' %(tensor expected, got nil%)",
      err_of(function() return lt.hypot(lt.ones(2)) end))
    assert.are.equal("[2 x 0]", lt.ones(2, 1):diff():shape_str())
  end)
end)

describe("pointwise: nan_to_num of other dtypes", function()
  it("int64 (no NaN, no infinity) comes back as a copy", function()
    local x = lt.tensor({ 1, -2, 3 }, "int64")
    local y = x:nan_to_num()
    assert.are.equal("int64", y:dtype())
    assert.are.same({ 1, -2, 3 }, y:tolist())
    y:fill_(0)
    assert.are.same({ 1, -2, 3 }, x:tolist())
  end)
  it("float64: float64's largest values, or an error naming nan_to_num while the core lacks an op", function()
    local ok, y = pcall(lt.nan_to_num, lt.tensor({ 0 / 0, math.huge, -math.huge, 1 }, "float64"))
    if ok then
      assert.are.same({ 0, 1.7976931348623157e308, -1.7976931348623157e308, 1 }, y:tolist())
    else
      assert.matches("^nan_to_num: ", (tostring(y):gsub("^[^\n]-:%d+: ", "")))
    end
  end)
end)

