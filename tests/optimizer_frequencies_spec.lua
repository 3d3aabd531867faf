-- tests/optimizer_frequencies_spec.lua — several optimizers under automatic optimization, the GAN case
-- (Lightning 1.6): optimizer frequencies (one optimizer active per batch, in turn), toggle_optimizer /
-- untoggle_optimizer around each optimizer's closure (only its parameters require grad), and the errors of
-- a malformed configuration.
local lt = require "lutra"
local nn, F = lt.nn, lt.F

local function loader(n)
  return require("helpers.loader").make(n, function() return { lt.randn(4, 3), lt.randn(4, 1) } end)
end

local function same(a, b) return a:allclose(b, 0, 0) end

local function trainer(opts) return lt.Trainer(require "helpers.quiet"({ max_epochs = 1 }, opts)) end

-- A "generator" g: 3 -> 3 and a "discriminator" d: 3 -> 1; the generator's loss goes through d, as in a GAN.
local function gan(config)
  lt.manual_seed(1)
  local m = { g = nn.Linear(3, 3), d = nn.Linear(3, 1), seen = {} }
  function m:training_step(batch, batch_idx, optimizer_idx)
    self.seen[#self.seen + 1] = { batch_idx = batch_idx, opt = optimizer_idx,
      g_grad = self.g.weight:requires_grad(), d_grad = self.d.weight:requires_grad() }
    local x, y = batch[1], batch[2]
    if optimizer_idx == 0 then return F.mse_loss(self.d(self.g(x)), y) end
    return F.mse_loss(self.d(x), y)
  end
  function m:configure_optimizers()
    local og = lt.optim.SGD(nn.parameters(self.g), { lr = 0.1 })
    local od = lt.optim.SGD(nn.parameters(self.d), { lr = 0.1 })
    return config and config(og, od) or { og, od }
  end
  return m
end

