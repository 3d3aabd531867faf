-- tests/hook_dispatch_spec.lua — the hook dispatcher's paths (core/bind/l_loop_dispatch.c): a target whose
-- result nobody wants (every callback, the model's on_* hooks) is called for no result; a target whose result
-- is wanted (the model's on_train_batch_start, training_step, a data hook) keeps it. Errors name the hook and
-- the target on either path, and returned values where none is wanted change nothing.
local lt = require "lutra"

local opts = require "helpers.quiet"

local function loader(n)
  return require("helpers.loader").make(n, function(i) return { lt.full({ 2, 1 }, i), lt.full({ 2, 1 }, 2 * i) } end)
end

local function model(hooks)
  local m = { w = lt.param(lt.zeros(1, 1)), seen = 0 }
  function m:training_step(b)
    self.seen = self.seen + 1
    return ((b[1] * self.w - b[2]) ^ 2):mean()
  end
  function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 0.01 }) end
  for k, v in pairs(hooks or {}) do m[k] = v end
  return m
end

local function fit_error(m, cbs, n)
  local ok, err = pcall(function() lt.Trainer(opts { callbacks = cbs, max_epochs = 1 }):fit(m, loader(n or 3)) end)
  assert.is_false(ok)
  return tostring(err)
end

describe("hook dispatcher", function()
  it("an error in a per-batch callback hook names the hook and the callback's position, with its traceback", function()
    for _, h in ipairs { "on_train_batch_start", "on_train_batch_end", "on_before_zero_grad", "on_before_backward",
      "on_after_backward", "on_before_optimizer_step" } do
      local calls = 0
      local quiet = { [h] = function() calls = calls + 1 end }
      local bad = { [h] = function(_, _, _) if calls == 2 then error("boom in " .. h) end end }
      local err = fit_error(model(), { quiet, {}, bad }, 4)
      assert.truthy(err:find("^" .. h .. " %(callback #3%): [^\n]*boom in " .. h), err)
      assert.truthy(err:find("stack traceback:", 1, true), err)
      assert.are.equal(2, calls) -- the first callback ran before the failing one on both batches
    end
  end)

  it("an error in the model's hook after callbacks that return values names the hook alone", function()
    local cb = { on_after_backward = function() return 1, 2, 3 end, on_train_batch_end = function() return "x" end }
    local m = model { on_after_backward = function(self) if self.seen == 2 then error("model hook failed") end end }
    local err = fit_error(m, { cb }, 3)
    assert.truthy(err:find("^on_after_backward: [^\n]*model hook failed"), err)
  end)

  it("a non-string error value from a callback is named by its type", function()
    local err = fit_error(model(), { { on_train_batch_end = function() error({}) end } }, 2)
    assert.truthy(err:find("^on_train_batch_end %(callback #1%): %(error object is a table value%)"), err)
  end)

  it("values returned where none is wanted change nothing", function()
    -- every callback and the model's on_* hooks return values, -1 among them: only the model's
    -- on_train_batch_start's -1 stops an epoch (Lightning's), a callback's does not
    local many = function() return -1, "a", {}, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21 end
    local names = { "on_train_batch_start", "on_train_batch_end", "on_before_zero_grad", "on_before_backward",
      "on_after_backward", "on_before_optimizer_step", "on_train_epoch_start", "on_train_epoch_end", "on_train_start" }
    local cb, hooks = {}, {}
    for _, h in ipairs(names) do
      cb[h] = many
      if h ~= "on_train_batch_start" then hooks[h] = many end
    end
    local m = model(hooks)
    local t = lt.Trainer(opts { callbacks = { cb, cb }, max_epochs = 2 })
    t:fit(m, loader(5))
    assert.are.equal(10, m.seen)
    assert.are.equal(10, t.global_step)
    -- the model's own -1 still skips the rest of the epoch, with the callbacks returning values beside it
    local m2 = model { on_train_batch_start = function(_, _, i) if i == 2 then return -1 end end }
    local t2 = lt.Trainer(opts { callbacks = { cb }, max_epochs = 2 })
    t2:fit(m2, loader(5))
    assert.are.equal(4, m2.seen)
  end)

  it("a wanted result survives the callbacks' calls before it, many batches over (no stack growth)", function()
    local cb = { on_train_batch_start = function() return 7 end }
    local m = model { on_train_batch_start = function(self) return self.seen == 300 and -1 or nil end }
    local t = lt.Trainer(opts { callbacks = { cb, cb, cb }, max_epochs = 1 })
    t:fit(m, loader(400))
    assert.are.equal(300, m.seen)
  end)

  it("a datamodule and the model both defining a data hook: the datamodule's loader is the one used", function()
    local dm = lt.DataModule()
    function dm:train_dataloader() return loader(3) end
    local m = model { train_dataloader = function() return loader(9) end }
    local t = lt.Trainer(opts { callbacks = { { on_train_start = function() return loader(5) end } }, max_epochs = 1 })
    t:fit(m, { datamodule = dm })
    assert.are.equal(3, m.seen)
  end)
end)
