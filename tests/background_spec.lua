-- tests/background_spec.lua — lt.background (docs/reference/background.md): a fit in a Lua state and thread of
-- its own. A job stopped and joined mid-fit (on_exception and teardown once, the checkpoint readable),
-- load_into equal to the job's weights at the step it reports and allocating nothing, never a torn copy,
-- mismatch messages, errors in setup and training_step raised by join with the job's traceback, messages to
-- the job, the host's collector untouched, and no thread left behind.
local lt = require "lutra"
local core = require "lutra.core"

local function tasks()
  local p = io.popen("ls /proc/" .. (io.open("/proc/self/stat"):read("*l"):match("^(%d+)")) .. "/task | wc -l")
  local n = tonumber(p:read("*a"))
  p:close()
  return n
end

-- The job's setup. It is carried into the job's state, so it uses only its argument and require.
-- o: hidden (the first layer's width), epochs, fail ("setup" | a step at which training_step raises),
-- record (hooks and weights sent to the host), dir (a ModelCheckpoint there), echo (answers job:send).
local function setup(o)
  local lt = require "lutra" -- luacheck: ignore 431 (the job's own lt: its state's, not this one)
  local parent = lt.thread.parent
  lt.manual_seed(7)
  if o.fail == "setup" then error("no data for this setup") end
  local model = { l1 = lt.nn.Linear(4, o.hidden or 3), l2 = lt.nn.Linear(o.hidden or 3, 1) }
  local steps = 0
  function model:training_step(b)
    steps = steps + 1
    if steps == o.fail then error("bad batch " .. steps) end
    return lt.F.mse_loss(self.l2(lt.F.relu(self.l1(b[1]))), b[2])
  end
  function model:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), { lr = 0.05 }) end
  function model:on_train_batch_end(_, _, _)
    if o.record then -- the weights after this step's optimizer step, copied (a sent tensor is shared)
      parent:send({ step = self.trainer.global_step, w = self.l1.weight:clone(), b = self.l2.bias:clone() })
    end
    if o.echo then
      local v = parent:receive(0)
      if v ~= nil then parent:send("echo " .. tostring(v)) end
    end
  end
  local callbacks = {}
  local Recorder = lt.callbacks.Callback:extend("Recorder")
  function Recorder.on_exception(_, _, _, err) parent:send("on_exception " .. tostring(err)) end
  function Recorder.teardown(_, _, _, stage) parent:send("teardown " .. tostring(stage)) end
  callbacks[1] = Recorder {}
  if o.dir then
    callbacks[2] = lt.callbacks.ModelCheckpoint { dirpath = o.dir, every_n_train_steps = 1, save_last = true }
  end
  local trainer = lt.Trainer { max_epochs = o.epochs or 1000, logger = false, enable_checkpointing = o.dir ~= nil,
    enable_model_summary = false, enable_progress_bar = false, callbacks = callbacks }
  local ds = lt.data.TensorDataset(lt.randn(256, 4), lt.randn(256, 1))
  return model, trainer, lt.data.DataLoader(ds, { batch_size = 8 })
end

local function same(a, b) return lt.allclose(a, b, 0, 0) end -- bitwise, for finite values

local function host_model(hidden)
  return { l1 = lt.nn.Linear(4, hidden or 3), l2 = lt.nn.Linear(hidden or 3, 1) }
end

-- waits until the job's global_step reaches n (or it ended)
local function wait_steps(job, n)
  for _ = 1, 2000 do
    local st = job:status()
    if st.global_step >= n or (st.state ~= "running" and st.state ~= "starting") then return st end
    os.execute("sleep 0.01")
  end
  error("the job made no progress")
end

