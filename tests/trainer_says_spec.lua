-- tests/trainer_says_spec.lua — the Trainer says what happened instead of doing nothing silently: a
-- training_step returning nil (warned once per fit), a fit with nothing to train (max_epochs / max_steps
-- reached, should_stop set, kept from the checkpoint it resumed), an interrupted fit (where it stopped, how to
-- go on); and its argument errors name the caller's line, not trainer.lua's.
local lt = require "lutra"
local quiet = require "helpers.quiet"
local fs = require "helpers.fs"

local function model()
  local m = { net = lt.nn.Linear(3, 1) }
  function m:training_step(batch)
    if self.skip then return nil end
    return lt.F.mse_loss(self.net(batch[1]), batch[2])
  end
  function m:configure_optimizers() return lt.optim.SGD(self.net:parameters(), { lr = 0.1 }) end
  return m
end

local function data(n)
  lt.manual_seed(3)
  local x = lt.randn(n, 3)
  return lt.data.DataLoader(lt.data.TensorDataset(x, x:sum(2, true)), { batch_size = 4 })
end

-- the lines lutra writes on stderr (lt._note) while f runs
local function notes(f)
  local lines, saved = {}, rawget(lt, "_note")
  rawset(lt, "_note", function(line) lines[#lines + 1] = line end)
  local ok, err = pcall(f)
  rawset(lt, "_note", saved)
  assert(ok, err)
  return lines
end

local function count(lines, text)
  local n = 0
  for _, l in ipairs(lines) do if l:find(text, 1, true) then n = n + 1 end end
  return n
end

local NIL_STEP = "lutra: warning: training_step returned nil. If this was on purpose, ignore this warning..."

describe("a training_step that returns nil", function()
  it("is warned about once per fit, the batches skipped", function()
    local m = model()
    m.skip = true
    local w0 = m.net.weight:clone()
    local t = lt.Trainer(quiet { max_epochs = 2 })
    local lines = notes(function() t:fit(m, data(16)) end)
    assert.are.equal(1, count(lines, NIL_STEP), table.concat(lines, "\n"))
    assert.truthy(lines[1]:find("the batch is skipped", 1, true))
    assert.is_true(m.net.weight:allclose(w0, 0, 0)) -- (global_step counts the batches, as Lightning's)
    -- a second fit warns again (once)
    t.max_epochs = 3
    lines = notes(function() t:fit(m, data(16)) end)
    assert.are.equal(1, count(lines, NIL_STEP))
  end)

  it("says nothing when the steps return a loss, or under manual optimization", function()
    assert.are.equal(0, #notes(function() lt.Trainer(quiet { max_epochs = 1 }):fit(model(), data(8)) end))
    local m = model()
    m.automatic_optimization = false
    function m:training_step() return nil end
    assert.are.equal(0, #notes(function() lt.Trainer(quiet { max_epochs = 1 }):fit(m, data(8)) end))
  end)
end)

describe("a fit with nothing to train", function()
  it("says max_epochs was reached when fit is called on a finished trainer", function()
    local m, t = model(), lt.Trainer(quiet { max_epochs = 2 })
    assert.are.equal(0, #notes(function() t:fit(m, data(8)) end))
    local lines = notes(function() t:fit(m, data(8)) end)
    assert.are.same({ "lutra: fit: nothing to train: max_epochs=2 reached (current_epoch 2); " ..
      "raise trainer.max_epochs to train more, or use a new Trainer to start again" }, lines)
    -- as it says: a higher max_epochs trains on
    t.max_epochs = 3
    assert.are.equal(0, #notes(function() t:fit(m, data(8)) end))
    assert.are.equal(3, t.current_epoch)
    assert.are.equal(6, t.global_step)
  end)

  it("says max_steps was reached", function()
    local m, t = model(), lt.Trainer(quiet { max_steps = 3 })
    t:fit(m, data(8))
    local lines = notes(function() t:fit(m, data(8)) end)
    assert.are.equal(1, #lines)
    assert.matches("fit: nothing to train: max_steps=3 reached (global_step 3)", lines[1], 1, true)
  end)

  it("says should_stop was set before the first batch", function()
    local stopper = { on_train_start = function(_, trainer) trainer.should_stop = true end }
    local t = lt.Trainer(quiet { max_epochs = 2, min_epochs = 0, callbacks = { stopper } })
    local lines = notes(function() t:fit(model(), data(8)) end)
    assert.are.same({ "lutra: fit: nothing to train: trainer.should_stop was set before the first batch " ..
      "(by a callback or the model)" }, lines)
  end)

  it("says why a resume from a checkpoint saved after should_stop trains nothing", function()
    local dir = fs.tmpdir()
    local path = dir .. "/stopped.ckpt"
    local stopper = { on_train_epoch_end = function(_, trainer)
      trainer.should_stop = true
      trainer:save_checkpoint(path)
    end }
    local t = lt.Trainer(quiet { max_epochs = 5, callbacks = { stopper } })
    t:fit(model(), data(8))
    assert.are.equal(1, t.current_epoch) -- stopped after one epoch of five
    local t2 = lt.Trainer(quiet { max_epochs = 5 })
    local lines = notes(function() t2:fit(model(), data(8), { ckpt_path = path }) end)
    fs.rmrf(dir)
    assert.are.equal(1, #lines, table.concat(lines, "\n"))
    assert.matches("fit: nothing to train: the checkpoint " .. path .. " was saved after trainer.should_stop was set",
      lines[1], 1, true)
    assert.matches("stopped that run at global_step 2)", lines[1], 1, true)
    assert.are.equal(2, t2.global_step)
  end)

  it("says nothing for limit_train_batches = 0 (no training was asked for)", function()
    local t = lt.Trainer(quiet { max_epochs = 1, limit_train_batches = 0 })
    assert.are.equal(0, #notes(function() t:fit(model(), data(8)) end))
  end)
end)

describe("an interrupted fit", function()
  it("says where it stopped and how to go on", function()
    local m = model()
    function m:on_train_batch_end(_, _, batch_idx)
      if self.trainer.current_epoch == 1 and batch_idx == 2 then lt.interrupt() end
    end
    local t = lt.Trainer(quiet { max_epochs = 2 })
    local lines = notes(function() t:fit(m, data(16)) end)
    assert.is_true(t.interrupted)
    assert.are.same({ "lutra: fit interrupted in epoch 1 after 3 of 4 batches (global_step 7); " ..
      "trainer:fit(model, ...) again with this trainer and model continues from there" }, lines)
    lines = notes(function() t:fit(m, data(16)) end)
    assert.are.equal(0, #lines)
    assert.are.equal(8, t.global_step)
  end)
end)

describe("an interrupted evaluation", function()
  it("says its results cover the batches before the interruption", function()
    local m = model()
    local seen = 0
    function m:validation_step(batch, batch_idx)
      seen = seen + 1
      self:log("val_loss", lt.F.mse_loss(self.net(batch[1]), batch[2]))
      if batch_idx == 1 then lt.interrupt() end
    end
    local t = lt.Trainer(quiet())
    local lines = notes(function() t:validate(m, data(16)) end)
    assert.are.equal(2, seen)
    assert.is_true(t.interrupted)
    assert.are.same({ "lutra: validate interrupted; its results cover the batches before the interruption" }, lines)
  end)
end)

describe("argument errors", function()
  -- each call is on one line: the message must start with this file and that line
  local function where() return "trainer_says_spec.lua:" .. debug.getinfo(2, "l").currentline .. ": " end

  it("name the caller's line for fit, fit_run, validate, test and predict", function()
    local t = lt.Trainer(quiet())
    local at
    local function err_of(f)
      local ok, err = pcall(f)
      assert.is_false(ok)
      return err
    end
    local err = err_of(function() at = where(); t:fit(nil, data(8)) end)
    assert.matches(at .. "fit: the model must be a table, got nil", err, 1, true)
    err = err_of(function() at = where(); t:fit(model(), 5) end)
    assert.matches(at .. "fit: expected a DataLoader", err, 1, true)
    err = err_of(function() at = where(); t:fit_run(model()) end)
    assert.matches(at .. "fit: no training dataloader given", err, 1, true)
    for _, what in ipairs { "validate", "test", "predict" } do
      err = err_of(function() at = where(); t[what](t, nil, data(8)) end)
      assert.matches(at .. what .. ": the model must be a table, got nil", err, 1, true)
    end
  end)
end)
