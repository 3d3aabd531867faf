-- callbacks_spec.lua — the built-in callbacks: ModelCheckpoint's file sets over scripted metric
-- sequences, EarlyStopping with patience / thresholds / min_epochs, LearningRateMonitor's columns, Timer,
-- ModelSummary, the Callback base, and option checking.
local lt = require "lutra"
local cb = lt.callbacks

local fs = require "helpers.fs"
local tmpdir, rmrf = fs.tmpdir, fs.rmrf

local function files(dir)
  local out = {}
  for _, n in ipairs(lt._io.listdir(dir) or {}) do out[#out + 1] = n end
  table.sort(out)
  return out
end

-- A model whose validation logs metric `name` = seq[epoch + 1] (a scripted sequence); 2 training batches
-- per epoch. Records the checkpoint directory's files at each epoch end (after the callbacks).
local function scripted(seq, name, dir)
  lt.manual_seed(2)
  local ds = lt.data.TensorDataset(lt.randn(8, 2), lt.randn(8, 1))
  local train = lt.data.DataLoader(ds, { batch_size = 4 })
  local val = lt.data.DataLoader(ds, { batch_size = 8 })
  local model = { fc = lt.nn.Linear(2, 1), seen = {} }
  function model:training_step(b) return lt.F.mse_loss(self.fc(b[1]), b[2]) end
  function model:validation_step()
    local v = seq[self.current_epoch + 1]
    if v ~= nil then self:log(name or "val_loss", v) end
  end
  function model:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), { lr = 0.01 }) end
  function model:on_train_epoch_end() if dir then self.seen[#self.seen + 1] = files(dir) end end
  return model, train, val
end

local function trainer(opts)
  local o = { logger = false, enable_progress_bar = false, enable_model_summary = false, num_sanity_val_steps = 0,
    enable_checkpointing = false, default_root_dir = os.getenv("TMPDIR") or "/tmp" }
  for k, v in pairs(opts) do o[k] = v end
  return lt.Trainer(o)
end

describe("ModelCheckpoint", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmrf(dir) end)

  it("keeps the top k files of a scripted val_loss sequence, deleting those that fall out (mode min)", function()
    local seq = { 5, 3, 4, 1, 2, 6 }
    local model, train, val = scripted(seq, "val_loss", dir)
    local mc = cb.ModelCheckpoint { dirpath = dir, monitor = "val_loss", save_top_k = 2, filename = "{epoch}-{val_loss:.1f}" }
    trainer({ max_epochs = #seq, callbacks = { mc } }):fit(model, train, val)
    assert.are.same({
      { "epoch=0-val_loss=5.0.ckpt" },
      { "epoch=0-val_loss=5.0.ckpt", "epoch=1-val_loss=3.0.ckpt" },
      { "epoch=1-val_loss=3.0.ckpt", "epoch=2-val_loss=4.0.ckpt" },
      { "epoch=1-val_loss=3.0.ckpt", "epoch=3-val_loss=1.0.ckpt" },
      { "epoch=3-val_loss=1.0.ckpt", "epoch=4-val_loss=2.0.ckpt" },
      { "epoch=3-val_loss=1.0.ckpt", "epoch=4-val_loss=2.0.ckpt" },
    }, model.seen)
    assert.are.equal(dir .. "/epoch=3-val_loss=1.0.ckpt", mc.best_model_path)
    assert.are.equal(1, mc.best_model_score)
    assert.are.equal(dir .. "/epoch=4-val_loss=2.0.ckpt", mc.kth_best_model_path)
    assert.are.equal(2, mc.kth_value)
    assert.are.same({ [dir .. "/epoch=3-val_loss=1.0.ckpt"] = 1, [dir .. "/epoch=4-val_loss=2.0.ckpt"] = 2 }, mc.best_k_models)
    -- the best file holds the weights of that epoch and loads
    local sd = lt.load(mc.best_model_path)
    assert.are.same({ 1, 2 }, sd["fc.weight"]:shape())
  end)

  it("mode max keeps the largest; save_top_k = 1 keeps one file", function()
    local seq = { 0.5, 0.7, 0.6, 0.9, 0.8 }
    local model, train, val = scripted(seq, "acc", dir)
    local mc = cb.ModelCheckpoint { dirpath = dir, monitor = "acc", mode = "max", filename = "best-{acc:.2f}" }
    trainer({ max_epochs = #seq, callbacks = { mc } }):fit(model, train, val)
    assert.are.same({ { "best-acc=0.50.ckpt" }, { "best-acc=0.70.ckpt" }, { "best-acc=0.70.ckpt" },
      { "best-acc=0.90.ckpt" }, { "best-acc=0.90.ckpt" } }, model.seen)
    assert.is_true(math.abs(mc.best_model_score - 0.9) < 1e-6)
  end)

  it("save_top_k = -1 keeps every file; 0 keeps none but save_last still writes last.ckpt", function()
    local model, train, val = scripted({ 3, 2, 1 }, "val_loss", dir)
    trainer({ max_epochs = 3, callbacks = { cb.ModelCheckpoint { dirpath = dir, monitor = "val_loss", save_top_k = -1 } } })
      :fit(model, train, val)
    assert.are.same({ "epoch=0-step=2.ckpt", "epoch=1-step=4.ckpt", "epoch=2-step=6.ckpt" }, files(dir))
    rmrf(dir)
    lt._io.mkdirs(dir)
    local model2, train2, val2 = scripted({ 3, 2, 1 }, "val_loss", dir)
    local mc = cb.ModelCheckpoint { dirpath = dir, monitor = "val_loss", save_top_k = 0, save_last = true }
    trainer({ max_epochs = 3, callbacks = { mc } }):fit(model2, train2, val2)
    assert.are.same({ "last.ckpt" }, files(dir))
    assert.are.equal(dir .. "/last.ckpt", mc.last_model_path)
    assert.are.equal("", mc.best_model_path)
  end)

  it("without a monitor keeps the latest file (save_top_k = 1) and names it from the epoch and step", function()
    local model, train, val = scripted({}, nil, dir)
    local mc = cb.ModelCheckpoint { dirpath = dir }
    trainer({ max_epochs = 3, callbacks = { mc } }):fit(model, train, val)
    assert.are.same({ { "epoch=0-step=2.ckpt" }, { "epoch=1-step=4.ckpt" }, { "epoch=2-step=6.ckpt" } }, model.seen)
    assert.are.equal(dir .. "/epoch=2-step=6.ckpt", mc.best_model_path)
  end)

  it("every_n_epochs = 2 saves after epochs 1 and 3; every_n_train_steps = 3 at steps 3, 6, 9", function()
    local model, train, val = scripted({}, nil, dir)
    trainer({ max_epochs = 4, callbacks = { cb.ModelCheckpoint { dirpath = dir, save_top_k = -1, every_n_epochs = 2 } } })
      :fit(model, train, val)
    assert.are.same({ "epoch=1-step=4.ckpt", "epoch=3-step=8.ckpt" }, files(dir))
    rmrf(dir)
    lt._io.mkdirs(dir)
    local model2, train2, val2 = scripted({}, nil, dir)
    trainer({ max_epochs = 5, callbacks = { cb.ModelCheckpoint { dirpath = dir, save_top_k = -1, every_n_train_steps = 3,
      filename = "{step:03d}" } } }):fit(model2, train2, val2)
    assert.are.same({ "step=003.ckpt", "step=006.ckpt", "step=009.ckpt" }, files(dir))
  end)

  it("formats file names: auto_insert_metric_name = false, specs, missing keys, versions for taken names", function()
    local mc = cb.ModelCheckpoint { dirpath = "d", filename = "{epoch:02d}_{val_loss:.3f}_{acc:.1%}",
      auto_insert_metric_name = false }
    assert.are.equal("d/03_0.123_0.0%.ckpt", mc:format_checkpoint_name { epoch = 3, val_loss = lt.tensor(0.12345) })
    local mc2 = cb.ModelCheckpoint { dirpath = "d", filename = "{val_loss}-{x:.2e}" }
    assert.are.equal("d/val_loss=0.5-x=1.50e+03.ckpt", mc2:format_checkpoint_name { val_loss = 0.5, x = 1500 })
    assert.are.equal("d/val_loss=0.5-x=1.50e+03-v2.ckpt", mc2:format_checkpoint_name({ val_loss = 0.5, x = 1500 }, nil, 2))
    -- a file name already used gets -v1
    local model, train, val = scripted({ 1, 1, 1 }, "val_loss", dir)
    trainer({ max_epochs = 3, callbacks = { cb.ModelCheckpoint { dirpath = dir, monitor = "val_loss", save_top_k = -1,
      filename = "{val_loss:.0f}" } } }):fit(model, train, val)
    assert.are.same({ "val_loss=1-v1.ckpt", "val_loss=1-v2.ckpt", "val_loss=1.ckpt" }, files(dir))
  end)

  it("puts checkpoints under the logger's version directory, or <default_root_dir>/checkpoints", function()
    local model, train, val = scripted({}, nil)
    local mc = cb.ModelCheckpoint {}
    lt.Trainer({ max_epochs = 1, default_root_dir = dir, enable_progress_bar = false, enable_model_summary = false,
      callbacks = { mc } }):fit(model, train, val)
    assert.are.equal(dir .. "/lutra_logs/version_0/checkpoints", mc.dirpath)
    assert.are.same({ "epoch=0-step=2.ckpt" }, files(mc.dirpath))
    local model2, train2, val2 = scripted({}, nil)
    local t = trainer { max_epochs = 1, default_root_dir = dir, enable_checkpointing = true }
    t:fit(model2, train2, val2)
    assert.are.equal(dir .. "/checkpoints", t.checkpoint_callback.dirpath)
    assert.are.same({ "epoch=0-step=2.ckpt" }, files(dir .. "/checkpoints"))
  end)

  it("its state round-trips through state_dict / load_state_dict", function()
    local a = cb.ModelCheckpoint { dirpath = "d", monitor = "m", save_top_k = 2 }
    a.best_k_models = { ["d/a.ckpt"] = 1, ["d/b.ckpt"] = 2 }
    a.best_model_path, a.best_model_score, a.kth_best_model_path, a.kth_value = "d/a.ckpt", 1, "d/b.ckpt", 2
    a.last_model_path = "d/last.ckpt"
    local b = cb.ModelCheckpoint { dirpath = "d", monitor = "m", save_top_k = 2 }
    b:load_state_dict(require("lutra.checkpoint").decode(require("lutra.checkpoint").encode(a:state_dict())))
    assert.are.same(a:state_dict(), b:state_dict())
  end)

  it("a monitor missing after validation ran is an error naming it and the metrics there are", function()
    local model, train, val = scripted({ 1, 2 }, "val_loss", dir)
    local t = trainer { max_epochs = 2, callbacks = { cb.ModelCheckpoint { dirpath = dir, monitor = "val_acc" } } }
    local ok, err = pcall(t.fit, t, model, train, val)
    assert.is_false(ok)
    assert.matches('ModelCheckpoint(monitor="val_acc") could not find the monitored key in the returned metrics: ' ..
      'epoch, step, val_loss', err, 1, true)
  end)

  it("rejects unknown and invalid options", function()
    local cases = {
      { { dirpth = "x" }, "ModelCheckpoint: unknown option 'dirpth'" },
      { { mode = "avg" }, 'ModelCheckpoint: option \'mode\' must be "min" or "max", got "avg"' },
      { { save_top_k = -2 }, "ModelCheckpoint: option 'save_top_k' must be >= -1, got -2" },
      { { save_top_k = 2 }, "ModelCheckpoint: save_top_k=2 needs a monitor" },
      { { save_top_k = "2" }, "ModelCheckpoint: option 'save_top_k' must be an integer, got string" },
      { { every_n_epochs = 2, every_n_train_steps = 5 }, "'every_n_train_steps' and 'every_n_epochs' are mutually exclusive" },
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(cb.ModelCheckpoint, c[1])
      assert.is_false(ok)
      assert.matches(c[2], err, 1, true)
    end
  end)
end)

describe("EarlyStopping", function()
  it("stops when the metric has not improved for `patience` checks", function()
    local seq = { 5, 4, 4.5, 4.2, 3, 2, 1 }
    local model, train, val = scripted(seq, "val_loss")
    local es = cb.EarlyStopping { monitor = "val_loss", patience = 2 }
    local t = trainer { max_epochs = #seq, callbacks = { es } }
    t:fit(model, train, val)
    assert.are.equal(4, t.current_epoch) -- epochs 0..3 ran; the stop came at epoch 3
    assert.are.equal(3, es.stopped_epoch)
    assert.are.equal(4, es.best_score)
    assert.are.equal(2, es.wait_count)
  end)

  it("stops only once min_epochs is met", function()
    local seq = { 1, 2, 3, 4, 5, 6, 7, 8 }
    local model, train, val = scripted(seq, "val_loss")
    local es = cb.EarlyStopping { monitor = "val_loss", patience = 1 }
    local t = trainer { max_epochs = #seq, min_epochs = 5, callbacks = { es } }
    t:fit(model, train, val)
    assert.are.equal(5, t.current_epoch)
    local model2, train2, val2 = scripted(seq, "val_loss")
    local t2 = trainer { max_epochs = #seq, callbacks = { cb.EarlyStopping { monitor = "val_loss", patience = 1 } } }
    t2:fit(model2, train2, val2)
    assert.are.equal(2, t2.current_epoch)
  end)

  it("mode max and min_delta: an improvement must beat the best by more than min_delta", function()
    local es = cb.EarlyStopping { monitor = "acc", mode = "max", min_delta = 0.1, patience = 2 }
    assert.is_false((es:evaluate(0.5)))
    assert.is_false((es:evaluate(0.55))) -- not enough: wait 1
    assert.are.equal(1, es.wait_count)
    assert.is_false((es:evaluate(0.65))) -- improved by 0.15
    assert.are.equal(0, es.wait_count)
    assert.are.equal(0.65, es.best_score)
    assert.is_false((es:evaluate(0.7)))
    local stop, reason = es:evaluate(0.74)
    assert.is_true(stop)
    assert.are.equal("Monitored metric acc did not improve in the last 2 records. Best score: 0.650. Signaling Trainer to stop.",
      reason)
  end)

  it("mode min and min_delta: an improvement must be lower than the best by more than min_delta", function()
    local es = cb.EarlyStopping { monitor = "loss", mode = "min", min_delta = 0.5, patience = 2 }
    assert.is_false((es:evaluate(10)))
    assert.is_false((es:evaluate(9.75))) -- lower, but by less than 0.5: wait 1
    assert.are.equal(1, es.wait_count)
    assert.are.equal(10, es.best_score)
    local stop, reason = es:evaluate(9.25) -- lower by 0.75
    assert.is_false(stop)
    assert.are.equal("Metric loss improved by 0.750 >= min_delta = 0.500. New best score: 9.250", reason)
    assert.are.equal(0, es.wait_count)
    assert.is_false((es:evaluate(9.5))) -- higher: wait 1
    stop, reason = es:evaluate(8.8) -- lower by 0.45: wait 2, stop
    assert.is_true(stop)
    assert.are.equal("Monitored metric loss did not improve in the last 2 records. Best score: 9.250. Signaling Trainer to stop.",
      reason)
  end)

  it("check_finite, stopping_threshold and divergence_threshold stop at once", function()
    local es = cb.EarlyStopping { monitor = "loss", patience = 10 }
    es:evaluate(1)
    local stop, reason = es:evaluate(0 / 0)
    assert.is_true(stop)
    assert.matches("Monitored metric loss = nan is not finite. Previous best value was 1.000", reason, 1, true)
    assert.is_false((cb.EarlyStopping { monitor = "loss", check_finite = false }:evaluate(math.huge)))
    local th = cb.EarlyStopping { monitor = "loss", stopping_threshold = 0.1 }
    assert.is_false((th:evaluate(0.2)))
    stop, reason = th:evaluate(0.05)
    assert.is_true(stop)
    assert.are.equal("Stopping threshold reached: loss = 0.050 < 0.100. Signaling Trainer to stop.", reason)
    local dv = cb.EarlyStopping { monitor = "loss", divergence_threshold = 10 }
    assert.is_false((dv:evaluate(5)))
    stop, reason = dv:evaluate(12)
    assert.is_true(stop)
    assert.matches("Divergence threshold reached", reason, 1, true)
  end)

  it("a missing metric is an error naming it (strict), or skipped (strict = false)", function()
    local model, train, val = scripted({ 1, 2 }, "val_loss")
    local t = trainer { max_epochs = 2, callbacks = { cb.EarlyStopping { monitor = "val_acc" } } }
    local ok, err = pcall(t.fit, t, model, train, val)
    assert.is_false(ok)
    assert.matches('EarlyStopping: conditioned on metric "val_acc" which is not available; available metrics: val_loss',
      err, 1, true)
    local model2, train2, val2 = scripted({ 1, 2 }, "val_loss")
    local t2 = trainer { max_epochs = 2, callbacks = { cb.EarlyStopping { monitor = "val_acc", strict = false } } }
    t2:fit(model2, train2, val2)
    assert.are.equal(2, t2.current_epoch)
  end)

  it("its state round-trips and options are checked", function()
    local a = cb.EarlyStopping { monitor = "m", patience = 4 }
    a:evaluate(3)
    a:evaluate(4)
    local b = cb.EarlyStopping { monitor = "m" }
    b:load_state_dict(a:state_dict())
    assert.are.same({ wait_count = 1, stopped_epoch = 0, best_score = 3, patience = 4 }, b:state_dict())
    local ok, err = pcall(cb.EarlyStopping, { monitor = "m", patients = 3 })
    assert.is_false(ok)
    assert.matches("EarlyStopping: unknown option 'patients'", err, 1, true)
    ok, err = pcall(cb.EarlyStopping, { patience = 3 })
    assert.is_false(ok)
    assert.matches("EarlyStopping: option 'monitor' is required", err, 1, true)
    ok, err = pcall(cb.EarlyStopping, { monitor = "m", mode = "up" })
    assert.is_false(ok)
    assert.matches("EarlyStopping: option 'mode' must be \"min\" or \"max\"", err, 1, true)
  end)
end)

describe("LearningRateMonitor", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmrf(dir) end)

  local function read_csv(path)
    local f = assert(io.open(path))
    local header
    local rows = {}
    for line in f:lines() do
      local cells = {}
      for c in (line .. ","):gmatch("([^,]*),") do cells[#cells + 1] = c end
      if not header then header = cells
      else
        local r = {}
        for i, h in ipairs(header) do r[h] = cells[i] ~= "" and tonumber(cells[i]) or nil end
        rows[#rows + 1] = r
      end
    end
    f:close()
    return header, rows
  end

  local function fit_with(opts, configure)
    local model, train, val = scripted({}, nil)
    model.configure_optimizers = configure
    local logger = lt.loggers.CSVLogger { save_dir = dir }
    local t = lt.Trainer { max_epochs = 3, logger = logger, log_every_n_steps = 1, enable_progress_bar = false,
      enable_model_summary = false, enable_checkpointing = false, callbacks = { cb.LearningRateMonitor(opts) } }
    t:fit(model, train, val)
    return read_csv(logger.log_dir .. "/metrics.csv")
  end

  it("logs lr-<Optimizer> at every logging step for a step scheduler", function()
    local _, rows = fit_with({ logging_interval = "step" }, function(self)
      local opt = lt.optim.SGD(lt.nn.parameters(self), { lr = 1 })
      return { optimizer = opt, lr_scheduler = { scheduler = lt.optim.lr_scheduler.StepLR(opt, { step_size = 1, gamma = 0.5 }),
        interval = "step" } }
    end)
    local lrs = {}
    for _, r in ipairs(rows) do if r["lr-SGD"] then lrs[#lrs + 1] = r["lr-SGD"] end end
    assert.are.same({ 1, 0.5, 0.25, 0.125, 0.0625, 0.03125 }, lrs)
  end)

  it("logs once per epoch with logging_interval = \"epoch\", and names param groups and repeated kinds", function()
    local header, rows = fit_with({ logging_interval = "epoch" }, function(self)
      local a = lt.optim.Adam({ { params = { self.fc.weight }, lr = 0.1 }, { params = { self.fc.bias }, lr = 0.2 } })
      -- with two optimizers each step trains only its optimizer's parameters (toggle_optimizer): b needs one
      -- of the loss's
      local b = lt.optim.Adam({ self.fc.weight }, { lr = 0.3 })
      return { a, b }
    end)
    local names = {}
    for _, h in ipairs(header) do names[h] = true end
    assert.is_true(names["lr-Adam/pg1"] and names["lr-Adam/pg2"] and names["lr-Adam-1"])
    local n = 0
    for _, r in ipairs(rows) do
      if r["lr-Adam/pg1"] then
        n = n + 1
        assert.is_true(math.abs(r["lr-Adam/pg2"] - 0.2) < 1e-12 and math.abs(r["lr-Adam-1"] - 0.3) < 1e-12)
      end
    end
    assert.are.equal(3, n)
  end)

  it("log_momentum: also lr-<Optimizer>-momentum, from Adam's betas[1] and SGD's momentum (0 without)", function()
    local function configure(self)
      local a = lt.optim.Adam({ self.fc.weight }, { lr = 0.1, betas = { 0.8, 0.99 } })
      local s = lt.optim.SGD({ { params = { self.fc.weight }, momentum = 0.7 }, { params = { self.fc.bias } } },
        { lr = 0.2 })
      return { a, s }
    end
    local header, rows = fit_with({ logging_interval = "epoch", log_momentum = true }, configure)
    local names = {}
    for _, h in ipairs(header) do names[h] = true end
    assert.is_true(names["lr-Adam-momentum"] and names["lr-SGD/pg1-momentum"] and names["lr-SGD/pg2-momentum"])
    local n = 0
    for _, r in ipairs(rows) do
      if r["lr-Adam-momentum"] then
        n = n + 1
        assert.is_true(math.abs(r["lr-Adam-momentum"] - 0.8) < 1e-12, "Adam momentum " .. r["lr-Adam-momentum"])
        assert.is_true(math.abs(r["lr-SGD/pg1-momentum"] - 0.7) < 1e-12, "SGD momentum " .. r["lr-SGD/pg1-momentum"])
        assert.are.equal(0, r["lr-SGD/pg2-momentum"])
      end
    end
    assert.are.equal(3, n)
    header = fit_with({ logging_interval = "epoch" }, configure)
    for _, h in ipairs(header) do assert.is_nil(h:match("momentum"), h) end
  end)

  it("keeps only the last value of each name: nothing grows with the number of epochs", function()
    local function run(epochs)
      local model, train, val = scripted({}, nil)
      model.configure_optimizers = function(self)
        local opt = lt.optim.SGD(lt.nn.parameters(self), { lr = 1 })
        return { optimizer = opt, lr_scheduler = lt.optim.lr_scheduler.StepLR(opt, { step_size = 1, gamma = 0.5 }) }
      end
      local monitor = cb.LearningRateMonitor { logging_interval = "epoch" }
      lt.Trainer { max_epochs = epochs, logger = lt.loggers.CSVLogger { save_dir = dir }, enable_progress_bar = false,
        enable_model_summary = false, enable_checkpointing = false, callbacks = { monitor } }:fit(model, train, val)
      local entries = 0 -- every entry of every table the callback holds, one level down
      for _, v in pairs(monitor) do
        if type(v) == "table" then for _ in pairs(v) do entries = entries + 1 end end
      end
      return monitor, entries
    end
    local m3, n3 = run(3)
    local m12, n12 = run(12)
    assert.are.equal(n3, n12)
    assert.are.equal(0.25, m3.last_lrs["lr-SGD"]) -- the lr logged at the start of epoch 3
    assert.are.equal(0.5 ^ 11, m12.last_lrs["lr-SGD"])
  end)

  it("is an error without a logger, and checks its options", function()
    local model, train, val = scripted({}, nil)
    local t = trainer { max_epochs = 1, callbacks = { cb.LearningRateMonitor() } }
    local ok, err = pcall(t.fit, t, model, train, val)
    assert.is_false(ok)
    assert.matches("LearningRateMonitor: cannot log learning rates with a Trainer that has no logger", err, 1, true)
    ok, err = pcall(cb.LearningRateMonitor, { logging_interval = "batch" })
    assert.is_false(ok)
    assert.matches("option 'logging_interval' must be \"step\", \"epoch\" or nil, got \"batch\"", err, 1, true)
  end)
end)

describe("Timer", function()
  it("stops fitting once the duration has passed (after min_epochs)", function()
    local model, train, val = scripted({}, nil)
    local timer = cb.Timer { duration_seconds = 0, verbose = false }
    local t = trainer { max_epochs = 10, callbacks = { timer } }
    t:fit(model, train, val)
    assert.are.equal(1, t.current_epoch)
    assert.is_true(timer:time_elapsed("train") > 0)
    assert.is_true(timer:time_elapsed("validate") >= 0)
    assert.is_true(timer:time_remaining() <= 0)
    assert.is_number(timer:start_time("train"))
    assert.is_true(timer:end_time("train") >= timer:start_time("train"))
  end)

  it("measures without a duration; parses DD:HH:MM:SS and tables; keeps elapsed time in its state", function()
    assert.are.equal(90061, cb.Timer { duration = "01:01:01:01" }._duration)
    assert.are.equal(5400, cb.Timer { duration = { hours = 1, minutes = 30 } }._duration)
    local t = cb.Timer {}
    assert.is_nil(t:time_remaining())
    assert.are.equal(0, t:time_elapsed())
    t:load_state_dict { time_elapsed = { train = 12.5 } }
    assert.are.equal(12.5, t:time_elapsed("train"))
    assert.are.equal(12.5, t:state_dict().time_elapsed.train)
  end)

  it("rejects bad options and stages", function()
    local cases = {
      { { duration = "1:00" }, 'Timer: option \'duration\' must be a "DD:HH:MM:SS" string, got "1:00"' },
      { { duration = { weeks = 1 } }, "Timer: unknown field 'weeks' in option 'duration'" },
      { { duration = "00:00:00:01", duration_seconds = 1 }, "give either option 'duration' or option 'duration_seconds'" },
      { { interval = "batch" }, "Timer: option 'interval' must be \"step\" or \"epoch\"" },
      { { duraton = 1 }, "Timer: unknown option 'duraton'" },
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(cb.Timer, c[1])
      assert.is_false(ok)
      assert.matches(c[2], err, 1, true)
    end
    local ok, err = pcall(cb.Timer {}.time_elapsed, cb.Timer {}, "training")
    assert.is_false(ok)
    assert.matches('Timer: unknown stage "training"', err, 1, true)
  end)
end)

describe("ModelSummary", function()
  local function capture()
    local buf = {}
    return { write = function(_, ...) for _, s in ipairs { ... } do buf[#buf + 1] = s end end, flush = function() end },
      function() return table.concat(buf) end
  end

  it("prints names, types, parameter counts and totals at fit start", function()
    local stream, text = capture()
    local model, train, val = scripted({}, nil)
    model.head = lt.nn.Sequential { lt.nn.Linear(1, 100), lt.nn.ReLU(), lt.nn.Linear(100, 1) }
    trainer({ max_epochs = 1, callbacks = { cb.ModelSummary { stream = stream } } }):fit(model, train, val)
    assert.are.equal(table.concat({
      "  | Name | Type       | Params",
      "------------------------------",
      "1 | fc   | Linear     | 3",
      "2 | head | Sequential | 301",
      "------------------------------",
      "304       Trainable params",
      "0         Non-trainable params",
      "304       Total params",
      "0.001     Total estimated model params size (MB)",
    }, "\n") .. "\n", text())
  end)

  it("adds output shapes when the model has example_input_array, without moving the RNG", function()
    local s = require "lutra.trainer.summary"
    local model = { net = lt.nn.Sequential { lt.nn.Linear(3, 4), lt.nn.Dropout(0.5) }, example_input_array = lt.zeros(2, 3) }
    function model:forward(x) return self.net(x) end
    local rng = lt.get_rng_state()
    local text = s.summarize(model, { max_depth = 2 })
    assert.are.equal(rng, lt.get_rng_state())
    assert.matches("1 | net   | Sequential | 16     | [2 x 3]  | [2 x 4]", text, 1, true)
    assert.matches("3 | net.2 | Dropout    | 0      | [2 x 4]  | [2 x 4]", text, 1, true)
    assert.is_true(model.net.training)
  end)

  it("is absent with enable_model_summary = false, and human counts read like Lightning's", function()
    local s = require "lutra.trainer.summary"
    assert.are.equal("12  ", s.human_count(12))
    assert.are.equal("1.2 K", s.human_count(1234))
    assert.are.equal("101 K", s.human_count(101770))
    assert.are.equal("3.3 M", s.human_count(3300000))
    local t = lt.Trainer { logger = false, enable_model_summary = false, enable_progress_bar = false }
    for _, c in ipairs(t.callbacks) do assert.is_false(cb.is_instance(c, cb.ModelSummary)) end
    local t2 = lt.Trainer { logger = false, enable_progress_bar = false }
    local found = false
    for _, c in ipairs(t2.callbacks) do found = found or cb.is_instance(c, cb.ModelSummary) end
    assert.is_true(found)
  end)
end)

describe("the Callback base", function()
  it("makes classes with a constructor, a name for checkpoints, and no hooks of its own", function()
    local Counter = cb.Callback:extend("Counter")
    function Counter:init(opts) self.every = opts.every; self.n = 0 end
    function Counter:on_train_batch_end() self.n = self.n + 1 end
    function Counter:state_dict() return { n = self.n } end
    local c = Counter { every = 2 }
    assert.are.equal(2, c.every)
    assert.are.equal("Counter", cb.state_key(c))
    assert.are.equal("Counter()", tostring(c))
    assert.is_nil(cb.Callback.on_train_epoch_end)
    assert.is_nil(c.on_fit_start)
    local model, train, val = scripted({}, nil)
    trainer({ max_epochs = 2, callbacks = { c } }):fit(model, train, val)
    assert.are.equal(4, c.n)
    assert.is_true(cb.is_instance(c, cb.Callback))
  end)
end)