-- the values the job sent, until it closed
local function drain(job)
  local got = {}
  while true do
    local v, why = job:receive(5)
    if why then break end
    got[#got + 1] = v
  end
  return got
end

describe("lt.background", function()
  it("stops mid-fit at a batch boundary: status 'stopped', on_exception and teardown once, checkpoint readable",
    function()
      local dir = os.tmpname()
      os.remove(dir)
      local job = lt.background(setup, { dir = dir })
      wait_steps(job, 20)
      job:stop()
      local st = job:join()
      assert.are.equal("stopped", st.state)
      assert.is_true(st.global_step >= 20 and st.global_step < 32 * 1000, "global_step " .. st.global_step)
      assert.is_true(st.current_epoch < 1000)
      local hooks = drain(job)
      local exceptions, teardowns = 0, 0
      for _, h in ipairs(hooks) do
        if h:match("^on_exception") then exceptions = exceptions + 1 end
        if h == "teardown fit" then teardowns = teardowns + 1 end
      end
      assert.are.equal(1, exceptions, table.concat(hooks, "; "))
      assert.are.equal(1, teardowns, table.concat(hooks, "; "))
      local ck = require("lutra.checkpoint").read(dir .. "/last.ckpt")
      assert.is_true(ck.global_step >= 20, "the last checkpoint's step " .. tostring(ck.global_step))
      -- and load_into after the end gives the final weights
      local m = host_model()
      assert.are.equal(st.global_step, job:load_into(m))
      os.execute("rm -rf '" .. dir .. "'")
    end)

  it("runs to the end: status 'done' with the fit's counters", function()
    local job = lt.background(setup, { epochs = 2 })
    local st = job:join()
    assert.are.equal("done", st.state)
    assert.are.equal(64, st.global_step)
    assert.are.equal(2, st.current_epoch)
    local teardowns = 0
    for _, h in ipairs(drain(job)) do
      assert.is_nil(h:match("^on_exception"), h)
      if h == "teardown fit" then teardowns = teardowns + 1 end
    end
    assert.are.equal(1, teardowns)
  end)

  it("load_into copies the job's weights of the step it returns, into the model's own tensors", function()
    -- epochs enough to outlast five pulls on a loaded machine (20 finished before the first pull was served once,
    -- in CI's lua5.4 lane); the job is stopped after the checks
    local job = lt.background(setup, { record = true, epochs = 1000 })
    local m = host_model()
    local w, b = m.l1.weight, m.l2.bias
    local checked = 0
    local sent = {}
    -- the job's messages are step records and, once it ends, its Recorder's "teardown fit" string
    local function record(v) if type(v) == "table" then sent[v.step] = v end end
    while checked < 5 do
      local step = job:load_into(m)
      for _, v in ipairs((function()
        local got = {}
        while true do
          local x = job:receive(0)
          if x == nil then return got end
          got[#got + 1] = x
        end
      end)()) do record(v) end
      if step and step > 0 then
        -- the record of that step may still be on its way
        for _ = 1, 500 do
          if sent[step] then break end
          record(job:receive(1))
        end
        assert.is_truthy(sent[step], "no record of step " .. step)
        assert.is_true(same(sent[step].w, m.l1.weight), "weights of step " .. step)
        assert.is_true(same(sent[step].b, m.l2.bias), "bias of step " .. step)
        checked = checked + 1
      end
      local st = job:status()
      if st.state == "done" then break end
    end
    assert.are.equal(w, m.l1.weight) -- the same tensors, written in place
    assert.are.equal(b, m.l2.bias)
    job:stop()
    job:join()
    assert.is_true(checked >= 1)
  end)

  it("load_into allocates nothing after the first call for a model", function()
    local job = lt.background(setup, {})
    local m = host_model()
    wait_steps(job, 1)
    assert.is_truthy(job:load_into(m))
    -- stopped first: lutra's counters are the process's, and a running job allocates
    job:stop()
    job:join()
    local t = {}
    job:status(t)
    -- up to eight rounds: LuaJIT's compiler allocates its traces in the Lua heap while the loop warms up (which
    -- traces start, and when, moves with ASLR: hot counters share slots hashed by bytecode address; 572 bytes in
    -- a third round was seen once under ASan), and a per-call allocation fails every round
    local grew
    for _ = 1, 8 do
      local s0 = lt.memory_stats()
      local kb = collectgarbage("count")
      for _ = 1, 100 do
        job:load_into(m)
        job:status(t)
      end
      local kb2 = collectgarbage("count")
      local s1 = lt.memory_stats()
      grew = { lua_bytes = (kb2 - kb) * 1024, allocated = s1.total_allocated - s0.total_allocated,
        system_allocs = s1.system_allocs - s0.system_allocs }
      if grew.lua_bytes == 0 and grew.allocated == 0 and grew.system_allocs == 0 then break end
    end
    assert.are.same({ lua_bytes = 0, allocated = 0, system_allocs = 0 }, grew)
    -- a parameter replaced under its key is matched again
    m.l1.weight = lt.zeros(3, 4)
    assert.is_truthy(job:load_into(m))
    assert.is_false(same(m.l1.weight, lt.zeros(3, 4)))
  end)

  it("never copies a torn snapshot", function()
    -- every element of p equals the step count when the job publishes: a torn copy would mix two values
    local job = lt.background(function()
      local lt = require "lutra" -- luacheck: ignore 431
      local model = { p = lt.zeros(200000):requires_grad(true) }
      local n = 0
      function model:training_step() return (self.p * 0):sum() end
      function model:configure_optimizers() return lt.optim.SGD({ self.p }, { lr = 0 }) end
      function model:on_train_batch_start()
        n = n + 1
        lt.no_grad(function() self.p:fill_(n) end)
      end
      local trainer = lt.Trainer { max_epochs = 100000, logger = false, enable_checkpointing = false,
        enable_model_summary = false, enable_progress_bar = false }
      return model, trainer, lt.data.DataLoader(lt.data.TensorDataset(lt.zeros(64, 1)), { batch_size = 1 })
    end)
    local m = { p = lt.zeros(200000):requires_grad(true) } -- (a parameter: a plain tensor is no state)
    wait_steps(job, 1)
    local pulls, last = 0, -1
    for _ = 1, 3000 do
      local step = job:load_into(m)
      if step and step > 0 then
        local lo, hi = m.p:min():item(), m.p:max():item()
        assert.are.equal(lo, hi, "a torn copy at step " .. step)
        assert.are.equal(step, lo)
        assert.is_true(step >= last)
        last = step
        pulls = pulls + 1
        if pulls >= 200 then break end
      end
    end
    job:stop()
    assert.are.equal("stopped", job:join().state)
    assert.is_true(pulls >= 50, "pulls " .. pulls)
  end)

  it("says which key differs: shape, dtype, missing and extra keys", function()
    local job = lt.background(setup, { hidden = 5 })
    wait_steps(job, 1)
    local ok, err = pcall(job.load_into, job, host_model(3))
    assert.is_false(ok)
    assert.matches("load_into: key 'l1.weight': the job has [5 x 4] float32, the model has [3 x 4] float32", err, 1,
      true)
    local m = host_model(5)
    m.l3 = lt.nn.Linear(1, 1)
    err = select(2, pcall(job.load_into, job, m))
    assert.matches("load_into: key 'l3.weight': the model has [1 x 1] float32, the job has no such key", err, 1, true)
    m = host_model(5)
    m.l2 = nil
    err = select(2, pcall(job.load_into, job, m))
    assert.matches("load_into: key 'l2.weight': the job has [1 x 5] float32, the model has no such key", err, 1, true)
    m = host_model(5)
    m.l2.bias = lt.zeros(1):long()
    err = select(2, pcall(job.load_into, job, m))
    assert.matches("load_into: key 'l2.bias': the job has [1] float32, the model has [1] int64", err, 1, true)
    assert.is_truthy(job:load_into(host_model(5)))
    job:stop()
    job:join()
  end)

  it("raises an error of setup in join, with the job's traceback; status 'error'", function()
    local job = lt.background(setup, { fail = "setup" })
    local ok, err = pcall(job.join, job)
    assert.is_false(ok)
    assert.matches("lt.background: the job failed: .*no data for this setup", err)
    assert.matches("job traceback:", err, 1, true)
    assert.matches("background_spec.lua:%d+", err)
    local st = job:status()
    assert.are.equal("error", st.state)
    assert.matches("no data for this setup", st.error, 1, true)
  end)

  it("raises an error of training_step in join, with the job's traceback", function()
    local job = lt.background(setup, { fail = 5 })
    local ok, err = pcall(job.join, job)
    assert.is_false(ok)
    assert.matches("bad batch 5", err, 1, true)
    assert.matches("training_step", err, 1, true)
    assert.matches("background_spec.lua:%d+", err)
    assert.are.equal(4, job:status().global_step)
  end)

  it("refuses what setup returns when it is not model, trainer, loader", function()
    local job = lt.background(function() return {}, 42 end)
    local ok, err = pcall(job.join, job)
    assert.is_false(ok)
    assert.matches("setup must return model, trainer, train_loader[, val_loader], got table, number, nil", err, 1,
      true)
    ok, err = pcall(lt.background, 42)
    assert.is_false(ok)
    assert.matches("lt.background: argument #1 must be a function (setup), got number", err, 1, true)
  end)

  it("carries job:send(v) to the model, which reads it with lt.thread.parent:receive(0)", function()
    local job = lt.background(setup, { echo = true })
    wait_steps(job, 1)
    job:send("hello")
    local v = job:receive(10)
    assert.are.equal("echo hello", v)
    job:stop()
    job:join()
  end)

  it("leaves the host's collector alone while the host pulls weights", function()
    local job = lt.background(setup, {})
    local m = host_model()
    wait_steps(job, 1)
    job:load_into(m)
    core._gc_stats(true)
    for _ = 1, 200 do
      job:load_into(m)
      os.execute("sleep 0.001")
    end
    local st = core._gc_stats(true)
    assert.are.equal(0, st.steps)
    assert.are.equal(0, st.cycles)
    job:stop()
    job:join()
  end)

  it("refuses lt.distributed inside the job's state", function()
    local job = lt.background(function()
      local lt = require "lutra" -- luacheck: ignore 431
      lt.distributed.init()
    end)
    local ok, err = pcall(job.join, job)
    assert.is_false(ok)
    assert.matches("lt.distributed: not available in a worker state", err, 1, true)
  end)

  it("leaves no thread when its handle is collected or closed", function()
    collectgarbage()
    collectgarbage()
    local before = tasks()
    do
      local job = lt.background(setup, {})
      wait_steps(job, 1)
      assert.is_true(tasks() > before)
    end
    collectgarbage()
    collectgarbage()
    assert.are.equal(before, tasks())
    local job = lt.background(setup, {})
    wait_steps(job, 1)
    job:close()
    assert.are.equal(before, tasks())
  end)
end)
