-- tests/trainer_debug_spec.lua — Trainer{detect_anomaly=true} names the op that made a NaN/inf (forward and
-- backward), track_grad_norm logs Lightning 1.6's names with the values of a hand computation, max_time stops
-- fit at a batch boundary with a state that checkpoints and resumes, DeviceStatsMonitor logs lutra's stats.
local lt = require "lutra"
local quiet = require "helpers.quiet"

local function loader(n, bs)
  lt.manual_seed(1)
  local x, y = lt.randn(n or 8, 3), lt.randn(n or 8, 1)
  return lt.data.DataLoader(lt.data.TensorDataset(x, y), { batch_size = bs or 4 })
end

local function model(step)
  local m = { lin = lt.nn.Linear(3, 1) }
  m.training_step = step or function(self, b) return lt.F.mse_loss(self.lin(b[1]), b[2]) end
  function m:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), { lr = 0.1 }) end
  return m
end

local function fit_error(opts, m)
  local t = lt.Trainer(quiet(opts))
  local ok, err = pcall(t.fit, t, m, loader())
  assert.is_false(ok)
  return tostring(err)
end

describe("Trainer{detect_anomaly=true}", function()
  it("names the forward op whose output has the first NaN", function()
    local m = model(function(self, b)
      local h = self.lin(b[1]) - 1e3 -- negative: log gives NaN
      return h:log():mean()
    end)
    local err = fit_error({ max_epochs = 1, detect_anomaly = true }, m)
    assert.is_truthy(err:find("^training_step: "), err)
    assert.is_truthy(err:find("detect_anomaly: the forward of 'log' produced nan in its output [4 x 1]", 1, true), err)
  end)

  it("names the backward kernel whose gradient has the first inf", function()
    local m = model(function(self, b)
      local h = self.lin(b[1]) * 0 -- sqrt at 0: a finite forward, an infinite gradient
      return h:sqrt():sum()
    end)
    local err = fit_error({ max_epochs = 1, detect_anomaly = true }, m)
    assert.is_truthy(err:find("detect_anomaly: the backward of 'sqrt' produced inf in the gradient of its input 1 [4 x 1]",
      1, true), err)
  end)

  it("is off by default and after the run (the same NaN trains on, the ops' watch is off again)", function()
    local m = model(function(self, b) return (self.lin(b[1]) - 1e3):log():mean() end)
    local t = lt.Trainer(quiet { max_epochs = 1 })
    t:fit(m, loader())
    assert.are.equal(2, t.global_step)
    local t2 = lt.Trainer(quiet { max_epochs = 1, detect_anomaly = true })
    pcall(t2.fit, t2, model(function(self, b) return (self.lin(b[1]) - 1e3):log():mean() end), loader())
    assert.is_false(require("lutra.core")._detect_anomaly())
    local x = lt.param(lt.tensor({ -1 }))
    assert.is_true(x:log():item() ~= x:log():item()) -- NaN outside a run: no error
  end)

  it("rejects a value that is not a boolean", function()
    assert.has_error(function() lt.Trainer { detect_anomaly = 1 } end,
      "Trainer: option 'detect_anomaly' must be a boolean, got 1 (number)")
  end)
end)

