-- tests/callbacks_builtin_spec.lua — the callbacks of docs/reference/callbacks.md ("More built-in callbacks") by what they do:
-- SWA's weights are the mean of the weights of the SWA epochs and its LR anneals as SWALR; EMA's weights
-- follow the recurrence, are swapped in for validation and resume from a checkpoint; the accumulation
-- schedule changes the number of steps; BackboneFinetuning freezes, then adds the backbone with its rates;
-- the LR finder's curve is the smoothed loss of the exponential range, its suggestion the steepest descent;
-- a prediction writer sees every batch and the epoch's predictions.
local lt = require "lutra"
local cb = lt.callbacks

local function quiet(o)
  local t = { logger = false, enable_progress_bar = false, enable_model_summary = false, enable_checkpointing = false,
    num_sanity_val_steps = 0 }
  for k, v in pairs(o or {}) do t[k] = v end
  return t
end

local function data(n, bs, seed)
  lt.manual_seed(seed or 7)
  local x = lt.randn(n, 3)
  local y = x:matmul(lt.tensor { { 1 }, { -2 }, { 0.5 } }) + 0.1
  return lt.data.DataLoader(lt.data.TensorDataset(x, y), { batch_size = bs })
end

local function model(lr, momentum)
  lt.manual_seed(1)
  local m = { backbone = lt.nn.Linear(3, 4), head = lt.nn.Linear(4, 1), lr = lr or 0.05 }
  function m:forward(x) return self.head(self.backbone(x)) end
  function m:training_step(b) return lt.F.mse_loss(self:forward(b[1]), b[2]) end
  function m:validation_step(b) self:log("val_loss", lt.F.mse_loss(self:forward(b[1]), b[2])) end
  function m:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), { lr = self.lr, momentum = momentum or 0 }) end
  return m
end

local function snapshot(m)
  local s = {}
  for k, t in pairs(lt.nn.state_dict(m)) do s[k] = t:clone() end
  return s
end

local function close(a, b, tol)
  return a:allclose(b, tol or 1e-6, tol or 1e-6)
end

describe("StochasticWeightAveraging", function()
  it("the final weights are the mean of the weights at the start of the SWA epochs; the LR anneals (SWALR)", function()
    local m = model(0.1)
    local starts, lrs = {}, {}
    local rec = { on_train_epoch_start = function(_, trainer, mm)
      starts[trainer.current_epoch] = snapshot(mm)
      lrs[trainer.current_epoch + 1] = trainer.optimizers[1].param_groups[1].lr
    end }
    local swa = cb.StochasticWeightAveraging { swa_lrs = 0.01, swa_epoch_start = 2, annealing_epochs = 2,
      annealing_strategy = "linear" }
    lt.Trainer(quiet { max_epochs = 5, callbacks = { rec, swa } }):fit(m, data(16, 4))
    assert.are.equal(3, swa.n_averaged)
    for name, w in pairs(lt.nn.state_dict(m)) do
      local mean = (starts[2][name] + starts[3][name] + starts[4][name]) / 3
      assert.is_true(close(mean, w, 1e-5), name)
    end
    -- SWALR from 0.1 to 0.01 over 2 epochs, linear: stepped at the end of epochs 2 and 3
    local want = { 0.1, 0.1, 0.1, 0.055, 0.01 }
    for i = 1, 5 do assert.is_true(math.abs(lrs[i] - want[i]) < 1e-12, ("epoch %d lr %s"):format(i - 1, lrs[i])) end
  end)

  it("swa_epoch_start as a fraction of max_epochs; cos annealing; bad options fail", function()
    local swa = cb.StochasticWeightAveraging { swa_lrs = 0.02, swa_epoch_start = 0.5, annealing_epochs = 1 }
    local m = model(0.1)
    lt.Trainer(quiet { max_epochs = 4, callbacks = { swa } }):fit(m, data(8, 4))
    assert.are.equal(2, swa:swa_start())
    assert.are.equal(3, swa:swa_end())
    assert.are.equal(2, swa.n_averaged)
    assert.has_error(function() cb.StochasticWeightAveraging {} end,
      "StochasticWeightAveraging: option 'swa_lrs' is required (a learning rate > 0 or a list)")
    assert.has_error(function() cb.StochasticWeightAveraging { swa_lrs = 0.1, swa_epoch_start = 1.5 } end,
      "StochasticWeightAveraging: option 'swa_epoch_start' must be an integer epoch >= 0 or a fraction in (0, 1), got 1.5")
    assert.has_error(function() cb.StochasticWeightAveraging { swa_lrs = 0.1, annealing_strategy = "exp" } end,
      "StochasticWeightAveraging: option 'annealing_strategy' must be \"cos\" or \"linear\", got \"exp\"")
  end)
end)

