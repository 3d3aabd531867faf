-- autograd_spec: a finite-difference gradient check for every differentiable op of docs/reference/tensor.md, and the
-- autograd rules: accumulation, no_grad, detach, graph freed by backward, errors.
local lt = require "lutra"

-- Compares autograd's gradient of sum(fn(inputs) * r) with central differences computed in doubles.
local function gradcheck(name, fn, inputs, opts)
  opts = opts or {}
  local eps, rtol, atol = opts.eps or 1e-2, opts.rtol or 2e-2, opts.atol or 2e-3
  for _, x in ipairs(inputs) do x:requires_grad(true); x.grad = nil end
  local y = fn(unpack(inputs))
  lt.manual_seed(7)
  local r = lt.randn(y:shape())
  local rl = r:flatten():tolist()
  local function f()
    local out = lt.no_grad(fn, unpack(inputs)):flatten():tolist()
    local s = 0
    for i = 1, #out do s = s + out[i] * rl[i] end
    return s
  end
  ;(y * r):sum():backward()
  for k, x in ipairs(inputs) do
    local g = x.grad and x.grad:flatten():tolist()
    assert(g, ("%s: input %d got no gradient"):format(name, k))
    local flat = x:view(-1)
    for i = 1, x:numel() do
      local v = flat[i]:item()
      lt.no_grad(function() flat[i] = v + eps end)
      local fp = f()
      lt.no_grad(function() flat[i] = v - eps end)
      local fm = f()
      lt.no_grad(function() flat[i] = v end)
      local num = (fp - fm) / (2 * eps)
      if math.abs(num - g[i]) > atol + rtol * math.abs(num) then
        error(("%s: input %d element %d: autograd %.6g, finite difference %.6g"):format(name, k, i, g[i], num), 2)
      end
    end
  end
  return true
end

-- inputs away from kinks (|x| >= 0.1) for relu/abs/clamp/max
local function away(shape, seed)
  lt.manual_seed(seed or 1)
  local x = lt.rand(shape) * 1.8 + 0.2
  local s = lt.rand(shape):gt(0.5) * 2 - 1
  return (x * s):detach()
end
local function pos(shape, seed)
  lt.manual_seed(seed or 2)
  return (lt.rand(shape) + 0.5):detach()
end
local function rn(shape, seed)
  lt.manual_seed(seed or 3)
  return lt.randn(shape)
end

