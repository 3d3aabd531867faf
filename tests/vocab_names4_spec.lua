-- vocab_names4_spec.lua — index_copy / index_copy_, index_put / index_put_ (accumulate) against torch 1.13's
-- values and gradients (tests/fixtures/vocab_names4.json, from tests/fixtures/gen_vocab_names4.py), and lt.normal's
-- tensor forms and lt.poisson: shapes, dtypes, seeding, the distribution's moments and the errors.
local lt = require "lutra"
local cjson = require "cjson"

local fh = assert(io.open("tests/fixtures/vocab_names4.json", "rb"))
local fx = cjson.decode(fh:read("*a"))
fh:close()

local function tensor_of(o, dtype) return lt.tensor(o.data, dtype):reshape(o.shape) end
local function index_of(o) return lt.tensor(o.data, "int64"):reshape(o.shape) end
local function same(what, got, ref)
  assert.are.same(ref.shape, got:shape(), what .. ": shape")
  local g = got:flatten():tolist()
  for i, r in ipairs(ref.data) do
    if math.abs(g[i] - r) > 1e-6 then error(string.format("%s: element %d is %.9g, torch %.9g", what, i, g[i], r), 2) end
  end
end

describe("index_copy and index_put, as torch 1.13", function()
  for n, case in ipairs(fx.cases) do
    it(string.format("case %d: %s values and gradients", n, case.op), function()
      local x = tensor_of(case.x):requires_grad(true)
      local out, other
      if case.op == "index_copy" then
        other = tensor_of(case.source):requires_grad(true)
        out = x:index_copy(case.dim, index_of(case.index), other)
      else
        other = tensor_of(case.values):requires_grad(true)
        local idx = {}
        for i, o in ipairs(case.indices) do idx[i] = index_of(o) end
        out = x:index_put(idx, other, case.accumulate)
      end
      same("out", out, case.out)
      out:backward(tensor_of(case.grad_out))
      same("grad x", x.grad, case.grad_x)
      same("grad " .. (case.op == "index_copy" and "source" or "values"), other.grad,
        case.op == "index_copy" and case.grad_source or case.grad_values)
      -- the in-place forms write the same values into x and return it
      local y = tensor_of(case.x)
      local r = case.op == "index_copy" and y:index_copy_(case.dim, index_of(case.index), tensor_of(case.source))
        or y:index_put_((function()
          local idx = {}
          for i, o in ipairs(case.indices) do idx[i] = index_of(o) end
          return idx
        end)(), tensor_of(case.values), case.accumulate)
      assert.are.equal(y, r)
      same("in place", y, case.out)
    end)
  end

  it("is also lt.index_copy / lt.index_put, and index_put takes a number as values", function()
    local x = lt.zeros(2, 3)
    same("lt.index_copy", lt.index_copy(x, 2, lt.tensor({ 3 }, "int64"), lt.ones(2, 1)),
      { shape = { 2, 3 }, data = { 0, 0, 1, 0, 0, 1 } })
    same("number", lt.index_put(x, { lt.tensor({ 2 }, "int64"), lt.tensor({ 1, 3 }, "int64") }, 7),
      { shape = { 2, 3 }, data = { 0, 0, 0, 7, 0, 7 } })
  end)

  it("names the op, the shapes and the value in its errors", function()
    local x = lt.zeros(3, 4)
    local function err(f, ...)
      local ok, e = pcall(f, ...)
      assert.is_false(ok)
      return e
    end
    local i2 = lt.tensor({ 1, 2 }, "int64")
    assert.truthy(err(x.index_copy, x, 1, lt.tensor({ 1, 9 }, "int64"), lt.ones(2, 4)):find("index_copy: scatter: index 9 is out of range for dim 1 of size 3", 1, true))
    assert.truthy(err(x.index_copy, x, 1, i2, lt.ones(3, 4)):find("index_copy: 2 indices for source [3 x 4] along dim 1", 1, true))
    assert.truthy(err(x.index_copy, x, 1, i2, lt.ones(2, 5)):find("index_copy: source [2 x 5] and the input [3 x 4] must have the same sizes outside dim 1", 1, true))
    assert.truthy(err(x.index_copy, x, 1, lt.tensor({ 1, 2 }), lt.ones(2, 4)):find("index_copy: index must be an int64 tensor (1-based), got float32", 1, true))
    assert.truthy(err(x.index_copy, x, 3, i2, lt.ones(2, 4)):find("index_copy: dim 3 out of range", 1, true))
    assert.truthy(err(x.index_put, x, { lt.tensor({ 4 }, "int64") }, lt.ones(1, 4)):find("index_put: index 4 is out of range for dim 1 of size 3 (indices are 1-based)", 1, true))
    assert.truthy(err(x.index_put, x, { lt.tensor({ 0 }, "int64") }, lt.ones(1, 4)):find("index_put: index 0 is out of range for dim 1 of size 3", 1, true))
    assert.truthy(err(x.index_put, x, lt.tensor({ 1 }, "int64"), lt.ones(4)):find("index_put: indices must be a list of int64 tensors, one per indexed dim, got a tensor (wrap it in a table: {index})", 1, true))
    assert.truthy(err(x.index_put, x, { i2, lt.tensor({ 1, 2, 3 }, "int64") }, 1):find("index_put: the indices [2], [3] cannot be broadcast together", 1, true))
    assert.truthy(err(x.index_put, x, { i2, i2, i2 }, 1):find("index_put: 3 index tensors for the input [3 x 4] of 2 dims", 1, true))
    assert.truthy(err(x.index_put, x, { i2 }, lt.ones(2, 4, "float64")):find("index_put: the input is float32 and values is float64: both must have the same dtype", 1, true))
    assert.truthy(err(x.index_put, x, { i2 }, lt.ones(2, 4), 1):find("index_put: accumulate must be a boolean, got number", 1, true))
  end)
end)

