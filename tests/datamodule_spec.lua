-- tests/datamodule_spec.lua — lt.DataModule: its state in checkpoints (saved, restored on resume),
-- from_datasets, and the data hooks' errors. The hook order with a datamodule: tests/hooks_order_spec.lua.
local lt = require "lutra"

local function quiet(o)
  local t = { logger = false, enable_progress_bar = false, enable_model_summary = false }
  for k, v in pairs(o or {}) do t[k] = v end
  return t
end

local function model()
  local m = { net = lt.nn.Linear(2, 1) }
  function m:training_step(b) return lt.F.mse_loss(self.net(b[1]), b[2]) end
  function m:validation_step(b) self:log("val_loss", lt.F.mse_loss(self.net(b[1]), b[2])) end
  function m:configure_optimizers() return lt.optim.SGD(self.net:parameters(), { lr = 0.1 }) end
  return m
end

local function dataset(n)
  lt.manual_seed(3)
  return lt.data.TensorDataset(lt.randn(n, 2), lt.randn(n, 1))
end

describe("lt.DataModule", function()
  local dir
  before_each(function() dir = os.tmpname(); os.remove(dir); os.execute("mkdir -p " .. dir) end)
  after_each(function() os.execute("rm -rf " .. dir) end)

  it("a checkpoint keeps the datamodule's state_dict; a resumed fit gives it to load_state_dict", function()
    local D = lt.DataModule:extend("Counting")
    function D:init() self.epochs_seen = 0 end
    function D:train_dataloader()
      self.epochs_seen = self.epochs_seen + 1
      return lt.data.DataLoader(dataset(4), { batch_size = 2 })
    end
    function D:state_dict() return { epochs_seen = self.epochs_seen, note = "x" } end
    function D:load_state_dict(s) self.loaded = s end
    local dm = D()
    local t = lt.Trainer(quiet { max_epochs = 1, enable_checkpointing = false })
    t:fit(model(), { datamodule = dm })
    local path = dir .. "/a.ckpt"
    t:save_checkpoint(path)
    local dm2 = D()
    local t2 = lt.Trainer(quiet { max_epochs = 2, enable_checkpointing = false })
    t2:fit(model(), dm2, { ckpt_path = path })
    assert.are.same({ epochs_seen = 1, note = "x" }, dm2.loaded)
    assert.are.equal(2, t2.current_epoch)
  end)

  it("the default state_dict is empty and saves nothing; a state_dict that is not a table is an error", function()
    local dm = lt.DataModule.from_datasets { train = dataset(4), batch_size = 2 }
    local t = lt.Trainer(quiet { max_epochs = 1, enable_checkpointing = false })
    t:fit(model(), dm)
    assert.are.same({}, dm:state_dict())
    function dm:state_dict() return 5 end
    assert.has_error(function() t:save_checkpoint(dir .. "/b.ckpt") end,
      "save_checkpoint: the datamodule's state_dict must return a table, got number")
  end)

  it("from_datasets: loaders of the given batch size, val and test as lists; unknown options fail", function()
    local dm = lt.DataModule.from_datasets { train = dataset(6), val = { dataset(4), dataset(2) }, test = dataset(4),
      batch_size = 2, seed = 1 }
    assert.are.equal(3, #dm:train_dataloader())
    assert.are.equal(2, #dm:val_dataloader())
    local t = lt.Trainer(quiet { max_epochs = 1, enable_checkpointing = false, num_sanity_val_steps = 0 })
    local m = model()
    t:fit(m, dm)
    assert.are.equal(3, t.num_training_batches)
    assert.are.same({ 2, 1 }, t.num_val_batches)
    function m:test_step(b) self:log("t", lt.F.mse_loss(self.net(b[1]), b[2])) end
    local r = t:test(m, { datamodule = dm })
    assert.are.equal(1, #r)
    assert.is_number(r[1].t)
    assert.has_error(function() lt.DataModule.from_datasets { train = dataset(2), batchsize = 2 } end,
      "DataModule.from_datasets: unknown option 'batchsize' (known options: batch_size, predict, seed, shuffle, " ..
      "test, train, val)")
  end)

  it("errors: no test_dataloader, a data hook returning nil, extend without a name", function()
    local dm = lt.DataModule.from_datasets { train = dataset(4), batch_size = 2 }
    local m = model()
    function m:test_step() end
    local t = lt.Trainer(quiet { max_epochs = 1, enable_checkpointing = false })
    local ok, err = pcall(t.test, t, m, dm)
    assert.is_false(ok)
    assert.matches("test: the datamodule has no test_dataloader", tostring(err), 1, true)
    function dm.train_dataloader() return nil end
    ok, err = pcall(t.fit, t, m, dm)
    assert.is_false(ok)
    assert.matches("train_dataloader returned nil (return a DataLoader or a list of them)", tostring(err), 1, true)
    assert.has_error(function() lt.DataModule:extend(3) end, "DataModule:extend: expected a class name string, got number")
  end)

  it("reload_dataloaders_every_n_epochs = 2: new loaders at epochs 2 and 4, their lengths used", function()
    local D = lt.DataModule:extend("Growing")
    local sizes = { 4, 6, 8 }
    function D:init() self.calls = 0 end
    function D:train_dataloader()
      self.calls = self.calls + 1
      local n = sizes[self.calls]
      return lt.data.DataLoader(lt.data.TensorDataset(lt.randn(n, 2), lt.randn(n, 1)), { batch_size = 2 })
    end
    function D:val_dataloader() self.val_calls = (self.val_calls or 0) + 1; return self:train_dataloader_val() end
    function D:train_dataloader_val() return lt.data.DataLoader(dataset(2), { batch_size = 2 }) end
    local m = model()
    local per = {}
    local step = m.training_step
    function m:training_step(b, i) per[self.current_epoch + 1] = i + 1; return step(self, b, i) end
    local dm = D()
    local t = lt.Trainer(quiet { max_epochs = 5, reload_dataloaders_every_n_epochs = 2, enable_checkpointing = false })
    t:fit(m, dm)
    assert.are.equal(3, dm.calls)
    assert.are.equal(3, dm.val_calls)
    assert.are.same({ 2, 2, 3, 3, 4 }, per)
    assert.are.equal(2 + 2 + 3 + 3 + 4, t.global_step)
    -- without the option: one load
    local dm2 = D()
    lt.Trainer(quiet { max_epochs = 3, enable_checkpointing = false }):fit(model(), dm2)
    assert.are.equal(1, dm2.calls)
    assert.has_error(function() lt.Trainer { reload_dataloaders_every_n_epochs = -1 } end,
      "Trainer: option 'reload_dataloaders_every_n_epochs' must be an integer >= 0, got -1 (number)")
  end)
end)

-- Lightning 1.6 asks for the data hooks' loaders when its loops need them: val_dataloader after
-- on_sanity_check_start (or at the fit loop's start without a sanity check), train_dataloader at the fit loop's
-- start, before on_train_start; both after on_fit_start (the order itself: tests/hooks_order_spec.lua).
describe("lt.DataModule: the loaders come after on_fit_start", function()
  -- a datamodule with no data until a callback's on_fit_start "downloads" it
  local function lazy_dm(log)
    local D = lt.DataModule:extend("Lazy")
    function D:train_dataloader()
      log[#log + 1] = "train_dataloader"
      if self.train_ds == nil then error("no training data yet", 0) end
      return lt.data.DataLoader(self.train_ds, { batch_size = 2 })
    end
    function D:val_dataloader()
      log[#log + 1] = "val_dataloader"
      if self.val_ds == nil then error("no validation data yet", 0) end
      return lt.data.DataLoader(self.val_ds, { batch_size = 2 })
    end
    return D()
  end
  local at_train_start = {}
  local function downloader(log)
    return { on_fit_start = function(_, trainer)
      log[#log + 1] = "on_fit_start"
      local dm = trainer.datamodule
      dm.train_ds, dm.val_ds = dataset(6), dataset(4)
    end, on_sanity_check_start = function() log[#log + 1] = "on_sanity_check_start" end,
    on_train_start = function(_, trainer)
      log[#log + 1] = "on_train_start"
      at_train_start.batches = trainer.num_training_batches
    end }
  end

  it("a callback that creates the datamodule's data in on_fit_start: fit trains and validates on it", function()
    local log = {}
    local dm = lazy_dm(log)
    local t = lt.Trainer(quiet { max_epochs = 2, enable_checkpointing = false, callbacks = { downloader(log) } })
    local m = model()
    local sane
    local vdl = dm.val_dataloader
    function dm:val_dataloader() sane = t.sanity_checking; return vdl(self) end
    t:fit(m, dm)
    assert.are.same({ "on_fit_start", "on_sanity_check_start", "val_dataloader", "train_dataloader",
      "on_train_start" }, { log[1], log[2], log[3], log[4], log[5] })
    assert.are.equal(5, #log)
    assert.is_true(sane) -- asked inside the sanity check, as Lightning's
    assert.are.equal(3, at_train_start.batches)
    assert.are.equal(3, t.num_training_batches)
    assert.are.same({ 2 }, t.num_val_batches)
    assert.are.same({ 2 }, t.num_sanity_val_batches)
    assert.are.equal(6, t.global_step)
    assert.is_number(t.callback_metrics.val_loss)
  end)

  it("num_sanity_val_steps = 0: val_dataloader right after train_dataloader, before on_train_start", function()
    local log = {}
    local dm = lazy_dm(log)
    local t = lt.Trainer(quiet { max_epochs = 1, num_sanity_val_steps = 0, enable_checkpointing = false,
      callbacks = { downloader(log) } })
    local m = model()
    local vsteps = 0
    local vs = m.validation_step
    function m:validation_step(b, i) vsteps = vsteps + 1; return vs(self, b, i) end
    t:fit(m, dm)
    assert.are.same({ "on_fit_start", "train_dataloader", "val_dataloader", "on_train_start" }, log)
    assert.are.equal(2, vsteps) -- the epoch's validation only (no sanity check)
    assert.are.same({ 2 }, t.num_val_batches)
  end)

  it("stepwise: the first advance asks for the loaders after on_fit_start; later advances ask for nothing", function()
    local log = {}
    local dm = lazy_dm(log)
    local t = lt.Trainer(quiet { max_epochs = 1, enable_checkpointing = false, callbacks = { downloader(log) } })
    local run = t:fit_run(model(), dm)
    assert.are.same({}, log)
    assert.is_false(run:advance { batches = 1 })
    assert.are.same({ "on_fit_start", "on_sanity_check_start", "val_dataloader", "train_dataloader",
      "on_train_start" }, log)
    assert.are.equal(1, t.global_step)
    assert.is_true(run:advance())
    assert.are.equal(5, #log)
    assert.are.equal(3, t.global_step)
  end)

  it("limit_train_batches = 0 asks for no train_dataloader (the fit loop is skipped); an empty one trains nothing",
    function()
      local log = {}
      local dm = lazy_dm(log)
      local t = lt.Trainer(quiet { max_epochs = 1, limit_train_batches = 0, enable_checkpointing = false,
        callbacks = { downloader(log) } })
      t:fit(model(), dm)
      assert.are.same({ "on_fit_start", "on_sanity_check_start", "val_dataloader" }, log)
      assert.are.equal(0, t.global_step)
      -- an empty training loader: Lightning's fit loop runs on_train_start, finds no batch, ends
      local ends = 0
      local D = lt.DataModule:extend("Empty")
      function D:train_dataloader() return lt.data.DataLoader(dataset(0), { batch_size = 2 }) end
      local cb = { on_train_start = function() ends = ends + 1 end, on_train_end = function() ends = ends + 10 end,
        on_train_epoch_start = function() error("no epoch expected", 0) end }
      local t2 = lt.Trainer(quiet { max_epochs = 1, enable_checkpointing = false, callbacks = { cb } })
      t2:fit(model(), D())
      assert.are.equal(11, ends)
      assert.are.equal(0, t2.num_training_batches)
    end)

  it("errors: a data hook's error names it; the trainer's own checks read as they do for given loaders", function()
    local log = {}
    local got
    local cb = { on_exception = function(_, _, _, err) got = err end }
    local t = lt.Trainer(quiet { max_epochs = 1, enable_checkpointing = false, callbacks = { cb } })
    local ok, err = pcall(t.fit, t, model(), lazy_dm(log)) -- no downloader: the sanity check's val_dataloader fails
    assert.is_false(ok)
    assert.matches("^val_dataloader %(datamodule%): no validation data yet", tostring(err))
    assert.are.equal(err, got)
    local t2 = lt.Trainer(quiet { max_epochs = 1, enable_checkpointing = false, num_sanity_val_steps = 0 })
    ok, err = pcall(t2.fit, t2, model(), lazy_dm(log))
    assert.is_false(ok)
    assert.matches("^train_dataloader %(datamodule%): no training data yet", tostring(err))
    local t3 = lt.Trainer(quiet { max_epochs = 1, enable_checkpointing = false, val_check_interval = 5,
      callbacks = { downloader({}) } })
    assert.has_error(function() t3:fit(model(), lazy_dm({})) end, "Trainer: val_check_interval (5) must be less " ..
      "than or equal to the number of the training batches (3). If you want to disable validation set " ..
      "limit_val_batches to 0 instead.")
    local D = lt.DataModule:extend("NoTrain")
    function D:val_dataloader() return lt.data.DataLoader(dataset(2), { batch_size = 2 }) end
    assert.has_error(function() t3:fit(model(), D()) end, "fit: the datamodule has no train_dataloader")
  end)

  it("resuming a fit whose train_dataloader builds a shuffling loader is bitwise the uninterrupted fit", function()
    local dir = os.tmpname()
    os.remove(dir)
    local D = lt.DataModule:extend("Shuffled")
    function D:train_dataloader() -- a new permutation seed drawn from the global RNG at each construction
      return lt.data.DataLoader(self.train_ds, { batch_size = 2, shuffle = true })
    end
    function D:val_dataloader() return lt.data.DataLoader(self.val_ds, { batch_size = 2 }) end
    local function fresh()
      local dm = D()
      dm.train_ds, dm.val_ds = dataset(8), dataset(4)
      local m = model()
      local step = m.training_step
      function m:training_step(b, i) -- draws from the global RNG at every step
        return step(self, { b[1] + 0.1 * lt.randn(b[1]:size(1), 2), b[2] }, i)
      end
      lt.manual_seed(11)
      return dm, m
    end
    local dm, m = fresh()
    lt.Trainer(quiet { max_epochs = 3, enable_checkpointing = false }):fit(m, dm)
    local want = { m.net.weight:totable(), m.net.bias:totable() }
    local dm1, m1 = fresh()
    local t1 = lt.Trainer(quiet { max_epochs = 1, enable_checkpointing = false })
    t1:fit(m1, dm1)
    t1:save_checkpoint(dir)
    local dm2, m2 = D(), model()
    dm2.train_ds, dm2.val_ds = dm1.train_ds, dm1.val_ds
    local step = m2.training_step
    function m2:training_step(b, i) return step(self, { b[1] + 0.1 * lt.randn(b[1]:size(1), 2), b[2] }, i) end
    lt.manual_seed(99) -- the checkpoint's RNG state replaces whatever the process has
    lt.Trainer(quiet { max_epochs = 3, enable_checkpointing = false }):fit(m2, dm2, { ckpt_path = dir })
    os.remove(dir)
    assert.are.same(want, { m2.net.weight:totable(), m2.net.bias:totable() })
  end)

  it("the progress bar's sanity line gets its total once the loaders have come", function()
    local out = {}
    local stream = { write = function(_, ...) for _, x in ipairs { ... } do out[#out + 1] = x end end,
      flush = function() end }
    local log = {}
    local t = lt.Trainer(quiet { max_epochs = 1, enable_checkpointing = false, enable_progress_bar = true,
      callbacks = { downloader(log), lt.callbacks.ProgressBar { stream = stream, tty = true, width = 100 } } })
    t:fit(model(), lazy_dm(log))
    local text = table.concat(out):gsub("\27%[[%d;]*%a", "")
    assert.matches("Sanity Checking: 100%%|[^|]*| 2/2 ", text)
  end)
end)