describe("gradient checks", function()
  it("add, sub, mul, div with broadcasting", function()
    gradcheck("add", function(a, b) return a + b end, {rn{2, 3}, rn{3}})
    gradcheck("sub", function(a, b) return a - b end, {rn{2, 1}, rn{1, 3}})
    gradcheck("mul", function(a, b) return a * b end, {rn{2, 3}, rn{2, 1}})
    gradcheck("div", function(a, b) return a / b end, {rn{2, 3}, pos{3}})
  end)
  it("scalar forms on either side", function()
    gradcheck("add scalar", function(a) return a + 3 end, {rn{4}})
    gradcheck("rsub", function(a) return 3 - a end, {rn{4}})
    gradcheck("mul scalar", function(a) return a * -2.5 end, {rn{4}})
    gradcheck("div scalar", function(a) return a / 4 end, {rn{4}})
    gradcheck("rdiv", function(a) return 2 / a end, {pos{4}})
    gradcheck("pow scalar", function(a) return a ^ 3 end, {rn{4}})
    gradcheck("rpow", function(a) return lt.tensor{2}:pow(a) end, {rn{1}})
    gradcheck("pow tensor", function(a, b) return a:pow(b) end, {pos{3}, rn{3}})
  end)
  it("maximum and minimum", function()
    gradcheck("maximum", function(a, b) return a:maximum(b) end, {away({5}, 1), away({5}, 9)})
    gradcheck("minimum", function(a, b) return a:minimum(b) end, {away({5}, 1), away({5}, 9)})
  end)
  it("unary maths and activations", function()
    gradcheck("neg", function(a) return -a end, {rn{5}})
    gradcheck("exp", function(a) return a:exp() end, {rn{5}})
    gradcheck("log", function(a) return a:log() end, {pos{5}})
    gradcheck("sqrt", function(a) return a:sqrt() end, {pos{5}})
    gradcheck("rsqrt", function(a) return a:rsqrt() end, {pos{5}})
    gradcheck("abs", function(a) return a:abs() end, {away{5}})
    gradcheck("tanh", function(a) return a:tanh() end, {rn{5}})
    gradcheck("sigmoid", function(a) return a:sigmoid() end, {rn{5}})
    gradcheck("relu", function(a) return a:relu() end, {away{6}})
    gradcheck("leaky_relu", function(a) return a:leaky_relu(0.2) end, {away{6}})
    gradcheck("gelu", function(a) return a:gelu() end, {rn{6}})
    gradcheck("sin", function(a) return a:sin() end, {rn{5}})
    gradcheck("cos", function(a) return a:cos() end, {rn{5}})
    gradcheck("log1p", function(a) return a:log1p() end, {pos{5}})
    gradcheck("square", function(a) return a:square() end, {rn{5}})
    gradcheck("clamp", function(a) return a:clamp(-0.5, 0.5) end, {away{8}})
  end)
  it("where", function()
    local cond = lt.tensor{1, 0, 1, 0}
    gradcheck("where", function(a, b) return lt.where(cond, a, b) end, {rn{4}, rn{1}})
  end)
  it("matmul in its 1-D, 2-D, transposed and batched forms", function()
    gradcheck("matmul 2d", function(a, b) return a:matmul(b) end, {rn{3, 4}, rn{4, 2}})
    gradcheck("matmul t", function(a, b) return a:t():matmul(b:t()) end, {rn{4, 3}, rn{2, 4}})
    gradcheck("matmul mv", function(a, b) return a:matmul(b) end, {rn{3, 4}, rn{4}})
    gradcheck("matmul vm", function(a, b) return a:matmul(b) end, {rn{3}, rn{3, 2}})
    gradcheck("matmul dot", function(a, b) return a:matmul(b) end, {rn{3}, rn{3}})
    gradcheck("matmul batched", function(a, b) return a:matmul(b) end, {rn{2, 3, 4}, rn{2, 4, 2}})
    gradcheck("matmul broadcast", function(a, b) return a:matmul(b) end, {rn{2, 3, 4}, rn{4, 2}})
  end)
  it("fused linear with and without bias", function()
    gradcheck("linear", function(x, w, b) return lt.linear(x, w, b) end, {rn{3, 4}, rn{2, 4}, rn{2}})
    gradcheck("linear nobias", function(x, w) return lt.linear(x, w) end, {rn{2, 3, 4}, rn{5, 4}})
  end)
  it("reductions with dim and keepdim", function()
    gradcheck("sum", function(a) return a:sum() end, {rn{2, 3}})
    gradcheck("sum dim", function(a) return a:sum(2) end, {rn{2, 3, 2}})
    gradcheck("sum keepdim", function(a) return a:sum(1, true) end, {rn{2, 3}})
    gradcheck("mean", function(a) return a:mean() end, {rn{2, 3}})
    gradcheck("mean dim", function(a) return a:mean(-1) end, {rn{2, 3}})
    gradcheck("max", function(a) return a:max() end, {away{7}})
    gradcheck("max dim", function(a) return (a:max(2)) end, {away({3, 4}, 5)})
    gradcheck("min dim keepdim", function(a) return (a:min(1, true)) end, {away({3, 4}, 6)})
  end)
  it("softmax and log_softmax", function()
    gradcheck("softmax", function(a) return a:softmax(2) end, {rn{2, 4}})
    gradcheck("softmax dim1", function(a) return a:softmax(1) end, {rn{3, 2}})
    gradcheck("log_softmax", function(a) return a:log_softmax(2) end, {rn{2, 4}})
    gradcheck("log_softmax 3d", function(a) return a:log_softmax(2) end, {rn{2, 3, 2}})
  end)
  it("views", function()
    gradcheck("view", function(a) return a:view(3, 2) * lt.tensor{1, 2} end, {rn{2, 3}})
    gradcheck("reshape", function(a) return a:t():reshape(6) * lt.arange(1, 7) end, {rn{2, 3}})
    gradcheck("transpose", function(a) return a:transpose(1, 3) * lt.arange(1, 3) end, {rn{2, 3, 2}})
    gradcheck("permute", function(a) return a:permute(3, 1, 2):contiguous() end, {rn{2, 3, 2}})
    gradcheck("narrow", function(a) return a:narrow(2, 2, 2) end, {rn{2, 4}})
    gradcheck("select", function(a) return a:select(2, 3) end, {rn{2, 4}})
    gradcheck("index", function(a) return a[2] end, {rn{3, 2}})
    gradcheck("unsqueeze/squeeze", function(a) return a:unsqueeze(1):squeeze(1) * 2 end, {rn{3}})
    gradcheck("expand", function(a) return a:expand(3, 4) * lt.arange(0, 12):view(3, 4) end, {rn{1, 4}})
    gradcheck("flatten", function(a) return a:flatten() end, {rn{2, 2, 2}})
    gradcheck("clone", function(a) return a:clone() * 3 end, {rn{4}})
  end)
  it("cat, stack, gather, index_select", function()
    gradcheck("cat", function(a, b) return lt.cat({a, b, a}, 2) end, {rn{2, 1}, rn{2, 3}})
    gradcheck("stack", function(a, b) return lt.stack({a, b}, 2) end, {rn{3}, rn{3}})
    local gi = lt.tensor({{1, 1}, {3, 2}}, "int64")
    gradcheck("gather", function(a) return a:gather(2, gi) end, {rn{2, 3}})
    local si = lt.tensor({2, 2, 1}, "int64")
    gradcheck("index_select", function(a) return a:index_select(1, si) end, {rn{3, 2}})
  end)
end)

