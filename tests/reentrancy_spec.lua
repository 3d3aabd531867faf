-- tests/reentrancy_spec.lua — a trainer's own hooks calling fit / validate / test / predict on it (issue 14):
-- the call raises at once, naming the method and the hook, before any further training_step; a hook that
-- catches the error leaves the outer run exactly as a run without the call (same steps, same weights); the
-- trainer trains again afterwards. A second Trainer fitting the same model from inside a hook is a clear error.
local lt = require "lutra"

local quiet = require "helpers.quiet"

local function setup()
  lt.manual_seed(3)
  local x = lt.randn(24, 3)
  local y = x:matmul(lt.randn(3, 1))
  local ds = lt.data.TensorDataset(x, y)
  local train = lt.data.DataLoader(ds, { batch_size = 6 })
  local val = lt.data.DataLoader(ds, { batch_size = 12 })
  local m = { lin = lt.nn.Linear(3, 1), steps = 0 }
  function m:forward(v) return self.lin(v) end
  function m:training_step(b)
    self.steps = self.steps + 1
    return lt.F.mse_loss(self:forward(b[1]), b[2])
  end
  function m:validation_step(b) self:log("val_loss", lt.F.mse_loss(self:forward(b[1]), b[2])) end
  function m:test_step(b) self:log("test_loss", lt.F.mse_loss(self:forward(b[1]), b[2])) end
  function m:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), { lr = 0.1 }) end
  return m, train, val
end

local function weights(m) return { m.lin.weight:totable(), m.lin.bias:totable() } end

-- the reference: the same run without nested calls
local function reference()
  local m, train, val = setup()
  local t = lt.Trainer(quiet { max_epochs = 2 })
  t:fit(m, train, val)
  return weights(m), m.steps, t.global_step
end

local METHODS = {
  fit = function(t, m, train, val) return t:fit(m, train, val) end,
  validate = function(t, m, _, val) return t:validate(m, val) end,
  test = function(t, m, _, val) return t:test(m, val) end,
  predict = function(t, m, _, val) return t:predict(m, val) end,
}