describe("Trainer{track_grad_norm=p}", function()
  local function logged(p)
    local rows = {}
    local lg = { log_metrics = function(_, m, step) rows[#rows + 1] = { m = m, step = step } end }
    local grads = {}
    local m = model()
    function m:on_before_optimizer_step()
      grads[#grads + 1] = { w = self.lin.weight.grad:clone(), b = self.lin.bias.grad:clone() }
    end
    local t = lt.Trainer(quiet { max_epochs = 1, track_grad_norm = p, logger = lg, log_every_n_steps = 1 })
    t:fit(m, loader())
    return rows, grads, t
  end

  local function round4(v) return math.floor(v * 1e4 + 0.5) / 1e4 end

  it("logs grad_2.0_norm_<param> and grad_2.0_norm_total equal to a hand computation", function()
    local rows, grads = logged(2)
    assert.are.equal(2, #grads)
    for i = 1, 2 do
      local w, b = grads[i].w, grads[i].b
      local nw, nb = 0, math.abs(b[1]:item())
      for j = 1, 3 do nw = nw + w[1][j]:item() ^ 2 end
      nw = math.sqrt(nw)
      local m = rows[i].m
      assert.are.equal(round4(nw), m["grad_2.0_norm_lin.weight_step"])
      assert.are.equal(round4(nb), m["grad_2.0_norm_lin.bias_step"])
      assert.is_true(math.abs(round4(math.sqrt(nw ^ 2 + nb ^ 2)) - m["grad_2.0_norm_total_step"]) < 1e-12)
    end
  end)

  it("names p as Python prints a float (1 -> 1.0, inf -> inf) and takes the max for inf", function()
    local rows, grads = logged("inf")
    local w, b = grads[1].w, grads[1].b
    local mx = math.abs(b[1]:item())
    for j = 1, 3 do mx = math.max(mx, math.abs(w[1][j]:item())) end
    assert.are.equal(round4(mx), rows[1].m["grad_inf_norm_total_step"])
    local rows1 = logged(1)
    assert.is_truthy(rows1[1].m["grad_1.0_norm_total_step"])
    assert.has_error(function() lt.Trainer { track_grad_norm = 0 } end,
      'Trainer: option \'track_grad_norm\' must be -1 (off), a number p > 0, math.huge or "inf", got 0 (number)')
  end)
end)

describe("Trainer{max_time=...}", function()
  it("stops fit at a batch boundary once the time is up, in a state that saves and resumes", function()
    local m = model()
    local t = lt.Trainer(quiet { max_epochs = 5, max_time = { seconds = 0 } })
    t:fit(m, loader(16))
    assert.are.equal(1, t.global_step) -- the first batch's end sees the time is up
    assert.is_true(t.should_stop)
    local path = os.tmpname()
    t:save_checkpoint(path)
    local t2 = lt.Trainer(quiet { max_epochs = 2 })
    t2:fit(model(), loader(16), { ckpt_path = path })
    os.remove(path)
    assert.are.equal(1 + 4, t2.global_step) -- the stopped epoch counts as done (Lightning's should_stop), then one more
  end)

  it('accepts "DD:HH:MM:SS", a table and seconds; rejects others, naming the option', function()
    for _, v in ipairs { "00:00:01:00", { minutes = 1 }, 60 } do
      local t = lt.Trainer(quiet { max_time = v })
      local timer
      for _, cb in ipairs(t.callbacks) do if getmetatable(cb) == lt.callbacks.Timer then timer = cb end end
      assert.are.equal(60, timer:time_remaining())
    end
    assert.has_error(function() lt.Trainer { max_time = "1 hour" } end, "Trainer: option 'max_time' is not a duration " ..
      '(option \'duration\' must be a "DD:HH:MM:SS" string, got "1 hour"), got "1 hour" (string)')
    assert.has_error(function() lt.Trainer { max_time = -1 } end, "Trainer: option 'max_time' must be a " ..
      '"DD:HH:MM:SS" string, a table {days=, hours=, minutes=, seconds=} or seconds >= 0, got -1 (number)')
  end)
end)

describe("lt.callbacks.DeviceStatsMonitor", function()
  it("logs lutra's memory and thread stats at batch start, batch end and epoch end", function()
    local rows = {}
    local lg = { log_metrics = function(_, m, step) rows[#rows + 1] = { m = m, step = step } end }
    local t = lt.Trainer(quiet { max_epochs = 1, logger = lg, log_every_n_steps = 1,
      callbacks = { lt.callbacks.DeviceStatsMonitor {} } })
    t:fit(model(), loader())
    local seen = {}
    for _, r in ipairs(rows) do for k, v in pairs(r.m) do seen[k] = v end end
    for _, hook in ipairs { "on_train_batch_start", "on_train_batch_end", "on_train_epoch_end" } do
      for _, k in ipairs { "live_bytes", "cached_bytes", "live_tensors", "num_threads", "lua_heap_bytes", "rss_bytes" } do
        assert.is_truthy(seen[hook .. "/" .. k], hook .. "/" .. k)
      end
    end
    assert.are.equal(lt.get_num_threads(), seen["on_train_epoch_end/num_threads"])
    assert.is_true(seen["on_train_batch_end/live_tensors"] > 0)
  end)

  it("needs a logger", function()
    local t = lt.Trainer(quiet { max_epochs = 1, callbacks = { lt.callbacks.DeviceStatsMonitor {} } })
    local ok, err = pcall(t.fit, t, model(), loader())
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("DeviceStatsMonitor: cannot log device stats with a Trainer that has no logger",
      1, true), err)
  end)
end)
