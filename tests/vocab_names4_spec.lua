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

-- f(...) fails with a message containing msg
local function expect(msg, f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok)
  assert(tostring(e):find(msg, 1, true), tostring(e))
end

describe("index_copy and index_put, as torch 1.13", function()
  -- the fixture's values are quarters, exact in float32 and float64: both dtypes compare with the same numbers
  for _, dt in ipairs({ "float32", "float64" }) do
  for n, case in ipairs(fx.cases) do
    it(string.format("case %d: %s %s values and gradients", n, dt, case.op), function()
      local x = tensor_of(case.x, dt):requires_grad(true)
      local out, other
      if case.op == "index_copy" then
        other = tensor_of(case.source, dt):requires_grad(true)
        out = x:index_copy(case.dim, index_of(case.index), other)
      else
        other = tensor_of(case.values, dt):requires_grad(true)
        local idx = {}
        for i, o in ipairs(case.indices) do idx[i] = index_of(o) end
        out = x:index_put(idx, other, case.accumulate)
      end
      assert.are.equal(dt, out:dtype())
      same("out", out, case.out)
      out:backward(tensor_of(case.grad_out, dt))
      same("grad x", x.grad, case.grad_x)
      same("grad " .. (case.op == "index_copy" and "source" or "values"), other.grad,
        case.op == "index_copy" and case.grad_source or case.grad_values)
      -- the in-place forms write the same values into x and return it
      local y = tensor_of(case.x, dt)
      local r = case.op == "index_copy" and y:index_copy_(case.dim, index_of(case.index), tensor_of(case.source, dt))
        or y:index_put_((function()
          local idx = {}
          for i, o in ipairs(case.indices) do idx[i] = index_of(o) end
          return idx
        end)(), tensor_of(case.values, dt), case.accumulate)
      assert.are.equal(y, r)
      same("in place", y, case.out)
    end)
  end
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
    local i2 = lt.tensor({ 1, 2 }, "int64")
    expect("index_copy: scatter: index 9 is out of range for dim 1 of size 3",
      x.index_copy, x, 1, lt.tensor({ 1, 9 }, "int64"), lt.ones(2, 4))
    expect("index_copy: 2 indices for source [3 x 4] along dim 1",
      x.index_copy, x, 1, i2, lt.ones(3, 4))
    expect("index_copy: source [2 x 5] and the input [3 x 4] must have the same sizes outside dim 1",
      x.index_copy, x, 1, i2, lt.ones(2, 5))
    expect("index_copy: index must be an int64 tensor (1-based), got float32",
      x.index_copy, x, 1, lt.tensor({ 1, 2 }), lt.ones(2, 4))
    expect("index_copy: dim 3 out of range",
      x.index_copy, x, 3, i2, lt.ones(2, 4))
    expect("index_put: index 4 is out of range for dim 1 of size 3 (indices are 1-based)",
      x.index_put, x, { lt.tensor({ 4 }, "int64") }, lt.ones(1, 4))
    expect("index_put: index 0 is out of range for dim 1 of size 3",
      x.index_put, x, { lt.tensor({ 0 }, "int64") }, lt.ones(1, 4))
    expect("index_put: indices must be a list of int64 tensors, one per indexed dim, got a tensor (wrap it in a table: {index})",
      x.index_put, x, lt.tensor({ 1 }, "int64"), lt.ones(4))
    expect("index_put: the indices [2], [3] cannot be broadcast together",
      x.index_put, x, { i2, lt.tensor({ 1, 2, 3 }, "int64") }, 1)
    expect("index_put: 3 index tensors for the input [3 x 4] of 2 dims",
      x.index_put, x, { i2, i2, i2 }, 1)
    expect("index_put: the input is float32 and values is float64: both must have the same dtype",
      x.index_put, x, { i2 }, lt.ones(2, 4, "float64"))
    expect("index_put: accumulate must be a boolean, got number",
      x.index_put, x, { i2 }, lt.ones(2, 4), 1)
    local xi = lt.zeros(3, 4):long()
    for _, v in ipairs { 0.5, 1 / 0, 2 ^ 63 } do -- named by the op, not by the lt.full it makes the value with
      expect(("index_put_: value %.14g is not an int64 value (the tensor is int64)"):format(v), xi.index_put_, xi, { i2 }, v)
    end
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
    expect("normal: std must be >= 0, got -1", lt.normal, lt.zeros(2), -1)
    expect("normal: every element of std must be >= 0, got -2", lt.normal, 0, lt.tensor({ 1, -2 }))
    expect("normal: mean must be float32 or float64, got int64", lt.normal, lt.zeros(2, "int64"), 1)
    expect("normal: with numbers mean and std, the size must be a table", lt.normal, 0, 1)
    expect("normal: size is only for numbers mean and std", lt.normal, lt.zeros(2), 1, { 2 })
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
    expect("poisson: rates must be finite and >= 0, got -1 at element 2", lt.poisson, lt.tensor({ 1, -1 }))
    expect("poisson: rates must be finite and >= 0, got NaN at element 1", lt.poisson, lt.tensor({ 0 / 0 }))
    expect("poisson: rates must be float32 or float64, got int64", lt.poisson, lt.tensor({ 1 }, "int64"))
  end)
