-- ops_shape_reduce_spec.lua — nested tolist, stride-compatible view, flatten/unflatten/unbind, sort/argsort/topk,
-- cumsum/cumprod/prod, logsumexp, norm, any/all, tril/triu, repeat/tile, flip, roll and the rounding,
-- special and classifying elementwise ops: values and gradients against torch 1.13 (tests/fixtures/ops1.json),
-- finite-difference gradchecks, and the error texts of bad input.
local lt = require "lutra"
local X = require "tests.helpers.nn_fixtures"
local gradcheck = require "tests.helpers.gradcheck"

local cases = X.load("ops1.json")

local function arg_of(v)
  if v == "inf" then return math.huge elseif v == "-inf" then return -math.huge end
  return v
end

local function run(c, x)
  local args = {}
  for i, v in ipairs(c.args) do args[i] = arg_of(v) end
  if c.opts then args[#args + 1] = c.opts end
  return x[c.op](x, unpack(args, 1, #args))
end

local function err(f, pattern)
  local ok, e = pcall(f)
  assert.is_false(ok, "expected an error matching " .. pattern)
  assert.matches(pattern, tostring(e), 1, true)
end

describe("ops against torch 1.13 (ops1.json)", function()
  for _, c in ipairs(cases) do
    if c.op ~= "tolist" then
      it(c.name, function()
        local x = X.tensor(c.input)
        if c.grad_output then x:requires_grad(true) end
        local outs = { run(c, x) }
        assert.are.equal(#c.outputs, #outs)
        for k, ref in ipairs(c.outputs) do
          X.check(c.name .. " output " .. k, outs[k], ref)
          if ref.dtype == "int64" then assert.are.equal("int64", outs[k]:dtype()) end
        end
        if c.grad_output then
          outs[1]:backward(X.tensor(c.grad_output))
          X.check(c.name .. " grad", x.grad, c.grad_input)
        end
      end)
    end
  end
end)

describe("tolist", function()
  it("is nested as torch's", function()
    for _, c in ipairs(cases) do
      if c.op == "tolist" then assert.are.same(c.list, X.tensor(c.input):tolist()) end
    end
  end)
  it("gives a number for a 0-dim tensor, a flat list for 1 dim, and follows views", function()
    assert.are.equal(3, lt.tensor(3):tolist())
    assert.are.same({ 1, 2 }, lt.tensor({ 1, 2 }):tolist())
    assert.are.same({ { 1, 3 }, { 2, 4 } }, lt.tensor({ { 1, 2 }, { 3, 4 } }):t():tolist())
    assert.are.same({ { 5 }, { 7 } }, lt.tensor({ { 5, 6 }, { 7, 8 } }, "int64"):narrow(2, 1, 1):tolist())
  end)
end)

describe("view of non-contiguous tensors", function()
  it("splits a narrowed last dim ([B, T, 3C] slice as [B, T, nh, hs]) without copying", function()
    local qkv = lt.randn(2, 3, 12)
    local k = qkv:narrow(3, 5, 4)
    local v = k:view(2, 3, 2, 2)
    assert.are.same({ 2, 3, 2, 2 }, v:shape())
    assert.are.same({ 36, 12, 2, 1 }, v:stride())
    assert.are.equal(k:data_ptr(), v:data_ptr())
    assert.is_true(v:allclose(k:contiguous():view(2, 3, 2, 2), 0, 0))
  end)
  it("merges dims that are back to back and splits transposed ones", function()
    local x = lt.randn(4, 6):t() -- [6 x 4], strides {1, 6}
    local v = x:view(2, 3, 4)
    assert.are.same({ 3, 1, 6 }, v:stride())
    assert.is_true(v:allclose(x:contiguous():view(2, 3, 4), 0, 0))
    local y = lt.randn(3, 4, 5):narrow(1, 2, 2) -- dims 2, 3 still back to back
    assert.are.same({ 2, 20 }, y:view(2, 20):shape())
    assert.is_true(y:view(2, 20):allclose(y:contiguous():view(2, 20), 0, 0))
    assert.are.same({ 2, 1, 4, 1, 5 }, y:view(2, 1, 4, 1, 5):shape())
  end)
  it("passes gradients back through the split", function()
    gradcheck(function(a) return a:narrow(3, 3, 4):view(2, 2, 2, 2) end, { lt.randn(2, 2, 8) })
  end)
  it("refuses shapes that would need a copy", function()
    err(function() return lt.randn(2, 3):t():view(6) end,
      "view: the tensor's layout is not compatible with shape [6]")
    err(function() return lt.randn(2, 3, 4):narrow(3, 1, 2):view(2, 6) end,
      "view: the tensor's layout is not compatible with shape [2 x 6]")
  end)
end)

describe("flatten, unflatten, unbind", function()
  it("flatten(start, end) merges the dims from start to end", function()
    local x = lt.randn(2, 3, 4, 5)
    assert.are.same({ 2, 12, 5 }, x:flatten(2, 3):shape())
    assert.are.same({ 2, 3, 20 }, x:flatten(-2):shape())
    assert.are.same({ 120 }, x:flatten():shape())
    assert.are.same({ 1 }, lt.tensor(2):flatten():shape())
    err(function() return x:flatten(3, 2) end, "flatten: start dim 3 is after end dim 2")
  end)
  it("unflatten splits one dim into sizes (one may be -1)", function()
    local x = lt.arange(24):view(2, 12)
    assert.are.same({ 2, 3, 4 }, x:unflatten(2, { 3, 4 }):shape())
    assert.are.same({ 2, 2, 6 }, lt.unflatten(x, -1, { 2, -1 }):shape())
    assert.are.same(x:view(2, 3, 4):tolist(), x:unflatten(2, { 3, 4 }):tolist())
    gradcheck(function(a) return a:unflatten(1, { 2, 3 }) end, { lt.randn(6, 2) })
    err(function() return x:unflatten(2, { 5, 2 }) end,
      "unflatten: sizes {5, 2} don't multiply up to the size of dim 2 (12)")
    err(function() return x:unflatten(3, { 3, 4 }) end, "unflatten: dim 3 out of range for a 2-dimensional tensor")
  end)
  it("unbind gives a Lua list of slices, with gradients", function()
    local x = lt.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
    local cols = x:unbind(2)
    assert.are.equal(3, #cols)
    assert.are.same({ 2, 5 }, cols[2]:tolist())
    local rows = lt.unbind(x)
    assert.are.same({ 4, 5, 6 }, rows[2]:tolist())
    gradcheck(function(a) local p = a:unbind(2); return p[1] * 2 + p[3] end, { lt.randn(3, 3) })
    err(function() return lt.tensor(1):unbind() end, "unbind: a 0-dim tensor has no dim to unbind")
  end)
end)

describe("sort, argsort, topk", function()
  it("keeps ties in their order (stable) and puts NaN last ascending, first descending", function()
    local x = lt.tensor({ 2, 1, 2, 0 / 0, 1 })
    local v, i = x:sort()
    assert.are.same({ 2, 5, 1, 3, 4 }, i:tolist())
    assert.is_true(v[5]:item() ~= v[5]:item())
    local _, j = x:sort(1, { descending = true })
    assert.are.same({ 4, 1, 3, 2, 5 }, j:tolist())
    assert.are.same({ 4, 1, 3, 2, 5 }, x:argsort({ descending = true }):tolist())
  end)
  it("sorts int64 tensors exactly", function()
    local big = 2 ^ 53
    local v, i = lt.tensor({ big + 2, 3, big }, "int64"):sort()
    assert.are.equal("int64", v:dtype())
    assert.are.same({ 2, 3, 1 }, i:tolist())
  end)
  it("topk (by selection) gives the first k of the stable sort, ties included", function()
    local x = (lt.rand(5, 40) * 4):floor() -- many ties
    for _, largest in ipairs { true, false } do
      local full = x:argsort(2, { descending = largest })
      for _, k in ipairs { 1, 2, 7, 20, 39, 40 } do
        local v, i = x:topk(k, 2, { largest = largest })
        assert.are.same(full:narrow(2, 1, k):tolist(), i:tolist())
        assert.are.same(x:gather(2, i):tolist(), v:tolist())
      end
    end
    local _, i = lt.tensor({ 1, 0 / 0, 3, 0 / 0 }):topk(2)
    assert.are.same({ 2, 4 }, i:tolist()) -- NaN counts as the largest, as torch
  end)
  it("topk with sorted = false gives the same k elements", function()
    local x = lt.randn(3, 8)
    local v1 = x:topk(3, 2, { sorted = false })
    local v2 = x:topk(3)
    assert.is_true(v1:sort(2):allclose(v2:sort(2), 0, 0))
  end)
  it("passes gradients to the values (gradcheck)", function()
    gradcheck(function(a) return (a:sort(2, { descending = true })) end, { lt.randn(3, 5) })
    gradcheck(function(a) return (a:topk(2, 1, { largest = false })) end, { lt.randn(4, 3) })
  end)
  it("says what is wrong with k, dims and options", function()
    local x = lt.randn(3, 5)
    err(function() return x:topk(7, 2) end, "topk: k (7) is larger than the size of dim 2 (5)")
    err(function() return x:topk(-1) end, "topk: k must be an integer >= 0, got -1")
    err(function() return x:topk(2, 3) end,
      "topk: dim 3 out of range for a 2-dimensional tensor (expected 1..2, or -2..-1)")
    err(function() return x:topk(2, 2, { larges = true }) end, "topk: unknown option 'larges' (known: largest, sorted)")
    err(function() return x:topk(2, 2, { largest = 1 }) end, "topk: option largest must be a boolean, got number")
    err(function() return x:sort(2, { descnding = true }) end,
      "sort: unknown option 'descnding' (known: descending, stable)")
    err(function() return x:argsort(3) end, "argsort: dim 3 out of range for a 2-dimensional tensor")
    err(function() return x:argsort(1, "desc") end, "argsort: options must be a table {descending, stable}, got string")
  end)
end)

describe("cumsum, cumprod, prod", function()
  it("gradcheck, zeros included", function()
    local z = lt.tensor({ { 1.5, 0, -2, 0.5 }, { 0, 0, 3, -1 }, { 0.7, 1.2, -0.4, 2 } })
    gradcheck(function(a) return a:cumsum(2) end, { lt.randn(3, 4) })
    gradcheck(function(a) return a:cumprod(2) end, { z })
    gradcheck(function(a) return a:cumprod(1) end, { z })
    gradcheck(function(a) return a:prod() end, { z:narrow(1, 3, 1) })
    gradcheck(function(a) return a:prod(2, true) end, { z })
    gradcheck(function(a) return a:prod(1) end, { lt.randn(3, 4) })
  end)
  it("works on int64 tensors in int64", function()
    local x = lt.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, "int64")
    assert.are.equal("int64", x:cumsum(2):dtype())
    assert.are.same({ { 1, 3, 6 }, { 4, 9, 15 } }, x:cumsum(2):tolist())
    assert.are.same({ { 1, 2, 6 }, { 4, 20, 120 } }, x:cumprod(2):tolist())
    assert.are.same({ 4, 10, 18 }, x:prod(1):tolist())
    assert.are.equal(720, x:prod():item())
  end)
  it("needs a dim in range", function()
    err(function() return lt.randn(2, 3):cumsum(3) end, "cumsum: dim 3 out of range for a 2-dimensional tensor")
    err(function() return lt.randn(2, 3):cumprod() end, "cumprod: dim must be a number, got no value")
    err(function() return lt.randn(2, 3):prod(0) end, "prod: dim 0 out of range")
  end)
end)

describe("logsumexp, norm, any, all", function()
  it("logsumexp: gradcheck; an all -inf row gives -inf", function()
    gradcheck(function(a) return a:logsumexp(2) end, { lt.randn(3, 4) })
    local r = lt.tensor({ { -math.huge, -math.huge }, { 0, 0 } }):logsumexp(2)
    assert.are.equal(-math.huge, r[1]:item())
    assert.is_true(math.abs(r[2]:item() - math.log(2)) < 1e-6)
    err(function() return lt.randn(3):logsumexp() end, "logsumexp: dim is required")
  end)
  it("norm: gradcheck for p = 1, 2, 3, 0.5, inf, -inf, 'fro'", function()
    local x = lt.tensor({ { 1.5, -0.3, 2.2, -0.9 }, { 0.4, -2.6, 0.8, 1.1 } })
    for _, p in ipairs { 1, 2, 3, 0.5, math.huge, -math.huge, "fro" } do
      gradcheck(function(a) return a:norm(p, 2) end, { x })
      gradcheck(function(a) return a:norm(p) end, { x })
    end
  end)
  it("norm over a list of dims: gradcheck", function()
    gradcheck(function(a) return a:norm(2, { 1, 3 }) end, { lt.randn(2, 3, 2) })
    gradcheck(function(a) return lt.norm(a, 1, { 2, 3 }, true) end, { lt.randn(2, 3, 2) })
    err(function() return lt.randn(2, 3):norm(2, { 1, 1 }) end, "norm: dim 1 appears more than once in dims")
  end)
  it("norm: errors", function()
    err(function() return lt.randn(3):norm("nuc") end, "norm: unknown p 'nuc'")
    err(function() return lt.tensor({ 1, 2 }, "int64"):norm() end, "norm: expects a float32 or float64 tensor, got int64")
    err(function() return lt.randn(3):norm(2, 2) end, "norm: dim 2 out of range for a 1-dimensional tensor")
  end)
  it("any/all of empty tensors are 0 and 1, as torch's", function()
    local e = lt.zeros(0)
    assert.are.equal(0, e:any():item())
    assert.are.equal(1, e:all():item())
    assert.are.equal(1, lt.tensor({ 0, 0 / 0 }):any():item()) -- NaN is true
    assert.are.same({ 1, 0 }, lt.all(lt.tensor({ { 1, 2 }, { 0, 3 } }), 2):tolist())
  end)
end)

describe("tril, triu", function()
  it("gradcheck and int64", function()
    gradcheck(function(a) return a:tril(1) end, { lt.randn(3, 4) })
    gradcheck(function(a) return lt.triu(a, -1) end, { lt.randn(2, 3, 3) })
    assert.are.same({ { 1, 2 }, { 0, 4 } }, lt.tensor({ { 1, 2 }, { 3, 4 } }, "int64"):triu():tolist())
  end)
  it("needs two dims", function()
    err(function() return lt.randn(3):tril() end, "tril: expects a tensor with at least 2 dims, got [3]")
    err(function() return lt.randn(3, 3):triu(0.5) end, "triu: diagonal")
  end)
end)

describe("repeat, tile, flip, roll", function()
  it("gradchecks", function()
    gradcheck(function(a) return a["repeat"](a, 2, 1, 3) end, { lt.randn(2, 3) })
    gradcheck(function(a) return a:tile(2) end, { lt.randn(2, 3) })
    gradcheck(function(a) return a:flip { 1, 3 } end, { lt.randn(2, 3, 2) })
    gradcheck(function(a) return a:roll({ 1, -2 }, { 1, 2 }) end, { lt.randn(3, 4) })
    gradcheck(function(a) return lt.roll(a, 3) end, { lt.randn(2, 3) })
  end)
  it("keeps int64 and 0-dim tensors", function()
    assert.are.same({ 3, 2, 1 }, lt.tensor({ 1, 2, 3 }, "int64"):flip(1):tolist())
    assert.are.same({ 1, 2, 1, 2 }, lt["repeat"](lt.tensor({ 1, 2 }, "int64"), 2):tolist())
    assert.are.equal(5, lt.tensor(5):flip(1):item())
  end)
  it("says what is wrong", function()
    local x = lt.randn(2, 3)
    err(function() return x["repeat"](x, 2) end,
      "repeat: the number of sizes (1) can not be smaller than the number of dims of the tensor (2)")
    err(function() return x:flip { 1, 1 } end, "flip: dim 1 appears more than once in dims")
    err(function() return x:flip { 3 } end, "flip: dim 3 out of range for a 2-dimensional tensor")
    err(function() return x:roll({ 1, 2 }, { 1 }) end, "roll: 2 shifts and 1 dims given (expected as many of each)")
    err(function() return x:roll(1.5, 1) end, "roll: shift must be an integer, got 1.5")
    err(function() return x:tile("a") end, "tile: size 1 must be an integer >= 0, got a")
  end)
end)

describe("elementwise: rounding, special functions, classification, logic", function()
  it("gradchecks away from the jumps", function()
    local x = lt.tensor({ { 0.3, -1.4, 2.6 }, { -0.7, 1.2, 0.45 } })
    for _, op in ipairs { "floor", "ceil", "round", "trunc", "frac", "erf", "erfinv", "expm1" } do
      gradcheck(function(a) return a[op](a) end, { op == "erfinv" and x * 0.3 or x })
    end
    gradcheck(function(a) return a:reciprocal() end, { x })
  end)
  it("round's decimals option is checked", function()
    err(function() return lt.randn(2):round({ digits = 1 }) end, "round: unknown option 'digits' (known: decimals)")
    err(function() return lt.randn(2):round({ decimals = 0.5 }) end, "round: decimals must be an integer, got 0.5")
    assert.is_true(lt.tensor({ 1.23, -0.25 }):round({ decimals = 1 }):allclose(lt.tensor({ 1.2, -0.2 })))
    assert.are.same({ 120, 1230 }, lt.tensor({ 125, 1234 }):round({ decimals = -1 }):tolist())
  end)
  it("erfinv at the ends and beyond", function()
    assert.are.same({ -math.huge, math.huge }, lt.tensor({ -1, 1 }):erfinv():tolist())
    local v = lt.tensor({ 1.5 }):erfinv():item()
    assert.is_true(v ~= v)
  end)
  it("isnan, isinf, isfinite give 0/1 float masks", function()
    local x = lt.tensor({ 1, 0 / 0, math.huge, -math.huge, 0 })
    assert.are.same({ 0, 1, 0, 0, 0 }, x:isnan():tolist())
    assert.are.same({ 0, 0, 1, 1, 0 }, x:isinf():tolist())
    assert.are.same({ 1, 0, 0, 0, 1 }, lt.isfinite(x):tolist())
    assert.are.equal("float32", x:isnan():dtype())
    assert.are.same({ 1, 1 }, lt.tensor({ 1, 2 }, "int64"):isfinite():tolist())
  end)
  it("logical_and, logical_or, logical_not broadcast and treat non-zero as true", function()
    local a, b = lt.tensor({ { 0, 2 }, { -1, 0 } }), lt.tensor({ 3, 0 })
    assert.are.same({ { 0, 0 }, { 1, 0 } }, a:logical_and(b):tolist())
    assert.are.same({ { 1, 1 }, { 1, 0 } }, lt.logical_or(a, b):tolist())
    assert.are.same({ { 1, 0 }, { 0, 1 } }, a:logical_not():tolist())
    err(function() return a:logical_and(1) end, "bad argument #2 to 'logical_and' (tensor expected, got number)")
  end)
  it("int64 input: rounding keeps int64, the rest goes to float32", function()
    local i = lt.tensor({ 1, -2 }, "int64")
    assert.are.equal("int64", i:floor():dtype())
    assert.are.same({ 1, -0.5 }, i:reciprocal():tolist())
  end)
end)