describe("StochasticWeightAveraging with BatchNorm", function()
  it("recomputes the running statistics for the averaged weights: one cumulative pass, momentum restored", function()
    lt.manual_seed(3)
    local x = lt.randn(12, 3)
    local loader = lt.data.DataLoader(lt.data.TensorDataset(x, x:sum(2, true)), { batch_size = 4 })
    lt.manual_seed(1)
    local m = { net = lt.nn.Sequential(lt.nn.Linear(3, 4), lt.nn.BatchNorm1d(4), lt.nn.Linear(4, 1)) }
    function m:forward(a) return self.net(a) end
    function m:training_step(b) return lt.F.mse_loss(self:forward(b[1]), b[2]) end
    function m:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), { lr = 0.1 }) end
    local stats_before
    local rec = { on_train_end = function(_, _, mm) -- runs before SWA's (callback order)
      stats_before = mm.net[2].running_mean:clone()
    end }
    local swa = cb.StochasticWeightAveraging { swa_lrs = 0.05, swa_epoch_start = 1 }
    local trainer = lt.Trainer(quiet { max_epochs = 3, callbacks = { rec, swa } })
    trainer:fit(m, loader)
    local lin, bn = m.net[1], m.net[2]
    for name, w in pairs(swa:average()) do
      assert.is_true(close(w, lt.nn.state_dict(m)[name], 0), name) -- the model holds the mean weights
    end
    -- by hand: the first layer's outputs with the mean weights, batch by batch; the cumulative average of the
    -- batch means and of the unbiased batch variances
    local mean, var = lt.zeros(4), lt.zeros(4)
    local nb = 0
    for i = 1, 12, 4 do
      local h = x:narrow(1, i, 4):matmul(lin.weight:detach():t()) + lin.bias:detach()
      local mu = h:mean(1)
      local v = ((h - mu) * (h - mu)):sum(1) / 3
      mean, var, nb = mean + mu, var + v, nb + 1
    end
    mean, var = mean / nb, var / nb
    assert.is_true(close(bn.running_mean, mean, 1e-5))
    assert.is_true(close(bn.running_var, var, 1e-5))
    assert.is_false(close(bn.running_mean, stats_before, 1e-3)) -- the pass changed them
    assert.are.equal(3, bn.num_batches_tracked:item())
    assert.are.equal(0.1, bn.momentum)
    assert.is_true(bn.training)
    assert.are.equal(9, trainer.global_step) -- the pass made no optimizer step (3 epochs of 3 batches)
  end)
end)