describe("lt.normal with tensors, lt.poisson", function()
  it("draws normal(mean_t, std), normal(mean, std_t), normal(mean_t, std_t) with their shapes and moments", function()
    lt.manual_seed(3)
    local mean = lt.full({ 20000 }, 2.0)
    local a = lt.normal(mean, 0.5)
    assert.are.same({ 20000 }, a:shape())
    assert.is_true(math.abs(a:mean():item() - 2) < 0.02 and math.abs(a:std():item() - 0.5) < 0.02)
    local b = lt.normal(-1, lt.full({ 100, 200 }, 3.0))
    assert.are.same({ 100, 200 }, b:shape())
    assert.is_true(math.abs(b:mean():item() + 1) < 0.1 and math.abs(b:std():item() - 3) < 0.1)
    local c = lt.normal(lt.tensor({ { -100 }, { 100 } }), lt.tensor({ 0, 0, 0 })) -- std 0: the mean exactly
    same("std 0", c, { shape = { 2, 3 }, data = { -100, -100, -100, 100, 100, 100 } })
    assert.are.same({ 3 }, lt.normal(0, 1, { 3 }):shape())
    -- the dtypes: mean's when it is a tensor (torch 1.13's normal(float32, float64) is float32), else std's
    assert.are.equal(fx.stats.normal_mean_std_dtype:gsub("torch%.", ""), lt.normal(lt.zeros(2), lt.ones(2, "float64")):dtype())
    assert.are.equal("float64", lt.normal(0, lt.ones(2, "float64")):dtype())
    assert.are.equal("float64", lt.normal(lt.zeros(2, "float64")):dtype())
    assert.are.equal("float64", lt.normal(0, 1, { 2 }, "float64"):dtype())
    -- seeded by lt.manual_seed
    lt.manual_seed(7)
    local d1 = lt.normal(lt.zeros(5), 1):tolist()
    lt.manual_seed(7)
    assert.are.same(d1, lt.normal(lt.zeros(5), 1):tolist())
    -- no gradient (PyTorch's is zero)
    local m = lt.zeros(3):requires_grad(true)
    assert.is_false(lt.normal(m, 1):requires_grad())
  end)

  it("refuses a negative std and int64 tensors, naming them", function()
    local ok, e = pcall(lt.normal, lt.zeros(2), -1)
    assert.truthy(e:find("normal: std must be >= 0, got -1", 1, true))
    ok, e = pcall(lt.normal, 0, lt.tensor({ 1, -2 }))
    assert.truthy(e:find("normal: every element of std must be >= 0, got -2", 1, true))
    ok, e = pcall(lt.normal, lt.zeros(2, "int64"), 1)
    assert.truthy(e:find("normal: mean must be float32 or float64, got int64", 1, true))
    ok, e = pcall(lt.normal, 0, 1)
    assert.truthy(e:find("normal: with numbers mean and std, the size must be a table", 1, true))
    ok, e = pcall(lt.normal, lt.zeros(2), 1, { 2 })
    assert.is_false(ok)
    assert.truthy(e:find("normal: size is only for numbers mean and std", 1, true))
  end)

  it("draws Poisson counts with the rates' means and variances, in their dtype, seeded", function()
    lt.manual_seed(11)
    for _, rate in ipairs({ 0.3, 4, 25, 400 }) do
      local s = lt.poisson(lt.full({ 20000 }, rate, "float64"))
      assert.are.equal("float64", s:dtype())
      local m, v = s:mean():item(), s:var():item()
      assert(math.abs(m - rate) < 4 * math.sqrt(rate / 20000) + 1e-9, string.format("rate %g: mean %g", rate, m))
      assert(math.abs(v / rate - 1) < 0.06, string.format("rate %g: variance %g", rate, v))
      for _, k in ipairs(s:tolist()) do assert(k == math.floor(k), k) end -- counts
    end
    assert.are.equal("float32", lt.poisson(lt.ones(2)):dtype())
    same("rate 0", lt.poisson(lt.zeros(3)), { shape = { 3 }, data = { 0, 0, 0 } })
    lt.manual_seed(5)
    local a = lt.poisson(lt.full({ 50 }, 30)):tolist()
    lt.manual_seed(5)
    assert.are.same(a, lt.poisson(lt.full({ 50 }, 30)):tolist())
  end)

  it("refuses negative, NaN and infinite rates and int64, naming the element", function()
    local ok, e = pcall(lt.poisson, lt.tensor({ 1, -1 }))
    assert.is_false(ok)
    assert.truthy(e:find("poisson: rates must be finite and >= 0, got -1 at element 2", 1, true), e)
    ok, e = pcall(lt.poisson, lt.tensor({ 0 / 0 }))
    assert.truthy(e:find("poisson: rates must be finite and >= 0, got NaN at element 1", 1, true), e)
    ok, e = pcall(lt.poisson, lt.tensor({ 1 }, "int64"))
    assert.truthy(e:find("poisson: rates must be float32 or float64, got int64", 1, true), e)
  end)
end)