describe("optimizer frequencies", function()
  it("runs one optimizer per batch, each for its frequency in turn, one step per batch", function()
    local m = gan(function(og, od) return { { optimizer = og, frequency = 2 }, { optimizer = od, frequency = 1 } } end)
    local t = trainer()
    t:fit(m, loader(7))
    local opts = {}
    for i, s in ipairs(m.seen) do
      opts[i] = s.opt
      assert.are.equal(i - 1, s.batch_idx)
    end
    assert.are.same({ 0, 0, 1, 0, 0, 1, 0 }, opts)
    assert.are.equal(7, t.global_step)
    assert.are.same({ 2, 1 }, t.optimizer_frequencies)
  end)

  it("updates only the active optimizer's parameters", function()
    local m = gan(function(og, od) return { { optimizer = og, frequency = 1 }, { optimizer = od, frequency = 3 } } end)
    local g0, d0 = m.g.weight:clone(), m.d.weight:clone()
    local snaps = {}
    m.on_train_batch_end = function(self) snaps[#snaps + 1] = { self.g.weight:clone(), self.d.weight:clone() } end
    trainer():fit(m, loader(4)) -- optimizers 0, 1, 1, 1
    assert.is_false(same(snaps[1][1], g0)); assert.is_true(same(snaps[1][2], d0))
    for b = 2, 4 do
      assert.is_true(same(snaps[b][1], snaps[1][1]), "g must not move on d's batches")
      assert.is_false(same(snaps[b][2], snaps[b - 1][2]), "d moves on its batches")
    end
  end)

  it("steps only the active optimizer's lr schedulers", function()
    local m = gan(function(og, od)
      local S = lt.optim.lr_scheduler.StepLR
      return {
        { optimizer = og, frequency = 1,
          lr_scheduler = { scheduler = S(og, { step_size = 1, gamma = 0.5 }), interval = "step" } },
        { optimizer = od, frequency = 1,
          lr_scheduler = { scheduler = S(od, { step_size = 1, gamma = 0.1 }), interval = "step" } },
      }
    end)
    local t = trainer()
    t:fit(m, loader(5)) -- g on batches 0, 2, 4; d on 1, 3
    assert.is_true(math.abs(t.optimizers[1].param_groups[1].lr - 0.1 * 0.5 ^ 3) < 1e-12)
    assert.is_true(math.abs(t.optimizers[2].param_groups[1].lr - 0.1 * 0.1 ^ 2) < 1e-12)
  end)

  it("gives on_train_batch_end and training_epoch_end the active optimizer's output", function()
    local m = gan(function(og, od) return { { optimizer = og, frequency = 1 }, { optimizer = od, frequency = 1 } } end)
    local batch_outs, epoch_outs = {}, nil
    m.on_train_batch_end = function(_, outputs) batch_outs[#batch_outs + 1] = outputs end
    m.training_epoch_end = function(_, outputs) epoch_outs = outputs end
    trainer():fit(m, loader(3))
    assert.are.equal(3, #batch_outs)
    for _, o in ipairs(batch_outs) do
      assert.are.equal(1, #o)
      assert.is_true(lt.is_tensor(o[1].loss))
    end
    assert.are.equal(3, #epoch_outs)
  end)

  it("rejects a malformed configuration, naming what is wrong", function()
    local function fit_with(config) return pcall(function() trainer():fit(gan(config), loader(2)) end) end
    local ok, err = fit_with(function(og, od) return { { optimizer = og, frequency = 0 }, { optimizer = od, frequency = 1 } } end)
    assert.is_false(ok)
    assert.matches("element 1's frequency must be a positive integer, got 0", err, 1, true)
    ok, err = fit_with(function(og, od) return { { optimizer = og, frequency = 2 }, { optimizer = od } } end)
    assert.is_false(ok)
    assert.matches("a frequency must be given to each optimizer (1 of 2 have one)", err, 1, true)
    ok, err = fit_with(function(og, od) return { { optimizer = og, frequncy = 2 }, { optimizer = od } } end)
    assert.is_false(ok)
    assert.matches("unknown key 'frequncy' in the optimizer config (element 1)", err, 1, true)
  end)
end)

describe("toggle_optimizer", function()
  it("lets only the current optimizer's parameters require grad, and restores them after", function()
    local m = gan()
    local t = trainer()
    t:fit(m, loader(2))
    assert.are.equal(4, #m.seen)
    for _, s in ipairs(m.seen) do
      assert.are.equal(s.opt == 0, s.g_grad)
      assert.are.equal(s.opt == 1, s.d_grad)
    end
    for _, p in ipairs(nn.parameters(m)) do assert.is_true(p:requires_grad()) end
  end)

  it("keeps a parameter the user froze frozen", function()
    local m = gan()
    m.d.bias:requires_grad(false)
    trainer():fit(m, loader(2))
    assert.is_false(m.d.bias:requires_grad())
    assert.is_true(m.d.weight:requires_grad())
  end)

  it("keeps the generator's backward out of the discriminator's gradients", function()
    local m = gan()
    local d_grad_at_d_step
    m.on_before_optimizer_step = function(self, _, idx)
      if idx == 1 then
        d_grad_at_d_step = self.d.weight.grad:clone()
      elseif d_grad_at_d_step then -- the generator's step: d's gradient is still the one of d's own step
        assert.is_true(same(self.d.weight.grad, d_grad_at_d_step))
      end
    end
    trainer():fit(m, loader(3))
    assert.is_not_nil(d_grad_at_d_step)
  end)

  it("calls a model's own toggle_optimizer / untoggle_optimizer around each optimizer's closure", function()
    local m = gan()
    local calls = {}
    function m:toggle_optimizer(opt, idx)
      assert.are.equal(self.trainer.optimizers[idx + 1], opt)
      calls[#calls + 1] = "toggle(" .. idx .. ")"
    end
    function m:untoggle_optimizer(idx) calls[#calls + 1] = "untoggle(" .. idx .. ")" end
    local step = m.training_step
    function m:training_step(b, i, idx)
      calls[#calls + 1] = "training_step(" .. idx .. ")"
      return step(self, b, i, idx)
    end
    trainer():fit(m, loader(1))
    assert.are.same({ "toggle(0)", "training_step(0)", "untoggle(0)", "toggle(1)", "training_step(1)", "untoggle(1)" },
      calls)
  end)

  it("is not called with a single optimizer", function()
    local m = gan(function(og) return og end)
    local called = false
    function m:toggle_optimizer() called = true end
    function m:training_step(batch) return F.mse_loss(self.d(self.g(batch[1])), batch[2]) end
    trainer():fit(m, loader(2))
    assert.is_false(called)
  end)

  it("is available to manual optimization as self:toggle_optimizer(opt)", function()
    local m = gan()
    m.automatic_optimization = false
    local states = {}
    function m:training_step(batch)
      local og, od = unpack(self:optimizers())
      self:toggle_optimizer(og, 0)
      states[#states + 1] = { self.g.weight:requires_grad(), self.d.weight:requires_grad() }
      local loss = F.mse_loss(self.d(self.g(batch[1])), batch[2])
      og:zero_grad()
      self:manual_backward(loss)
      og:step()
      self:untoggle_optimizer(0)
      states[#states + 1] = { self.g.weight:requires_grad(), self.d.weight:requires_grad() }
      assert.is_nil(self.d.weight.grad)
      local _ = od
    end
    trainer():fit(m, loader(1))
    assert.are.same({ { true, false }, { true, true } }, states)
  end)
end)
