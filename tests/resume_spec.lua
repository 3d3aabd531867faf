-- resume_spec.lua — fit{ckpt_path=...} resumes exactly: from every checkpoint an uninterrupted run wrote
-- (end of epoch, mid-epoch, during and after validation, with dropout, shuffling, Adam state, several
-- optimizers and LR schedulers, gradient accumulation), the final weights are bitwise those of the
-- uninterrupted run; ckpt_path = "last"; a paused run saved and resumed; errors for wrong checkpoints.
local lt = require "lutra"
local ck = require "lutra.checkpoint"

local fs = require "helpers.fs"
local tmpdir, rmrf = fs.tmpdir, fs.rmrf

local function sorted_files(dir)
  local names = lt._io.listdir(dir) or {}
  table.sort(names)
  local out = {}
  for _, n in ipairs(names) do if n:match("%.ckpt$") then out[#out + 1] = dir .. "/" .. n end end
  return out
end

-- The experiment: data from a fixed seed; the model from `seed` (a resumed run starts from other weights
-- and another global RNG state, so everything must come from the checkpoint).
-- o: {opt = "adam"|"sgd"|"two", sched = nil|"plateau"|"step"|"two", dropout, shuffle, n = samples}
local function setup(seed, o)
  o = o or {}
  lt.manual_seed(1)
  local n = o.n or 40
  local x, y = lt.randn(n, 4), lt.randn(n, 1)
  local train = lt.data.DataLoader(lt.data.TensorDataset(x, y), { batch_size = 8, shuffle = o.shuffle ~= false })
  local val = lt.data.DataLoader(lt.data.TensorDataset(lt.randn(12, 4), lt.randn(12, 1)), { batch_size = 5 })
  lt.manual_seed(seed)
  local layers = { lt.nn.Linear(4, 8), lt.nn.ReLU() }
  if o.dropout ~= false then layers[#layers + 1] = lt.nn.Dropout(0.3) end
  layers[#layers + 1] = lt.nn.Linear(8, 1)
  local model = { net = lt.nn.Sequential(layers), head = lt.nn.Linear(1, 1) }
  function model:forward(inp) return self.head(self.net(inp)) end
  if o.opt == "two" then
    function model:training_step(b, _, opt_idx)
      if opt_idx == 0 then
        local l = lt.F.mse_loss(self.net(b[1]), b[2])
        self:log("loss_a", l)
        return l
      end
      local l = lt.F.mse_loss(self:forward(b[1]), b[2])
      self:log("loss_b", l)
      return l
    end
  elseif o.manual then
    model.automatic_optimization = false
    function model:training_step(b)
      local opt = self:optimizers()
      opt:zero_grad()
      local l = lt.F.mse_loss(self:forward(b[1]), b[2])
      self:manual_backward(l)
      opt:step()
      self:log("train_loss", l)
    end
  else
    function model:training_step(b)
      local l = lt.F.mse_loss(self:forward(b[1]), b[2])
      self:log("train_loss", l)
      return l
    end
  end
  function model:validation_step(b)
    self:log("val_loss", lt.F.mse_loss(self:forward(b[1]), b[2]))
  end
  function model:configure_optimizers()
    local S = lt.optim.lr_scheduler
    if o.opt == "two" then
      local a = lt.optim.Adam(lt.nn.parameters(self.net), { lr = 0.01 })
      local b = lt.optim.SGD(lt.nn.parameters(self.head), { lr = 0.05, momentum = 0.9 })
      return { { a, b }, { { scheduler = S.StepLR(a, { step_size = 2, gamma = 0.7 }), interval = "step" },
        S.CosineAnnealingLR(b, { T_max = 3 }) } }
    end
    local opt = o.opt == "sgd" and lt.optim.SGD(lt.nn.parameters(self), { lr = 0.05, momentum = 0.9 })
      or lt.optim.Adam(lt.nn.parameters(self), { lr = 0.01 })
    if o.sched == "plateau" then
      return { optimizer = opt, lr_scheduler = { scheduler = S.ReduceLROnPlateau(opt, { patience = 0, factor = 0.5 }),
        monitor = "val_loss" } }
    elseif o.sched == "step" then
      return { optimizer = opt, lr_scheduler = { scheduler = S.StepLR(opt, { step_size = 3, gamma = 0.5 }), interval = "step" } }
    end
    return opt
  end
  return model, train, val
end

local function weights(m)
  local out = {}
  for k, v in pairs(lt.nn.state_dict(m)) do out[k] = v:view(-1):totable() end
  return out
end

local function assert_same_bits(a, b, what)
  for k, xs in pairs(a) do
    local ys = b[k]
    assert(ys, what .. ": missing " .. k)
    for i = 1, #xs do
      if xs[i] ~= ys[i] then
        error(string.format("%s: %s[%d] differs: %.9g vs %.9g", what, k, i, xs[i], ys[i]), 2)
      end
    end
  end
end

local BASE = { enable_progress_bar = false, enable_model_summary = false, logger = false, enable_checkpointing = false,
  default_root_dir = os.getenv("TMPDIR") or "/tmp" }

local function trainer_opts(extra)
  local t = {}
  for k, v in pairs(BASE) do t[k] = v end
  for k, v in pairs(extra or {}) do t[k] = v end
  return t
end

-- Runs the uninterrupted fit with `callbacks` (which save into dir), then resumes from each file saved;
-- returns the resume points seen.
local function check_all_resumes(o, topts, make_callbacks, dir)
  local model, train, val = setup(1, o)
  local with = {}
  for k, v in pairs(topts) do with[k] = v end
  with.callbacks = make_callbacks()
  local t = lt.Trainer(trainer_opts(with))
  t:fit(model, train, val)
  local final, steps = weights(model), t.global_step
  local files = sorted_files(dir)
  assert.is_true(#files > 0, "no checkpoint was written")
  local points = {}
  for _, f in ipairs(files) do
    local m2, train2, val2 = setup(99, o)
    local t2 = lt.Trainer(trainer_opts(topts))
    t2:fit(m2, train2, val2, { ckpt_path = f })
    assert_same_bits(final, weights(m2), "resumed from " .. f)
    assert.are.equal(steps, t2.global_step)
    local point = ck.read(f).resume.point
    points[point] = (points[point] or 0) + 1
  end
  return points, #files
end

-- a callback that saves in hook `hook` when pick(trainer, ...) says so
local function saver(dir, hook, pick)
  local cb = { n = 0 }
  cb[hook] = function(self, trainer, _, ...)
    if trainer.sanity_checking then return end
    if pick == nil or pick(trainer, ...) then
      self.n = self.n + 1
      trainer:save_checkpoint(string.format("%s/%s-%03d.ckpt", dir, hook, self.n))
    end
  end
  return cb
end

describe("fit{ckpt_path} resumes to the same bits", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmrf(dir) end)

  it("from end-of-epoch checkpoints (dropout, shuffling, Adam, ReduceLROnPlateau on val_loss)", function()
    local points, n = check_all_resumes({ sched = "plateau" }, { max_epochs = 4 }, function()
      return { lt.callbacks.ModelCheckpoint { dirpath = dir, save_top_k = -1 } }
    end, dir)
    assert.are.equal(4, n)
    assert.are.equal(4, points.epoch_end)
  end)

  it("from mid-epoch checkpoints (every_n_train_steps), including one on an epoch's last batch", function()
    local points, n = check_all_resumes({ sched = "plateau" }, { max_epochs = 3 }, function()
      return { lt.callbacks.ModelCheckpoint { dirpath = dir, save_top_k = -1, every_n_train_steps = 5, filename = "s{step}" },
        lt.callbacks.ModelCheckpoint { dirpath = dir, save_top_k = -1, every_n_train_steps = 3 } }
    end, dir)
    assert.is_true(n >= 6)
    assert.is_true(points.batch_end >= 6)
  end)

  it("from checkpoints taken during validation, with two validations per epoch", function()
    local points = check_all_resumes({ sched = "step" }, { max_epochs = 3, val_check_interval = 0.5 }, function()
      return { saver(dir, "on_validation_batch_end", function(_, _, _, batch_idx) return batch_idx == 1 end) }
    end, dir)
    assert.are.equal(6, points.val)
  end)

  it("from checkpoints taken in on_validation_end (save_on_train_epoch_end = false) with EarlyStopping", function()
    local points = check_all_resumes({ sched = "plateau" }, { max_epochs = 5 }, function()
      return { lt.callbacks.EarlyStopping { monitor = "val_loss", patience = 1, check_on_train_epoch_end = false },
        lt.callbacks.ModelCheckpoint { dirpath = dir, save_top_k = -1, save_on_train_epoch_end = false } }
    end, dir)
    assert.is_true(points.after_val >= 2)
  end)

  it("with limit_train_batches (the loader not exhausted) and an integer val_check_interval", function()
    local points = check_all_resumes({ sched = "plateau" }, { max_epochs = 3, limit_train_batches = 3, val_check_interval = 2 },
      function()
        return { lt.callbacks.ModelCheckpoint { dirpath = dir, save_top_k = -1, every_n_train_steps = 3 },
          lt.callbacks.ModelCheckpoint { dirpath = dir, save_top_k = -1, every_n_train_steps = 2, filename = "s{step}" },
          saver(dir, "on_validation_batch_end", function(_, _, _, batch_idx) return batch_idx == 0 end) }
      end, dir)
    assert.is_true(points.batch_end >= 6)
    assert.is_true(points.val >= 3)
  end)

  it("with two optimizers and two schedulers (step and epoch intervals), from mid-epoch and epoch ends", function()
    local points = check_all_resumes({ opt = "two" }, { max_epochs = 3 }, function()
      return { saver(dir, "on_train_batch_end", function(_, _, _, batch_idx) return batch_idx % 2 == 1 end),
        saver(dir, "on_train_epoch_end") }
    end, dir)
    assert.is_true(points.batch_end >= 3)
    assert.are.equal(3, points.epoch_end)
  end)

  it("with manual optimization, from mid-epoch and end-of-epoch checkpoints", function()
    local points = check_all_resumes({ manual = true }, { max_epochs = 3 }, function()
      return { lt.callbacks.ModelCheckpoint { dirpath = dir, save_top_k = -1, every_n_train_steps = 3 },
        saver(dir, "on_train_epoch_end") }
    end, dir)
    assert.is_true(points.batch_end >= 4)
    assert.are.equal(3, points.epoch_end)
  end)

  it("inside an accumulation window (accumulate_grad_batches = 2 keeps the accumulated gradients)", function()
    local points = check_all_resumes({ opt = "sgd" }, { max_epochs = 2, accumulate_grad_batches = 2 }, function()
      return { saver(dir, "on_train_batch_end") }
    end, dir)
    assert.are.equal(10, points.batch_end)
  end)

  it("from a checkpoint taken in on_train_epoch_start and one before a batch's step", function()
    local points = check_all_resumes({}, { max_epochs = 2 }, function()
      return { saver(dir, "on_train_epoch_start"),
        saver(dir, "on_train_batch_start", function(_, _, batch_idx) return batch_idx == 2 end) }
    end, dir)
    assert.are.equal(2, points.epoch_start)
    assert.are.equal(2, points.batch_start)
  end)

  it("from a run paused by run:advance{batches=...} and saved between batches", function()
    local model, train, val = setup(1, {})
    local t = lt.Trainer(trainer_opts { max_epochs = 3 })
    t:fit(model, train, val)
    local final = weights(model)
    local m1, train1, val1 = setup(1, {})
    local t1 = lt.Trainer(trainer_opts { max_epochs = 3 })
    local run = t1:fit_run(m1, train1, val1)
    run:advance { batches = 7 }
    local path = dir .. "/paused.ckpt"
    t1:save_checkpoint(path)
    assert.are.equal("boundary", ck.read(path).resume.point)
    local m2, train2, val2 = setup(99, {})
    local t2 = lt.Trainer(trainer_opts { max_epochs = 3 })
    t2:fit(m2, train2, val2, { ckpt_path = path })
    assert_same_bits(final, weights(m2), "resumed from a paused run")
  end)

  it("through a chain: a resumed run's own checkpoints resume to the same bits", function()
    local model, train, val = setup(1, {})
    local t = lt.Trainer(trainer_opts { max_epochs = 4 })
    t:fit(model, train, val)
    local final = weights(model)
    local m1, train1, val1 = setup(1, {})
    local t1 = lt.Trainer(trainer_opts { max_epochs = 4,
      callbacks = { lt.callbacks.ModelCheckpoint { dirpath = dir .. "/a", save_top_k = -1, every_n_train_steps = 4 } } })
    t1:fit(m1, train1, val1)
    local m2, train2, val2 = setup(7, {})
    local t2 = lt.Trainer(trainer_opts { max_epochs = 4,
      callbacks = { lt.callbacks.ModelCheckpoint { dirpath = dir .. "/b", save_top_k = -1, every_n_epochs = 1 } } })
    t2:fit(m2, train2, val2, { ckpt_path = dir .. "/a/epoch=0-step=4.ckpt" })
    assert_same_bits(final, weights(m2), "first resume")
    for _, f in ipairs(sorted_files(dir .. "/b")) do
      local m3, train3, val3 = setup(8, {})
      local t3 = lt.Trainer(trainer_opts { max_epochs = 4 })
      t3:fit(m3, train3, val3, { ckpt_path = f })
      assert_same_bits(final, weights(m3), "second resume from " .. f)
    end
  end)

  it("stops at the same epoch when EarlyStopping's state comes back (patience counted before the checkpoint)", function()
    local function run(ckpt_path, cbs)
      local m, train, val = setup(1, { dropout = false })
      local t = lt.Trainer(trainer_opts { max_epochs = 30, callbacks = cbs })
      t:fit(m, train, val, ckpt_path and { ckpt_path = ckpt_path } or nil)
      return t, m
    end
    -- an lr so large that val_loss soon stops improving
    local t, m = run(nil, { lt.callbacks.EarlyStopping { monitor = "val_loss", patience = 2 },
      lt.callbacks.ModelCheckpoint { dirpath = dir, save_top_k = -1 } })
    assert.is_true(t.current_epoch < 30, "early stopping never triggered")
    local files = sorted_files(dir)
    local t2, m2 = run(files[#files - 1], { lt.callbacks.EarlyStopping { monitor = "val_loss", patience = 2 } })
    assert.are.equal(t.current_epoch, t2.current_epoch)
    assert.are.equal(t.global_step, t2.global_step)
    assert_same_bits(weights(m), weights(m2), "early-stopped run")
  end)
end)

describe("a checkpoint saved after fit ended", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmrf(dir) end)

  it("resumes into more epochs, even when EarlyStopping had stopped the run", function()
    local m, train, val = setup(1, { dropout = false })
    local t = lt.Trainer(trainer_opts { max_epochs = 30,
      callbacks = { lt.callbacks.EarlyStopping { monitor = "val_loss", patience = 1 } } })
    t:fit(m, train, val)
    assert.is_true(t.current_epoch < 30)
    t:save_checkpoint(dir .. "/end.ckpt")
    local m2, train2, val2 = setup(2, { dropout = false })
    local t2 = lt.Trainer(trainer_opts { max_epochs = t.current_epoch + 3 })
    t2:fit(m2, train2, val2, { ckpt_path = dir .. "/end.ckpt" })
    assert.are.equal(t.current_epoch + 3, t2.current_epoch)
    assert.are.equal(t.global_step + 15, t2.global_step)
  end)
end)

describe("callbacks after a resume", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmrf(dir) end)

  it("ModelCheckpoints save at the same steps as in the uninterrupted run (no second save at the resume step)", function()
    local function run(ckpt_path)
      local saves = {}
      local spy = { state_key = "spy" }
      function spy:on_save_checkpoint(trainer) saves[#saves + 1] = trainer.global_step end
      local m, train, val = setup(1, {})
      local t = lt.Trainer(trainer_opts { max_epochs = 3, callbacks = { spy,
        lt.callbacks.ModelCheckpoint { dirpath = dir .. "/steps", save_top_k = -1, every_n_train_steps = 5, save_last = true },
        lt.callbacks.ModelCheckpoint { dirpath = dir .. "/epochs", save_top_k = -1 } } })
      t:fit(m, train, val, ckpt_path and { ckpt_path = ckpt_path } or nil)
      return saves
    end
    local all = run(nil)
    assert.are.same({ 5, 5, 5, 10, 10, 10, 15, 15, 15 }, all) -- steps/ (top-k, last), then epochs/, each epoch end
    local resumed = run(dir .. "/steps/epoch=0-step=5.ckpt")
    assert.are.same({ 5, 10, 10, 10, 15, 15, 15 }, resumed)
  end)
end)

describe("ckpt_path = \"last\"", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmrf(dir) end)

  it("resumes from the newest checkpoint of the run's checkpoint directory", function()
    local m, train, val = setup(1, {})
    local t = lt.Trainer(trainer_opts { max_epochs = 2,
      callbacks = { lt.callbacks.ModelCheckpoint { dirpath = dir, save_top_k = -1, save_last = true } } })
    t:fit(m, train, val)
    local m2, train2, val2 = setup(5, {})
    local t2 = lt.Trainer(trainer_opts { max_epochs = 3,
      callbacks = { lt.callbacks.ModelCheckpoint { dirpath = dir, save_top_k = -1, save_last = true } } })
    t2:fit(m2, train2, val2, { ckpt_path = "last" })
    assert.are.equal(dir .. "/last.ckpt", t2.ckpt_path)
    assert.are.equal(15, t2.global_step) -- 2 epochs restored + 1 trained
    local m3, train3, val3 = setup(1, {})
    local t3 = lt.Trainer(trainer_opts { max_epochs = 3 })
    t3:fit(m3, train3, val3)
    assert_same_bits(weights(m3), weights(m2), "last")
  end)

  it("finds the previous logger version's checkpoints in a new process (default dirpath)", function()
    local m, train, val = setup(1, {})
    local t = lt.Trainer { max_epochs = 1, enable_progress_bar = false, enable_model_summary = false, default_root_dir = dir }
    t:fit(m, train, val)
    local m2, train2, val2 = setup(5, {})
    local t2 = lt.Trainer { max_epochs = 2, enable_progress_bar = false, enable_model_summary = false, default_root_dir = dir }
    t2:fit(m2, train2, val2, { ckpt_path = "last" })
    assert.are.equal(dir .. "/lutra_logs/version_0/checkpoints/epoch=0-step=5.ckpt", t2.ckpt_path)
    assert.are.equal(10, t2.global_step)
  end)

  it("starts from the beginning with a warning when the run has no checkpoint yet", function()
    local m, train, val = setup(1, {})
    local t = lt.Trainer(trainer_opts { max_epochs = 1,
      callbacks = { lt.callbacks.ModelCheckpoint { dirpath = dir .. "/none" } } })
    t:fit(m, train, val, { ckpt_path = "last" })
    assert.are.equal(5, t.global_step)
    assert.is_nil(t.ckpt_path)
  end)
end)

describe("fit{ckpt_path} errors", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmrf(dir) end)

  local function saved_checkpoint()
    local m, train, val = setup(1, {})
    local t = lt.Trainer(trainer_opts { max_epochs = 1 })
    t:fit(m, train, val)
    local p = dir .. "/c.ckpt"
    t:save_checkpoint(p)
    return p
  end

  local function fit_error(model, path)
    local _, train, val = setup(1, {})
    local t = lt.Trainer(trainer_opts { max_epochs = 2 })
    local ok, err = pcall(t.fit, t, model, train, val, { ckpt_path = path })
    assert.is_false(ok)
    return tostring(err)
  end

  it("names the file and the parameter when the checkpoint is of another model", function()
    local p = saved_checkpoint()
    local other = setup(1, {})
    other.net[1] = lt.nn.Linear(4, 6)
    other.net[4] = lt.nn.Linear(6, 1)
    local err = fit_error(other, p)
    assert.matches("fit: cannot resume from " .. p:gsub("%p", "%%%0") .. ": the checkpoint does not match the model", err)
    assert.matches("size mismatch for net.1.weight", err, 1, true)
  end)

  it("names the missing parameters", function()
    local p = saved_checkpoint()
    local other = setup(1, {})
    other.extra = lt.nn.Linear(2, 2)
    local err = fit_error(other, p)
    assert.matches('missing key(s) in state_dict: "extra.bias", "extra.weight"', err, 1, true)
  end)

  it("says when the number of optimizers differs", function()
    local p = saved_checkpoint()
    local other = setup(1, {})
    function other:configure_optimizers()
      return { lt.optim.SGD(lt.nn.parameters(self.net), { lr = 0.1 }), lt.optim.SGD(lt.nn.parameters(self.head), { lr = 0.1 }) }
    end
    function other:training_step(b) return lt.F.mse_loss(self:forward(b[1]), b[2]) end
    local err = fit_error(other, p)
    assert.matches("it holds the state of 1 optimizer(s), configure_optimizers returned 2", err, 1, true)
  end)

  it("names the file for a missing, truncated, corrupt or weights-only file, and a foreign safetensors file", function()
    local p = saved_checkpoint()
    local m = setup(3, {})
    assert.matches("fit: cannot resume from " .. dir .. "/nope.ckpt: cannot open: No such file or directory",
      fit_error(m, dir .. "/nope.ckpt"), 1, true)
    local bytes = lt._io.read_all(p)
    lt._io.write_atomic(dir .. "/trunc.ckpt", bytes:sub(1, #bytes - 10))
    assert.matches("fit: cannot resume from " .. dir .. "/trunc.ckpt: ", fit_error(m, dir .. "/trunc.ckpt"), 1, true)
    local flipped = bytes:sub(1, #bytes - 3) .. string.char((bytes:byte(#bytes - 2) + 1) % 256) .. bytes:sub(#bytes - 1)
    lt._io.write_atomic(dir .. "/flip.ckpt", flipped)
    assert.matches("checksum", fit_error(m, dir .. "/flip.ckpt"), 1, true)
    lt.save(dir .. "/w.safetensors", m)
    assert.matches("it holds weights only", fit_error(m, dir .. "/w.safetensors"), 1, true)
    lt._io.save(dir .. "/foreign.safetensors", { "w" }, { lt.zeros(2) }, {})
    assert.matches("without lutra metadata", fit_error(m, dir .. "/foreign.safetensors"), 1, true)
  end)
end)
