-- tests/stepwise_spec.lua — stepwise training: trainer:fit_run and run:advance{batches=}/{seconds=}
-- stop at batch boundaries and continue exactly (N advances of one batch == one fit, bitwise); Ctrl-C
-- (lt.interrupt) stops fit at the next batch boundary and fit continues; loops' progress, state_dict and
-- custom Lua loops (lt.Loop).
local lt = require "lutra"

local opts = require "helpers.quiet"

-- A small MLP on a shuffled loader (the data order comes from the loader's own RNG), SGD with momentum,
-- a validation loader, dropout-free: everything that carries state across batches.
local function setup(seed)
  lt.manual_seed(seed)
  local x = lt.randn(40, 4)
  local y = (x:matmul(lt.randn(4, 1)) + 0.1):tanh()
  local ds = lt.data.TensorDataset(x, y)
  local train = lt.data.DataLoader(ds, { batch_size = 8, shuffle = true, seed = 7 })
  local val = lt.data.DataLoader(ds, { batch_size = 20 })
  local m = { l1 = lt.nn.Linear(4, 8), l2 = lt.nn.Linear(8, 1), calls = {} }
  local function count(name) m.calls[name] = (m.calls[name] or 0) + 1 end
  function m:forward(inp) return self.l2(self.l1(inp):tanh()) end
  function m:training_step(b) return lt.F.mse_loss(self:forward(b[1]), b[2]) end
  function m:validation_step(b) self:log("val_loss", lt.F.mse_loss(self:forward(b[1]), b[2])) end
  function m:configure_optimizers()
    count("configure_optimizers")
    local opt = lt.optim.SGD(lt.nn.parameters(self), { lr = 0.05, momentum = 0.9 })
    return { optimizer = opt, lr_scheduler = { scheduler = lt.optim.lr_scheduler.StepLR(opt, { step_size = 2 }),
      interval = "step" } }
  end
  for _, h in ipairs { "setup", "on_fit_start", "on_train_start", "on_train_epoch_start", "on_train_end", "on_fit_end" } do
    m[h] = function() count(h) end
  end
  return m, train, val
end

local function weights(m)
  return { m.l1.weight:totable(), m.l1.bias:totable(), m.l2.weight:totable(), m.l2.bias:totable() }
end

local function bits_equal(a, b)
  local function flat(t, out)
    for _, v in ipairs(t) do
      if type(v) == "table" then flat(v, out) else out[#out + 1] = v end
    end
    return out
  end
  local fa, fb = flat(a, {}), flat(b, {})
  if #fa ~= #fb then return false end
  local ok, ffi = pcall(require, "ffi")
  if not ok then
    -- PUC Lua: no ffi; the values are float32 widened exactly to doubles, so equal values with the same
    -- sign of zero, or both NaN, are the same bits (short of a NaN's payload)
    for i = 1, #fa do
      local x, y = fa[i], fb[i]
      if not ((x == y and 1 / x == 1 / y) or (x ~= x and y ~= y)) then return false end
    end
    return true
  end
  local f = ffi.new("float[1]")
  local u = ffi.cast("uint32_t *", f)
  for i = 1, #fa do
    f[0] = fa[i]
    local x = u[0]
    f[0] = fb[i]
    if x ~= u[0] then return false end
  end
  return true
end

describe("stepwise training", function()
  it("N calls of advance{batches=1} give bitwise the weights of one fit, start hooks once", function()
    local m1, train1, val1 = setup(3)
    local t1 = lt.Trainer(opts { max_epochs = 3 })
    t1:fit(m1, train1, val1)
    local w1 = weights(m1)

    local m2, train2, val2 = setup(3)
    local t2 = lt.Trainer(opts { max_epochs = 3 })
    local run = t2:fit_run(m2, train2, val2)
    local n = 0
    while not run:advance { batches = 1 } do n = n + 1 end
    assert.are.equal(15, t2.global_step)
    assert.are.equal(t1.global_step, t2.global_step)
    assert.is_true(n >= 14)
    assert.is_true(run:done())
    assert.is_true(bits_equal(w1, weights(m2)))
    for _, h in ipairs { "setup", "on_fit_start", "on_train_start", "configure_optimizers", "on_train_end", "on_fit_end" } do
      assert.are.equal(1, m2.calls[h], h)
    end
    assert.are.equal(3, m2.calls.on_train_epoch_start)
    assert.are.equal(t1.callback_metrics.val_loss, t2.callback_metrics.val_loss)
  end)

  it("advance{batches=n} trains n batches (crossing epochs) and returns done() at the end", function()
    local m, train = setup(1)
    local t = lt.Trainer(opts { max_epochs = 2 })
    local run = t:fit_run(m, train)
    assert.is_false(run:advance { batches = 3 })
    assert.are.equal(3, t.global_step)
    assert.is_false(run:advance { batches = 4 })
    assert.are.equal(7, t.global_step)
    assert.are.equal(1, t.current_epoch)
    assert.is_true(run:advance { batches = 100 })
    assert.are.equal(10, t.global_step)
    assert.is_true(run:advance { batches = 1 }) -- a finished run stays finished
    assert.are.equal(10, t.global_step)
  end)

  it("advance{seconds=s} stops at a batch boundary within s seconds, at least one batch", function()
    local m, train = setup(1)
    local now = require("lutra.core")._io.now -- monotonic, under any Lua
    local ts = m.training_step
    local starts = {}
    function m:training_step(b)
      starts[#starts + 1] = now()
      local t0 = now()
      while now() - t0 < 0.004 do end -- a 4 ms batch (wall time)
      return ts(self, b)
    end
    local t = lt.Trainer(opts { max_epochs = 2 })
    local run = t:fit_run(m, train)
    run:advance { seconds = 0.0001 }
    assert.are.equal(1, t.global_step) -- at least one batch
    for _, s in ipairs { 0.011, 0.02 } do
      starts = {}
      local t0 = now()
      local deadline = t0 + s
      local before = t.global_step
      run:advance { seconds = s }
      local n = t.global_step - before
      assert.are.equal(#starts, n)
      assert.is_true(n >= 1)
      -- every batch after the first started before the deadline (the loops also skip a batch that would,
      -- at the pace of the last ones, end after it: a host's frame budget holds)
      for i = 2, #starts do assert.is_true(starts[i] < deadline, "batch " .. i .. " started after the deadline") end
    end
  end)

  it("advance checks its budget", function()
    local m, train = setup(1)
    local run = lt.Trainer(opts()):fit_run(m, train)
    assert.has_error(function() run:advance { batch = 1 } end,
      "advance: unknown option 'batch' (known options: batches, seconds)")
    assert.has_error(function() run:advance { seconds = 0 } end, "advance: 'seconds' must be a number > 0, got 0")
  end)

  it("fit after some advances finishes the same run", function()
    local m1, train1 = setup(2)
    local t1 = lt.Trainer(opts { max_epochs = 2 })
    t1:fit(m1, train1)
    local m2, train2 = setup(2)
    local t2 = lt.Trainer(opts { max_epochs = 2 })
    t2:fit_run(m2, train2):advance { batches = 4 }
    t2:fit(m2, train2)
    assert.are.equal(10, t2.global_step)
    assert.is_true(bits_equal(weights(m1), weights(m2)))
    assert.are.equal(1, m2.calls.on_fit_start)
  end)

  it("Ctrl-C (lt.interrupt) stops fit at the next batch boundary; on_exception; fit again continues exactly", function()
    local m1, train1, val1 = setup(4)
    lt.Trainer(opts { max_epochs = 2 }):fit(m1, train1, val1)

    local m2, train2, val2 = setup(4)
    local seen = {}
    local cb = {
      on_train_batch_end = function(_, trainer, _, _, _, i)
        if trainer.global_step == 7 and not seen.fired then seen.fired = true; lt.interrupt() end
      end,
      on_exception = function(_, trainer, model, err) seen.err = err end,
    }
    local t2 = lt.Trainer(opts { max_epochs = 2, callbacks = { cb } })
    t2:fit(m2, train2, val2)
    assert.is_true(t2.interrupted)
    assert.are.equal(7, t2.global_step)
    assert.are.equal("interrupted", seen.err)
    assert.is_false(lt.interrupt_pending())
    t2:fit(m2, train2, val2)
    assert.is_false(t2.interrupted)
    assert.are.equal(10, t2.global_step)
    assert.is_true(bits_equal(weights(m1), weights(m2)))
    assert.are.equal(1, m2.calls.on_train_start)
  end)
end)

describe("loops as objects", function()
  it("expose progress for every loop and Lightning's state_dict layout", function()
    local m, train, val = setup(1)
    local t = lt.Trainer(opts { max_epochs = 2 })
    t:fit(m, train, val)
    local fl = t.fit_loop
    assert.are.same({ ready = 2, started = 2, processed = 2, completed = 2 }, fl.progress.current)
    assert.are.equal(10, fl.epoch_loop.progress.total.completed)
    assert.are.equal(5, fl.epoch_loop.progress.current.completed)
    assert.are.equal(10, fl.epoch_loop.batch_loop.optimizer_loop.progress.total.completed)
    assert.are.equal(10, fl.epoch_loop.batch_loop.progress.total.completed)
    assert.are.equal(2, fl.epoch_loop.val_loop.progress.total.completed)
    assert.are.equal(2, fl.epoch_loop.val_loop.epoch_loop.progress.total.completed)
    local sd = fl:state_dict()
    assert.are.same({}, sd.state_dict)
    assert.are.equal(2, sd.epoch_progress.current.completed)
    assert.are.equal(10, sd["epoch_loop.state_dict"]._batches_that_stepped)
    assert.are.equal(10, sd["epoch_loop.batch_progress"].total.completed)
    assert.is_true(sd["epoch_loop.batch_progress"].is_last_batch)
    assert.are.equal(10, sd["epoch_loop.scheduler_progress"].total.completed)
    assert.are.equal(10, sd["epoch_loop.batch_loop.optimizer_loop.optim_progress"].optimizer.step.total.completed)
    assert.are.equal(10, sd["epoch_loop.batch_loop.optimizer_loop.optim_progress"].optimizer.zero_grad.total.completed)
    assert.are.equal(2, sd["epoch_loop.val_loop.dataloader_progress"].total.completed)
    assert.is_table(sd["epoch_loop.val_loop.epoch_loop.batch_progress"])

    local t2 = lt.Trainer(opts { max_epochs = 2 })
    t2.fit_loop:load_state_dict(sd)
    assert.is_true(t2.fit_loop.restarting)
    assert.is_true(t2.fit_loop.epoch_loop.batch_loop.optimizer_loop.restarting)
    assert.are.equal(10, t2.global_step)
    assert.are.equal(2, t2.current_epoch)
    assert.are.same(sd, t2.fit_loop:state_dict())
    t2.fit_loop.restarting = false
    assert.is_false(t2.fit_loop.epoch_loop.restarting)
  end)

  it("a stepwise run shows where each loop stopped", function()
    local m, train = setup(1)
    local t = lt.Trainer(opts { max_epochs = 2 })
    local run = t:fit_run(m, train)
    run:advance { batches = 2 }
    assert.are.equal("advance", t.fit_loop.phase)
    assert.are.equal("running", t.fit_loop.epoch_loop.phase)
    assert.are.equal(2, t.fit_loop.epoch_loop.progress.current.completed)
    run:advance()
    assert.are.equal("idle", t.fit_loop.phase)
  end)

  it("a Lua loop connected in the epoch slot runs the C batch loop it uses", function()
    local m, train = setup(1)
    local MyEpoch = lt.Loop:extend()
    function MyEpoch:reset() self.i = 0; self.next = train:iter() end
    function MyEpoch:done() return self.i >= 2 end
    function MyEpoch:advance()
      local batch = self.next()
      self.batch_loop:run(batch, self.i)
      self.i = self.i + 1
    end
    local t = lt.Trainer(opts { max_epochs = 3 })
    local loop = MyEpoch()
    loop:connect { batch_loop = t.fit_loop.epoch_loop.batch_loop } -- lutra's C batch loop as its child
    t.fit_loop:connect { epoch_loop = loop }
    assert.are.equal(t, loop.trainer)
    t:fit(m, train)
    assert.are.equal(6, t.global_step)
    assert.are.equal(3, m.calls.on_train_epoch_start)
    assert.are.equal(3, t.current_epoch)
    local ok, err = pcall(function() t.fit_loop:connect { batch_loop = loop } end)
    assert.is_false(ok)
    assert.truthy(err:find("connect: fit_loop has no child loop 'batch_loop' (children: epoch_loop)", 1, true), err)
  end)

  it("lt.Loop's template runs skip, reset, on_run_start, advance, on_advance_end, on_run_end; StopIteration", function()
    local calls = {}
    local L = lt.Loop:extend()
    function L:reset() calls[#calls + 1] = "reset"; self.n = 0 end
    function L:on_run_start() calls[#calls + 1] = "on_run_start" end
    function L:done() return self.n >= 5 end
    function L:on_advance_start() calls[#calls + 1] = "start" .. self.n end
    function L:advance()
      if self.n == 2 then return lt.Loop.StopIteration end
      self.n = self.n + 1
    end
    function L:on_advance_end() calls[#calls + 1] = "end" .. self.n end
    function L:on_run_end() calls[#calls + 1] = "on_run_end"; return "out" end
    assert.are.equal("out", L():run())
    assert.are.same({ "reset", "on_run_start", "start0", "end1", "start1", "end2", "start2", "on_run_end" }, calls)
  end)
end)
