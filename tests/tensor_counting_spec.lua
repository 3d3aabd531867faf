-- tensor_counting_spec: bincount, histc, searchsorted, bucketize, unique, dist and cdist
-- (lua/lutra/tensor/counting.lua): values, 1-based positions and the distances' gradients against PyTorch 1.13
-- (tests/fixtures/counting.json from gen_counting.py), finite-difference gradchecks of the distances, bad input.
local lt = require "lutra"
local X = require "tests.helpers.nn_fixtures"
local gradcheck = require "tests.helpers.gradcheck"
local bounded_err = require "tests.helpers.bounded_err"

local function err_of(f)
  local ok, e = pcall(f)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

-- several results, flattened and joined as float32 (as the generator's joined)
local function joined(...)
  local flat = {}
  for i, t in ipairs { ... } do flat[i] = t:float():reshape(-1) end
  return lt.cat(flat, 1)
end

local all = { return_inverse = true, return_counts = true }
local ops = {
  bincount = lt.bincount,
  bincount_weights_minlength = function(x, w) return x:bincount(w, 9) end,
  histc = function(x) return x:histc(7) end,
  histc_range = function(x) return lt.histc(x, 5, -1, 1) end,
  searchsorted = lt.searchsorted,
  searchsorted_right = function(s, v) return lt.searchsorted(s, v, { right = true }) end,
  searchsorted_batched = function(s, v) return lt.searchsorted(s, v, { side = "right" }) end,
  bucketize = function(v, b) return v:bucketize(b) end,
  bucketize_right = function(v, b) return lt.bucketize(v, b, { right = true }) end,
  unique = function(x) return x:unique() end,
  unique_inverse_counts = function(x) return joined(lt.unique(x, all)) end,
  unique_float_inverse_counts = function(x) return joined(x:unique(all)) end,
  unique_dim = function(x) return joined(lt.unique(x, { dim = 1, return_inverse = true, return_counts = true })) end,
  dist = lt.dist,
  dist_p1_broadcast = function(a, b) return a:dist(b, 1) end,
  dist_p3 = function(a, b) return lt.dist(a, b, 3) end,
  dist_inf = function(a, b) return lt.dist(a, b, math.huge) end,
  cdist = lt.cdist,
  cdist_p1 = function(a, b) return a:cdist(b, 1) end,
  cdist_p3 = function(a, b) return lt.cdist(a, b, 3) end,
}

describe("counting against PyTorch 1.13 (counting.json)", function()
  X.describe_cases(it, "counting.json", ops)
end)

describe("distances: finite-difference gradients", function()
  local r = lt.randn
  for name, f in pairs {
    dist = function(a, b) return lt.dist(a, b:sum(1, true)) end,
    dist_p3 = function(a, b) return lt.dist(a, b:sum(1, true), 3) end,
    cdist = function(a, b) return lt.cdist(a, b) end,
    cdist_p1_5 = function(a, b) return lt.cdist(a, b, 1.5) end,
  } do
    it(name, function()
      lt.manual_seed(9)
      assert.is_true(gradcheck(f, { r(3, 4), r(2, 4) + 3 }, { eps = 1e-2, rtol = 2e-2, atol = 2e-3 }))
    end)
  end
end)

describe("counting: bad input", function()
  local r = lt.randn
  it("names the function and what is wrong", function()
    assert.matches("bincount: expected a 1%-D int64 tensor, got float32 %[3%]", err_of(function() return lt.bincount(r(3)) end))
    assert.matches("bincount: the values must be non%-negative, got %-1",
      err_of(function() return lt.bincount(lt.tensor({ 1, -1 }, "int64")) end))
    assert.matches("histc: max 0 must not be less than min 1", err_of(function() return lt.histc(r(3), 4, 1, 0) end))
    assert.matches("searchsorted: the sorted sequence %[2 x 3%] and the values %[3 x 1%] must have the same leading dims",
      err_of(function() return lt.searchsorted(r(2, 3), r(3, 1)) end))
    assert.matches("searchsorted: options 'side' and 'right' disagree",
      err_of(function() return lt.searchsorted(r(3), r(2), { side = "left", right = true }) end))
    assert.matches("bucketize: boundaries must be 1%-D, got %[2 x 2%]",
      err_of(function() return lt.bucketize(r(3), r(2, 2)) end))
    assert.matches("unique: unknown option 'return_index'",
      err_of(function() return lt.unique(r(3), { return_index = true }) end))
    assert.matches("cdist: expected x1 %[... x P x M%] and x2 %[... x R x M%] with the same batch dims, "
      .. "got %[3 x 4%] and %[2 x 3%]",
      err_of(function() return lt.cdist(r(3, 4), r(2, 3)) end))
    assert.matches("dist: p must be a number >= 0, got %-1", err_of(function() return lt.dist(r(3), r(3), -1) end))
  end)
  it("unique keeps int64 values exact", function()
    local v = lt.unique(lt.tensor({ 16777217, 16777216, 16777217 }, "int64"))
    assert.are.same({ 16777216, 16777217 }, v:tolist())
  end)
end)

-- an error message without its "file:line: " position
local function msg(e) return (e:gsub("^[^\n]-:%d+: ", "")) end

describe("counting: NaN and huge sizes", function()
  it("histc leaves NaNs out of a given range, and refuses a data range that is NaN as torch", function()
    assert.are.same({ 0, 1, 1, 0 }, lt.histc(lt.tensor({ 0 / 0, 1, 2 }), 4, 0, 3):tolist())
    assert.matches("^histc: range of %[%-?nan, %-?nan%] is not finite",
      msg(err_of(function() return lt.histc(lt.tensor({ 0 / 0, 1, 2 }), 4) end)))
    assert.matches("^histc: range of %[1, inf%] is not finite",
      msg(err_of(function() return lt.histc(lt.tensor({ math.huge, 1, 2 }), 4) end)))
  end)
  it("a huge bins or minlength is refused by the core's size checks, named", function()
    assert.matches("^histc: bins 4%.6116860184274e%+18: zeros: ", msg(bounded_err(lt.histc, lt.randn(3), 2 ^ 62)))
    assert.matches("^bincount: zeros: ", msg(bounded_err(lt.bincount, lt.tensor({ 1 }, "int64"), nil, 2 ^ 62)))
  end)
end)

