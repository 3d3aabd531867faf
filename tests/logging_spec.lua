-- tests/logging_spec.lua — self:log / self:log_dict: Lightning 1.6's per-hook defaults, the
-- name_step / name_epoch fork, reductions (batch-size-weighted mean, sum, max, min), hooks where logging
-- is forbidden, what reaches callback_metrics / logged_metrics / progress_bar_metrics and the logger.
local lt = require "lutra"

local function loader(n, bs)
  bs = bs or 2
  return require("helpers.loader").make(n, function(i) return { lt.full({ bs, 1 }, i), lt.full({ bs, 1 }, 2 * i), id = i } end)
end

-- a logger recording rows
local function fake_logger()
  local l = { rows = {}, saves = 0 }
  function l:log_metrics(m, step)
    local r = { step = step }
    for k, v in pairs(m) do r[k] = v end
    self.rows[#self.rows + 1] = r
  end
  function l:save() self.saves = self.saves + 1 end
  function l:finalize(status) self.status = status end
  return l
end

local function opts(o)
  local t = { enable_checkpointing = false, enable_model_summary = false, enable_progress_bar = false }
  for k, v in pairs(o or {}) do t[k] = v end
  if t.logger == nil then t.logger = false end
  return t
end

local function model(steps)
  local m = { w = lt.param(lt.zeros(1, 1)) }
  function m:training_step(batch, i)
    if steps then steps(self, batch, i) end
    return ((batch[1] * self.w - batch[2]) ^ 2):mean()
  end
  function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 0 }) end
  return m
end

local function near(a, b) return math.abs(a - b) < 1e-9 end

