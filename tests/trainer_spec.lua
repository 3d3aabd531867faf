-- tests/trainer_spec.lua — lt.Trainer's options with Lightning 1.6's meaning, each proven by
-- what can be counted (optimizer steps, epochs, batches seen, validation runs), the optimization features
-- (several optimizers, manual optimization, TBPTT, gradient clipping, LR schedulers) and the errors.
local lt = require "lutra"

local function loader(n, opts)
  opts = opts or {}
  return require("helpers.loader").make(n, function(i)
    local x = opts.x and opts.x(i) or lt.full({ 2, 1 }, i)
    return { x, lt.full({ 2, 1 }, 2 * i), id = i }
  end)
end

local opts = require "helpers.quiet"

-- A model counting what it sees, and a callback counting what happens.
local function counted(extra)
  local c = { train_batches = 0, val_batches = 0, sanity_batches = 0, val_runs = 0, epochs = 0, test_batches = 0,
    predict_batches = 0, train_ids = {}, val_ids = {} }
  local m = { w = lt.param(lt.zeros(1, 1)) }
  function m:training_step(batch, i)
    c.train_batches = c.train_batches + 1
    c.train_ids[#c.train_ids + 1] = batch.id
    return ((batch[1] * self.w - batch[2]) ^ 2):mean()
  end
  function m:validation_step(batch, i)
    if self.trainer.sanity_checking then c.sanity_batches = c.sanity_batches + 1
    else c.val_batches = c.val_batches + 1; c.val_ids[#c.val_ids + 1] = batch.id end
  end
  function m:test_step(batch) c.test_batches = c.test_batches + 1 end
  function m:predict_step(batch) c.predict_batches = c.predict_batches + 1; return batch.id end
  function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 0.01 }) end
  local cb = {
    on_validation_start = function(_, trainer) if not trainer.sanity_checking then c.val_runs = c.val_runs + 1 end end,
    on_train_epoch_start = function() c.epochs = c.epochs + 1 end,
  }
  for k, v in pairs(extra or {}) do cb[k] = v end
  return m, cb, c
end

