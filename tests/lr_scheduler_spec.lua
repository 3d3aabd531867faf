-- lr_scheduler_spec.lua — lt.optim.lr_scheduler: PyTorch 1.13 lr/momentum sequences (tests/fixtures/sched.json),
-- state_dict round trips, explicit epochs, ReduceLROnPlateau details and the error messages.
local lt = require "lutra"
local cjson = require "cjson"
local S = lt.optim.lr_scheduler

local function read_json(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return cjson.decode(s)
end

local CASES = read_json("tests/fixtures/sched.json")

local function errmsg(fn, ...)
  local ok, e = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

local function close(a, b) return math.abs(a - b) <= 1e-5 * math.abs(b) end

local function make_opt(cs, kind)
  local p = lt.param(lt.zeros(1))
  if kind == "Adam" then return lt.optim.Adam({ p }, { lr = cs.optimizer.lr }) end
  return lt.optim.SGD({ p }, { lr = cs.optimizer.lr, momentum = cs.optimizer.momentum or 0 })
end

local function make_sched(cs, opt)
  if cs.scheduler == "LambdaLR" then
    assert.equals("0.95^epoch", cs.lambda)
    return S.LambdaLR(opt, function(e) return 0.95 ^ e end)
  end
  return S[cs.scheduler](opt, cs.opts)
end

local function step(cs, sched, i)
  if cs.metrics then sched:step(cs.metrics[i]) else sched:step() end
end

describe("lt.optim.lr_scheduler fixtures (PyTorch 1.13, 30 steps)", function()
  for _, cs in ipairs(CASES) do
    it("matches PyTorch's " .. cs.name .. " lr" .. (cs.momentums and " and momentum" or "") .. " sequence", function()
      local opt = make_opt(cs)
      local sched = make_sched(cs, opt)
      assert.equals(0, sched.last_epoch)
      assert.equals(opt, sched.optimizer)
      for i = 1, cs.steps do
        local g = opt.param_groups[1]
        assert.is_true(close(g.lr, cs.lrs[i]), string.format("step %d: lr %.17g, PyTorch %.17g", i, g.lr, cs.lrs[i]))
        if cs.momentums then
          assert.is_true(close(g.momentum, cs.momentums[i]),
            string.format("step %d: momentum %.17g, PyTorch %.17g", i, g.momentum, cs.momentums[i]))
        end
        opt:step()
        step(cs, sched, i)
        assert.equals(opt.param_groups[1].lr, sched:get_last_lr()[1])
      end
    end)

    it("continues " .. cs.name .. " identically after a state_dict round trip at step 10", function()
      local opt = make_opt(cs)
      local sched = make_sched(cs, opt)
      for i = 1, 10 do opt:step(); step(cs, sched, i) end
      -- through JSON, as a checkpoint stores it
      local osd = opt:state_dict()
      local ssd = cjson.decode(cjson.encode(sched:state_dict()))
      local ref = {}
      for i = 11, cs.steps do
        ref[#ref + 1] = { opt.param_groups[1].lr, opt.param_groups[1].momentum }
        opt:step(); step(cs, sched, i)
      end
      local opt2 = make_opt(cs)
      opt2.param_groups[1].lr = 0.5
      local sched2 = make_sched(cs, opt2)
      opt2:load_state_dict(osd)
      sched2:load_state_dict(ssd)
      assert.equals(10, sched2.last_epoch)
      for i = 11, cs.steps do
        local r = ref[i - 10]
        assert.equals(r[1], opt2.param_groups[1].lr)
        assert.equals(r[2], opt2.param_groups[1].momentum)
        opt2:step(); step(cs, sched2, i)
      end
    end)
  end
end)

describe("lt.optim.lr_scheduler behaviour", function()
  local function sgd(lr, extra)
    local opts = { lr = lr }
    for k, v in pairs(extra or {}) do opts[k] = v end
    return lt.optim.SGD({ lt.param(lt.zeros(1)) }, opts)
  end

  it("records initial_lr in the groups and base_lrs at construction", function()
    local opt = sgd(0.1)
    local sched = S.ExponentialLR(opt, { gamma = 0.5 })
    assert.equals(0.1, opt.param_groups[1].initial_lr)
    assert.same({ 0.1 }, sched.base_lrs)
    assert.same({ 0.1 }, sched:get_last_lr())
    sched:step()
    assert.equals(0.05, opt.param_groups[1].lr)
    assert.equals(1, sched.last_epoch)
  end)

  it("applies to every param group with its own base lr", function()
    local opt = lt.optim.SGD({ { params = { lt.param(lt.zeros(1)) } }, { params = { lt.param(lt.zeros(1)) }, lr = 1 } },
      { lr = 0.1 })
    local sched = S.StepLR(opt, { step_size = 2, gamma = 0.5 })
    sched:step(); sched:step()
    assert.same({ 0.05, 0.5 }, sched:get_last_lr())
  end)

  it("uses the closed form when step is given an explicit epoch", function()
    local opt = sgd(1)
    local sched = S.StepLR(opt, { step_size = 3, gamma = 0.5 })
    sched:step(7)
    assert.equals(0.25, opt.param_groups[1].lr)
    assert.equals(7, sched.last_epoch)
    local cos = S.CosineAnnealingLR(sgd(1), { T_max = 10 })
    cos:step(5)
    assert.is_true(math.abs(cos:get_last_lr()[1] - 0.5) < 1e-15)
  end)

  it("is chainable like PyTorch: a change of lr from outside carries on", function()
    local opt = sgd(1)
    local sched = S.ExponentialLR(opt, { gamma = 0.5 })
    opt.param_groups[1].lr = 4
    sched:step()
    assert.equals(2, opt.param_groups[1].lr)
  end)

  it("LambdaLR takes one function per group, and its state_dict leaves the functions out", function()
    local opt = lt.optim.SGD({ { params = { lt.param(lt.zeros(1)) } }, { params = { lt.param(lt.zeros(1)) } } }, { lr = 1 })
    local sched = S.LambdaLR(opt, { function(e) return e + 1 end, function(e) return 1 / (e + 1) end })
    sched:step()
    assert.same({ 2, 0.5 }, sched:get_last_lr())
    local sd = sched:state_dict()
    assert.is_nil(sd.lr_lambdas)
    assert.equals(1, sd.last_epoch)
    assert.has_no.errors(function() cjson.encode(sd) end)
    local opt2 = lt.optim.SGD({ lt.param(lt.zeros(1)) }, { lr = 1 })
    assert.same({ 3 }, S.LambdaLR(opt2, { lr_lambda = function(e) return e + 3 end }):get_last_lr())
  end)

  it("OneCycleLR cycles beta1 of Adam and refuses to step past total_steps", function()
    local opt = lt.optim.Adam({ lt.param(lt.zeros(1)) }, { lr = 0.1 })
    local sched = S.OneCycleLR(opt, { max_lr = 0.1, epochs = 2, steps_per_epoch = 5 })
    assert.equals(10, sched.total_steps)
    assert.same({ 0.95, 0.999 }, opt.param_groups[1].betas)
    assert.is_true(math.abs(opt.param_groups[1].lr - 0.004) < 1e-15) -- max_lr / div_factor
    for _ = 1, 9 do sched:step() end -- the last step of the cycle: back to max_momentum
    assert.equals(0.95, opt.param_groups[1].betas[1])
    assert.is_true(math.abs(opt.param_groups[1].lr - 4e-7) < 1e-18)
    sched:step() -- PyTorch allows one step more (step_num == total_steps)
    assert.matches("OneCycleLR: tried to step 12 times%. The specified number of total steps is 10",
      errmsg(function() sched:step() end))
  end)

  it("OneCycleLR supports linear annealing and three phases", function()
    local opt = sgd(0.1, { momentum = 0.9 })
    local sched = S.OneCycleLR(opt, { max_lr = 1, total_steps = 10, anneal_strategy = "linear", three_phase = true,
      pct_start = 0.25 })
    -- phases end at 1.5, 3 and 9: lr 0.04 -> 1 -> 0.04 -> 4e-6
    local lrs = { opt.param_groups[1].lr }
    for _ = 1, 9 do sched:step(); lrs[#lrs + 1] = opt.param_groups[1].lr end
    assert.is_true(math.abs(lrs[1] - 0.04) < 1e-15)
    assert.is_true(math.abs(lrs[2] - (0.04 + 0.96 / 1.5)) < 1e-12)
    assert.is_true(math.abs(lrs[4] - 0.04) < 1e-12)
    assert.is_true(math.abs(lrs[10] - 4e-6) < 1e-15)
  end)

  it("ReduceLROnPlateau is marked is_plateau, waits patience epochs, honours cooldown and min_lr", function()
    local opt = sgd(1)
    local sched = S.ReduceLROnPlateau(opt, { mode = "max", factor = 0.5, patience = 1, cooldown = 1, min_lr = 0.3 })
    assert.is_true(sched.is_plateau)
    assert.is_nil(S.StepLR(sgd(1), { step_size = 1 }).is_plateau)
    local lrs = {}
    for _, m in ipairs { 1, 1, 1, 1, 1, 1, 1, 2 } do
      sched:step(lt.tensor(m))
      lrs[#lrs + 1] = opt.param_groups[1].lr
    end
    -- bad epochs: 1 (wait), 2 -> halve, cooldown, 1, 2 -> halve (0.25 clamps to min_lr 0.3) ...
    assert.same({ 1, 1, 0.5, 0.5, 0.5, 0.3, 0.3, 0.3 }, lrs)
    assert.equals(2, sched.best)
    assert.equals(0, sched.num_bad_epochs)
  end)

  it("ReduceLROnPlateau's state_dict holds no infinity before the first metric (JSON-safe)", function()
    local sched = S.ReduceLROnPlateau(sgd(1))
    local sd = sched:state_dict()
    assert.is_nil(sd.best)
    assert.equals(0, sd.last_epoch)
    assert.has_no.errors(function() cjson.encode(sd) end)
  end)
end)

describe("lt.optim.lr_scheduler errors", function()
  local opt = lt.optim.SGD({ lt.param(lt.zeros(1)) }, { lr = 1 })

  it("rejects unknown, missing and mistyped options, naming them", function()
    assert.matches("StepLR: unknown option 'stepsize' %(known options: gamma, step_size%)",
      errmsg(S.StepLR, opt, { stepsize = 3 }))
    assert.matches("StepLR: option 'step_size' is required", errmsg(S.StepLR, opt, {}))
    assert.matches("StepLR: option 'step_size' must be an integer, got 2.5", errmsg(S.StepLR, opt, { step_size = 2.5 }))
    assert.matches("ExponentialLR: option 'gamma' must be a number, got string", errmsg(S.ExponentialLR, opt, { gamma = "x" }))
    assert.matches("MultiStepLR: milestones%[2%] must be an integer, got x",
      errmsg(S.MultiStepLR, opt, { milestones = { 1, "x" } }))
  end)

  it("rejects what is not an optimizer", function()
    assert.matches("StepLR: expected an optimizer %(with param_groups%), got number", errmsg(S.StepLR, 3, { step_size = 1 }))
  end)

  it("checks values as PyTorch does", function()
    assert.matches("OneCycleLR: you must define either total_steps OR %(epochs AND steps_per_epoch%)",
      errmsg(S.OneCycleLR, opt, { max_lr = 0.1 }))
    assert.matches("OneCycleLR: expected positive integer total_steps, but got 0",
      errmsg(S.OneCycleLR, opt, { max_lr = 0.1, total_steps = 0 }))
    assert.matches("OneCycleLR: anneal_strategy must be one of 'cos' or 'linear', instead got 'exp'",
      errmsg(S.OneCycleLR, opt, { max_lr = 0.1, total_steps = 5, anneal_strategy = "exp" }))
    assert.matches("ReduceLROnPlateau: factor should be < 1.0, got 2", errmsg(S.ReduceLROnPlateau, opt, { factor = 2 }))
    assert.matches("ReduceLROnPlateau: mode 'avg' is unknown", errmsg(S.ReduceLROnPlateau, opt, { mode = "avg" }))
    assert.matches("LambdaLR: expected 1 lr_lambdas %(one per param group%), got 2",
      errmsg(S.LambdaLR, opt, { function() return 1 end, function() return 1 end }))
    assert.matches("LambdaLR: expected a function", errmsg(S.LambdaLR, opt, 3))
    assert.matches("ReduceLROnPlateau: step expects the monitored metric",
      errmsg(function() S.ReduceLROnPlateau(opt):step() end))
  end)
end)

-- The constructors' errors name the caller's line (the positional-argument wrapper is an ordinary call with its
-- level counted, as nn modules' constructors: the same under LuaJIT, PUC 5.1 and 5.4), whichever check raises:
-- the optimizer, the options, a constructor's own check or a helper's.
describe("constructor errors blame the caller's line", function()
  local function here() return debug.getinfo(2, "l").currentline end
  local function blames(line, msg, err)
    local want = "tests/lr_scheduler_spec.lua:" .. line .. ": " .. msg
    assert.are.equal(want, tostring(err):sub(1, #want))
  end

  it("for every scheduler", function()
    local opt = lt.optim.SGD({ lt.param(lt.zeros(1)) }, { lr = 0.1, momentum = 0.9 })
    local function noop() end
    local s1, s2 = S.StepLR(opt, 1), S.StepLR(opt, 1)
    local line, err
    line, err = here(), select(2, pcall(function() S.StepLR(5, 1) end))
    blames(line, "StepLR: expected an optimizer (with param_groups), got number", err)
    line, err = here(), select(2, pcall(function() S.StepLR(opt, { step_size = 1, bogus = 1 }) end))
    blames(line, "StepLR: unknown option 'bogus'", err)
    line, err = here(), select(2, pcall(function() S.StepLR(opt) end))
    blames(line, "StepLR: option 'step_size' is required", err)
    line, err = here(), select(2, pcall(function() S.StepLR(opt, 0) end))
    blames(line, "StepLR: step_size must be a positive integer, got 0", err)
    line, err = here(), select(2, pcall(function() S.StepLR(opt, 1, 0.5, -1, false, 5) end))
    blames(line, "StepLR: options must be a table, got number", err)
    line, err = here(), select(2, pcall(function() S.MultiStepLR(opt, { 1.5 }) end))
    blames(line, "MultiStepLR: milestones[1] must be an integer, got 1.5", err)
    line, err = here(), select(2, pcall(function() S.CosineAnnealingLR(opt, 0) end))
    blames(line, "CosineAnnealingLR: T_max must be > 0, got 0", err)
    line, err = here(), select(2, pcall(function() S.LambdaLR(opt, 5) end))
    blames(line, "LambdaLR: expected a function (epoch -> factor) or a list of them, got number", err)
    line, err = here(), select(2, pcall(function() S.MultiplicativeLR(opt, { noop, noop }) end))
    blames(line, "MultiplicativeLR: expected 1 lr_lambdas (one per param group), got 2", err)
    line, err = here(), select(2, pcall(function() S.OneCycleLR(opt, -1, 10) end))
    blames(line, "OneCycleLR: max_lr must be a finite number >= 0, got -1", err)
    line, err = here(), select(2, pcall(function() S.OneCycleLR(opt, 0.1) end))
    blames(line, "OneCycleLR: you must define either total_steps OR (epochs AND steps_per_epoch)", err)
    line, err = here(), select(2, pcall(function() S.ReduceLROnPlateau(opt, "min", 2) end))
    blames(line, "ReduceLROnPlateau: factor should be < 1.0, got 2", err)
    line, err = here(), select(2, pcall(function() S.ConstantLR(opt, 2) end))
    blames(line, "ConstantLR: ", err)
    line, err = here(), select(2, pcall(function() S.LinearLR(opt, 0.5, 2) end))
    blames(line, "LinearLR: ", err)
    line, err = here(), select(2, pcall(function() S.PolynomialLR(opt, 0) end))
    blames(line, "PolynomialLR: total_iters must be a positive integer, got 0", err)
    line, err = here(), select(2, pcall(function() S.CosineAnnealingWarmRestarts(opt, 0) end))
    blames(line, "CosineAnnealingWarmRestarts: expected positive integer T_0, but got 0", err)
    line, err = here(), select(2, pcall(function() S.CyclicLR(opt, 0.01, 0.1, 0) end))
    blames(line, "CyclicLR: step_size_up must be > 0 and step_size_down >= 0", err)
    line, err = here(), select(2, pcall(function() S.SequentialLR(opt, { schedulers = { 5 }, milestones = {} }) end))
    blames(line, "SequentialLR: schedulers[1] is not a scheduler (got number)", err)
    line, err = here(), select(2, pcall(function() S.SequentialLR(opt, { schedulers = { s1, s2 }, milestones = {} }) end))
    blames(line, "SequentialLR: expects number of schedulers provided to be one more", err)
    line, err = here(), select(2, pcall(function() S.ChainedScheduler({}) end))
    blames(line, "ChainedScheduler: expected a non-empty list of schedulers", err)
  end)
end)
