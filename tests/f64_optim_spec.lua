-- f64_optim_spec.lua — SGD (momentum, dampening, nesterov, weight_decay, maximize), Adam and AdamW (amsgrad,
-- weight_decay) on float64 parameters against torch 1.13 (tests/fixtures/f64_optim.json, gen_f64_optim.py):
-- parameters and state buffers after each step to 1e-12, the state kept in float64; a state_dict round trip;
-- the other optimizers are f64_optim2_spec's.
local lt = require "lutra"
local cjson = require "cjson"

local f64_ref = require "tests.helpers.f64_ref"
local tensor_of, check = f64_ref.tensor_of, f64_ref.check

local function options(o) -- the fixture's options with Lua lists for tuples
  local t = {}
  for k, v in pairs(o) do t[k] = v end
  return t
end

describe("float64 optimizers against torch 1.13 (f64_optim.json)", function()
  local fx = f64_ref.load("f64_optim")
  for n, c in ipairs(fx.cases) do
    it(string.format("%s %s", c.optimizer, cjson.encode(c.options)), function()
      local w, b = tensor_of(fx.w0):requires_grad(true), tensor_of(fx.b0):requires_grad(true)
      local opt = lt.optim[c.optimizer]({ w, b }, options(c.options))
      for s, want in ipairs(c.steps) do
        local gw, gb = tensor_of(fx.grads[s][1]), tensor_of(fx.grads[s][2])
        opt:zero_grad()
        local loss = (w * gw):sum() + (b * gb):sum()
        loss:backward()
        opt:step()
        check(string.format("case %d step %d w", n, s), w, want.w)
        check(string.format("case %d step %d b", n, s), b, want.b)
        local st = opt:state_dict().state[1]
        for k, ref in pairs(want.state_w) do check(string.format("case %d step %d %s", n, s, k), st[k], ref) end
      end
    end)
  end

  it("a state_dict round trip keeps the float64 state and the next step", function()
    local function run(reload)
      local w = tensor_of(fx.w0):requires_grad(true)
      local opt = lt.optim.Adam({ w }, { lr = 0.01, amsgrad = true })
      for s = 1, 3 do
        if s == 3 and reload then
          local opt2 = lt.optim.Adam({ w }, { lr = 0.01, amsgrad = true })
          opt2:load_state_dict(opt:state_dict())
          opt = opt2
        end
        opt:zero_grad()
        local loss = (w * tensor_of(fx.grads[s][1])):sum()
        loss:backward()
        opt:step()
      end
      return w, opt:state_dict().state[1]
    end
    local w1, st1 = run(false)
    local w2, st2 = run(true)
    assert.are.same(w1:tolist(), w2:tolist())
    assert.are.equal("float64", st2.exp_avg_sq:dtype())
    assert.are.same(st1.max_exp_avg_sq:tolist(), st2.max_exp_avg_sq:tolist())
  end)
end)
