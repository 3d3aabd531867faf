-- tensor_statistics_spec: amax, amin, aminmax, var_mean, std_mean, median, kthvalue, mode, msort and count_nonzero
-- (lua/lutra/tensor/statistics.lua): values, 1-based indices and gradients against PyTorch 1.13
-- (tests/fixtures/statistics.json from gen_statistics.py), finite-difference gradchecks, and bad input.
local lt = require "lutra"
local X = require "tests.helpers.nn_fixtures"
local gradcheck = require "tests.helpers.gradcheck"

local function err_of(f)
  local ok, e = pcall(f)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

local function second(_, b) return b end

local ops = {
  amax_all = lt.amax,
  amax_dims = function(x) return x:amax({ 1, 3 }) end,
  amin_dim_keepdim = function(x) return lt.amin(x, 2, true) end,
  aminmax_min = function(x) return (x:aminmax({ dim = 3 })) end,
  aminmax_max = function(x) return second(lt.aminmax(x, { dim = 3, keepdim = true })) end,
  var_mean_var = function(x) return (x:var_mean(2)) end,
  var_mean_mean = function(x) return second(lt.var_mean(x, 2, true)) end,
  std_mean_std = function(x) return (x:std_mean(3, false, { unbiased = false })) end,
  std_mean_all = function(x) return (lt.std_mean(x)) end,
  median_all = function(x) return x:median() end,
  median_dim_even = function(x) return (x:median(2)) end,
  median_dim_even_idx = function(x) return second(x:median(2)) end,
  median_dim_odd_keepdim = function(x) return (lt.median(x, 2, true)) end,
  median_dim0_idx = function(x) return second(x:median(1)) end,
  kthvalue = function(x) return (x:kthvalue(2)) end,
  kthvalue_idx = function(x) return second(lt.kthvalue(x, 3, 1)) end,
  kthvalue_keepdim = function(x) return (x:kthvalue(4, 2, true)) end,
  mode = function(x) return (x:mode()) end,
  mode_idx = function(x) return second(lt.mode(x)) end,
  mode_dim0_idx = function(x) return second(x:mode(1)) end,
  msort = lt.msort,
  count_nonzero = function(x) return x:count_nonzero(2) end,
  count_nonzero_all = lt.count_nonzero,
}

describe("statistics against PyTorch 1.13 (statistics.json)", function()
  X.describe_cases(it, "statistics.json", ops)
end)

describe("statistics: finite-difference gradients", function()
  local checks = {
    amax = function(x) return x:amax({ 1, 2 }) end,
    amin = function(x) return x:amin(2) end,
    var_mean = function(x) local v, m = x:var_mean(1); return v + m * 2 end,
    std_mean = function(x) local s, m = x:std_mean(2, true); return s * m end,
    median = function(x) return (x:median(2)) end,
    kthvalue = function(x) return (x:kthvalue(2, 1)) end,
    msort = function(x) return x:msort() end,
  }
  for name, f in pairs(checks) do
    it(name, function()
      lt.manual_seed(11)
      assert.is_true(gradcheck(f, { lt.randn(4, 5) }, { eps = 1e-2, rtol = 2e-2, atol = 2e-3 }))
    end)
  end
end)

describe("statistics: bad input", function()
  it("names the function and what is wrong", function()
    assert.matches("kthvalue: k must be an integer in 1..5 for dim 2 of %[3 x 5%], got 6",
      err_of(function() return lt.randn(3, 5):kthvalue(6) end))
    assert.matches("amax: the max of an empty tensor %[0 x 2%] is not defined",
      err_of(function() return lt.zeros(0, 2):amax() end))
    assert.matches("amax: dim 2 is listed twice", err_of(function() return lt.zeros(2, 2):amax({ 2, -1 }) end))
    assert.matches("median: dim 2 of %[2 x 0%] is empty", err_of(function() return lt.zeros(2, 0):median(2) end))
    assert.matches("aminmax: unknown option 'dims'", err_of(function() return lt.zeros(2):aminmax({ dims = 1 }) end))
    assert.matches("bad argument #1 to 'median' %(tensor expected, got number%)", err_of(function() return lt.median(3) end))
  end)
  it("median of nothing is NaN, as torch", function()
    local v = lt.zeros(0):median():item()
    assert.is_true(v ~= v)
  end)
end)

describe("statistics: every error names the function called", function()
  it("aminmax of an empty tensor is aminmax's error, not amin's", function()
    assert.matches("^aminmax: the min of an empty tensor %[0%] is not defined",
      (err_of(function() return lt.zeros(0):aminmax() end):gsub("^[^\n]-:%d+: ", "")))
  end)
end)

