-- f64_softmax_spec.lua — softmax and log_softmax on float64 input against torch 1.13 (tests/fixtures/f64_softmax.json,
-- gen_f64_softmax.py): the output and the gradient of sum(y * r) to 1e-12 on every path of the kernels (short
-- rows in blocks, long contiguous rows, a dim that is not the last, 0-d, -inf entries), float64 finite-difference
-- gradchecks, the modules and F's functions in float64, and float32 left as it was.
local lt = require "lutra"

local f64_ref = require "tests.helpers.f64_ref"
local gradcheck64 = require "tests.helpers.gradcheck64"
local tensor_of, check = f64_ref.tensor_of, f64_ref.check

local CASES = f64_ref.load("f64_softmax")

describe("float64 softmax and log_softmax against torch 1.13 (f64_softmax.json)", function()
  for _, c in ipairs(CASES) do
    it(("%s of [%s] over dim %d"):format(c.op, table.concat(c.x.shape, "x"), c.dim), function()
      local x = tensor_of(c.x):requires_grad(true)
      local y = x[c.op](x, c.dim)
      check("y", y, c.y)
      ;(y * tensor_of(c.r)):sum():backward()
      check("dL/dx", x.grad, c.gx)
    end)
  end
end)

describe("float64 softmax gradients by finite differences", function()
  local function input(shape, seed)
    local n, t = 1, {}
    for _, s in ipairs(shape) do n = n * s end
    for i = 1, n do t[i] = math.sin(i * 12.9898 + seed) * 4 end
    return lt.tensor(t, "float64"):reshape(shape)
  end
  for _, op in ipairs({ "softmax", "log_softmax" }) do
    for _, case in ipairs({ { { 3, 5 }, 2 }, { { 2, 20 }, 2 }, { { 2, 3, 4 }, 2 }, { { 4, 3 }, 1 } }) do
      local shape, dim = case[1], case[2]
      it(("%s of [%s] over dim %d"):format(op, table.concat(shape, "x"), dim), function()
        assert.is_true(gradcheck64(function(p) return p[1][op](p[1], dim) end, { input(shape, 1) }, input(shape, 2)))
      end)
    end
  end
end)

describe("float64 softmax through the modules and F", function()
  local x = lt.tensor({ { 0.1, 1e-3, 3 }, { -2, 700, 699.5 } }, "float64")
  it("nn.Softmax, nn.LogSoftmax, F.softmax and F.log_softmax keep float64 and its precision", function()
    for _, y in ipairs({ lt.nn.Softmax(2):double()(x), lt.F.softmax(x, 2) }) do
      assert.are.equal("float64", y:dtype())
      -- exp(1e-3 - 0.1) / (exp(0.1 - 0.1) + ...) in doubles: float32 would be off in the 8th digit
      local e1, e2, e3 = math.exp(0.1 - 3), math.exp(1e-3 - 3), 1
      local s = e1 + e2 + e3
      local got = y:tolist()
      assert.is_true(math.abs(got[1][2] - e2 / s) <= 1e-15)
      assert.is_true(math.abs(got[2][3] - math.exp(-0.5) / (math.exp(-702) + 1 + math.exp(-0.5))) <= 1e-15)
    end
    for _, y in ipairs({ lt.nn.LogSoftmax(2)(x), lt.F.log_softmax(x, 2) }) do
      assert.are.equal("float64", y:dtype())
      local lse = 700 + math.log(1 + math.exp(-0.5) + math.exp(-702))
      assert.is_true(math.abs(y:tolist()[2][2] - (700 - lse)) <= 1e-13)
    end
  end)
  it("a strided float64 input (a transposed view) gives the contiguous input's result", function()
    local a = lt.tensor({ { 1, 2, 3 }, { 4, 5, 7 } }, "float64")
    local ref = a:contiguous():t():contiguous():softmax(2):tolist()
    assert.are.same(ref, a:t():softmax(2):tolist())
  end)
  it("a large float64 tensor split over threads gives the single-thread result bit for bit", function()
    local big = lt.randn(64, 40, 33):double() * 5
    local before = lt.get_num_threads()
    local results = {}
    for i, threads in ipairs({ 1, 2 }) do
      lt.set_num_threads(threads)
      local a = big:clone():requires_grad(true)
      local y = a:log_softmax(3) + a:softmax(2)
      y:sum():backward()
      results[i] = { y:flatten():tolist(), a.grad:flatten():tolist() }
    end
    lt.set_num_threads(before)
    assert.are.same(results[1], results[2])
  end)
  it("float32 input stays float32", function()
    local y = lt.tensor({ 1, 2, 3 }):softmax(1)
    assert.are.equal("float32", y:dtype())
    assert.is_true(math.abs(y:tolist()[3] - math.exp(0) / (math.exp(-2) + math.exp(-1) + 1)) < 1e-6)
  end)
  it("int64 input is refused naming the op and both dtypes", function()
    assert.has_error(function() lt.tensor({ 1, 2 }, "int64"):softmax(1) end)
    local ok, err = pcall(function() lt.tensor({ 1, 2 }, "int64"):log_softmax(1) end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("log_softmax", 1, true))
    assert.truthy(tostring(err):find("int64", 1, true))
  end)
end)
