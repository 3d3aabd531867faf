-- binary_alpha_spec.lua — the third argument of the binary ops: add and sub scale their second operand by
-- alpha as PyTorch's torch.add(x, y, alpha=2) (a number third, as x:add_(y, 2) takes it, or {alpha = 2}), with
-- gradients through both operands; every other third argument is an error naming the op. Until it was checked,
-- x:add(y, 2) silently gave x + y and lt.add(x, y, {out = o}) left o untouched.
local lt = require "lutra"
local gradcheck = require "tests.helpers.gradcheck"
local err_of = require "tests.helpers.err_of"

local function close(a, b, tol)
  assert.are.same(a:shape(), b:shape())
  assert.is_true((a - b):abs():max():item() <= (tol or 1e-6), tostring(a) .. " vs " .. tostring(b))
end

describe("add and sub with alpha", function()
  lt.manual_seed(3)
  local x, y = lt.randn(3, 4), lt.randn(3, 4)

  it("compute x + alpha * y and x - alpha * y, alpha given as a number or as {alpha =}", function()
    close(x:add(y, 2.5), x + y * 2.5)
    close(lt.add(x, y, { alpha = -3 }), x - y * 3)
    close(x:sub(y, 0.5), x - y * 0.5)
    close(lt.sub(x, y, { alpha = 2 }), x - y * 2)
    close(lt.add(x, y, { alpha = 1 }), x + y)
    close(lt.add(x, y, {}), x + y)
  end)

  it("broadcast, take a number on either side and keep float64", function()
    local bias = lt.randn(4)
    close(x:add(bias, 2), x + bias:view(1, 4) * 2)
    close(lt.add(x, 3, 2), x + 6)
    close(lt.sub(5, y, 2), y * -2 + 5)
    local x64, y64 = x:double(), y:double()
    local r = x64:add(y64, 1 / 3)
    assert.are.equal("float64", r:dtype())
    close(r, x64 + y64 * (1 / 3), 1e-15)
  end)

  it("int64 tensors take an integral alpha and refuse a fractional one, as PyTorch's", function()
    local a, b = lt.tensor({ 1, 2 }):long(), lt.tensor({ 10, 20 }):long()
    assert.are.same({ 31, 62 }, a:add(b, 3):totable())
    for _, bad in ipairs { 2.5, 1 / 0, -1e300, 2 ^ 63 } do
      assert.matches(("add: alpha must be an integer within int64's range for an int64 tensor, got %.14g"):format(bad),
        err_of(function() return a:add(b, bad) end), 1, true)
    end
    assert.matches("sub: alpha must be an integer within int64's range", err_of(function() return lt.sub(a, b, 0 / 0) end), 1,
      true)
  end)

  it("differentiate through both operands (finite differences)", function()
    gradcheck(function(a, b) return a:add(b, -1.75) end, { lt.randn(2, 3), lt.randn(2, 3) })
    gradcheck(function(a, b) return lt.sub(a, b, { alpha = 0.5 }) end, { lt.randn(2, 3), lt.randn(3) })
    local a, b = lt.randn(2, 3):requires_grad(true), lt.randn(2, 3):requires_grad(true)
    lt.sub(a, b, 4):sum():backward()
    close(a.grad, lt.ones(2, 3))
    close(b.grad, lt.full({ 2, 3 }, -4))
  end)
end)

describe("the binary ops' other third arguments", function()
  local x, y = lt.ones(2), lt.ones(2)
  it("are errors naming the op and what it takes", function()
    assert.matches("mul: expected (input, other), got 3 arguments", err_of(function() return lt.mul(x, y, 2) end), 1, true)
    assert.matches("maximum: expected (input, other), got 3 arguments",
      err_of(function() return x:maximum(y, {}) end), 1, true)
    assert.matches("add: expected (input, other[, alpha]), got 4 arguments",
      err_of(function() return lt.add(x, y, 2, 3) end), 1, true)
    assert.matches("add: unknown option 'alhpa' (known options: alpha)",
      err_of(function() return lt.add(x, y, { alhpa = 2 }) end), 1, true)
    assert.matches("add: options must be a table {alpha}, got string", err_of(function() return x:add(y, "2") end), 1, true)
    assert.matches("sub: option 'alpha' must be a number, got string",
      err_of(function() return lt.sub(x, y, { alpha = "2" }) end), 1, true)
  end)

  it("out= is refused with what to write instead, and the tensor named as out is untouched", function()
    local o = lt.zeros(2)
    assert.matches("add: option 'out' is not supported: use the result (y = lt.add(a, b)), or update a tensor in place " ..
      "with a:add_(b)", err_of(function() return lt.add(x, y, { out = o }) end), 1, true)
    assert.are.same({ 0, 0 }, o:totable())
  end)

  it("leave the operators as they were (two operands)", function()
    close(x + y, lt.full({ 2 }, 2))
    close(x - 1, lt.zeros(2))
    close(2 * y, lt.full({ 2 }, 2))
  end)
end)