describe("EMA", function()
  it("follows ema = d * ema + (1 - d) * w after every step; validation sees the EMA weights", function()
    local m = model(0.1)
    local after = {}
    local init
    local rec = {
      on_fit_start = function(_, _, mm) init = snapshot(mm) end,
      on_train_batch_end = function(_, _, mm) after[#after + 1] = snapshot(mm) end,
    }
    local ema = cb.EMA { decay = 0.8 }
    local in_val = {}
    function m:validation_step(b)
      in_val[#in_val + 1] = snapshot(self)
      self:log("val_loss", lt.F.mse_loss(self:forward(b[1]), b[2]))
    end
    local t = lt.Trainer(quiet { max_epochs = 2, callbacks = { rec, ema } })
    t:fit(m, data(12, 4), data(4, 4, 9))
    assert.are.equal(6, #after)
    for name in pairs(init) do
      local e = init[name]:clone()
      for k = 1, 3 do e = e * 0.8 + after[k][name] * 0.2 end
      assert.is_true(close(e, in_val[1][name], 1e-6), "validation after epoch 0 runs on the EMA weights: " .. name)
      for k = 4, 6 do e = e * 0.8 + after[k][name] * 0.2 end
      assert.is_true(close(e, ema:weights()[name], 1e-6), name)
      assert.is_true(close(after[6][name], lt.nn.state_dict(m)[name], 0), "the training weights are back: " .. name)
    end
  end)

  it("is saved in checkpoints and resumed; apply_at_end leaves the EMA weights in the model", function()
    local dir = os.tmpname(); os.remove(dir); os.execute("mkdir -p " .. dir)
    local m = model(0.1)
    local ema = cb.EMA { decay = 0.5 }
    local t = lt.Trainer(quiet { max_epochs = 1, callbacks = { ema } })
    t:fit(m, data(8, 4))
    t:save_checkpoint(dir .. "/e.ckpt")
    local ema2 = cb.EMA { decay = 0.5, apply_at_end = true }
    local m2 = model(0.1)
    local t2 = lt.Trainer(quiet { max_epochs = 1, callbacks = { ema2 } })
    t2:fit(m2, data(8, 4), { ckpt_path = dir .. "/e.ckpt" }) -- finished already: restores, runs no batch
    for name, w in pairs(ema:weights()) do
      assert.is_true(close(w, ema2:weights()[name], 0), name)
      assert.is_true(close(w, lt.nn.state_dict(m2)[name], 0), name)
    end
    os.execute("rm -rf " .. dir)
    assert.has_error(function() cb.EMA { decay = 1.5 } end, "EMA: option 'decay' must be in [0, 1], got 1.5")
  end)
end)

describe("GradientAccumulationScheduler", function()
  it("{[0] = 1, [2] = 2}: 4 steps an epoch for two epochs, then 2", function()
    local gas = cb.GradientAccumulationScheduler { scheduling = { [2] = 2 } }
    local per = {}
    local rec = { on_train_epoch_end = function(_, trainer) per[#per + 1] = trainer.global_step end }
    local t = lt.Trainer(quiet { max_epochs = 4, callbacks = { gas, rec } })
    t:fit(model(), data(16, 4))
    assert.are.same({ 4, 8, 10, 12 }, per)
    assert.are.equal(2, t.accumulate_grad_batches)
    assert.are.equal(1, gas:get_accumulate_grad_batches(1))
    -- the validation loaders stay: every epoch validates, before and after the factor changes
    local m = model()
    local vsteps = 0
    local vs = m.validation_step
    function m:validation_step(b, i) vsteps = vsteps + 1; return vs(self, b, i) end
    lt.Trainer(quiet { max_epochs = 4, callbacks = { cb.GradientAccumulationScheduler { scheduling = { [2] = 2 } } } })
      :fit(m, data(16, 4), data(8, 4))
    assert.are.equal(4 * 2, vsteps)
    assert.has_error(function() cb.GradientAccumulationScheduler { scheduling = { [1] = 0 } } end,
      "GradientAccumulationScheduler: the factor for epoch 1 must be an integer >= 1, got 0")
    assert.has_error(function() cb.GradientAccumulationScheduler { scheduling = { [-1] = 2 } } end,
      "GradientAccumulationScheduler: epoch -1 in 'scheduling' must be an integer >= 0")
  end)
end)

describe("accumulate_grad_batches", function()
  it("has one value: the loops', which the trainer reads and a trainer's assignment sets (checked)", function()
    local t = lt.Trainer(quiet { max_epochs = 1, accumulate_grad_batches = 3 })
    assert.are.equal(3, t.accumulate_grad_batches)
    assert.are.equal(3, t._lp:get("accumulate_grad_batches"))
    t.accumulate_grad_batches = 2
    assert.are.equal(2, t._lp:get("accumulate_grad_batches"))
    assert.is_nil(rawget(t, "accumulate_grad_batches"))
    local steps
    local rec = { on_train_end = function(_, trainer) steps = trainer.global_step end }
    t = lt.Trainer(quiet { max_epochs = 1, callbacks = { rec } })
    t.accumulate_grad_batches = 2
    t:fit(model(), data(16, 4)) -- 4 batches, stepping every 2
    assert.are.equal(2, steps)
    assert.has_error(function() t.accumulate_grad_batches = 0 end,
      "Trainer: accumulate_grad_batches must be an integer >= 1, got 0")
    assert.has_error(function() t.accumulate_grad_batches = 2.5 end,
      "Trainer: accumulate_grad_batches must be an integer >= 1, got 2.5")
    assert.has_error(function() t.accumulate_grad_batches = "2" end,
      "Trainer: accumulate_grad_batches must be an integer >= 1, got a string")
    assert.are.equal(2, t.accumulate_grad_batches)
  end)
end)

describe("BackboneFinetuning", function()
  it("freezes the backbone, adds it at unfreeze_backbone_at_epoch with ratio * lr, then lambda_func, aligned", function()
    local m = model(0.1)
    function m:configure_optimizers() return lt.optim.SGD(self.head:parameters(), { lr = self.lr }) end
    local bf = cb.BackboneFinetuning { unfreeze_backbone_at_epoch = 2, backbone_initial_ratio_lr = 0.1,
      lambda_func = function() return 4 end }
    local seen = {}
    local rec = { on_train_epoch_start = function(_, trainer, mm)
      local g = trainer.optimizers[1].param_groups
      seen[#seen + 1] = { groups = #g, lr = g[#g].lr, w = mm.backbone.weight:clone(),
        grad = mm.backbone.weight:requires_grad() }
    end }
    lt.Trainer(quiet { max_epochs = 5, callbacks = { bf, rec } }):fit(m, data(8, 4))
    assert.are.equal(1, seen[1].groups)
    assert.is_false(seen[1].grad)
    assert.is_true(close(seen[1].w, seen[2].w, 0))  -- frozen in epochs 0 and 1
    assert.is_true(close(seen[2].w, seen[3].w, 0))
    assert.are.equal(2, seen[3].groups)
    assert.is_true(seen[3].grad)
    assert.is_true(math.abs(seen[3].lr - 0.01) < 1e-12)
    assert.is_true(math.abs(seen[4].lr - 0.04) < 1e-12)
    assert.is_true(math.abs(seen[5].lr - 0.1) < 1e-12) -- 0.16 capped at the head's 0.1 (should_align)
    assert.is_false(close(seen[3].w, seen[4].w, 0)) -- the backbone trains from epoch 2
    local nobb = model()
    nobb.backbone = nil
    function nobb:forward(x) return self.head(lt.zeros(x:size(1), 4)) end
    assert.has_error(function()
      lt.Trainer(quiet { max_epochs = 1, callbacks = { cb.BackboneFinetuning {} } }):fit(nobb, data(4, 4))
    end)
  end)
end)

describe("BackboneFinetuning resumed", function()
  local fs = require "helpers.fs"
  local function run(max_epochs, ckpt_path, save_to)
    local m = model(0.1, 0.9)
    if ckpt_path then -- other starting weights: everything must come from the checkpoint
      lt.manual_seed(99)
      m.backbone, m.head = lt.nn.Linear(3, 4), lt.nn.Linear(4, 1)
    end
    function m:configure_optimizers() return lt.optim.SGD(self.head:parameters(), { lr = self.lr, momentum = 0.9 }) end
    local bf = cb.BackboneFinetuning { unfreeze_backbone_at_epoch = 1, lambda_func = function() return 2 end }
    local trainer = lt.Trainer(quiet { max_epochs = max_epochs, callbacks = { bf } })
    trainer:fit(m, data(8, 4), nil, ckpt_path and { ckpt_path = ckpt_path } or nil)
    if save_to then trainer:save_checkpoint(save_to) end
    return m, trainer
  end

  it("after the unfreeze epoch continues bitwise as the uninterrupted fit (the added param group is saved)", function()
    local dir = fs.tmpdir()
    local whole, tw = run(4)
    run(3, nil, dir .. "/e3.ckpt")
    local resumed, tr = run(4, dir .. "/e3.ckpt")
    local a, b = lt.nn.state_dict(whole), lt.nn.state_dict(resumed)
    for name, w in pairs(a) do assert.is_true(close(w, b[name], 0), name) end
    local ga, gb = tw.optimizers[1].param_groups, tr.optimizers[1].param_groups
    assert.are.equal(2, #gb)
    assert.are.equal(ga[2].lr, gb[2].lr)
    assert.is_true(resumed.backbone.weight:requires_grad())
    -- a checkpoint whose added group names a parameter the model lacks
    local m = model(0.1)
    local opt = lt.optim.SGD(m.head:parameters(), { lr = 0.1 })
    local bf = cb.BackboneFinetuning {}
    assert.has_error(function()
      bf:on_load_checkpoint({ optimizers = { opt } }, m, { internal_optimizer_metadata = { {
        { params = { "head.weight", "head.bias" }, lr = 0.1 }, { params = { "backbone.nope" }, lr = 0.01 } } } })
    end, "BaseFinetuning: the checkpoint's optimizer 1 param group 2 holds 'backbone.nope', which the model does not have")
    assert.are.equal(1, #opt.param_groups)
    -- a state saved before the groups were kept ({previous_backbone_lr} alone) still loads
    bf:on_load_checkpoint({ optimizers = { opt } }, m, { previous_backbone_lr = 0.02 })
    bf:load_state_dict { previous_backbone_lr = 0.02 }
    assert.are.equal(0.02, bf.previous_backbone_lr)
    assert.are.equal(1, #opt.param_groups)
    fs.rmrf(dir)
  end)
end)

describe("lr_find and LearningRateFinder", function()
  -- full-batch least squares: the loss is a function of the weights alone
  local function problem()
    lt.manual_seed(3)
    local x = lt.randn(32, 3)
    local y = x:matmul(lt.tensor { { 1 }, { -2 }, { 0.5 } })
    local m = { net = lt.nn.Linear(3, 1), lr = 0.01 }
    function m:training_step(b) return lt.F.mse_loss(self.net(b[1]), b[2]) end
    function m:configure_optimizers() return lt.optim.SGD(self.net:parameters(), { lr = self.lr }) end
    return m, lt.data.DataLoader(lt.data.TensorDataset(x, y), { batch_size = 32 }), x, y
  end

  it("with accumulate_grad_batches, one point per optimizer step, the epoch's short last window included", function()
    local m, _, x, y = problem()
    -- 4 batches per epoch, accumulating 3: the loops step after batches 3 and 4 (the epoch's last batch)
    local loader = lt.data.DataLoader(lt.data.TensorDataset(x, y), { batch_size = 8 })
    local t = lt.Trainer(quiet { max_epochs = 1, accumulate_grad_batches = 3 })
    local f = t:lr_find(m, loader, { min_lr = 1e-3, max_lr = 10, num_training = 6, early_stop_threshold = false })
    assert.are.equal(6, #f.results.lr)
    assert.are.equal(6, #f.results.loss)
    for s = 1, 6 do
      local lr = 1e-3 * 1e4 ^ (s / 6)
      assert.is_true(math.abs(f.results.lr[s] - lr) < 1e-12 * lr, "lr " .. s)
    end
  end)

  it("the curve is the smoothed loss over the exponential range; the suggestion is the steepest descent", function()
    local m, loader, x, y = problem()
    local w0 = snapshot(m)
    local t = lt.Trainer(quiet { max_epochs = 1 })
    local f = t:lr_find(m, loader, { min_lr = 1e-3, max_lr = 10, num_training = 40, early_stop_threshold = false })
    assert.are.equal(40, #f.results.lr)
    assert.are.equal(40, #f.results.loss)
    -- the same steps by hand: lr_s = 1e-3 * 1e4^(s/40), plain SGD, smoothed with beta 0.98
    local ref = { net = lt.nn.Linear(3, 1) }
    lt.nn.load_state_dict(ref, w0)
    local avg = 0
    for s = 1, 40 do
      local lr = 1e-3 * 1e4 ^ (s / 40)
      assert.is_true(math.abs(f.results.lr[s] - lr) < 1e-12 * lr, "lr " .. s)
      local loss = lt.F.mse_loss(ref.net(x), y)
      ref.net:zero_grad(true)
      loss:backward()
      lt.no_grad(function() for _, p in ipairs(ref.net:parameters()) do p:copy_(p - p.grad * lr) end end)
      avg = 0.98 * avg + 0.02 * loss:item()
      local smoothed = avg / (1 - 0.98 ^ s)
      assert.is_true(math.abs(f.results.loss[s] - smoothed) < 1e-4 * math.max(1, smoothed), "loss " .. s)
    end
    -- steepest descent of the points 11..39 (numpy.gradient)
    local ys = {}
    for i = 11, 39 do ys[#ys + 1] = f.results.loss[i] end
    local best, bi = math.huge, nil
    for i = 1, #ys do
      local g = i == 1 and ys[2] - ys[1] or i == #ys and ys[i] - ys[i - 1] or (ys[i + 1] - ys[i - 1]) / 2
      if g < best then best, bi = g, i end
    end
    assert.are.equal(f.results.lr[bi + 10], f:suggestion())
    -- the weights are restored
    for k, v in pairs(w0) do assert.is_true(close(v, lt.nn.state_dict(m)[k], 0), k) end
    -- the plot
    local svg = f:plot()
    assert.matches("suggested lr", svg, 1, true)
    assert.matches("log10(lr)", svg, 1, true)
  end)

  it("stops early when the loss diverges; update_attr sets model.lr; the callback sets the fit's rates", function()
    local m, loader = problem()
    local t = lt.Trainer(quiet { max_epochs = 1 })
    local f = t:lr_find(m, loader, { min_lr = 1e-3, max_lr = 100, num_training = 60, update_attr = true })
    assert.is_true(f.stopped_early)
    assert.is_true(#f.results.loss < 60)
    assert.are.equal(f:suggestion(), m.lr)
    local m2, loader2 = problem()
    local lrf = cb.LearningRateFinder { min_lr = 1e-3, max_lr = 100, num_training = 60 }
    local seen
    local rec = { on_train_start = function(_, trainer) seen = trainer.optimizers[1].param_groups[1].lr end }
    lt.Trainer(quiet { max_epochs = 1, callbacks = { lrf, rec } }):fit(m2, loader2)
    assert.are.equal(f:suggestion(), seen)
    assert.are.equal(seen, m2.lr)
    -- the fit's loader from a datamodule: asked for when the callback needs it (the fit loop asks no more)
    local m3, loader3 = problem()
    local asked = 0
    local D = lt.DataModule:extend("D")
    function D:train_dataloader() asked = asked + 1; return loader3 end
    local seen3
    rec.on_train_start = function(_, trainer) seen3 = trainer.optimizers[1].param_groups[1].lr end
    lt.Trainer(quiet { max_epochs = 1, callbacks = { cb.LearningRateFinder { min_lr = 1e-3, max_lr = 100,
      num_training = 60 }, rec } }):fit(m3, D())
    assert.are.equal(1, asked)
    assert.are.equal(f:suggestion(), seen3)
    assert.has_error(function() t:lr_find(m, loader, { min_lr = 1, max_lr = 0.1 }) end,
      "lr_find: needs 0 < min_lr < max_lr, got min_lr = 1, max_lr = 0.1")
    assert.has_error(function() t:lr_find(m, loader, { mode = "cubic" }) end,
      "lr_find: option 'mode' must be \"exponential\" or \"linear\", got \"cubic\"")
  end)
end)

describe("BasePredictionWriter", function()
  it("write_on_batch_end per batch, write_on_epoch_end with every prediction", function()
    local W = cb.BasePredictionWriter:extend("W")
    local batches, epochs = {}, {}
    function W:write_on_batch_end(_, _, prediction, _, _, batch_idx, dl) batches[#batches + 1] = { batch_idx, dl, prediction } end
    function W:write_on_epoch_end(_, _, predictions) epochs[#epochs + 1] = predictions end
    local m = model()
    local t = lt.Trainer(quiet { callbacks = { W { write_interval = "batch_and_epoch" } } })
    local preds = t:predict(m, data(12, 4))
    assert.are.equal(3, #batches)
    assert.are.same({ 2, 0 }, { batches[3][1], batches[3][2] })
    assert.are.equal(preds[3], batches[3][3])
    assert.are.equal(1, #epochs)
    assert.are.equal(preds, epochs[1][1])
    local only_epoch = cb.BasePredictionWriter:extend("E")
    function only_epoch:write_on_epoch_end() epochs[#epochs + 1] = true end
    lt.Trainer(quiet { callbacks = { only_epoch { write_interval = "epoch" } } }):predict(m, data(4, 4))
    assert.are.equal(2, #epochs)
    local bare = cb.BasePredictionWriter {}
    local ok, err = pcall(function() lt.Trainer(quiet { callbacks = { bare } }):predict(m, data(4, 4)) end)
    assert.is_false(ok)
    assert.matches("BasePredictionWriter: define write_on_batch_end", tostring(err), 1, true)
    assert.has_error(function() cb.BasePredictionWriter { write_interval = "step" } end,
      "BasePredictionWriter: option 'write_interval' must be \"batch\", \"epoch\" or \"batch_and_epoch\", got \"step\"")
  end)
end)

describe("RichProgressBar", function()
  -- a terminal's screen from what was written: \r, \n, ESC[nA (up), ESC[K (erase to the end of the line)
  local function screen_of(text)
    local rows, r, c = { "" }, 1, 0
    local i = 1
    while i <= #text do
      local ch = text:sub(i, i)
      if ch == "\r" then c = 0; i = i + 1
      elseif ch == "\n" then r = r + 1; rows[r] = rows[r] or ""; c = 0; i = i + 1
      elseif ch == "\27" then
        local n, code = text:match("^%[(%d*)([AK])", i + 1)
        if code == "A" then r = math.max(1, r - (tonumber(n) or 1))
        else rows[r] = rows[r]:sub(1, c) end
        i = i + 2 + #n + 1
      else
        local line = rows[r] or ""
        if #line < c then line = line .. string.rep(" ", c - #line) end
        rows[r] = line:sub(1, c) .. ch .. line:sub(c + 2)
        c = c + 1
        i = i + 1
      end
    end
    return rows
  end

  local function run_fit(capture_in_val)
    local out = {}
    local stream = { write = function(_, s) out[#out + 1] = s end, flush = function() end }
    local bar = cb.RichProgressBar { stream = stream, tty = true, multiline = true, color = false, width = 90 }
    local m = model()
    local during
    function m:validation_step(b)
      if capture_in_val and during == nil then during = screen_of(table.concat(out)) end
      self:log("val_loss", lt.F.mse_loss(self:forward(b[1]), b[2]), { prog_bar = true })
    end
    lt.Trainer(quiet { max_epochs = 2, callbacks = { bar }, enable_progress_bar = true }):fit(m, data(8, 4), data(4, 2, 9))
    return screen_of(table.concat(out)), during
  end

  it("draws the training bar, the validation bar below it and the metrics line, in place", function()
    local screen, during = run_fit(true)
    local text = table.concat(screen, "\n")
    -- each epoch's block stays: its bar (complete) and its metrics line
    assert.matches("^Epoch 0/1%s+━.-━ 2/2 ", screen[1])
    assert.matches("^loss: %S+  val_loss: %S+", screen[2])
    assert.matches("^Epoch 1/1%s+━.-━ 2/2 ", screen[3])
    assert.matches("^loss: %S+  val_loss: %S+", screen[4])
    assert.is_nil(text:find("Validation", 1, true)) -- the validation bar is gone once validation ends
    -- during validation: three lines, the training bar, the validation bar, the metrics
    assert.matches("^Epoch 0/1", during[1])
    assert.matches("^Validation%s+━.-━ 0/2 ", during[2])
    assert.matches("^loss: ", during[3])
  end)

  it("is the one-line ProgressBar where the terminal does not allow more", function()
    local out = {}
    local stream = { write = function(_, s) out[#out + 1] = s end, flush = function() end }
    local bar = cb.RichProgressBar { stream = stream, tty = false }
    assert.is_false(bar.multiline)
    lt.Trainer(quiet { max_epochs = 1, callbacks = { bar }, enable_progress_bar = true }):fit(model(), data(8, 4))
    assert.matches("^Epoch 0: 2/2 batches %[", table.concat(out))
    assert.has_error(function() cb.RichProgressBar { colour = true } end)
  end)
end)

