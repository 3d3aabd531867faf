-- ties_spec: what lutra does when values tie, pinned to PyTorch 1.13 (tests/fixtures/ties.json, written by
-- tests/fixtures/gen_ties.py): maximum/minimum share the gradient half and half on ties (broadcast too);
-- max/min/argmax pick the first occurrence overall and along a dim; max/min along a dim send the gradient to that
-- index, over all elements they share it evenly among the tied elements. Gradchecks cannot see any of this:
-- finite differences are undefined at a tie.
local X = require "helpers.nn_fixtures"

local cases = {}
for _, c in ipairs(X.load("ties.json")) do cases[c.name] = c end

local function leaf(obj)
  local t = X.tensor(obj)
  t:requires_grad(true)
  return t
end

describe("ties", function()
  for _, name in ipairs { "maximum_same_shape", "maximum_broadcast", "minimum_same_shape", "minimum_broadcast" } do
    it(name .. ": each side gets half the gradient where a == b", function()
      local c = cases[name]
      local a, b = leaf(c.a), leaf(c.b)
      local out = a[c.op](a, b)
      X.check(name .. " output", out, c.output)
      out:backward(X.tensor(c.grad_output))
      X.check(name .. " grad a", a.grad, c.grad_a)
      X.check(name .. " grad b", b.grad, c.grad_b)
    end)
  end

  for _, op in ipairs { "max", "min" } do
    it(op .. "(): the first occurrence's index, the gradient shared evenly among the tied elements", function()
      local c = cases[op .. "_all"]
      local x = leaf(c.input)
      local v = x[op](x)
      X.check(op .. " value", v, c.output)
      v:backward()
      X.check(op .. " grad", x.grad, c.grad_input)
      if op == "max" then assert.are.equal(c.index.data[1], x:argmax():item()) end
    end)

    for _, dim in ipairs { 1, 2 } do
      it(op .. "(" .. dim .. "): the first occurrence along the dim, and its gradient goes to that index", function()
        local c = cases[op .. "_dim" .. dim]
        local x = leaf(c.input)
        local v, i = x[op](x, dim)
        X.check(op .. " values", v, c.values)
        assert.are.same(c.indices.data, i:tolist())
        if op == "max" then assert.are.same(c.argindex.data, x:argmax(dim):tolist()) end
        v:backward(X.tensor(c.grad_output))
        X.check(op .. " grad", x.grad, c.grad_input)
      end)
    end
  end
end)