describe("re-entrancy", function()
  local ref_w, ref_steps, ref_gs = reference()

  for _, hook in ipairs { "setup", "on_fit_start", "on_train_start", "on_train_epoch_start", "on_train_batch_end",
    "on_train_epoch_end", "on_validation_epoch_end", "training_epoch_end", "on_after_backward" } do
    for name, call in pairs(METHODS) do
      it(name .. " from the model's " .. hook .. " raises at once, and the outer fit goes on unchanged", function()
        local m, train, val = setup()
        local t = lt.Trainer(quiet { max_epochs = 2 })
        local errors, steps_at_error = {}, nil
        m[hook] = function(self)
          if #errors == 0 then
            local before = self.steps
            local ok, err = pcall(call, t, self, train, val)
            assert.is_false(ok)
            errors[1] = err
            steps_at_error = self.steps - before -- no training_step ran inside the call
          end
          if hook == "training_epoch_end" or hook == "setup" then return nil end
        end
        t:fit(m, train, val)
        assert.equal(1, #errors)
        assert.equal(0, steps_at_error)
        assert.truthy(errors[1]:find(name .. ": called from the hook '" .. hook .. "' while this trainer runs fit", 1, true),
          errors[1])
        assert.equal(ref_steps, m.steps)
        assert.equal(ref_gs, t.global_step)
        assert.same(ref_w, weights(m))
        assert.equal("finished", t.state.status)
      end)
    end
  end

  it("a callback's hook is refused too, naming the hook; evaluation runs refuse a nested run", function()
    local m, train, val = setup()
    local t = lt.Trainer(quiet { max_epochs = 1 })
    local seen = {}
    local cb = {}
    function cb.on_validation_batch_end(_, trainer, model)
      local ok, err = pcall(trainer.fit, trainer, model, train)
      seen[#seen + 1] = not ok and err
    end
    t.callbacks[#t.callbacks + 1] = cb
    t._base_callbacks = t.callbacks
    local res = t:validate(m, val)
    assert.equal(2, #seen)
    assert.truthy(seen[1]:find("fit: called from the hook 'on_validation_batch_end' while this trainer runs validate",
      1, true), seen[1])
    assert.equal(0, m.steps)
    assert.is_number(res[1].val_loss)
  end)

  it("an uncaught nested fit fails the outer fit with the hook's name; the trainer then trains again", function()
    local m, train, val = setup()
    local t = lt.Trainer(quiet { max_epochs = 2 })
    function m:on_train_epoch_end() t:fit(self, train, val) end
    local ok, err = pcall(t.fit, t, m, train, val)
    assert.is_false(ok)
    assert.truthy(err:find("^on_train_epoch_end: .*reentrancy_spec%.lua:%d+: fit: called from the hook " ..
      "'on_train_epoch_end' while this trainer runs fit"), err)
    assert.equal(4, m.steps) -- one epoch ran, the nested fit none
    assert.equal("failed", t.state.status)
    -- the next fit trains for real (it used to report success without training): the trainer's progress
    -- carries over (as Lightning's), so it trains the epoch that is left
    local m2, train2, val2 = setup()
    t:fit(m2, train2, val2)
    assert.equal(4, m2.steps)
    assert.equal(ref_gs, t.global_step)
    assert.equal("finished", t.state.status)
  end)

  it("a stepwise run's advance from inside its own hook is refused", function()
    local m, train, val = setup()
    local t = lt.Trainer(quiet { max_epochs = 2 })
    local run = t:fit_run(m, train, val)
    local err
    function m.on_train_batch_end()
      if err == nil then
        local ok, e = pcall(run.advance, run, { batches = 1 })
        assert.is_false(ok)
        err = e
      end
    end
    assert.is_false(run:advance { batches = 3 })
    assert.equal(3, m.steps)
    assert.truthy(err:find("advance: called from the hook 'on_train_batch_end' while this trainer runs fit", 1, true),
      err)
    -- between advances no hook runs: validate is refused for the paused fit, not as a nested run
    local ok, e = pcall(t.validate, t, m, val)
    assert.is_false(ok)
    assert.truthy(e:find("validate: a fit run is in progress", 1, true), e)
    run:advance()
    assert.equal(ref_steps, m.steps)
    assert.same(ref_w, weights(m))
  end)

  it("a second Trainer fitting the same model from inside a hook is a clear error", function()
    local m, train, val = setup()
    local t = lt.Trainer(quiet { max_epochs = 2 })
    local err
    function m:on_train_epoch_start()
      if err == nil then
        local other = lt.Trainer(quiet { max_epochs = 1 })
        local ok, e = pcall(other.fit, other, self, train)
        assert.is_false(ok)
        err = e
      end
    end
    t:fit(m, train, val)
    assert.truthy(err:find("fit: the model is in use by another Trainer's running fit (called from its hook " ..
      "'on_train_epoch_start')", 1, true), err)
    assert.equal(ref_steps, m.steps)
    assert.same(ref_w, weights(m))
    assert.equal(t, m.trainer)
  end)

  it("the binding refuses a nested run of its loops, whoever asks (no crash)", function()
    local m, train, val = setup()
    local t = lt.Trainer(quiet { max_epochs = 1 })
    local errs = {}
    function m:on_train_batch_end()
      if #errs == 0 then
        for _, call in ipairs {
          function() return t._lp:fit_advance(1, 0, false) end, function() return t._lp:eval_run("validation") end,
          function() return t._lp:detach() end, function() return t._lp:attach({}, t, self) end,
          function() return t._lp:set_cfg {} end, function() return t._lp:refresh(false) end,
        } do
          local ok, e = pcall(call)
          errs[#errs + 1] = not ok and e
        end
      end
    end
    t:fit(m, train, val)
    assert.equal(6, #errs)
    for i, what in ipairs { "fit_advance", "eval_run", "detach", "attach", "set_cfg", "refresh" } do
      assert.truthy(tostring(errs[i]):find("loops: " .. what .. " while the loops are running", 1, true), errs[i])
    end
    assert.equal(4, m.steps)
  end)

  it("a second Trainer on another model inside a hook works", function()
    local m, train, val = setup()
    local t = lt.Trainer(quiet { max_epochs = 2 })
    local m2, train2 = setup()
    function m.on_train_end() lt.Trainer(quiet { max_epochs = 1 }):fit(m2, train2) end
    t:fit(m, train, val)
    assert.equal(4, m2.steps)
    assert.equal(ref_steps, m.steps)
    assert.same(ref_w, weights(m))
  end)
end)
