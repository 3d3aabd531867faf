-- tensor_spec: creation, queries, views, broadcasting maths, reductions, indexing (1-based),
-- in-place ops and printing — the surface of docs/reference/tensor.md without autograd.
local lt = require "lutra"

local function close(a, b, tol)
  tol = tol or 1e-6
  return math.abs(a - b) <= tol * math.max(1, math.abs(b))
end

local function same_list(got, want, tol)
  assert.are.equal(#want, #got, "length")
  for i = 1, #want do
    assert(close(got[i], want[i], tol), ("element %d: got %s, want %s"):format(i, got[i], want[i]))
  end
end

describe("tensor creation", function()
  it("builds from nested tables with shape and float32 default", function()
    local x = lt.tensor{{1, 2, 3}, {4, 5, 6}}
    assert.are.same({2, 3}, x:shape())
    assert.are.equal("float32", x:dtype())
    assert.are.same({{1, 2, 3}, {4, 5, 6}}, x:totable())
  end)

  it("accepts sizes as varargs or a table", function()
    assert.are.same(lt.zeros(2, 3):shape(), lt.zeros{2, 3}:shape())
    assert.are.same({2, 3, 4}, lt.ones{2, 3, 4}:shape())
    assert.are.equal(24, lt.empty(2, 3, 4):numel())
  end)

  it("fills full, ones, eye and arange", function()
    same_list(lt.full({2, 2}, 7):flatten():tolist(), {7, 7, 7, 7})
    same_list(lt.eye(3):flatten():tolist(), {1, 0, 0, 0, 1, 0, 0, 0, 1})
    same_list(lt.arange(1, 5):flatten():tolist(), {1, 2, 3, 4})
    same_list(lt.arange(0, 1, 0.25):flatten():tolist(), {0, 0.25, 0.5, 0.75})
    same_list(lt.arange(5, 1, -2):flatten():tolist(), {5, 3})
  end)

  it("supports int64 tensors exactly", function()
    local y = lt.tensor({1, 2, 3, 2^40}, "int64")
    assert.are.equal("int64", y:dtype())
    assert.are.equal(2^40, y[4]:item())
    assert.are.equal("int64", (y + 1):dtype())
  end)

  it("supports up to 8 dimensions", function()
    local x = lt.zeros(1, 2, 1, 2, 1, 2, 1, 2)
    assert.are.equal(8, x:dim())
    assert.has_error(function() lt.zeros(1, 1, 1, 1, 1, 1, 1, 1, 1) end)
  end)

  it("makes rand/randn reproducible with manual_seed", function()
    lt.manual_seed(42)
    local a = lt.randn(100):flatten():tolist()
    lt.manual_seed(42)
    local b = lt.randn(100):flatten():tolist()
    assert.are.same(a, b)
    local u = lt.rand(10000)
    assert.is_true(u:min():item() >= 0 and u:max():item() < 1)
    assert.is_true(math.abs(u:mean():item() - 0.5) < 0.02)
    local n = lt.randn(10000)
    assert.is_true(math.abs(n:mean():item()) < 0.05)
    assert.is_true(math.abs((n * n):mean():item() - 1) < 0.05)
  end)
end)

describe("tensor queries", function()
  local x = lt.arange(0, 24):view(2, 3, 4)
  it("answers shape, size, dim, numel, #", function()
    assert.are.same({2, 3, 4}, x:shape())
    assert.are.equal(3, x:size(2))
    assert.are.equal(4, x:size(-1))
    assert.are.equal(3, x:dim())
    assert.are.equal(24, x:numel())
    assert.are.equal(2, #x)
  end)
  it("item() needs exactly one element", function()
    assert.are.equal(5, lt.tensor{5}:item())
    assert.has_error(function() x:item() end,
      "item: the tensor has 24 elements (shape [2 x 3 x 4]), item() needs exactly one")
  end)
  it("prints values and shape", function()
    local s = tostring(lt.tensor{{1, 2}, {3, 4}})
    assert.truthy(s:find("1.0000", 1, true))
    assert.truthy(s:find("4.0000", 1, true))
    assert.truthy(s:find("[float32 tensor of shape [2 x 2]]", 1, true))
    assert.truthy(tostring(lt.zeros(100, 100)):find("...", 1, true))
  end)
end)

describe("views", function()
  it("share storage with their base", function()
    local x = lt.zeros(4, 5)
    local row = x[2]
    row:fill_(3)
    assert.are.equal(15, x:sum():item())
    local col = x:select(2, 5)
    col:fill_(1)
    assert.are.equal(1, x[4][5]:item())
    local n = x:narrow(1, 3, 2)
    n:zero_()
    -- row 2 (15), column 5 set to 1 (replaces one 3, adds 4 ones), rows 3..4 zeroed
    assert.are.equal(14, x:sum():item())
  end)

  it("view infers one -1 size and checks the element count", function()
    local x = lt.arange(0, 12)
    assert.are.same({3, 4}, x:view(3, -1):shape())
    assert.are.same({2, 6}, x:view{-1, 6}:shape())
    assert.has_error(function() x:view(5, -1) end,
      "view: shape [5 x -1] is invalid for a tensor of 12 elements (shape [12])")
  end)

  it("transpose is a view; view of it needs contiguous", function()
    local x = lt.arange(0, 6):view(2, 3)
    local t = x:t()
    assert.are.same({3, 2}, t:shape())
    assert.is_false(t:is_contiguous())
    assert.are.same({{0, 3}, {1, 4}, {2, 5}}, t:totable())
    assert.has_error(function() t:view(6) end,
      "view: the tensor's layout is not compatible with shape [6] (call :contiguous() first, or use :reshape())")
    same_list(t:reshape(6):flatten():tolist(), {0, 3, 1, 4, 2, 5})
    same_list(t:contiguous():view(6):flatten():tolist(), {0, 3, 1, 4, 2, 5})
  end)

  it("permute, unsqueeze, squeeze, expand, flatten", function()
    local x = lt.arange(0, 24):view(2, 3, 4)
    assert.are.same({4, 2, 3}, x:permute(3, 1, 2):shape())
    assert.are.equal(x[2][3][4]:item(), x:permute(3, 1, 2)[4][2][3]:item())
    assert.are.same({2, 1, 3, 4}, x:unsqueeze(2):shape())
    assert.are.same({2, 3, 4}, x:unsqueeze(2):squeeze():shape())
    assert.are.same({3, 4}, lt.zeros(1, 4):expand(3, 4):shape())
    assert.are.same({2, 12}, x:flatten(2):shape())
    assert.are.same({24}, x:flatten():shape())
  end)

  it("indexes rows with x[i] (1-based, negative from the end) and assigns with x[i] = v", function()
    local x = lt.arange(1, 7):view(3, 2)
    same_list(x[1]:flatten():tolist(), {1, 2})
    same_list(x[-1]:flatten():tolist(), {5, 6})
    x[2] = 0
    same_list(x:flatten():tolist(), {1, 2, 0, 0, 5, 6})
    x[3] = lt.tensor{9, 8}
    same_list(x[3]:flatten():tolist(), {9, 8})
    assert.has_error(function() return x[4] end, "select: index 4 out of range 1..3 of dim 1")
  end)

  it("clone copies and detach shares", function()
    local x = lt.ones(3)
    local c, d = x:clone(), x:detach()
    x:fill_(2)
    assert.are.equal(3, c:sum():item())
    assert.are.equal(6, d:sum():item())
  end)
end)

describe("maths", function()
  it("broadcasts binary ops and numbers", function()
    local a = lt.tensor{{1, 2, 3}, {4, 5, 6}}
    local b = lt.tensor{10, 20, 30}
    same_list((a + b):flatten():tolist(), {11, 22, 33, 14, 25, 36})
    same_list((a - 1):flatten():tolist(), {0, 1, 2, 3, 4, 5})
    same_list((2 - a):flatten():tolist(), {1, 0, -1, -2, -3, -4})
    same_list((a * lt.tensor{{2}, {3}}):flatten():tolist(), {2, 4, 6, 12, 15, 18})
    same_list((a / 2):flatten():tolist(), {0.5, 1, 1.5, 2, 2.5, 3})
    same_list((1 / lt.tensor{2, 4}):flatten():tolist(), {0.5, 0.25})
    same_list((-a)[1]:flatten():tolist(), {-1, -2, -3})
    same_list((a ^ 2)[2]:flatten():tolist(), {16, 25, 36})
    same_list(lt.tensor{2}:pow(lt.tensor{3}):flatten():tolist(), {8})
  end)

  it("rejects shapes that cannot broadcast", function()
    assert.has_error(function() return lt.zeros(2, 3) + lt.zeros(4) end,
      "add: shapes [2 x 3] and [4] cannot be broadcast (sizes must match or be 1 in each dim, from the last)")
  end)

  it("computes unary maths", function()
    local x = lt.tensor{-1, 0, 0.5, 2}
    same_list(x:relu():flatten():tolist(), {0, 0, 0.5, 2})
    same_list(x:abs():flatten():tolist(), {1, 0, 0.5, 2})
    same_list(x:exp():flatten():tolist(), {math.exp(-1), 1, math.exp(0.5), math.exp(2)}, 1e-6)
    same_list(x:tanh():flatten():tolist(), {math.tanh(-1), 0, math.tanh(0.5), math.tanh(2)}, 1e-6)
    same_list(x:sigmoid():flatten():tolist(),
      {1 / (1 + math.exp(1)), 0.5, 1 / (1 + math.exp(-0.5)), 1 / (1 + math.exp(-2))}, 1e-6)
    same_list(lt.tensor{4, 9}:sqrt():flatten():tolist(), {2, 3})
    same_list(lt.tensor{1, math.exp(1)}:log():flatten():tolist(), {0, 1}, 1e-6)
    same_list(x:clamp(-0.5, 1):flatten():tolist(), {-0.5, 0, 0.5, 1})
    same_list(x:clamp(0):flatten():tolist(), {0, 0, 0.5, 2})
  end)

  it("matmul follows the 1-D/2-D/batched rules", function()
    local a = lt.tensor{{1, 2}, {3, 4}}
    local b = lt.tensor{{5, 6}, {7, 8}}
    same_list(a:matmul(b):flatten():tolist(), {19, 22, 43, 50})
    same_list(a:t():matmul(b):flatten():tolist(), {26, 30, 38, 44})
    same_list(a:matmul(b:t()):flatten():tolist(), {17, 23, 39, 53})
    same_list(a:matmul(lt.tensor{1, 1}):flatten():tolist(), {3, 7})
    same_list(lt.tensor{1, 1}:matmul(a):flatten():tolist(), {4, 6})
    assert.are.equal(11, lt.tensor{1, 2}:matmul(lt.tensor{3, 4}):item())
    local ba = lt.stack({a, b})
    local r = ba:matmul(a)
    assert.are.same({2, 2, 2}, r:shape())
    same_list(r[2]:flatten():tolist(), b:matmul(a):flatten():tolist())
  end)

  it("matmul names the mismatch the way the docs show", function()
    assert.has_error(function() lt.zeros(64, 256):matmul(lt.zeros(512, 10)) end,
      "matmul: shape mismatch: a is [64 x 256], b is [512 x 10] (a:size(2) must equal b:size(1))")
  end)

  it("reduces with dim and keepdim", function()
    local x = lt.tensor{{1, 5, 3}, {4, 2, 6}}
    assert.are.equal(21, x:sum():item())
    assert.are.equal(3.5, x:mean():item())
    same_list(x:sum(1):flatten():tolist(), {5, 7, 9})
    same_list(x:sum(2):flatten():tolist(), {9, 12})
    assert.are.same({2, 1}, x:sum(2, true):shape())
    same_list(x:mean(-1):flatten():tolist(), {3, 4})
    assert.are.equal(6, x:max():item())
    assert.are.equal(1, x:min():item())
  end)

  it("returns 1-based indices from max, min and argmax", function()
    local x = lt.tensor{{1, 5, 3}, {4, 2, 6}}
    local v, i = x:max(2)
    same_list(v:flatten():tolist(), {5, 6})
    assert.are.equal("int64", i:dtype())
    same_list(i:flatten():tolist(), {2, 3})
    local _, j = x:min(1)
    same_list(j:flatten():tolist(), {1, 2, 1})
    same_list(x:argmax(2):flatten():tolist(), {2, 3})
    assert.are.equal(6, x:argmax():item())
    local classes = {"a", "b", "c"}
    assert.are.equal("b", classes[x:argmax(2)[1]:item()])
  end)

  it("compares into float masks", function()
    local pred = lt.tensor({1, 2, 3, 4}, "int64")
    local y = lt.tensor({1, 0, 3, 0}, "int64")
    same_list(pred:eq(y):flatten():tolist(), {1, 0, 1, 0})
    assert.are.equal(0.5, pred:eq(y):mean():item())
    same_list(lt.tensor{1, 2, 3}:gt(2):flatten():tolist(), {0, 0, 1})
    same_list(lt.tensor{1, 2, 3}:lt(lt.tensor{2, 2, 2}):flatten():tolist(), {1, 0, 0})
    same_list(lt.where(lt.tensor{1, 0, 1}, lt.tensor{1, 2, 3}, 0):flatten():tolist(), {1, 0, 3})
  end)

  it("softmax and log_softmax along a dim", function()
    local x = lt.tensor{{1, 2, 3}, {1, 1, 1}}
    local s = x:softmax(2)
    same_list(s:sum(2):flatten():tolist(), {1, 1}, 1e-6)
    same_list(s[2]:flatten():tolist(), {1 / 3, 1 / 3, 1 / 3}, 1e-6)
    same_list(x:log_softmax(2):exp():flatten():tolist(), s:flatten():tolist(), 1e-6)
    same_list(lt.tensor{1000, 1000}:softmax(1):flatten():tolist(), {0.5, 0.5})
  end)

  it("softmax and log_softmax on every dim of a 3-D tensor, strided input, forward and backward", function()
    -- rows of 70 (16-lane blocks and a tail) and of 5 and 37, the input a transposed (non-contiguous) view;
    -- the reference is the formula in ops that do not share the kernels: exp(x - max) / sum, x - max - log(sum)
    lt.manual_seed(11)
    local x = lt.randn(5, 70, 37):transpose(2, 3)
    local g = lt.randn(5, 37, 70)
    for d = 1, 3 do
      for _, log_form in ipairs({ false, true }) do
        local xa, xb = x:clone():requires_grad(true), x:clone():requires_grad(true)
        local y = log_form and xa:log_softmax(d) or xa:softmax(d)
        local z = xb - (xb:detach():max(d, true))
        local lse = z:exp():sum(d, true):log()
        local ref = log_form and (z - lse) or (z - lse):exp()
        assert.is_true(y:allclose(ref, 1e-5, 1e-6), ("forward dim %d log %s"):format(d, tostring(log_form)))
        y:backward(g)
        ref:backward(g)
        assert.is_true(xa.grad:allclose(xb.grad, 1e-5, 1e-5), ("backward dim %d log %s"):format(d, tostring(log_form)))
      end
    end
  end)

  it("cat, stack, gather and index_select with 1-based indices", function()
    local a, b = lt.tensor{{1, 2}}, lt.tensor{{3, 4}, {5, 6}}
    same_list(lt.cat({a, b}, 1):flatten():tolist(), {1, 2, 3, 4, 5, 6})
    assert.are.same({1, 4}, lt.cat({a, a}, 2):shape())
    assert.are.same({2, 1, 2}, lt.stack({a, a}):shape())
    local x = lt.tensor{{10, 20, 30}, {40, 50, 60}}
    same_list(x:gather(2, lt.tensor({{3}, {1}}, "int64")):flatten():tolist(), {30, 40})
    same_list(x:index_select(2, lt.tensor({3, 1}, "int64")):flatten():tolist(), {30, 10, 60, 40})
    same_list(x:index_select(1, lt.tensor({2}, "int64")):flatten():tolist(), {40, 50, 60})
    assert.has_error(function() x:index_select(2, lt.tensor({4}, "int64")) end,
      "index_select: index 4 out of range 1..3 of dim 2")
    assert.has_error(function() x:index_select(2, lt.tensor({0}, "int64")) end,
      "index_select: index 0 is out of range (indices are 1-based)")
    assert.has_error(function() lt.cat({a, lt.zeros(2, 3)}, 1) end,
      "cat: tensor 2 has shape [2 x 3] (float32), tensor 1 has [1 x 2] (float32); all sizes but dim 1 must match")
  end)
end)

describe("in-place ops", function()
  it("update the tensor and return it", function()
    local x = lt.ones(2, 2)
    assert.are.equal(x, x:add_(1))
    x:mul_(lt.tensor{1, 2})
    same_list(x:flatten():tolist(), {2, 4, 2, 4})
    x:add_(lt.ones(2, 2), -0.5)
    same_list(x:flatten():tolist(), {1.5, 3.5, 1.5, 3.5})
    x:sub_(0.5):div_(lt.tensor{{1}, {3}})
    same_list(x:flatten():tolist(), {1, 3, 1 / 3, 1}, 1e-6)
    x:copy_(lt.tensor{7, 8})
    same_list(x:flatten():tolist(), {7, 8, 7, 8})
    x:zero_()
    assert.are.equal(0, x:abs():sum():item())
    x:uniform_(2, 3)
    assert.is_true(x:min():item() >= 2 and x:max():item() <= 3)
    x:normal_(10, 0.001)
    assert.is_true(math.abs(x:mean():item() - 10) < 0.01)
  end)

  it("works through strided views", function()
    local x = lt.zeros(3, 3)
    x:t()[1]:fill_(1) -- column 1
    same_list(x:flatten():tolist(), {1, 0, 0, 1, 0, 0, 1, 0, 0})
  end)

  it("refuses a result that does not fit the tensor", function()
    assert.has_error(function() lt.zeros(3):add_(lt.zeros(2, 3)) end,
      "add_: the result would have shape [2 x 3], but the tensor updated in place is [3]")
  end)
end)

describe("int64 arithmetic", function()
  -- PyTorch wraps int64 overflow around (two's complement); lutra computes it without C's undefined
  -- signed overflow (tests/run's sanitizer build reports any)
  it("wraps around on overflow as PyTorch does", function()
    local big = lt.tensor({ 2 ^ 62 }, "int64")
    assert.are.equal(-2 ^ 63, (big + big):flatten():tolist()[1])
    assert.are.equal(0, (big * 4):flatten():tolist()[1])
    assert.are.equal(-2 ^ 63, lt.tensor({ -2 ^ 63 }, "int64"):neg():flatten():tolist()[1])
    assert.are.equal(-2 ^ 63, lt.tensor({ -2 ^ 63 }, "int64"):abs():flatten():tolist()[1])
    assert.are.equal(-2 ^ 63, lt.tensor({ 2 ^ 62, 2 ^ 62 }, "int64"):sum():item())
    assert.are.equal(0, lt.tensor({ 2 ^ 32 }, "int64"):square():flatten():tolist()[1])
  end)
end)

describe("allclose", function()
  it("follows torch.allclose: tolerances, broadcasting, NaN never close, equal infinities close", function()
    assert.is_true(lt.tensor { 1, 2 }:allclose(lt.tensor { 1, 2.00001 }))
    assert.is_false(lt.tensor { 1, 2 }:allclose(lt.tensor { 1, 2.001 }))
    assert.is_true(lt.tensor { 1, 2 }:allclose(lt.tensor { 1, 2.001 }, 1e-3))
    assert.is_true(lt.ones(2, 3):allclose(lt.ones(3))) -- broadcast
    assert.is_false(lt.tensor { 1, 0 / 0 }:allclose(lt.tensor { 1, 0 / 0 }))
    assert.is_true(lt.tensor { 1, math.huge }:allclose(lt.tensor { 1, math.huge }))
    assert.is_false(lt.tensor { math.huge }:allclose(lt.tensor { -math.huge }))
    assert.is_true(lt.tensor({ 1, 2 }, "int64"):allclose(lt.tensor { 1, 2 }))
    local ok, err = pcall(function() return lt.zeros(2, 3):allclose(lt.zeros(3, 2)) end)
    assert.is_false(ok)
    assert.matches("allclose: shapes [2 x 3] and [3 x 2] cannot be broadcast", err, 1, true)
  end)

  it("keeps an error that is not about shapes: out of memory says so", function()
    -- [200000 x 1] against [1 x 200000] broadcasts to 160 GB: the allocation fails, the shapes are fine
    local ok, err = pcall(function() return lt.zeros(200000, 1):allclose(lt.zeros(1, 200000)) end)
    assert.is_false(ok)
    assert.matches("out of memory", err, 1, true)
    assert.is_nil(err:find("broadcast", 1, true))
  end)
end)

describe("var, std, argmin, masked_fill, split, chunk", function()
  local x = lt.tensor { { 1, 2, 3 }, { 4, 5, 7 } }
  it("computes torch's values (var and std Bessel-corrected by default)", function()
    assert.is_true(math.abs(x:var():item() - 14 / 3) < 1e-5) -- torch.var: 4.6667
    assert.is_true(lt.tensor { 1.0, 1.5275252 }:allclose(x:std(2), 1e-5))
    assert.is_true(lt.tensor { 2.25, 2.25, 4 }:allclose(x:var(1, false, { unbiased = false })))
    assert.are.same({ 2, 1 }, x:var(2, true):shape())
    assert.is_true(lt.tensor({ 5 }):var():item() ~= lt.tensor({ 5 }):var():item()) -- one element: NaN
    assert.are.equal(1, x:argmin():item())
    assert.are.same({ 1, 1 }, x:argmin(2):flatten():tolist())
    assert.are.same({ { 1, 2, 3 }, { 0, 0, 0 } }, x:masked_fill(x:gt(3), 0):totable())
    local parts = x:split(2, 2)
    assert.are.equal(2, #parts)
    assert.are.same({ { 3 }, { 7 } }, parts[2]:totable())
    assert.are.same({ 2, 1 }, x:chunk(2, 2)[2]:shape())
    assert.are.equal(3, #lt.arange(1, 8):chunk(3))
  end)

  it("rejects bad arguments by name", function()
    assert.has_error(function() x:var(1, false, { biased = true }) end,
      "var: unknown option 'biased' (known options: unbiased)")
    assert.has_error(function() x:split(0) end, "split: size must be a positive integer, got 0")
    assert.has_error(function() x:chunk(1.5) end, "chunk: the number of chunks must be a positive integer, got 1.5")
    assert.has_error(function() x:masked_fill(x:gt(3), "a") end, "masked_fill: value must be a number, got string")
  end)
end)
