-- vision_unbatched_spec.lua — lt.F's convolutions and pools on inputs without a batch dim, as PyTorch 1.13 takes
-- them ([C, L] for conv1d and the 1-d pools, [C, H, W] for conv2d, conv_transpose2d and the 2-d pools): values
-- and input gradients against PyTorch (tests/fixtures/unbatched.json from gen_unbatched.py), the same numbers as
-- the batch of one, and the errors.
local lt = require "lutra"
local X = require "tests.helpers.nn_fixtures"
local err_of = require "helpers.err_of"
local F = lt.F
local unpack = table.unpack or unpack -- luacheck: ignore 143

local cases = X.load("unbatched.json")

-- F[cs.fn](x, params..., args...); a convolution without a bias gets nil for it
local function call(cs, x, params)
  local args, n = {}, 0
  for _, p in ipairs(params) do n = n + 1; args[n] = p end
  if cs.fn:find("^conv") and n == 1 then n = 2 end
  for _, a in ipairs(cs.args) do n = n + 1; args[n] = a end
  return F[cs.fn](x, unpack(args, 1, n))
end

describe("lt.F on unbatched inputs against PyTorch 1.13", function()
  for _, cs in ipairs(cases) do
    it(cs.name .. ": output and input gradient, and the batch of one's numbers", function()
      local x = X.tensor(cs.input):requires_grad(true)
      local params = {}
      for i, p in ipairs(cs.params) do params[i] = X.tensor(p) end
      local y = call(cs, x, params)
      X.check(cs.name .. " output", y, cs.output)
      y:backward(X.tensor(cs.grad_output))
      X.check(cs.name .. " grad_input", x.grad, cs.grad_input)
      local batched = call(cs, X.tensor(cs.input):unsqueeze(1), params)
      assert.are.same(batched:squeeze(1):tolist(), y:tolist())
    end)
  end

  it("adaptive_max_pool1d's indices lose the batch dim too", function()
    local x = lt.randn(3, 10)
    local y, i = F.adaptive_max_pool1d(x, 4, true)
    local yb, ib = F.adaptive_max_pool1d(x:unsqueeze(1), 4, true)
    assert.are.same(yb:squeeze(1):tolist(), y:tolist())
    assert.are.same(ib:squeeze(1):tolist(), i:tolist())
  end)

  it("errors: an input of other dims names both forms; a kernel's error reads as for a batch", function()
    assert.matches("conv2d: input must be 4-D [batch x channels x height x width] or unbatched 3-D, got [5 x 5]",
      err_of(F.conv2d, lt.randn(5, 5), lt.randn(2, 1, 3, 3)), 1, true)
    assert.matches("conv1d: input must be 3-D [batch x channels x length] or unbatched 2-D, got [1 x 2 x 3 x 4]",
      err_of(F.conv1d, lt.randn(1, 2, 3, 4), lt.randn(2, 2, 3)), 1, true)
    assert.matches("max_pool1d: input must be 3-D [batch x channels x length] or unbatched 2-D, got [7]",
      err_of(F.max_pool1d, lt.randn(7), 2), 1, true)
    local batched = err_of(F.conv2d, lt.randn(1, 2, 5, 5), lt.randn(2, 1, 3, 3))
    assert.are.equal(batched, err_of(F.conv2d, lt.randn(2, 5, 5), lt.randn(2, 1, 3, 3)))
    assert.matches("^conv2d: input has 2 channels, expected 1", batched)
  end)
end)
