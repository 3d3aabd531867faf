-- tests/profiler_spec.lua — Trainer{profiler=...}: the rows of exclusive time add up to the fit's wall time,
-- every phase and every hook of every callback and of the model has its row, counts match the loops, the
-- per-advance table of a stepwise run, the advanced profiler's Lua samples and per-op rows, and the
-- option's errors. (What profiling off costs is measured in bench/loop_overhead.lua, not here.)
local lt = require "lutra"
local quiet = require "helpers.quiet"

local was_interactive = lt.is_interactive()
setup(function() lt.set_interactive(false) end) -- (the report would go to stderr)
teardown(function() lt.set_interactive(was_interactive) end)

local N, BS = 128, 4 -- 32 training batches an epoch

local function data()
  lt.manual_seed(3)
  local x = lt.randn(N, 16)
  local y = x:matmul(lt.randn(16, 1))
  local ds = lt.data.TensorDataset(x, y)
  return lt.data.DataLoader(ds, { batch_size = BS }), lt.data.DataLoader(ds, { batch_size = 32 })
end

local function model()
  local m = { l1 = lt.nn.Linear(16, 32), l2 = lt.nn.Linear(32, 1) }
  function m:forward(x) return self.l2(self.l1(x):relu()) end
  function m:training_step(b)
    local loss = lt.F.mse_loss(self:forward(b[1]), b[2])
    self:log("loss", loss)
    return loss
  end
  function m:validation_step(b) self:log("val_loss", lt.F.mse_loss(self:forward(b[1]), b[2])) end
  function m:on_train_epoch_start() end
  function m:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), { lr = 0.01 }) end
  return m
end

-- Fits (a fresh trainer each time, from make()) until the profiler's rows add up to the fit's wall time
-- within 5% plus 1 ms (the fit's fixed work outside any row: its setup before the first row and its end after
-- the last), at most 3 times; returns the closest fit's trainer and make()'s third result. A
-- profiler that loses time misses in all three; one fit preempted by another process on a loaded CI machine
-- (2.3 ms of 27.6 once, under PUC 5.1) does not fail the spec.
local function fit_timed(make)
  local best
  for _ = 1, 3 do
    local t, fit, extra = make()
    collectgarbage() -- (a cycle of the test's own garbage is not the fit's time)
    local t0 = lt._io.now()
    fit(t)
    local wall = lt._io.now() - t0
    local sum = 0
    for _, r in ipairs(t.profiler:summary()) do sum = sum + r.total end
    local gap = math.abs(sum - wall) - (0.05 * wall + 0.001)
    if not best or gap < best.gap then best = { t = t, extra = extra, sum = sum, wall = wall, gap = gap } end
    if gap <= 0 then break end
  end
  assert.is_true(best.gap <= 0, ("rows sum to %.6f s, fit took %.6f s"):format(best.sum, best.wall))
  return best.t, best.extra
end

local Printer = lt.callbacks.Callback:extend("Printer")
function Printer:on_train_batch_end() self.n = (self.n or 0) + 1 end
function Printer:on_validation_epoch_end() end

local function by_action(rows)
  local t = {}
  for _, r in ipairs(rows) do t[r.action] = r end
  return t
end