end)

describe("scatter_reduce, as torch 1.13", function()
  -- float32 to 1e-6 relative, float64 to 1e-12 (relative where magnitudes are large)
  local function close(what, got, ref, dtype)
    assert.are.equal(dtype, got:dtype(), what .. ": dtype")
    assert.are.same(ref.shape, got:shape(), what .. ": shape")
    local tol = dtype == "float64" and 1e-12 or 1e-6
    local g = got:flatten():tolist()
    for i, r in ipairs(ref.data) do
      if not (math.abs(g[i] - r) <= tol * math.max(1, math.abs(r))) then
        error(string.format("%s: element %d is %.17g, torch %.17g", what, i, g[i], r), 2)
      end
    end
  end
  for n, case in ipairs(fx.scatter_reduce) do
    it(string.format("case %d: %s %s include_self=%s dim %d, values and gradients", n, case.dtype, case.reduce,
      tostring(case.include_self), case.dim), function()
      local x = tensor_of(case.x, case.dtype):requires_grad(true)
      local src = tensor_of(case.src, case.dtype):requires_grad(true)
      local out = x:scatter_reduce(case.dim, index_of(case.index), src, case.reduce, { include_self = case.include_self })
      close("out", out, case.out, case.dtype)
      out:backward(tensor_of(case.grad_out, case.dtype))
      close("grad x", x.grad, case.grad_x, case.dtype)
      close("grad src", src.grad, case.grad_src, case.dtype)
      local y = tensor_of(case.x, case.dtype)
      assert.are.equal(y, y:scatter_reduce_(case.dim, index_of(case.index), tensor_of(case.src, case.dtype), case.reduce,
        { include_self = case.include_self }))
      close("in place", y, case.out, case.dtype)
    end)
  end

  it("passes a float64 finite-difference gradcheck for every reduce", function()
    local gradcheck64 = require "tests.helpers.gradcheck64"
    local idx = lt.tensor({ { 1, 2 }, { 2, 1 }, { 1, 1 } }, "int64")
    for _, reduce in ipairs({ "sum", "prod", "mean", "amax", "amin" }) do
      for _, inc in ipairs({ true, false }) do
        local x = lt.tensor({ { 0.3, -1.2, 0.7 }, { 1.1, 0.4, -0.6 } }, "float64")
        local src = lt.tensor({ { 0.9, -0.2 }, { -1.3, 0.5 }, { 0.8, 1.7 } }, "float64")
        local r = lt.tensor({ { 0.7, -1.1, 0.4 }, { 1.3, 0.2, -0.9 } }, "float64")
        gradcheck64(function(p) return p[1]:scatter_reduce(1, idx, p[2], reduce, { include_self = inc }) end, { x, src }, r)
      end
    end
  end)

  it("is lt.scatter_reduce too, and names the op, the reduce, the option, the dtypes and the index in errors", function()
    local x, i, s = lt.zeros(2, 3), lt.tensor({ { 1, 2 } }, "int64"), lt.ones(1, 2)
    same("lt.scatter_reduce", lt.scatter_reduce(x, 2, i, s, "sum"), { shape = { 2, 3 }, data = { 1, 1, 0, 0, 0, 0 } })
    expect("scatter_reduce: reduce must be one of \"sum\", \"prod\", \"mean\", \"amax\", \"amin\", got 'max'",
      x.scatter_reduce, x, 2, i, s, "max")
    expect("scatter_reduce: option 'include_self' must be a boolean, got number",
      x.scatter_reduce, x, 2, i, s, "sum", { include_self = 1 })
    expect("scatter_reduce: unknown option 'inclde_self' (known options: include_self)",
      x.scatter_reduce, x, 2, i, s, "sum", { inclde_self = true })
    expect("scatter_reduce: the input is float32 and src is float64: both must have the same dtype",
      x.scatter_reduce, x, 2, i, lt.ones(1, 2, "float64"), "sum")
    expect("scatter_reduce: index 4 is out of range for dim 2 of size 3 (indices are 1-based)",
      x.scatter_reduce, x, 2, lt.tensor({ { 1, 4 } }, "int64"), s, "amax")
    expect("scatter_reduce: index [2] and src must have as many dims as the input [2 x 3]",
      x.scatter_reduce, x, 2, lt.tensor({ 1, 2 }, "int64"), s, "sum")
    expect("scatter_reduce: index [1 x 3] is larger than the src in dim 2",
      x.scatter_reduce, x, 2, lt.tensor({ { 1, 2, 3 } }, "int64"), s, "sum")
  end)
end)