describe("gradient checks of the composed ops", function()
  it("var, std (all elements and along a dim) and masked_fill", function()
    lt.manual_seed(11)
    local r34 = function() return lt.randn(3, 4) end
    gradcheck("var", function(a) return a:var() end, { r34() })
    gradcheck("var dim", function(a) return a:var(2, true, { unbiased = false }) end, { r34() })
    gradcheck("std dim", function(a) return a:std(1) end, { r34() })
    gradcheck("masked_fill", function(a) return a:masked_fill(a:gt(0), 2) end, { r34() })
  end)
end)

describe("autograd rules", function()
  it("leaves have no grad until a backward reaches them, then accumulate", function()
    local w = lt.tensor{1, 2, 3}:requires_grad(true)
    assert.is_nil(w.grad)
    ;(w * 2):sum():backward()
    assert.are.same({2, 2, 2}, w.grad:flatten():tolist())
    ;(w * w):sum():backward()
    assert.are.same({4, 6, 8}, w.grad:flatten():tolist())
    w:zero_grad()
    assert.are.same({0, 0, 0}, w.grad:flatten():tolist())
    w:zero_grad(true)
    assert.is_nil(w.grad)
  end)

  -- lt.linear adds its weight gradient into an existing grad inside the GEMM (beta = 1) instead of making a
  -- temporary and adding it: the result must be the sum of the separate gradients, whatever the batch size
  -- (batch 1 takes the one-pass outer product), and a grad that shares memory with an operand must not be
  -- overwritten while it is read.
  it("linear accumulates its weight gradient into an existing grad", function()
    lt.manual_seed(3)
    for _, rows in ipairs({ 1, 8 }) do
      local w, b = lt.param(lt.randn(150, 120)), lt.param(lt.randn(150))
      local x1, x2 = lt.randn(rows, 120), lt.randn(rows, 120)
      lt.linear(x1, w, b):tanh():sum():backward()
      local g1, gb1 = w.grad:clone(), b.grad:clone()
      w:zero_grad(true); b:zero_grad(true)
      lt.linear(x2, w, b):tanh():sum():backward()
      local g2, gb2 = w.grad:clone(), b.grad:clone()
      w:zero_grad(true); b:zero_grad(true)
      lt.linear(x1, w, b):tanh():sum():backward()
      local kept = w.grad -- the same tensor must receive the second pass in place
      lt.linear(x2, w, b):tanh():sum():backward()
      assert.are.equal(kept:data_ptr(), w.grad:data_ptr())
      assert.is_true(w.grad:allclose(g1 + g2, 1e-6, 1e-5), "rows " .. rows)
      assert.is_true(b.grad:allclose(gb1 + gb2, 1e-6, 1e-5))
    end
    local w = lt.param(lt.randn(6, 6))
    local x = lt.randn(6, 6)
    local expect = x + lt.ones(6, 6):t():matmul(x) -- d/dW sum(x W^T) = 1^T x, added to the grad (which is x)
    w.grad = x
    lt.linear(x, w):sum():backward()
    assert.is_true(x:allclose(expect, 1e-6, 1e-5))
  end)

  it("matmul accumulates into existing leaf gradients of either operand", function()
    lt.manual_seed(4)
    local function grads(f)
      local a, b = lt.param(lt.randn(5, 7)), lt.param(lt.randn(7, 3))
      local x1, x2 = lt.randn(5, 3), lt.randn(5, 3)
      f(a, b, x1):backward()
      local ga, gb = a.grad:clone(), b.grad:clone()
      a:zero_grad(true); b:zero_grad(true)
      f(a, b, x2):backward()
      local ga2, gb2 = a.grad:clone(), b.grad:clone()
      a:zero_grad(true); b:zero_grad(true)
      f(a, b, x1):backward()
      f(a, b, x2):backward() -- into the existing grads
      assert.is_true(a.grad:allclose(ga + ga2, 1e-6, 1e-5))
      assert.is_true(b.grad:allclose(gb + gb2, 1e-6, 1e-5))
    end
    grads(function(a, b, x) return (a:matmul(b) * x):sum() end)
    grads(function(a, b, x) return (b:t():matmul(a:t()) * x:t()):sum() end) -- transposed views: the usual path
    local w = lt.param(lt.randn(4, 4))
    w.grad = lt.ones(4, 4)
    local g1 = lt.ones(4, 4) + lt.ones(4, 4):matmul(w:t()) + w:t():matmul(lt.ones(4, 4)) -- d sum(w w) = 1 w^T + w^T 1
    w:matmul(w):sum():backward()
    assert.is_true(w.grad:allclose(g1, 1e-6, 1e-5))
  end)

  it("lt.param makes a leaf that requires grad", function()
    local p = lt.param(lt.zeros(2))
    assert.is_true(p:requires_grad())
    assert.is_true(p:is_leaf())
  end)

  it("no_grad records nothing and returns fn's results", function()
    local w = lt.ones(2):requires_grad(true)
    local y, extra = lt.no_grad(function(a) return a * 2, "x" end, w)
    assert.is_false(y:requires_grad())
    assert.is_nil(y:grad_fn())
    assert.are.equal("x", extra)
    assert.is_true(lt.is_grad_enabled())
  end)

  it("no_grad restores grad mode when fn raises", function()
    assert.has_error(function() lt.no_grad(function() error("boom") end) end)
    assert.is_true(lt.is_grad_enabled())
  end)

  it("detach cuts the graph", function()
    local w = lt.ones(2):requires_grad(true)
    local d = (w * 3):detach()
    assert.is_false(d:requires_grad())
    ;(w * d):sum():backward()
    assert.are.same({3, 3}, w.grad:flatten():tolist())
  end)

  it("backward frees the graph: a second backward through it is an error", function()
    local w = lt.ones(2):requires_grad(true)
    local loss = (w * w):sum()
    loss:backward()
    assert.has_error(function() loss:backward() end,
      "backward: the graph of this result was already freed by an earlier backward() (sum)")
  end)

  it("shared subexpressions get the sum of their gradients", function()
    local x = lt.tensor{2}:requires_grad(true)
    local y = x * x
    ;(y + y * 3):backward()
    assert.are.equal(16, x.grad:item())
  end)

  it("gradients flow only to inputs that require grad", function()
    local a = lt.tensor{1, 2}:requires_grad(true)
    local b = lt.tensor{3, 4}
    ;(a * b):sum():backward()
    assert.are.same({3, 4}, a.grad:flatten():tolist())
    assert.is_nil(b.grad)
  end)

  it("explains a backward on a non-scalar or a tensor without grad", function()
    local a = lt.ones(2):requires_grad(true)
    assert.has_error(function() (a * 2):backward() end,
      "backward: grad can be implicitly created only for a tensor with one element, got shape [2] (pass a gradient)")
    assert.has_error(function() lt.ones(2):sum():backward() end,
      "backward: the tensor does not require grad and has no grad_fn (did you call x:requires_grad(true)?)")
    ;(a * 2):backward(lt.tensor{1, 10})
    assert.are.same({2, 20}, a.grad:flatten():tolist())
  end)

  it("refuses in-place ops on tensors that require grad, outside no_grad", function()
    local w = lt.ones(2):requires_grad(true)
    assert.has_error(function() w:add_(1) end,
      "add: in-place operation on a tensor that requires grad (use it inside lt.no_grad, or on x:detach())")
    lt.no_grad(function() w:add_(1) end)
    assert.are.same({2, 2}, w:flatten():tolist())
  end)

  it("only float32 tensors can require grad", function()
    assert.has_error(function() lt.tensor({1}, "int64"):requires_grad(true) end,
      "requires_grad: only float32 tensors can require grad, got int64")
  end)
end)