local function fit(o, ntrain, nval, extra)
  local m, cb, c = counted(extra)
  local t = lt.Trainer(opts(o))
  t.callbacks[#t.callbacks + 1] = cb
  t._base_callbacks = t.callbacks
  t:fit(m, loader(ntrain), nval and loader(nval) or nil)
  c.global_step, c.current_epoch = t.global_step, t.current_epoch
  return c, t, m
end

describe("Trainer options", function()
  it("max_epochs: 3 epochs of 4 batches make 12 steps, current_epoch ends at 3", function()
    local c = fit({ max_epochs = 3 }, 4)
    assert.are.same({ 3, 12, 12, 3 }, { c.epochs, c.train_batches, c.global_step, c.current_epoch })
  end)

  it("defaults: max_epochs 1000 without max_steps, -1 with it; min_epochs 1", function()
    local t = lt.Trainer(opts())
    assert.are.same({ 1000, -1, 1 }, { t.max_epochs, t.max_steps, t.min_epochs })
    t = lt.Trainer(opts { max_steps = 7 })
    assert.are.same({ -1, 7 }, { t.max_epochs, t.max_steps })
    local c = fit({ max_steps = 7 }, 3)
    assert.are.same({ 7, 7, 3 }, { c.global_step, c.train_batches, c.epochs })
  end)

  it("max_steps stops mid-epoch; the epoch-end hooks still run", function()
    local ends = 0
    local c = fit({ max_steps = 5, max_epochs = 10 }, 4, nil, { on_train_epoch_end = function() ends = ends + 1 end })
    assert.are.same({ 5, 5, 2, 2, 2 }, { c.global_step, c.train_batches, c.epochs, ends, c.current_epoch })
  end)

  it("should_stop ends the epoch at the next batch boundary and the fit", function()
    local c = fit({ max_epochs = 5 }, 6, nil, {
      on_train_batch_end = function(_, trainer, _, _, _, i) if i == 2 then trainer.should_stop = true end end,
    })
    assert.are.same({ 3, 1 }, { c.train_batches, c.epochs })
  end)

  it("should_stop waits for min_epochs (Lightning 1.6: each epoch ends early, the next one starts)", function()
    local c, t = fit({ max_epochs = 10, min_epochs = 3 }, 4, nil, {
      on_train_batch_end = function(_, trainer) trainer.should_stop = true end,
    })
    assert.are.same({ 3, 3 }, { c.epochs, c.train_batches })
    assert.is_true(t.should_stop)
  end)

  it("should_stop waits for min_steps", function()
    local c = fit({ max_epochs = 10, min_steps = 6 }, 4, nil, {
      on_train_batch_end = function(_, trainer) trainer.should_stop = true end,
    })
    assert.are.equal(6, c.global_step)
  end)

  it("limit_train_batches: an integer is a count, a fraction a part of the loader", function()
    assert.are.equal(3, fit({ max_epochs = 1, limit_train_batches = 3 }, 10).train_batches)
    assert.are.equal(1, fit({ max_epochs = 1, limit_train_batches = 1 }, 10).train_batches)
    assert.are.equal(2, fit({ max_epochs = 1, limit_train_batches = 0.25 }, 10).train_batches)
    local c = fit({ max_epochs = 2, limit_train_batches = 0 }, 10)
    assert.are.same({ 0, 0, 0 }, { c.train_batches, c.epochs, c.global_step })
  end)

  it("limit_val_batches: count, fraction, 0 turns validation (and the sanity check) off", function()
    local c = fit({ max_epochs = 2, limit_val_batches = 3 }, 2, 10)
    assert.are.same({ 6, 2, 2 }, { c.val_batches, c.val_runs, c.sanity_batches })
    c = fit({ max_epochs = 1, limit_val_batches = 0.5 }, 2, 10)
    assert.are.equal(5, c.val_batches)
    c = fit({ max_epochs = 2, limit_val_batches = 0 }, 2, 10)
    assert.are.same({ 0, 0, 0 }, { c.val_batches, c.val_runs, c.sanity_batches })
  end)

  it("limit_test_batches and limit_predict_batches", function()
    local m, _, c = counted()
    lt.Trainer(opts { limit_test_batches = 2 }):test(m, loader(5))
    lt.Trainer(opts { limit_predict_batches = 0.6 }):predict(m, loader(5))
    assert.are.same({ 2, 3 }, { c.test_batches, c.predict_batches })
  end)

  it("predict returns the predictions even when no model or callback defines on_predict_epoch_end", function()
    local m = counted()
    local preds = lt.Trainer(opts()):predict(m, loader(3))
    assert.are.same({ 1, 2, 3 }, preds)
    local two = lt.Trainer(opts()):predict(m, { loader(2), loader(1) })
    assert.are.same({ { 1, 2 }, { 1 } }, two)
    local plain = { net = lt.nn.Linear(1, 1) }
    function plain:forward(x) return self.net(x) end
    local out = lt.Trainer(opts()):predict(plain, loader(2))
    assert.are.equal(2, #out)
    assert.are.same({ 2, 1 }, out[1]:shape())
  end)

  it("val_check_interval as a fraction validates several times per epoch", function()
    local c = fit({ max_epochs = 2, val_check_interval = 0.25, num_sanity_val_steps = 0 }, 8, 1)
    assert.are.same({ 8, 8 }, { c.val_runs, c.val_batches })
  end)

  it("val_check_interval as an integer counts batches (no extra validation at the epoch end)", function()
    local at = {}
    fit({ max_epochs = 1, val_check_interval = 3, num_sanity_val_steps = 0 }, 8, 1, {
      on_validation_start = function(_, trainer)
        at[#at + 1] = trainer.fit_loop.epoch_loop.batch_idx
      end,
    })
    assert.are.same({ 2, 5 }, at)
  end)

  it("an integer val_check_interval larger than the epoch is an error naming it", function()
    local m = counted()
    assert.has_error(function() lt.Trainer(opts { val_check_interval = 9 }):fit(m, loader(8), loader(1)) end,
      "Trainer: val_check_interval (9) must be less than or equal to the number of the training batches (8). " ..
      "If you want to disable validation set limit_val_batches to 0 instead.")
  end)

  it("check_val_every_n_epoch = 2 validates after epochs 2 and 4", function()
    local epochs = {}
    local c = fit({ max_epochs = 4, check_val_every_n_epoch = 2, num_sanity_val_steps = 0 }, 2, 1, {
      on_validation_start = function(_, trainer) epochs[#epochs + 1] = trainer.current_epoch end,
    })
    assert.are.same({ 1, 3 }, epochs)
    assert.are.equal(2, c.val_batches)
  end)

  it("num_sanity_val_steps: 2 by default, 0 off, -1 every validation batch", function()
    assert.are.equal(2, fit({ max_epochs = 1 }, 1, 5).sanity_batches)
    assert.are.equal(0, fit({ max_epochs = 1, num_sanity_val_steps = 0 }, 1, 5).sanity_batches)
    assert.are.equal(5, fit({ max_epochs = 1, num_sanity_val_steps = -1 }, 1, 5).sanity_batches)
    assert.are.equal(1, fit({ max_epochs = 1 }, 1, 1).sanity_batches)
  end)

  it("the sanity check does not move the RNG and leaves no progress behind", function()
    local seen = {}
    local m = counted()
    function m:validation_step() seen[#seen + 1] = lt.rand(1):item() end
    function m:on_train_start() seen.train = lt.rand(1):item() end
    local t = lt.Trainer(opts { max_epochs = 1, limit_val_batches = 1 })
    lt.manual_seed(5)
    t:fit(m, loader(1), loader(1))
    lt.manual_seed(5)
    assert.are.equal(lt.rand(1):item(), seen.train)
    assert.are.equal(1, t.fit_loop.epoch_loop.val_loop.epoch_loop.progress.total.completed)
  end)

  it("fast_dev_run: one batch of training and validation, one epoch, no sanity check; n: n batches", function()
    local c = fit({ fast_dev_run = true, max_epochs = 5 }, 10, 10)
    assert.are.same({ 1, 1, 0, 1, 1 }, { c.train_batches, c.val_batches, c.sanity_batches, c.epochs, c.global_step })
    c = fit({ fast_dev_run = 3 }, 10, 10)
    assert.are.same({ 3, 3, 0, 1 }, { c.train_batches, c.val_batches, c.sanity_batches, c.epochs })
    local t = lt.Trainer { fast_dev_run = true, enable_model_summary = false, enable_progress_bar = false }
    assert.are.equal(0, #t.loggers)
  end)

  it("overfit_batches: trains and validates on the same first batches of the training loader", function()
    local c = fit({ max_epochs = 2, overfit_batches = 2, num_sanity_val_steps = 0 }, 10, 5)
    assert.are.same({ 1, 2, 1, 2 }, c.train_ids)
    assert.are.same({ 1, 2, 1, 2 }, c.val_ids)
  end)

  it("accumulate_grad_batches = 3 over 7 batches steps on batches 3, 6 and the last", function()
    local steps = {}
    local c = fit({ max_epochs = 1, accumulate_grad_batches = 3 }, 7, nil, {
      on_before_optimizer_step = function(_, trainer) steps[#steps + 1] = trainer.fit_loop.epoch_loop.batch_idx end,
    })
    assert.are.same({ 2, 5, 6 }, steps)
    assert.are.equal(3, c.global_step)
  end)

  it("accumulated gradients equal the mean over the window (loss divided by the window)", function()
    -- one weight, loss = (x*w - y)^2 with w = 0: grad = -2xy; two batches accumulate into one step
    local m = { w = lt.param(lt.zeros(1, 1)) }
    function m:training_step(b) return ((b[1] * self.w - b[2]) ^ 2):mean() end
    local grad
    function m:on_before_optimizer_step() grad = self.w.grad:item() end
    function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 0 }) end
    lt.Trainer(opts { max_epochs = 1, accumulate_grad_batches = 2 }):fit(m, loader(2))
    -- batch 1: x=1,y=2 -> -4; batch 2: x=2,y=4 -> -16; mean -10
    assert.is_true(math.abs(grad - (-10)) < 1e-5)
  end)

  it("gradient_clip_val with 'norm' and 'value' clips before the step", function()
    local function run(algo)
      local m = { w = lt.param(lt.zeros(1, 2)) }
      function m:training_step() return (self.w * lt.tensor { { 30, 40 } }):sum() end -- grad (30, 40), norm 50
      function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 1 }) end
      lt.Trainer(opts { max_steps = 1, gradient_clip_val = 5, gradient_clip_algorithm = algo }):fit(m, loader(1))
      return m.w:totable()[1]
    end
    local n = run("norm")
    assert.is_true(math.abs(n[1] + 3) < 1e-4 and math.abs(n[2] + 4) < 1e-4)
    local v = run("value")
    assert.are.same({ -5, -5 }, v)
  end)

  it("two optimizers: training_step gets optimizer_idx, each optimizer steps every batch", function()
    local seen = {}
    local m = { a = lt.param(lt.zeros(1, 1)), b = lt.param(lt.zeros(1, 1)) }
    function m:training_step(batch, i, k)
      seen[#seen + 1] = k
      return (((k == 0 and self.a or self.b) - 1) ^ 2):sum()
    end
    function m:configure_optimizers()
      return { lt.optim.SGD({ self.a }, { lr = 0.5 }), lt.optim.SGD({ self.b }, { lr = 0.25 }) }
    end
    local t = lt.Trainer(opts { max_epochs = 1 })
    t:fit(m, loader(2))
    assert.are.same({ 0, 1, 0, 1 }, seen)
    assert.are.equal(4, t.global_step)
    assert.are.equal(1, m.a:item()) -- a: 0 -> 1 -> 1 (lr 0.5, grad 2(a-1))
    assert.is_true(math.abs(m.b:item() - 0.75) < 1e-6) -- b: 0 -> 0.5 -> 0.75
  end)

  it("manual optimization: self:optimizers(), manual_backward, global_step counts the user's steps", function()
    local m = { w = lt.param(lt.zeros(1, 1)), automatic_optimization = false }
    local hooks = {}
    function m:training_step(batch, i)
      local opt = self:optimizers()
      opt:zero_grad()
      local loss = ((batch[1] * self.w - batch[2]) ^ 2):mean()
      self:manual_backward(loss)
      opt:step()
      if i == 1 then opt:step() end
      return loss
    end
    function m:on_before_backward() hooks[#hooks + 1] = "before_backward" end
    function m:on_after_backward() hooks[#hooks + 1] = "after_backward" end
    function m:on_before_optimizer_step() hooks[#hooks + 1] = "before_step" end
    function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 0.1 }) end
    local t = lt.Trainer(opts { max_epochs = 1 })
    t:fit(m, loader(2))
    assert.are.equal(3, t.global_step)
    assert.are.same({ "before_backward", "after_backward", "before_step", "before_backward", "after_backward",
      "before_step", "before_step" }, hooks)
    assert.is_true(m.w:item() ~= 0)
  end)

  it("manual optimization refuses accumulate_grad_batches and gradient_clip_val, naming them", function()
    local m = { w = lt.param(lt.zeros(1, 1)), automatic_optimization = false }
    function m:training_step() end
    function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 0.1 }) end
    assert.has_error(function() lt.Trainer(opts { accumulate_grad_batches = 2 }):fit(m, loader(1)) end,
      "Trainer: accumulate_grad_batches > 1 is not supported with manual optimization " ..
      "(self.automatic_optimization = false): accumulate in training_step yourself")
    assert.has_error(function() lt.Trainer(opts { gradient_clip_val = 1 }):fit(m, loader(1)) end,
      "Trainer: gradient_clip_val is not supported with manual optimization " ..
      "(self.automatic_optimization = false): clip in training_step yourself")
  end)

  it("truncated_bptt_steps splits the batch along dim 2, passes hiddens, detached between splits", function()
    local m = { w = lt.param(lt.zeros(1, 1)), truncated_bptt_steps = 2 }
    local seen = {}
    function m:training_step(split, i, hiddens)
      seen[#seen + 1] = { T = split[1]:size(2), h = hiddens and hiddens:item() or "nil",
        hgrad = hiddens and (hiddens:grad_fn() ~= nil) or false }
      local h = (split[1]:sum() * self.w):sum()
      return { loss = (h - 1) ^ 2, hiddens = h + (hiddens or 0) }
    end
    function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 0 }) end
    local batches = loader(1, { x = function() return lt.ones(2, 5, 1) end })
    local t = lt.Trainer(opts { max_epochs = 1 })
    t:fit(m, batches)
    assert.are.same({ 2, 2, 1 }, { seen[1].T, seen[2].T, seen[3].T })
    assert.are.same({ "nil", 0, 0 }, { seen[1].h, seen[2].h, seen[3].h })
    assert.is_false(seen[2].hgrad)
    assert.are.equal(3, t.global_step)
  end)

  it("LR schedulers step by interval and frequency", function()
    local function run(cfg, nb, ne)
      local m = { w = lt.param(lt.zeros(1, 1)) }
      function m:training_step(b) return (self.w * b[1]):sum() end
      local opt
      function m:configure_optimizers()
        opt = lt.optim.SGD({ self.w }, { lr = 1 })
        cfg.scheduler = lt.optim.lr_scheduler.StepLR(opt, { step_size = 1, gamma = 0.5 })
        return { optimizer = opt, lr_scheduler = cfg }
      end
      lt.Trainer(opts { max_epochs = ne }):fit(m, loader(nb))
      return opt.param_groups[1].lr
    end
    assert.are.equal(0.5 ^ 3, run({ interval = "epoch" }, 2, 3))
    assert.are.equal(0.5 ^ 6, run({ interval = "step" }, 2, 3))
    assert.are.equal(0.5 ^ 3, run({ interval = "step", frequency = 2 }, 2, 3))
    assert.are.equal(0.5 ^ 1, run({ interval = "epoch", frequency = 2 }, 2, 3))
  end)

  it("ReduceLROnPlateau reads its monitor from callback_metrics after validation", function()
    local m = { w = lt.param(lt.zeros(1, 1)) }
    function m:training_step(b) return (self.w * b[1]):sum() end
    function m:validation_step() self:log("val_loss", 1.0) end
    local opt
    function m:configure_optimizers()
      opt = lt.optim.SGD({ self.w }, { lr = 1 })
      local s = lt.optim.lr_scheduler.ReduceLROnPlateau(opt, { patience = 0, factor = 0.5 })
      return { optimizer = opt, lr_scheduler = { scheduler = s, monitor = "val_loss" } }
    end
    lt.Trainer(opts { max_epochs = 3, num_sanity_val_steps = 0 }):fit(m, loader(2), loader(1))
    assert.are.equal(0.25, opt.param_groups[1].lr) -- no improvement after epoch 1: halved twice
  end)

  it("a missing ReduceLROnPlateau monitor is an error naming the key and the available metrics", function()
    local m = { w = lt.param(lt.zeros(1, 1)) }
    function m:training_step(b)
      self:log("train_loss", 1.0)
      return (self.w * b[1]):sum()
    end
    function m:configure_optimizers()
      local opt = lt.optim.SGD({ self.w }, { lr = 1 })
      local s = lt.optim.lr_scheduler.ReduceLROnPlateau(opt, {})
      return { optimizer = opt, lr_scheduler = { scheduler = s, monitor = "val_acc" } }
    end
    local ok, err = pcall(function() lt.Trainer(opts { max_epochs = 1 }):fit(m, loader(1)) end)
    assert.is_false(ok)
    assert.truthy(err:find("lr_scheduler_step: ReduceLROnPlateau conditioned on metric 'val_acc' which is not " ..
      "available. Available metrics are: [train_loss]", 1, true), err)
  end)

  it("seed makes runs reproducible", function()
    lt.Trainer(opts { seed = 42 })
    local a = lt.rand(3):totable()
    lt.Trainer(opts { seed = 42 })
    assert.are.same(a, lt.rand(3):totable())
  end)

  it("an empty training loader runs no epoch and no epoch hooks", function()
    local c = fit({ max_epochs = 3 }, 0)
    assert.are.same({ 0, 0 }, { c.epochs, c.global_step })
  end)

  it("a loader shorter than it said ends the epoch when it runs out", function()
    local m, _, c = counted()
    local l = loader(3)
    l.len = function() return 5 end
    local t = lt.Trainer(opts { max_epochs = 2 })
    t:fit(m, l)
    assert.are.same({ 6, 6 }, { c.train_batches, t.global_step })
  end)

  it("calling fit again on a finished trainer does nothing more (max_epochs reached)", function()
    local m, _, c = counted()
    local t = lt.Trainer(opts { max_epochs = 2 })
    t:fit(m, loader(2))
    t:fit(m, loader(2))
    assert.are.equal(4, c.train_batches)
    assert.are.equal(2, t.current_epoch)
  end)
end)

describe("Trainer errors", function()
  it("unknown options and wrong types name the option", function()
    assert.has_error(function() lt.Trainer { max_epoch = 3 } end)
    local ok, err = pcall(lt.Trainer, { max_epoch = 3 })
    assert.is_false(ok)
    assert.truthy(err:find("Trainer: unknown option 'max_epoch' (known options: accumulate_grad_batches,", 1, true), err)
    ok, err = pcall(lt.Trainer, { max_epochs = "3" })
    assert.is_false(ok)
    assert.truthy(err:find("Trainer: option 'max_epochs' must be an integer >= -1, got \"3\" (string)", 1, true), err)
    ok, err = pcall(lt.Trainer, { limit_val_batches = 1.5 })
    assert.is_false(ok)
    assert.truthy(err:find("Trainer: option 'limit_val_batches' must be an integer count of batches or a fraction " ..
      "in [0, 1], got 1.5 (number)", 1, true), err)
    ok, err = pcall(lt.Trainer, { gradient_clip_algorithm = "l2" })
    assert.is_false(ok)
    assert.truthy(err:find("option 'gradient_clip_algorithm' must be \"norm\" or \"value\"", 1, true), err)
    ok, err = pcall(lt.Trainer, { logger = 3 })
    assert.is_false(ok)
    assert.truthy(err:find("option 'logger' must be true, false, a logger", 1, true), err)
  end)

  it("a model without training_step or configure_optimizers", function()
    local m = {}
    assert.has_error(function() lt.Trainer(opts()):fit(m, loader(1)) end,
      "fit: the model has no training_step (define function model:training_step(batch, batch_idx))")
    function m:training_step() end
    assert.has_error(function() lt.Trainer(opts()):fit(m, loader(1)) end,
      "fit: the model has no configure_optimizers (define it to return an optimizer)")
  end)

  it("configure_optimizers returning the wrong thing", function()
    local m = { w = lt.param(lt.zeros(1, 1)) }
    function m:training_step() end
    function m:configure_optimizers() return 3 end
    local ok, err = pcall(function() lt.Trainer(opts()):fit(m, loader(1)) end)
    assert.is_false(ok)
    assert.truthy(err:find("configure_optimizers returned a number that is not an optimizer", 1, true), err)
    function m:configure_optimizers() end
    ok, err = pcall(function() lt.Trainer(opts()):fit(m, loader(1)) end)
    assert.is_false(ok)
    assert.truthy(err:find("configure_optimizers returned nil", 1, true), err)
    function m:configure_optimizers() return { lt.optim.SGD({ self.w }, { lr = 1 }), "x" } end
    ok, err = pcall(function() lt.Trainer(opts()):fit(m, loader(1)) end)
    assert.is_false(ok)
    assert.truthy(err:find("configure_optimizers: element 2 is a string, not an optimizer", 1, true), err)
  end)

  it("training_step returning the wrong thing", function()
    local m = { w = lt.param(lt.zeros(1, 1)) }
    function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 1 }) end
    function m:training_step() return "loss" end
    local ok, err = pcall(function() lt.Trainer(opts()):fit(m, loader(1)) end)
    assert.is_false(ok)
    assert.truthy(err:find("training_step must return a loss tensor, a table with a 'loss' field, or nil; got a string",
      1, true), err)
    function m:training_step() return { acc = 1 } end
    ok, err = pcall(function() lt.Trainer(opts()):fit(m, loader(1)) end)
    assert.is_false(ok)
    assert.truthy(err:find("training_step: the returned table has no 'loss' field", 1, true), err)
    function m:training_step() return self.w:detach():sum() end
    ok, err = pcall(function() lt.Trainer(opts()):fit(m, loader(1)) end)
    assert.is_false(ok)
    assert.truthy(err:find("training_step's loss: backward:", 1, true), err)
  end)

  it("a hook that raises: the error names the hook, has a traceback, on_exception runs, counters say what completed",
    function()
      local m = { w = lt.param(lt.zeros(1, 1)) }
      function m:training_step(b) return (self.w * b[1]):sum() end
      function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 1 }) end
      function m:on_train_batch_end(_, _, i) if i == 2 then error("boom at 2") end end
      local got
      local cb = { on_exception = function(_, trainer, model, err) got = err end }
      local t = lt.Trainer(opts { max_epochs = 1, callbacks = { cb } })
      local ok, err = pcall(function() t:fit(m, loader(5)) end)
      assert.is_false(ok)
      assert.truthy(err:find("^on_train_batch_end: .*boom at 2"), err)
      assert.truthy(err:find("stack traceback:", 1, true), err)
      assert.are.equal(err, got)
      local p = t.fit_loop.epoch_loop.progress.current
      assert.are.same({ 3, 3, 3, 2 }, { p.ready, p.started, p.processed, p.completed })
      assert.are.equal(3, t.global_step)
      assert.are.equal("failed", t.state.status)
    end)

  it("every callback's on_exception runs, whatever another raises; the original error wins", function()
    local m = { w = lt.param(lt.zeros(1, 1)) }
    function m:training_step(b) return (self.w * b[1]):sum() end
    function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 1 }) end
    function m:on_train_epoch_start() error("epoch boom") end
    local seen = {}
    local cb1 = { on_exception = function(_, _, _, err) seen[#seen + 1] = "1"; error("cb1 fails too: " .. err) end }
    local cb2 = { on_exception = function(_, _, _, err) seen[#seen + 1] = "2:" .. err:match("^[^\n]*") end }
    local t = lt.Trainer(opts { callbacks = { cb1, cb2 } })
    local ok, err = pcall(function() t:fit(m, loader(1)) end)
    assert.is_false(ok)
    assert.truthy(err:find("^on_train_epoch_start: .*epoch boom"), err)
    assert.is_nil(err:find("cb1 fails too", 1, true), err)
    assert.are.equal("1", seen[1])
    assert.truthy(seen[2]:find("^2:on_train_epoch_start: .*epoch boom"), seen[2])
  end)

  it("lp:call_hook_all runs every target and returns their errors, named as the dispatcher names them", function()
    local m = { w = lt.param(lt.zeros(1, 1)) }
    function m:training_step(b) return (self.w * b[1]):sum() end
    function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 1 }) end
    local errs, calls
    local cb1 = { on_exception = function() calls = calls + 1; error("first") end }
    local cb2 = { on_exception = function() calls = calls + 1 end }
    local cb3 = { on_exception = function() calls = calls + 1; error("third") end }
    local probe = { on_train_end = function(_, trainer)
      calls = 0
      errs = trainer._lp:call_hook_all("on_exception", "probe")
    end }
    lt.Trainer(opts { callbacks = { cb1, cb2, cb3, probe } }):fit(m, loader(1))
    assert.are.equal(3, calls)
    assert.are.equal(2, #errs)
    assert.truthy(errs[1]:find("^on_exception %(callback #1%): .*first"), errs[1])
    assert.truthy(errs[2]:find("^on_exception %(callback #3%): .*third"), errs[2])
  end)

  it("the hooks whose arguments live in Lua are declared once, in C, and host.lua covers exactly those", function()
    local hooks = require("lutra.core")._seam().hooks
    local host = require "lutra.trainer.host"
    local n = 0
    for name, h in pairs(hooks) do
      assert.are.equal(h.lua_side, host.LUA_SIDE[name] ~= nil, name)
      if h.lua_side then n = n + 1 end
    end
    assert.are.equal(14, n)
    assert.is_true(hooks.lr_scheduler_step.lua_side)
    assert.is_false(hooks.training_step.lua_side)
  end)

  it("truncated backprop: an error in training_step names it, like without", function()
    local m = { w = lt.param(lt.zeros(1, 1)), truncated_bptt_steps = 2 }
    function m:training_step(split, i, hiddens) error("split boom") end
    function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 1 }) end
    local data = { { lt.randn(2, 4, 1) } }
    local l = { len = function() return 1 end, iter = function()
      local k = 0
      return function() k = k + 1; return data[k] end
    end }
    local ok, err = pcall(function() lt.Trainer(opts()):fit(m, l) end)
    assert.is_false(ok)
    assert.truthy(err:find("^training_step: .*split boom"), err)
  end)

  it("a callback hook that raises names the callback's position", function()
    local m = { w = lt.param(lt.zeros(1, 1)) }
    function m:training_step(b) return (self.w * b[1]):sum() end
    function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 1 }) end
    local cb1 = {}
    local cb2 = { on_train_epoch_start = function() error("bad callback") end }
    local ok, err = pcall(function() lt.Trainer(opts { callbacks = { cb1, cb2 } }):fit(m, loader(1)) end)
    assert.is_false(ok)
    assert.truthy(err:find("^on_train_epoch_start %(callback #2%): .*bad callback"), err)
  end)

  it("errors in training_step, the data and setup name where they happened", function()
    local m = { w = lt.param(lt.zeros(1, 1)) }
    function m:training_step(b) error("ts failed") end
    function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 1 }) end
    local ok, err = pcall(function() lt.Trainer(opts()):fit(m, loader(1)) end)
    assert.is_false(ok)
    assert.truthy(err:find("^training_step: .*ts failed"), err)
    function m:training_step(b) return (self.w * b[1]):sum() end
    local bad = { len = function() return 2 end, iter = function() return function() error("disk gone") end end }
    ok, err = pcall(function() lt.Trainer(opts()):fit(m, bad) end)
    assert.is_false(ok)
    assert.truthy(err:find("^train dataloader: .*disk gone"), err)
    function m:setup(stage) error("no setup") end
    ok, err = pcall(function() lt.Trainer(opts()):fit(m, loader(1)) end)
    assert.is_false(ok)
    assert.truthy(err:find("^setup: .*no setup"), err)
  end)

  it("fit and validate check their arguments", function()
    local m = {}
    assert.has_error(function() lt.Trainer(opts()):fit(m) end,
      "fit: no training dataloader given (fit(model, train_loader[, val_loader]), fit(model, {datamodule = dm}) " ..
      "or a train_dataloader hook)")
    assert.has_error(function() lt.Trainer(opts()):fit(m, 3) end)
    local ok, err = pcall(function() lt.Trainer(opts()):fit({ training_step = function() end,
      configure_optimizers = function() end }, 3) end)
    assert.is_false(ok)
    assert.truthy(err:find("fit: expected a DataLoader", 1, true), err)
    assert.has_error(function() lt.Trainer(opts()):validate(m, loader(1)) end, "validate: the model has no validation_step")
    assert.has_error(function() lt.Trainer(opts()):test(m, loader(1)) end, "test: the model has no test_step")
    assert.has_error(function() lt.Trainer(opts()):fit(m, loader(1), nil, { ckpt = 1 }) end,
      "fit: unknown option 'ckpt' (known options: ckpt_path, datamodule)")
  end)

  it("trainer fields: read-only ones refuse assignment; should_stop is settable", function()
    local t = lt.Trainer(opts())
    assert.has_error(function() t.global_step = 3 end, "Trainer: field 'global_step' is read-only")
    t.should_stop = true
    assert.is_true(t.should_stop)
  end)
end)

describe("configure_gradient_clipping", function()
  it("an override gets the trainer's values and can call self:clip_gradients", function()
    local m = { w = lt.param(lt.zeros(1, 2)) }
    function m:training_step() return (self.w * lt.tensor { { 30, 40 } }):sum() end
    function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 1 }) end
    local got
    function m:configure_gradient_clipping(opt, k, val, algo)
      got = { k, val, algo }
      self:clip_gradients(opt, val * 2, algo)
    end
    lt.Trainer(opts { max_steps = 1, gradient_clip_val = 5, gradient_clip_algorithm = "value" }):fit(m, loader(1))
    assert.are.same({ 0, 5, "value" }, got)
    assert.are.same({ -10, -10 }, m.w:totable()[1])
  end)
end)
