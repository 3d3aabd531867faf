-- vocab_optim_spec.lua — Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD (core/src/optim_adaptive.c) and LBFGS
-- (lua/lutra/optim/lbfgs.lua): 20-step PyTorch 1.13 trajectories with every option and with param groups
-- (tests/fixtures/vocab_optim.json), state_dict layout and round trips, option errors.
local lt = require "lutra"
local cjson = require "cjson"

local X = require "tests.helpers.nn_fixtures"

local CASES = X.load("vocab_optim.json")
local T = X.tensor

-- |a - b| <= max(1e-6, 1e-5*|b|), the fixtures' tolerance, for numbers
local function near(a, b) return math.abs(a - b) <= math.max(1e-6, 1e-5 * math.abs(b)) end

local function errmsg(fn, ...)
  local ok, e = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

local function objective(p1, p2, c1, c2) return (p1:sin() * c1):sum() + (p2 * p2 * c2):sum() end

local function build(cs, p1, p2)
  if cs.group2 then
    local g2 = { params = { p2 } }
    for k, v in pairs(cs.group2) do g2[k] = v end
    return lt.optim[cs.optimizer]({ { params = { p1 } }, g2 }, cs.opts)
  end
  return lt.optim[cs.optimizer]({ p1, p2 }, cs.opts)
end

-- runs the case's steps; check(s, p1, p2) after each
local function run(cs, opt, p1, p2, c1, c2, from, to, check)
  for s = from, to do
    if cs.optimizer == "LBFGS" then
      opt:step(function()
        opt:zero_grad()
        local l = objective(p1, p2, c1, c2)
        l:backward()
        return l
      end)
    else
      opt:zero_grad()
      objective(p1, p2, c1, c2):backward()
      opt:step()
    end
    check(s)
  end
end

