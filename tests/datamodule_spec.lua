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