describe("Trainer{profiler='simple'}", function()
  it("gives rows whose exclusive times add up to the fit's wall time (within 5%), one per phase and hook", function()
    local t, cb = fit_timed(function()
      local train, val = data()
      local cb = Printer {}
      return lt.Trainer(quiet { max_epochs = 3, profiler = "simple", callbacks = { cb } }),
        function(tr) tr:fit(model(), train, val) end, cb
    end)
    local rows = t.profiler:summary()
    for _, r in ipairs(rows) do
      assert.is_true(r.total >= 0 and r.count >= 0, r.action)
      assert.is_true(math.abs(r.mean - (r.count > 0 and r.total / r.count or 0)) < 1e-12, r.action)
    end
    local a = by_action(rows)
    local batches, val_batches = 3 * N / BS, 3 * (N / 32) + 2 -- (+ the sanity check's 2)
    assert.are.equal(batches, a["[Strategy].training_step"].count)
    assert.are.equal(batches, a["[Strategy].backward"].count)
    assert.are.equal(batches, a["[Strategy].optimizer_step"].count)
    assert.are.equal(batches, a["[Strategy].optimizer_zero_grad"].count)
    assert.are.equal(batches, a["[TrainingEpochLoop].train_dataloader_next"].count)
    assert.are.equal(val_batches, a["[Strategy].validation_step"].count)
    assert.are.equal(batches, a["[Callback]Printer.on_train_batch_end"].count)
    assert.are.equal(3 + 1, a["[Callback]Printer.on_validation_epoch_end"].count) -- (+ the sanity check's)
    assert.are.equal(3, a["[LightningModule]LightningModule.on_train_epoch_start"].count)
    assert.are.equal(1, a["[LightningModule]LightningModule.configure_optimizers"].count)
    assert.is_truthy(a["[Loop] other"])
    assert.are.equal(batches, cb.n)
  end)

  it("prints the table (action, mean, calls, total, share) through describe", function()
    local train = data()
    local t = lt.Trainer(quiet { max_epochs = 1, profiler = "simple" })
    t:fit(model(), train)
    local text = t.profiler:describe()
    assert.is_truthy(text:find("FIT Profiler Report", 1, true))
    assert.is_truthy(text:find("|  Action", 1, true))
    assert.is_truthy(text:find("Percentage %", 1, true))
    assert.is_truthy(text:find("[Strategy].training_step", 1, true))
    assert.is_truthy(text:find("[Strategy].backward", 1, true))
  end)

  it("writes the report to dirpath/fit-<filename>.txt with lt.profilers.SimpleProfiler{filename=}", function()
    local dir = os.tmpname()
    os.remove(dir)
    local p = lt.profilers.SimpleProfiler { dirpath = dir, filename = "perf" }
    local t = lt.Trainer(quiet { max_epochs = 1, profiler = p })
    assert.are.equal(p, t.profiler)
    t:fit(model(), (data()))
    local f = assert(io.open(dir .. "/fit-perf.txt"))
    local text = f:read("*a")
    f:close()
    os.execute("rm -rf '" .. dir .. "'")
    assert.is_truthy(text:find("[Strategy].optimizer_step", 1, true))
  end)

  it("gives a stepwise run the table of its last advance", function()
    local train = data()
    local t = lt.Trainer(quiet { max_epochs = 1, profiler = "simple", num_sanity_val_steps = 0 })
    local run = t:fit_run(model(), train)
    run:advance { batches = 5 }
    local first = by_action(t.profiler:last_advance())
    assert.are.equal(5, first["[Strategy].training_step"].count)
    run:advance { batches = 3 }
    local second = by_action(t.profiler:last_advance())
    assert.are.equal(3, second["[Strategy].training_step"].count)
    assert.are.equal(8, by_action(t.profiler:summary())["[Strategy].training_step"].count)
  end)

  it("times trainer:validate and test too (rows add up over the trainer's runs)", function()
    local train, val = data()
    local t = lt.Trainer(quiet { max_epochs = 1, profiler = "simple", num_sanity_val_steps = 0 })
    local m = model()
    function m:test_step(b) self:log("t", lt.F.mse_loss(self:forward(b[1]), b[2])) end
    t:fit(m, train)
    t:validate(m, val)
    t:test(m, val)
    local a = by_action(t.profiler:summary())
    assert.are.equal(N / 32, a["[Strategy].validation_step"].count)
    assert.are.equal(N / 32, a["[Strategy].test_step"].count)
    assert.are.equal(N / 32, a["[EvaluationEpochLoop].test_dataloader_next"].count)
    assert.are.equal(N / BS, a["[Strategy].training_step"].count)
  end)

  it("gives a datamodule's hooks their rows", function()
    local Data = lt.DataModule:extend("Data")
    function Data:setup() end
    function Data:train_dataloader() return (data()) end
    local t = lt.Trainer(quiet { max_epochs = 1, profiler = "simple" })
    t:fit(model(), { datamodule = Data() })
    local a = by_action(t.profiler:summary())
    assert.are.equal(1, a["[LightningDataModule]Data.setup"].count)
    assert.are.equal(1, a["[LightningDataModule]Data.train_dataloader"].count)
  end)

  it("keeps no rows with profiling off (the default PassThroughProfiler)", function()
    local t = lt.Trainer(quiet { max_epochs = 1 })
    t:fit(model(), (data()))
    assert.are.same({}, t.profiler:summary())
    assert.are.equal("", t.profiler:describe())
  end)

  it("rejects an unknown profiler option value and unknown profiler options", function()
    assert.has_error(function() lt.Trainer { profiler = "fancy" } end, "Trainer: option 'profiler' must be " ..
      '"simple", "advanced" or a profiler (lt.profilers.SimpleProfiler{...}), got "fancy" (string)')
    assert.has_error(function() lt.profilers.SimpleProfiler { file = "x" } end,
      "SimpleProfiler: unknown option 'file' (known options: dirpath, filename)")
    assert.has_error(function() lt.profilers.AdvancedProfiler { interval = 0 } end,
      "AdvancedProfiler: option 'interval' must be >= 1 (milliseconds), got 0")
  end)
end)

describe("Trainer{profiler='advanced'}", function()
  -- a small MLP of plain ops: matmul, add, relu forward; their backward kernels
  local function mlp()
    lt.manual_seed(5)
    local m = { w1 = lt.param(lt.randn(16, 8)), b1 = lt.param(lt.zeros(8)), w2 = lt.param(lt.randn(8, 1)),
      b2 = lt.param(lt.zeros(1)) }
    function m:training_step(b)
      local h = (b[1]:matmul(self.w1) + self.b1):relu()
      return lt.F.mse_loss(h:matmul(self.w2) + self.b2, b[2])
    end
    function m:configure_optimizers() return lt.optim.SGD({ self.w1, self.b1, self.w2, self.b2 }, { lr = 0.01 }) end
    return m
  end

  it("gives each forward op and backward kernel its row, exclusive: the rows still add up to the wall time", function()
    local epochs = 40 -- (~20 ms, ~40 under PUC Lua: the set-up outside the timed advances stays well under 5%)
    local t = fit_timed(function()
      local train = data()
      return lt.Trainer(quiet { max_epochs = epochs, profiler = "advanced" }), function(tr) tr:fit(mlp(), train) end
    end)
    local p = t.profiler
    local rows = p:summary()
    local a, batches = by_action(rows), epochs * N / BS
    assert.are.equal(2 * batches, a["[op] matmul"].count)
    assert.are.equal(2 * batches, a["[op] add"].count) -- (x + b, through the metamethod)
    assert.are.equal(batches, a["[op] relu"].count)
    assert.are.equal(batches, a["[op] mse_loss"].count)
    for _, name in ipairs { "[op] matmul", "[op] add", "[op] relu" } do
      assert.is_true(a[name].total > 0 and math.abs(a[name].mean - a[name].total / a[name].count) < 1e-12, name)
    end
    -- the backward kernels: one per node of each batch's graph (matmul, add, relu, matmul, add, mse_loss)
    local n = 0
    for _, k in ipairs(p:kernels()) do
      assert.are.equal(k.count, a["[backward] " .. k.op].count)
      n = n + k.count
    end
    assert.are.equal(6 * batches, n)
    local ops = {}
    for _, o in ipairs(p:ops()) do ops[o.op] = o end
    assert.are.equal(2 * batches, ops.matmul.count)
    assert.is_truthy(p:describe():find("[op] relu", 1, true))
    -- off again after the fit: an op outside a profiled fit adds nothing
    local before = a["[op] matmul"].count
    local _ = lt.randn(2, 2):matmul(lt.randn(2, 2))
    assert.are.equal(before, by_action(p:summary())["[op] matmul"].count)
  end)

  it("times no op with the simple profiler", function()
    local t = lt.Trainer(quiet { max_epochs = 1, profiler = "simple" })
    t:fit(mlp(), (data()))
    for _, r in ipairs(t.profiler:summary()) do assert.is_falsy(r.action:find("^%[op%]"), r.action) end
  end)

  it("finds the Lua function that takes the samples (jit.profile, in a fresh lutra process)", function()
    if not rawget(_G, "jit") then return end -- (PUC Lua has no sampling profiler: its report says so)
    -- 200 batches each running ~1.5 ms of Lua in burn: the kernel's profiling timer ticks every ~4 ms of the
    -- process's CPU time, so ~75 samples. The sampler must keep delivering through the whole fit: when the
    -- loops ran the Lua API under DAZ, LuaJIT filed jit.profile's registry entries under key 0 and the samples
    -- stopped after the first few (or the process crashed once the sampler's thread was collected).
    local out = require("helpers.child").run [[
      local lt = require "lutra"
      lt.set_interactive(false)
      local function burn()
        local t0, x = os.clock(), 0
        while os.clock() - t0 < 0.0015 do for i = 1, 1000 do x = x + i % 7 end end
        return x
      end
      local ds = lt.data.TensorDataset(lt.randn(200, 2), lt.randn(200, 1))
      local m = { lin = lt.nn.Linear(2, 1) }
      function m:training_step(b) burn() return lt.F.mse_loss(self.lin(b[1]), b[2]) end
      function m:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), { lr = 0.01 }) end
      local t = lt.Trainer { max_epochs = 1, profiler = "advanced", logger = false, enable_checkpointing = false,
        enable_model_summary = false, enable_progress_bar = false }
      t:fit(m, lt.data.DataLoader(ds, { batch_size = 1 }))
      local fns = t.profiler:lua_functions()
      local burn, total = 0, 0
      for _, f in ipairs(fns) do
        total = total + f.samples
        if f.name:find(":burn", 1, true) then burn = burn + f.samples end
      end
      print("functions", #fns, "burn", burn, "total", total)
    ]]
    -- the busy function is found by name, with samples (LuaJIT 2.1.0-beta3 sometimes charges a trace's
    -- samples to another function it passed through, so burn is not always the first row)
    local n, burn, total = out:match("functions%s+(%d+)%s+burn%s+(%d+)%s+total%s+(%d+)")
    assert.is_truthy(n, out)
    assert.is_true(tonumber(burn) > 0, out)
    assert.is_true(tonumber(total) >= 20, out) -- samples all through the fit, not only its first milliseconds
  end)

  it("leaves no SIGPROF that could end the process after the fit (a late sample is ignored)", function()
    if not rawget(_G, "jit") then return end -- (jit.profile is LuaJIT's)
    -- The sampler's timer is process-wide and lutra's threads block SIGPROF, so the last signal can reach the
    -- main thread after jit.profile.stop put back the handler it found: under the default action it ended the
    -- process ("Profiling timer expired", status 155; seen in the sanitizer suite). Raised by hand here.
    local out = require("helpers.child").run [[
      local lt = require "lutra"
      local ffi = require "ffi"
      ffi.cdef "int raise(int sig);"
      lt.set_interactive(false)
      local ds = lt.data.TensorDataset(lt.randn(8, 2), lt.randn(8, 1))
      local m = { lin = lt.nn.Linear(2, 1) }
      function m:training_step(b) return lt.F.mse_loss(self.lin(b[1]), b[2]) end
      function m:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), { lr = 0.01 }) end
      local t = lt.Trainer { max_epochs = 1, profiler = "advanced", logger = false, enable_checkpointing = false,
        enable_model_summary = false, enable_progress_bar = false }
      t:fit(m, lt.data.DataLoader(ds, { batch_size = 2 }))
      ffi.C.raise(27) -- SIGPROF on Linux
      print("still running")
    ]]
    assert.matches("still running", out, 1, true)
  end)
end)