describe("logging", function()
  it("training_step logs on_step by default: the value of the last step, nothing at the epoch level", function()
    local m = model(function(self, batch, i) self:log("a", i * 10) end)
    local t = lt.Trainer(opts { max_epochs = 1 })
    t:fit(m, loader(3))
    assert.are.equal(20, t.callback_metrics.a)
    assert.is_nil(t.callback_metrics.a_epoch)
    assert.is_nil(t.callback_metrics.a_step)
  end)

  it("on_step and on_epoch fork the name into name_step and name_epoch", function()
    local lg = fake_logger()
    local m = model(function(self, batch, i) self:log("loss", i + 1, { on_epoch = true }) end)
    local t = lt.Trainer(opts { max_epochs = 1, logger = lg, log_every_n_steps = 1 })
    t:fit(m, loader(4))
    local cm = t.callback_metrics
    -- at the epoch end `loss` takes the epoch value (Lightning's callback metrics carry both names)
    assert.are.same({ 4, 2.5, 2.5 }, { cm.loss_step, cm.loss, cm.loss_epoch })
    assert.are.equal(4, t.logged_metrics.loss_step)
    assert.are.equal(2.5, t.logged_metrics.loss_epoch)
    -- rows: 4 step rows, then the epoch row at the last batch's step
    assert.are.equal(5, #lg.rows)
    assert.are.same({ 0, 1, 2, 3, 3 }, { lg.rows[1].step, lg.rows[2].step, lg.rows[3].step, lg.rows[4].step,
      lg.rows[5].step })
    assert.are.equal(1, lg.rows[1].loss_step)
    assert.are.equal(2.5, lg.rows[5].loss_epoch)
    assert.are.equal(0, lg.rows[5].epoch)
    assert.are.equal("success", lg.status)
  end)

  it("the epoch mean is weighted by batch size (given or taken from the batch)", function()
    local m = model(function(self, batch, i)
      self:log("given", i == 0 and 1 or 3, { on_epoch = true, on_step = false, batch_size = i == 0 and 1 or 3 })
      self:log("inferred", batch[1]:size(1), { on_epoch = true, on_step = false })
    end)
    local l = loader(2)
    local b3 = { lt.ones(3, 1), lt.ones(3, 1) }
    local b1 = { lt.ones(1, 1), lt.ones(1, 1) }
    l.iter = function()
      local k = 0
      return function() k = k + 1; return ({ b1, b3 })[k] end
    end
    local t = lt.Trainer(opts { max_epochs = 1 })
    t:fit(m, l)
    assert.is_true(near(t.callback_metrics.given, (1 * 1 + 3 * 3) / 4))
    assert.is_true(near(t.callback_metrics.inferred, (1 * 1 + 3 * 3) / 4))
  end)

  it("reduce_fx sum, max and min", function()
    local vals = { 3, -1, 7, 2 }
    local m = model(function(self, batch, i)
      local v = vals[i + 1]
      self:log("s", v, { on_epoch = true, on_step = false, reduce_fx = "sum" })
      self:log("hi", v, { on_epoch = true, on_step = false, reduce_fx = "max" })
      self:log("lo", v, { on_epoch = true, on_step = false, reduce_fx = "min" })
    end)
    local t = lt.Trainer(opts { max_epochs = 1 })
    t:fit(m, loader(4))
    assert.are.same({ 11, 7, -1 }, { t.callback_metrics.s, t.callback_metrics.hi, t.callback_metrics.lo })
  end)

  it("validation_step logs on_epoch by default; the logger gets one row per validation", function()
    local lg = fake_logger()
    local m = model()
    function m:validation_step(batch, i) self:log("val_loss", batch[1][1]:item()) end
    local t = lt.Trainer(opts { max_epochs = 2, logger = lg, log_every_n_steps = 100 })
    t:fit(m, loader(2), loader(3))
    assert.are.equal(2, t.callback_metrics.val_loss) -- mean of 1, 2, 3
    local vrows = {}
    for _, r in ipairs(lg.rows) do if r.val_loss then vrows[#vrows + 1] = r end end
    assert.are.equal(2, #vrows) -- the sanity check logs nothing
    assert.are.same({ 1, 3 }, { vrows[1].step, vrows[2].step })
    assert.are.same({ 0, 1 }, { vrows[1].epoch, vrows[2].epoch })
  end)

  it("log_every_n_steps: step rows every n batches that stepped; loggers saved at that interval", function()
    local lg = fake_logger()
    local m = model(function(self, batch, i) self:log("x", i) end)
    local t = lt.Trainer(opts { max_epochs = 1, logger = lg, log_every_n_steps = 3 })
    t:fit(m, loader(10))
    local steps = {}
    for _, r in ipairs(lg.rows) do steps[#steps + 1] = r.step end
    assert.are.same({ 2, 5, 8 }, steps)
    assert.are.same({ 2, 5, 8 }, { lg.rows[1].x, lg.rows[2].x, lg.rows[3].x })
    assert.are.equal(3, lg.saves)
  end)

  it("log_every_n_steps: loggers are saved right after the batch that makes the stepped count a multiple of n", function()
    local lg, t = fake_logger(), nil
    local saved_at = {}
    function lg.save() saved_at[#saved_at + 1] = t.global_step end
    t = lt.Trainer(opts { max_epochs = 1, logger = lg, log_every_n_steps = 3 })
    t:fit(model(), loader(10))
    assert.are.same({ 3, 6, 9 }, saved_at)
  end)

  it("with accumulation, step rows come only on batches that step", function()
    local lg = fake_logger()
    local m = model(function(self, batch, i) self:log("x", i) end)
    lt.Trainer(opts { max_epochs = 1, logger = lg, log_every_n_steps = 1, accumulate_grad_batches = 2 }):fit(m, loader(4))
    local xs = {}
    for _, r in ipairs(lg.rows) do xs[#xs + 1] = r.x end
    assert.are.same({ 1, 3 }, xs)
  end)

  it("prog_bar values go to progress_bar_metrics; logger = false keeps a value from the logger", function()
    local lg = fake_logger()
    local m = model(function(self, batch, i)
      self:log("shown", 1, { prog_bar = true })
      self:log("secret", 2, { logger = false })
    end)
    local t = lt.Trainer(opts { max_epochs = 1, logger = lg, log_every_n_steps = 1 })
    t:fit(m, loader(1))
    assert.are.equal(1, t.progress_bar_metrics.shown)
    assert.is_nil(t.progress_bar_metrics.secret)
    assert.are.equal(2, t.callback_metrics.secret)
    assert.is_nil(t.logged_metrics.secret)
    assert.is_nil(lg.rows[1].secret)
  end)

  it("values may be one-element tensors (stored as numbers); log_dict logs each entry", function()
    local m = model(function(self, batch, i)
      self:log("t", lt.tensor { 0.5 })
      self:log_dict({ a = 1, b = lt.full({ 1, 1 }, 2) })
    end)
    local t = lt.Trainer(opts { max_epochs = 1 })
    t:fit(m, loader(1))
    assert.are.same({ 0.5, 1, 2 }, { t.callback_metrics.t, t.callback_metrics.a, t.callback_metrics.b })
    assert.are.equal("number", type(t.callback_metrics.b))
  end)

  it("bad values and options are errors naming the metric or the option", function()
    local function err_of(fn)
      local m = model(fn)
      local ok, err = pcall(function() lt.Trainer(opts { max_epochs = 1 }):fit(m, loader(1)) end)
      assert.is_false(ok)
      return err
    end
    assert.truthy(err_of(function(self) self:log("v", lt.zeros(2)) end):find(
      "log: the value of 'v' must be a number or a one-element tensor, got a tensor of shape [2]", 1, true))
    assert.truthy(err_of(function(self) self:log("v", "x") end):find(
      "log: the value of 'v' must be a number or a one-element tensor, got a string", 1, true))
    assert.truthy(err_of(function(self) self:log("v", 1, { on_stepp = true }) end):find(
      "log: unknown option 'on_stepp'", 1, true))
    assert.truthy(err_of(function(self) self:log("v", 1, { reduce_fx = "median" }) end):find(
      "log: reduce_fx must be \"mean\", \"max\", \"min\" or \"sum\", got median", 1, true))
  end)

  it("logging is forbidden where Lightning forbids it, and on_step in epoch-end hooks, naming the hook", function()
    local m = model()
    function m:configure_optimizers()
      self:log("x", 1)
      return lt.optim.SGD({ self.w }, { lr = 0 })
    end
    local ok, err = pcall(function() lt.Trainer(opts { max_epochs = 1 }):fit(m, loader(1)) end)
    assert.is_false(ok)
    assert.truthy(err:find("log: you can't self:log() inside 'configure_optimizers'", 1, true), err)

    m = model()
    function m:on_train_epoch_end() self:log("x", 1, { on_step = true }) end
    ok, err = pcall(function() lt.Trainer(opts { max_epochs = 1 }):fit(m, loader(1)) end)
    assert.is_false(ok)
    assert.truthy(err:find("log: you can't self:log('x', ..., {on_step=true}) inside 'on_train_epoch_end', " ..
      "must be one of (False)", 1, true), err)

    m = model()
    function m:optimizer_step(epoch, i, opt, k, closure)
      opt:step(closure)
      self:log("x", 1)
    end
    ok, err = pcall(function() lt.Trainer(opts { max_epochs = 1 }):fit(m, loader(1)) end)
    assert.is_false(ok)
    assert.truthy(err:find("optimizer_step: .*log: you can't self:log%(%) inside 'optimizer_step'"), err)

    local cb = { on_fit_start = function(_, trainer, pl_module) pl_module:log("x", 1) end }
    ok, err = pcall(function() lt.Trainer(opts { max_epochs = 1, callbacks = { cb } }):fit(model(), loader(1)) end)
    assert.is_false(ok)
    assert.truthy(err:find("log: you can't self:log() inside 'on_fit_start'", 1, true), err)
  end)

  it("on_train_epoch_end and training_epoch_end log epoch values; callbacks may log through the model", function()
    local m = model()
    function m:training_epoch_end(outputs) self:log("n_out", #outputs) end
    local cb = { on_train_epoch_end = function(_, trainer, pl_module) pl_module:log("cb", 5) end }
    local t = lt.Trainer(opts { max_epochs = 1, callbacks = { cb } })
    t:fit(m, loader(3))
    assert.are.same({ 3, 5 }, { t.callback_metrics.n_out, t.callback_metrics.cb })
  end)

  it("validate and test return the epoch metrics per loader, suffixed with the loader with several", function()
    local m = {}
    function m:test_step(batch, i, dl) self:log("acc", (dl or 0) + batch[1][1]:item()) end
    local r = lt.Trainer(opts()):test(m, loader(3))
    assert.are.same({ { acc = 2 } }, r)
    r = lt.Trainer(opts()):test(m, { loader(1), loader(3) })
    assert.are.same({ { ["acc/dataloader_idx_0"] = 1 }, { ["acc/dataloader_idx_1"] = 3 } }, r)
  end)

  it("the sanity check's metrics are not kept", function()
    local m = model()
    function m:validation_step(batch, i) self:log("v", 1) end
    local seen, ran = "unset", false
    local lg = fake_logger()
    local cb = { on_sanity_check_end = function() ran = true end,
      on_train_start = function(_, trainer) seen = trainer.callback_metrics.v end }
    local t = lt.Trainer(opts { max_epochs = 1, callbacks = { cb }, logger = lg, limit_val_batches = 1 })
    t:fit(m, loader(1), loader(1))
    assert.is_true(ran)
    assert.is_nil(seen)
    assert.are.equal(1, #lg.rows) -- only the epoch's validation row
    assert.are.equal(1, t.callback_metrics.v)
  end)

  it("the default logger is a CSVLogger under default_root_dir when lutra.loggers has one", function()
    local lm = require "lutra.loggers"
    local t = lt.Trainer { default_root_dir = "/tmp/x", enable_model_summary = false, enable_progress_bar = false }
    if lm.CSVLogger then
      assert.are.equal(1, #t.loggers)
      assert.is_truthy(t.logger)
    end
    t = lt.Trainer { logger = false }
    assert.are.equal(0, #t.loggers)
  end)
end)
