-- tests/trainer_traps_spec.lua — what porting real Lightning examples ran into (issue 14's "Trainer traps"):
-- predict's result without any on_predict_epoch_end, a single callback instead of a list, validate/test/
-- predict{ckpt_path = path | "best" | "last"}, lt.seed_everything before the model is built, and
-- m:load_state_dict(other:state_dict()).
local lt = require "lutra"
local quiet = require "helpers.quiet"
local fs = require "helpers.fs"

local function regression_model()
  local m = { net = lt.nn.Linear(3, 1) }
  function m:forward(x) return self.net(x) end
  function m:training_step(batch) return lt.F.mse_loss(self:forward(batch[1]), batch[2]) end
  function m:validation_step(batch)
    self:log("val_loss", lt.F.mse_loss(self:forward(batch[1]), batch[2]))
  end
  function m:test_step(batch)
    self:log("test_loss", lt.F.mse_loss(self:forward(batch[1]), batch[2]))
  end
  function m:configure_optimizers() return lt.optim.SGD(self.net:parameters(), { lr = 0.1 }) end
  return m
end

local function data(n)
  lt.manual_seed(7)
  local x = lt.randn(n, 3)
  local y = x:matmul(lt.tensor { { 1 }, { -2 }, { 0.5 } }) + 0.3
  return lt.data.DataLoader(lt.data.TensorDataset(x, y), { batch_size = 4 })
end

describe("trainer:predict", function()
  it("returns the predictions when no target defines on_predict_epoch_end", function()
    local m = regression_model()
    local preds = lt.Trainer(quiet()):predict(m, data(10))
    assert.are.equal(3, #preds) -- batches of 4, 4, 2
    assert.are.same({ 4, 1 }, preds[1]:shape())
    assert.are.same({ 2, 1 }, preds[3]:shape())
    local loader = data(10)
    local first = loader:iter()() -- the first batch
    assert.is_true(preds[1]:allclose(m:forward(first[1])))
  end)

  it("returns one list per loader with several loaders", function()
    local preds = lt.Trainer(quiet()):predict(regression_model(), { data(8), data(4) })
    assert.are.equal(2, #preds)
    assert.are.equal(2, #preds[1])
    assert.are.equal(1, #preds[2])
  end)
end)

describe("Trainer{callbacks = cb}", function()
  it("accepts a single callback as Lightning does", function()
    local calls = 0
    local cb = { on_train_epoch_end = function() calls = calls + 1 end }
    lt.Trainer(quiet { max_epochs = 2, callbacks = cb }):fit(regression_model(), data(8))
    assert.are.equal(2, calls)
  end)

  it("still refuses what is not a callback", function()
    local ok, err = pcall(lt.Trainer, quiet { callbacks = 3 })
    assert.is_false(ok)
    assert.matches("callbacks", err, 1, true)
  end)
end)

describe("validate/test/predict {ckpt_path = ...}", function()
  local dir
  before_each(function() dir = fs.tmpdir() end)
  after_each(function() fs.rmrf(dir) end)

  local function fitted()
    local m = regression_model()
    local ckpt = lt.callbacks.ModelCheckpoint { dirpath = dir, monitor = "val_loss", save_last = true }
    local t = lt.Trainer(quiet { max_epochs = 3, enable_checkpointing = true, callbacks = { ckpt } })
    t:fit(m, data(16), data(8))
    return t, m, ckpt
  end

  it('"best" loads the best checkpoint\'s weights before testing', function()
    local t, m, ckpt = fitted()
    assert.is_true(#ckpt.best_model_path > 0)
    local best = lt.load(ckpt.best_model_path)
    m.net.weight:detach():fill_(100) -- the current weights are not what is tested
    local res = t:test(m, data(8), { ckpt_path = "best" })
    assert.is_true(m.net.weight:allclose(best["net.weight"], 0, 0))
    assert.is_true(res[1].test_loss < 100)
  end)

  it('"last" and a path load those weights; the errors name the option', function()
    local t, m, ckpt = fitted()
    m.net.weight:detach():fill_(100)
    t:validate(m, data(8), { ckpt_path = "last" })
    assert.is_true(m.net.weight:allclose(lt.load(ckpt.last_model_path)["net.weight"], 0, 0))
    m.net.weight:detach():fill_(100)
    t:predict(m, data(8), { ckpt_path = ckpt.best_model_path })
    assert.is_true(m.net.weight:allclose(lt.load(ckpt.best_model_path)["net.weight"], 0, 0))

    local ok, err = pcall(t.test, t, m, data(8), { ckpt = "best" })
    assert.is_false(ok)
    assert.matches("test: unknown option 'ckpt' (known options: ckpt_path, datamodule)", err, 1, true)
    local t2 = lt.Trainer(quiet())
    ok, err = pcall(t2.test, t2, m, data(8), { ckpt_path = "best" })
    assert.is_false(ok)
    assert.matches('test: ckpt_path = "best" needs a ModelCheckpoint callback', err, 1, true)
    ok, err = pcall(t2.test, t2, m, data(8), { ckpt_path = dir .. "/none.ckpt" })
    assert.is_false(ok)
    assert.matches("none.ckpt", err, 1, true)
    -- a call refused for another reason loads nothing: the weights stay as they are
    m.net.weight:detach():fill_(100)
    local no_step = { net = m.net }
    ok, err = pcall(t.test, t, no_step, data(8), { ckpt_path = "best" })
    assert.is_false(ok)
    assert.matches("test: the model has no test_step", err, 1, true)
    assert.are.equal(100, m.net.weight:max():item())
  end)

  it("loads the checkpoint after setup, so a model that builds its layers in setup can be evaluated", function()
    local function built_in_setup()
      local m = regression_model()
      m.net = nil
      function m:setup(stage)
        self.stages = (self.stages or "") .. stage .. ","
        if self.net == nil then self.net = lt.nn.Linear(3, 1) end
      end
      return m
    end
    local m = built_in_setup()
    local ckpt = lt.callbacks.ModelCheckpoint { dirpath = dir, monitor = "val_loss" }
    local t = lt.Trainer(quiet { max_epochs = 2, enable_checkpointing = true, callbacks = { ckpt } })
    t:fit(m, data(16), data(8))
    local saved = lt.load(ckpt.best_model_path)["net.weight"]
    for _, what in ipairs { "test", "validate", "predict" } do
      local fresh = built_in_setup() -- no layers until setup
      local t2 = lt.Trainer(quiet())
      t2[what](t2, fresh, data(8), { ckpt_path = ckpt.best_model_path })
      assert.are.equal(what .. ",", fresh.stages)
      assert.is_true(fresh.net.weight:allclose(saved, 0, 0), what)
    end
    -- fit's resume too (it restores after setup and configure_optimizers)
    local fresh = built_in_setup()
    local t3 = lt.Trainer(quiet { max_epochs = 3 })
    t3:fit(fresh, data(16), data(8), { ckpt_path = ckpt.best_model_path })
    assert.are.equal("fit,", fresh.stages)
    assert.are.equal(3, t3.current_epoch)
  end)
end)

describe("lt.seed_everything", function()
  it("makes the weights of a model built after it reproducible, and returns the seed", function()
    assert.are.equal(42, lt.seed_everything(42))
    local a = lt.nn.Linear(5, 4)
    local ra = math.random()
    lt.randn(3) -- move the RNG on
    lt.seed_everything(42)
    local b = lt.nn.Linear(5, 4)
    assert.is_true(a.weight:allclose(b.weight, 0, 0))
    assert.are.equal(ra, math.random())
    local ok, err = pcall(lt.seed_everything, 1.5)
    assert.is_false(ok)
    assert.matches("seed_everything: the seed must be an integer", err, 1, true)
  end)
end)

describe("state_dict", function()
  it("returns one value, so m:load_state_dict(other:state_dict()) works", function()
    local a, b = lt.nn.Linear(3, 2), lt.nn.Linear(3, 2)
    assert.are.equal(1, select("#", a:state_dict()))
    b:load_state_dict(a:state_dict())
    assert.is_true(b.weight:allclose(a.weight, 0, 0))
    local m1 = { net = lt.nn.Linear(3, 2) }
    local m2 = { net = lt.nn.Linear(3, 2) }
    lt.nn.load_state_dict(m2, lt.nn.state_dict(m1))
    assert.is_true(m2.net.weight:allclose(m1.net.weight, 0, 0))
  end)
end)