describe("lt.optim (more) fixtures (PyTorch 1.13)", function()
  for _, cs in ipairs(CASES) do
    it("matches PyTorch's " .. cs.name .. " trajectory within 1e-5 relative", function()
      local p1, p2 = lt.param(T(cs.params_init.p1)), lt.param(T(cs.params_init.p2))
      local c1, c2 = T(cs.c1), T(cs.c2)
      local opt = build(cs, p1, p2)
      run(cs, opt, p1, p2, c1, c2, 1, #cs.params_after, function(s)
        X.check(cs.name .. " step " .. s .. " p1", p1, cs.params_after[s].p1)
        X.check(cs.name .. " step " .. s .. " p2", p2, cs.params_after[s].p2)
      end)
      if cs.state_p2 then -- the state PyTorch keeps, under its names
        local st = opt:state_dict().state[2]
        for k, v in pairs(cs.state_p2) do
          assert.is_not_nil(st[k], cs.name .. ": state has no '" .. k .. "'")
          if type(v) == "table" then
            X.check(cs.name .. ": state " .. k, st[k], v)
          else
            assert.is_true(near(st[k], v), cs.name .. ": state " .. k .. " " .. st[k] .. " vs " .. v)
          end
        end
        for k in pairs(st) do assert.is_not_nil(cs.state_p2[k], cs.name .. ": extra state '" .. k .. "'") end
      else
        local st = opt:state_dict().state[1]
        assert.equals(cs.func_evals, st.func_evals)
        assert.equals(cs.n_iter, st.n_iter)
      end
    end)
  end

  it("continues a trajectory exactly after state_dict -> load_state_dict into a new optimizer", function()
    for _, cs in ipairs(CASES) do
      local half = math.floor(#cs.params_after / 2)
      local p1, p2 = lt.param(T(cs.params_init.p1)), lt.param(T(cs.params_init.p2))
      local c1, c2 = T(cs.c1), T(cs.c2)
      local opt = build(cs, p1, p2)
      run(cs, opt, p1, p2, c1, c2, 1, half, function() end)
      local sd = opt:state_dict()
      local q1, q2 = lt.param(p1:detach():clone()), lt.param(p2:detach():clone())
      local opt2 = build(cs, q1, q2)
      opt2:load_state_dict(sd)
      run(cs, opt2, q1, q2, c1, c2, half + 1, #cs.params_after, function(s)
        X.check(cs.name .. " resumed, step " .. s, q1, cs.params_after[s].p1)
        X.check(cs.name .. " resumed, step " .. s, q2, cs.params_after[s].p2)
      end)
    end
  end)
end)

describe("lt.optim (more) options and errors", function()
  it("has PyTorch's defaults", function()
    local p = lt.param(lt.ones(1))
    local d = lt.optim.Adagrad({ p }).param_groups[1]
    assert.same({ 0.01, 0, 0, 0, 1e-10, false }, { d.lr, d.lr_decay, d.weight_decay, d.initial_accumulator_value,
      d.eps, d.maximize })
    d = lt.optim.Adadelta({ p }).param_groups[1]
    assert.same({ 1, 0.9, 1e-6 }, { d.lr, d.rho, d.eps })
    d = lt.optim.Adamax({ p }).param_groups[1]
    assert.same({ 0.002, { 0.9, 0.999 }, 1e-8 }, { d.lr, d.betas, d.eps })
    d = lt.optim.NAdam({ p }).param_groups[1]
    assert.same({ 0.002, 0.004 }, { d.lr, d.momentum_decay })
    d = lt.optim.RAdam({ p }).param_groups[1]
    assert.same({ 0.001, { 0.9, 0.999 } }, { d.lr, d.betas })
    d = lt.optim.ASGD({ p }).param_groups[1]
    assert.same({ 0.01, 1e-4, 0.75, 1e6 }, { d.lr, d.lambd, d.alpha, d.t0 })
    d = lt.optim.LBFGS({ p }).param_groups[1]
    assert.same({ 1, 20, 25, 1e-7, 1e-9, 100 }, { d.lr, d.max_iter, d.max_eval, d.tolerance_grad,
      d.tolerance_change, d.history_size })
  end)

  it("rejects bad and unknown options naming them", function()
    local p = lt.param(lt.ones(1))
    assert.matches("Adagrad: invalid lr_decay value: %-1", errmsg(lt.optim.Adagrad, { p }, { lr_decay = -1 }))
    assert.matches("Adagrad: invalid initial_accumulator_value value: %-0.5",
      errmsg(lt.optim.Adagrad, { p }, { initial_accumulator_value = -0.5 }))
    assert.matches("Adadelta: invalid rho value: 1.5", errmsg(lt.optim.Adadelta, { p }, { rho = 1.5 }))
    assert.matches("Adamax: invalid beta parameter at index 2: 1",
      errmsg(lt.optim.Adamax, { p }, { betas = { 0.9, 1 } }))
    assert.matches("NAdam: invalid momentum_decay value: %-1", errmsg(lt.optim.NAdam, { p }, { momentum_decay = -1 }))
    assert.matches("RAdam: invalid epsilon value: %-1", errmsg(lt.optim.RAdam, { p }, { eps = -1 }))
    assert.matches("ASGD: invalid learning rate: %-1", errmsg(lt.optim.ASGD, { p }, { lr = -1 }))
    -- NAdam and RAdam have no maximize in PyTorch 1.13
    assert.matches("NAdam: unknown option 'maximize' %(expected one of lr, betas, eps, weight_decay, momentum_decay%)",
      errmsg(lt.optim.NAdam, { p }, { maximize = true }))
    assert.matches("ASGD: option 't0' must be a number, got string", errmsg(lt.optim.ASGD, { p }, { t0 = "x" }))
    assert.matches("LBFGS: unknown option 'momentum'", errmsg(lt.optim.LBFGS, { p }, { momentum = 0.9 }))
    assert.matches("LBFGS: line_search_fn must be nil or \"strong_wolfe\", got armijo",
      errmsg(lt.optim.LBFGS, { p }, { line_search_fn = "armijo" }))
    assert.matches("LBFGS: option 'max_iter' must be an integer, got 2.5",
      errmsg(lt.optim.LBFGS, { p }, { max_iter = 2.5 }))
    assert.matches("LBFGS: doesn't support per%-parameter options",
      errmsg(lt.optim.LBFGS, { { params = { p } }, { params = { lt.param(lt.ones(1)) } } }))
    local opt = lt.optim.LBFGS({ p })
    assert.matches("LBFGS: step needs a closure", errmsg(opt.step, opt))
    assert.matches("LBFGS: the closure must return the loss %(a one%-element tensor or a number%), got a tensor of 2",
      errmsg(opt.step, opt, function() return lt.ones(2) end))
  end)

  it("loads a state dict with wrong shapes or names as an error, changing nothing", function()
    local p = lt.param(lt.ones(3))
    local opt = lt.optim.Adamax({ p })
    p.grad = lt.ones(3)
    opt:step()
    local sd = opt:state_dict()
    sd.state[1].exp_inf = lt.ones(2)
    assert.matches(
      "Adamax: load_state_dict: state%[1%]%.exp_inf has shape %[2%], but parameter 1 of group 1 has shape %[3%]",
      errmsg(opt.load_state_dict, opt, sd))
    sd = opt:state_dict()
    sd.state[1].mu_product = 1
    assert.matches("Adamax: load_state_dict: state%[1%] has an unknown entry 'mu_product'",
      errmsg(opt.load_state_dict, opt, sd))
  end)

  it("keeps memory flat: a step of every kind allocates nothing that outlives it", function()
    for _, kind in ipairs { "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "ASGD" } do
      local p = lt.param(lt.randn(50, 40))
      local opt = lt.optim[kind]({ p })
      p.grad = lt.randn(50, 40)
      local function live() collectgarbage(); collectgarbage(); return lt.memory_stats().live_bytes end
      for _ = 1, 3 do opt:step() end
      local before = live()
      for _ = 1, 200 do opt:step() end
      assert.equals(before, live(), kind)
    end
  end)

  it("Adagrad has its state from the start (step 0, sum = initial_accumulator_value), as PyTorch's", function()
    local p = lt.param(lt.ones(2))
    local st = lt.optim.Adagrad({ p }, { initial_accumulator_value = 0.25 }):state_dict().state[1]
    assert.equals(0, st.step)
    assert.same({ 0.25, 0.25 }, st.sum:tolist())
  end)

  it("ASGD keeps the running average ax of the iterates once step > t0", function()
    local p = lt.param(lt.tensor { 1, 2 })
    local opt = lt.optim.ASGD({ p }, { lr = 0.1, t0 = 2, lambd = 0 })
    local sum = { 0, 0 }
    for s = 1, 6 do
      p.grad = lt.tensor { 1, -1 }
      opt:step()
      if s >= 4 then
        local v = p:tolist()
        sum[1], sum[2] = sum[1] + v[1], sum[2] + v[2]
      end
    end
    -- step s averages with mu = 1/max(1, s - 1 - t0): ax is the plain mean of the iterates from step 4
    local ax = opt:state_dict().state[1].ax:tolist()
    assert.is_true(math.abs(ax[1] - sum[1] / 3) < 1e-6 and math.abs(ax[2] - sum[2] / 3) < 1e-6)
  end)

  it("LBFGS runs under the Trainer's manual optimization, the closure passed through self:optimizers()", function()
    local m = { w = lt.param(lt.zeros(2)), automatic_optimization = false }
    local hooks = 0
    function m:training_step()
      local opt = self:optimizers()
      opt:step(function()
        opt:zero_grad()
        local l = ((self.w - lt.tensor { 1, -2 }) ^ 2):sum()
        self:manual_backward(l)
        return l
      end)
    end
    function m:on_before_optimizer_step() hooks = hooks + 1 end
    function m:configure_optimizers() return lt.optim.LBFGS({ self.w }, { line_search_fn = "strong_wolfe" }) end
    local t = lt.Trainer(require "tests.helpers.quiet" { max_epochs = 1 })
    t:fit(m, require("tests.helpers.loader").of { { lt.zeros(1) } })
    local v = m.w:tolist()
    assert.is_true(math.abs(v[1] - 1) < 1e-5 and math.abs(v[2] + 2) < 1e-5, cjson.encode(v))
    assert.is_true(hooks > 1) -- once after every evaluation, as Lightning's closure wrapper
    assert.equals(1, t.global_step)
  end)

  it("LBFGS minimises a quadratic to its optimum (strong Wolfe)", function()
    local A = lt.tensor { { 3, 1 }, { 1, 2 } }
    local b = lt.tensor { 1, -1 }
    local x = lt.param(lt.zeros(2))
    local opt = lt.optim.LBFGS({ x }, { line_search_fn = "strong_wolfe" })
    local loss = opt:step(function()
      opt:zero_grad()
      local l = (x:view(1, 2):matmul(A):view(2) * x):sum() * 0.5 - (b * x):sum()
      l:backward()
      return l
    end)
    assert.equals(0, loss:item()) -- the first evaluation, at x = 0
    -- A x = b: x = (0.6, -0.8)
    local v = x:tolist()
    assert.is_true(math.abs(v[1] - 0.6) < 1e-5 and math.abs(v[2] + 0.8) < 1e-5, cjson.encode(v))
    assert.is_true(x:is_leaf() and x:requires_grad())
  end)
end)
