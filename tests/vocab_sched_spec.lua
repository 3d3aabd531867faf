-- vocab_sched_spec.lua — LinearLR, ConstantLR, MultiplicativeLR, PolynomialLR, CosineAnnealingWarmRestarts,
-- CyclicLR, SequentialLR, ChainedScheduler (lua/lutra/optim/lr_scheduler/cyclic.lua): 50-step lr and momentum
-- sequences of PyTorch 1.13 (tests/fixtures/vocab_sched.json), state_dict resume, option errors.
local lt = require "lutra"
local cjson = require "cjson"
local S = lt.optim.lr_scheduler

local CASES = require("tests.helpers.nn_fixtures").load("vocab_sched.json")

-- the MultiplicativeLR functions of tests/fixtures/gen_vocab.py, by name
local MULT_FNS = {
  ["0.95"] = function() return 0.95 end,
  ["even_epochs_0.8"] = function(e) return e % 2 == 0 and 0.8 or 1.0 end,
}

local function close(a, b) return math.abs(a - b) <= math.max(1e-12, 1e-9 * math.abs(b)) end

local function errmsg(fn, ...)
  local ok, e = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

local function make_opt(cs)
  local o = {}
  for k, v in pairs(cs.optimizer) do if k ~= "type" then o[k] = v end end
  local groups = { { params = { lt.param(lt.zeros(2)) } } }
  if cs.lr2 then groups[2] = { params = { lt.param(lt.zeros(2)) }, lr = cs.lr2 } end
  return lt.optim.SGD(groups, o)
end

local function make_sched(cs, opt)
  if cs.scheduler == "MultiplicativeLR" then return S.MultiplicativeLR(opt, MULT_FNS[cs.fn]) end
  if cs.children then
    local list = {}
    for i, c in ipairs(cs.children) do list[i] = S[c[1]](opt, c[2]) end
    if cs.scheduler == "SequentialLR" then
      return S.SequentialLR(opt, { schedulers = list, milestones = cs.milestones })
    end
    return S.ChainedScheduler(list)
  end
  return S[cs.scheduler](opt, cs.opts)
end

local function check_step(cs, opt, i)
  local g = opt.param_groups
  assert.is_true(close(g[1].lr, cs.lrs[i]), string.format("%s step %d: lr %.17g, PyTorch %.17g", cs.name, i - 1,
    g[1].lr, cs.lrs[i]))
  if cs.lrs2 then assert.is_true(close(g[2].lr, cs.lrs2[i]), cs.name .. " group 2, step " .. (i - 1)) end
  if cs.momentums then
    assert.is_true(close(g[1].momentum, cs.momentums[i]), string.format("%s step %d: momentum %.17g, PyTorch %.17g",
      cs.name, i - 1, g[1].momentum, cs.momentums[i]))
  end
end

describe("lt.optim.lr_scheduler (more) fixtures (PyTorch 1.13, 50 steps)", function()
  for _, cs in ipairs(CASES) do
    it("matches PyTorch's " .. cs.name .. " sequence", function()
      local opt = make_opt(cs)
      local sched = make_sched(cs, opt)
      for i = 1, cs.steps do
        check_step(cs, opt, i)
        opt:step()
        sched:step()
      end
      assert.is_true(close(sched:get_last_lr()[1], opt.param_groups[1].lr))
    end)
  end

  it("resumes every sequence from a JSON round trip of state_dict at step 17", function()
    for _, cs in ipairs(CASES) do
      local opt = make_opt(cs)
      local sched = make_sched(cs, opt)
      for _ = 1, 17 do sched:step() end
      local sd = cjson.decode(cjson.encode(sched:state_dict()))
      local lrs = {}
      for i, g in ipairs(opt.param_groups) do lrs[i] = g.lr end
      -- a fresh optimizer and scheduler, with the optimizer's lr restored as an optimizer state dict would
      local opt2 = make_opt(cs)
      local sched2 = make_sched(cs, opt2)
      for i, g in ipairs(opt2.param_groups) do g.lr = lrs[i]; g.momentum = opt.param_groups[i].momentum end
      sched2:load_state_dict(sd)
      for i = 18, cs.steps do
        check_step(cs, opt2, i)
        sched2:step()
      end
    end
  end)
end)

