-- tests/losses_spec.lua — lt.F losses: PyTorch fixtures (value and input gradient for every reduction),
-- options and error messages.
local lt = require "lutra"
local X = require "tests.helpers.nn_fixtures"
local F = lt.F

describe("lt.F losses against PyTorch fixtures (tests/fixtures/losses.json)", function()
  for _, case in ipairs(X.load("losses.json")) do
    it("matches " .. case.name .. ": value and grad of input", function()
      local opts = {}
      for k, v in pairs(case.opts) do opts[k] = type(v) == "table" and X.tensor(v) or v end
      local x = X.tensor(case.input):requires_grad(true)
      local out = F[case.fn](x, X.tensor(case.target), opts)
      X.check("output", out, case.output)
      out:backward(X.tensor(case.grad_output))
      X.check("grad_input", x.grad, case.grad_input)
    end)
  end
end)
