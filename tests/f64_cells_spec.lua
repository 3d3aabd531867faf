-- f64_cells_spec.lua — LSTMCell, GRUCell and RNNCell (tanh, relu) on float64 input against torch 1.13
-- (tests/fixtures/f64_cells.json, gen_f64_cells.py): one step's new state and the gradients of the input, the
-- state and every weight to 1e-12, with a float64 finite-difference gradcheck of the input.
local lt = require "lutra"
local cjson = require "cjson"

local f64_ref = require "tests.helpers.f64_ref"
local tensor_of, check = f64_ref.tensor_of, f64_ref.check

local CASES = f64_ref.load("f64_cells")

describe("float64 recurrent cells against torch 1.13 (f64_cells.json)", function()
  for _, c in ipairs(CASES) do
    it(c.cell .. " " .. cjson.encode(c.options), function()
      local opts = next(c.options) and c.options or nil
      local cell = lt.nn[c.cell](3, 4, opts):double()
      local named = cell:named_parameters()
      for j, name in ipairs(c.param_order) do
        local p = assert(named[name], name)
        local w = {}
        for k = 0, p:numel() - 1 do w[k + 1] = ((k * 7919 + (j - 1) * 131) % 1001 - 500) / 1500 end
        lt.no_grad(function() p:copy_(lt.tensor(w, "float64"):reshape(p:shape())) end)
      end
      local lstm = c.cell == "LSTMCell"
      local function run(x, h, c0)
        if lstm then
          local h1, c1 = cell(x, { h, c0 })
          return (h1 * tensor_of(c.gout)):sum() + (c1 * tensor_of(c.goutc)):sum(), h1, c1
        end
        local h1 = cell(x, h)
        return (h1 * tensor_of(c.gout)):sum(), h1
      end
      local x, h = tensor_of(c.x):requires_grad(true), tensor_of(c.h):requires_grad(true)
      local c0 = tensor_of(c.c):requires_grad(true)
      local loss, h1, c1 = run(x, h, c0)
      loss:backward()
      check("h'", h1, c.h1)
      if lstm then check("c'", c1, c.c1) end
      check("grad x", x.grad, c.grad_x)
      check("grad h", h.grad, c.grad_h)
      if lstm then check("grad c", c0.grad, c.grad_c) end
      for name, ref in pairs(c.grad_params) do check("grad " .. name, named[name].grad, ref) end
      -- central differences of the loss in x (relu: the inputs sit away from its kink for h = 1e-6)
      local flat, ga = tensor_of(c.x):flatten():tolist(), x.grad:flatten():tolist()
      for k = 1, #flat do
        local function at(v)
          local p = lt.tensor(flat, "float64")
          p[k] = v
          return run(p:reshape(c.x.shape), tensor_of(c.h), tensor_of(c.c)):item()
        end
        local num = (at(flat[k] + 1e-6) - at(flat[k] - 1e-6)) / 2e-6
        assert(math.abs(num - ga[k]) <= 1e-7 * math.max(1, math.abs(num)),
          string.format("gradcheck x[%d]: autograd %.12g, differences %.12g", k, ga[k], num))
      end
    end)
  end
end)
