-- tests/nn_spec.lua — lt.nn modules: PyTorch fixtures (forward, input and parameter gradients, running
-- stats), naming, state_dict, train/eval, error messages with the module path.
local lt = require "lutra"
local X = require "tests.helpers.nn_fixtures"
local nn = lt.nn

local function build(case)
  local args = {}
  for i, a in ipairs(case.args) do args[i] = a end
  if next(case.opts) ~= nil then args[#args + 1] = case.opts end
  return nn[case.module](unpack(args, 1, #case.args + 1))
end

describe("nn modules against PyTorch fixtures (tests/fixtures/modules.json)", function()
  for _, case in ipairs(X.load("modules.json")) do
    local ok, cls = pcall(function() return nn[case.module] end)
    if not (ok and cls) then pending(case.name .. ": lt.nn." .. case.module .. " is not built yet") else
    it("matches " .. case.name .. ": output, gradients" .. (case.buffers_after and ", running stats" or ""), function()
      local m = build(case)
      if case.mode == "eval" then m:eval() else m:train() end
      for name, p in pairs(case.params) do m[name] = X.tensor(p):requires_grad(true) end
      for name, b in pairs(case.buffers or {}) do m[name] = X.tensor(b) end
      local x = X.tensor(case.input)
      if x:dtype() == "float32" then x:requires_grad(true) end
      local out, state = m(x)
      X.check("output", out, case.output)
      if case.h_n then
        X.check("h_n", state[1], case.h_n)
        X.check("c_n", state[2], case.c_n)
      end
      out:backward(X.tensor(case.grad_output))
      if case.grad_input then X.check("grad_input", x.grad, case.grad_input) end
      for name, g in pairs(case.grad_params) do X.check("grad of " .. name, m[name].grad, g) end
      for name, b in pairs(case.buffers_after or {}) do X.check("buffer " .. name, m[name], b) end
    end)
    end
  end
end)