describe("lt.optim.lr_scheduler (more) behaviour and errors", function()
  local function opt1() return lt.optim.SGD({ lt.param(lt.zeros(1)) }, { lr = 0.1, momentum = 0.9 }) end

  it("uses the closed forms for step(epoch)", function()
    local opt = opt1()
    local s = S.LinearLR(opt, { start_factor = 0.5, total_iters = 4 })
    s:step(2)
    assert.is_true(close(opt.param_groups[1].lr, 0.1 * (0.5 + 0.5 * 2 / 4)))
    local c = S.CosineAnnealingWarmRestarts(opt1(), { T_0 = 4, T_mult = 2 })
    c:step(9) -- cycles of 4, 8: epoch 9 is T_cur 5 of T_i 8
    assert.equals(5, c.T_cur)
    assert.equals(8, c.T_i)
  end)

  it("CyclicLR with a scale_fn uses it (scale_mode = 'iterations')", function()
    local opt = opt1()
    local s = S.CyclicLR(opt, { base_lr = 0.1, max_lr = 1.1, step_size_up = 2,
      scale_fn = function(x) return 1 / (1 + x) end, scale_mode = "iterations", cycle_momentum = false })
    s:step() -- epoch 1: scale_factor 0.5, scale 1/2
    assert.is_true(close(opt.param_groups[1].lr, 0.1 + 1.0 * 0.5 * 0.5))
  end)

  it("rejects bad options naming them", function()
    assert.matches("ConstantLR: the constant multiplicative factor expected to be between 0 and 1, got 1.5",
      errmsg(S.ConstantLR, opt1(), { factor = 1.5 }))
    assert.matches("LinearLR: the starting multiplicative factor expected to be between 0 and 1, got %-1",
      errmsg(S.LinearLR, opt1(), { start_factor = -1 }))
    assert.matches("LinearLR: unknown option 'start'", errmsg(S.LinearLR, opt1(), { start = 0.1 }))
    assert.matches("PolynomialLR: option 'total_iters' must be an integer, got 2.5",
      errmsg(S.PolynomialLR, opt1(), { total_iters = 2.5 }))
    assert.matches("CosineAnnealingWarmRestarts: option 'T_0' is required",
      errmsg(S.CosineAnnealingWarmRestarts, opt1()))
    assert.matches("CosineAnnealingWarmRestarts: expected positive integer T_0, but got 0",
      errmsg(S.CosineAnnealingWarmRestarts, opt1(), { T_0 = 0 }))
    assert.matches("CosineAnnealingWarmRestarts: expected integer T_mult >= 1, but got 0",
      errmsg(S.CosineAnnealingWarmRestarts, opt1(), { T_0 = 2, T_mult = 0 }))
    assert.matches("CyclicLR: mode 'sawtooth' is invalid",
      errmsg(S.CyclicLR, opt1(), { base_lr = 0.1, max_lr = 1, mode = "sawtooth" }))
    assert.matches("CyclicLR: optimizer must support momentum with `cycle_momentum` option enabled",
      errmsg(S.CyclicLR, lt.optim.Adam({ lt.param(lt.zeros(1)) }), { base_lr = 0.1, max_lr = 1 }))
    assert.matches("CyclicLR: expected 1 values for max_lr, got 2",
      errmsg(S.CyclicLR, opt1(), { base_lr = 0.1, max_lr = { 1, 2 } }))
    assert.matches("MultiplicativeLR: expected a function", errmsg(S.MultiplicativeLR, opt1(), 0.5))
    local opt = opt1()
    local a, b = S.ConstantLR(opt), S.ExponentialLR(opt, { gamma = 0.9 })
    assert.matches("SequentialLR: expects number of schedulers provided to be one more than the number of milestone "
      .. "points, but got number of schedulers 2 and the number of milestones to be equal to 2",
      errmsg(S.SequentialLR, opt, { schedulers = { a, b }, milestones = { 1, 2 } }))
    assert.matches("SequentialLR: expects all schedulers to belong to the same optimizer, but schedulers%[2%]",
      errmsg(S.SequentialLR, opt, { schedulers = { a, S.ConstantLR(opt1()) }, milestones = { 3 } }))
    assert.matches("ChainedScheduler: schedulers%[2%] is not a scheduler", errmsg(S.ChainedScheduler, { a, 3 }))
    assert.matches("ChainedScheduler: schedulers%[1%] is a ReduceLROnPlateau",
      errmsg(S.ChainedScheduler, { S.ReduceLROnPlateau(opt) }))
    local seq = S.SequentialLR(opt, { schedulers = { a, b }, milestones = { 3 } })
    assert.matches("SequentialLR: load_state_dict: expected _schedulers with 2 state dicts, got 1",
      errmsg(seq.load_state_dict, seq, { _schedulers = { {} } }))
  end)

  it("keeps functions out of MultiplicativeLR's state_dict (JSON-safe)", function()
    local s = S.MultiplicativeLR(opt1(), function() return 0.5 end)
    local sd = s:state_dict()
    assert.is_nil(sd.lr_lambdas)
    assert.is_string(cjson.encode(sd))
  end)
end)
