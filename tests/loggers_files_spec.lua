-- tests/loggers_files_spec.lua — JSONLinesLogger and TensorBoardLogger: the files read back by independent
-- readers (Python's json for metrics.jsonl; tests/tfevents_reader.py, python3-protobuf, for the event file:
-- framing, both masked CRC-32Cs, Event/Summary fields, the HParams plugin's HParamsPluginData), several loggers
-- at once, and the errors.
local lt = require "lutra"
local quiet = require "helpers.quiet"

local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  return d
end

local function sh(cmd) -- output, and whether the command exited with 0
  local p = io.popen(cmd .. " 2>&1; echo \"rc=$?\"")
  local out = p:read("*a")
  p:close()
  local rc = out:match("rc=(%d+)\n$")
  return out:gsub("rc=%d+\n$", ""), rc == "0"
end

local function fit_with(loggers)
  lt.manual_seed(0)
  local x, y = lt.randn(24, 3), lt.randn(24, 1)
  local dl = lt.data.DataLoader(lt.data.TensorDataset(x, y), { batch_size = 4 })
  local m = { lin = lt.nn.Linear(3, 1), hparams = { lr = 0.05, layers = { 3, 1 } } }
  m.losses = {}
  function m:training_step(b)
    local loss = lt.F.mse_loss(self.lin(b[1]), b[2])
    self:log("loss", loss)
    self.losses[#self.losses + 1] = loss:item()
    return loss
  end
  function m:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), { lr = 0.05 }) end
  local t = lt.Trainer(quiet { max_epochs = 2, logger = loggers, log_every_n_steps = 1 })
  t:fit(m, dl)
  return m
end

-- the events of a TensorBoard file as tests/tfevents_reader.py reads them (one decoded JSON object each)
local function read_events(path)
  local out, ok = sh("/usr/bin/python3 tests/tfevents_reader.py '" .. path .. "'")
  assert.is_true(ok, out)
  local events = {}
  for line in out:gmatch("[^\n]+") do events[#events + 1] = assert(lt._io.json_decode(line)) end
  return events
end

-- the HParams plugin's three events from `first` on, checked for what every one holds (step 0, one value
-- each, plugin "hparams", version 0); returns the experiment, session start and end messages as read
local function hparams_events(events, first)
  local tags = { "_hparams_/experiment", "_hparams_/session_start_info", "_hparams_/session_end_info" }
  local data = {}
  for i, tag in ipairs(tags) do
    local ev = events[first + i - 1]
    assert.are.equal(0, ev.step)
    assert.are.same({}, ev.scalars) -- no simple_value: the plugin's content is all
    local n = 0
    for _ in pairs(ev.plugins) do n = n + 1 end
    assert.are.equal(1, n)
    local p = assert(ev.plugins[tag], tag)
    assert.are.equal("hparams", p.plugin_name)
    assert.are.equal(0, p.version)
    data[i] = p
  end
  return data[1].experiment, data[2].session_start_info, data[3].session_end_info
end

-- the Python side: each line of metrics.jsonl as {"step": s, "loss": v} (loss as repr)
local JSONL_READER = [[
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    print(d["step"], d["epoch"], repr(float(d["loss"])))
]]

describe("lt.loggers.JSONLinesLogger", function()
  it("writes one JSON object a line that Python's json reads back, value for value", function()
    local dir = tmpdir()
    local lg = lt.loggers.JSONLinesLogger { save_dir = dir, name = "j" }
    local m = fit_with(lg)
    assert.are.equal(dir .. "/j/version_0", lg.log_dir)
    local py = dir .. "/r.py"
    local f = assert(io.open(py, "w"))
    f:write(JSONL_READER)
    f:close()
    local out, ok = sh("/usr/bin/python3 " .. py .. " " .. dir .. "/j/version_0/metrics.jsonl")
    assert.is_true(ok, out)
    local i = 0
    for step, epoch, v in out:gmatch("(%d+) (%d+) (%S+)\n") do
      i = i + 1
      assert.are.equal(i - 1, tonumber(step))
      assert.are.equal(i <= 6 and 0 or 1, tonumber(epoch))
      assert.are.equal(m.losses[i], tonumber(v)) -- exactly: 17 digits read back
    end
    assert.are.equal(12, i)
    local hp = assert(io.open(dir .. "/j/version_0/hparams.json")):read("*a")
    assert.are.equal('{"layers":[3,1],"lr":0.05}\n', hp)
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("writes NaN and infinities as strings, and names a value it cannot write", function()
    local core = require "lutra.core"
    assert.are.equal('{"a":"nan","b":"inf","c":"-inf","d":2}',
      core._json_line { a = 0 / 0, b = math.huge, c = -math.huge, d = 2 })
    assert.has_error(function() core._json_line { f = print } end, "json_line: cannot write function as JSON")
    assert.are.equal('[0.1,0.25]', core._json_line { 0.1, 0.25 }) -- as few digits as read back exactly
    assert.are.equal('[0.30000000000000004]', core._json_line { 0.1 + 0.2 })
    assert.has_error(function() lt.loggers.JSONLinesLogger { dir = "x" } end,
      "JSONLinesLogger: unknown option 'dir' (known options: name, prefix, save_dir, version)")
  end)
end)

describe("lt.loggers.TensorBoardLogger", function()
  it("creates a new event file: never writes through a file or a symbolic link planted under its name", function()
    local core = require "lutra.core"
    local dir = tmpdir()
    local victim, path = dir .. "/victim", dir .. "/events.out.tfevents.1.host"
    assert.is_true(select(2, sh("mkdir -p " .. dir)))
    local f = assert(io.open(victim, "w")); f:write("victim"); f:close()
    assert.is_true(select(2, sh("ln -s " .. victim .. " " .. path)))
    local w1, p1 = core._tb_open(path, 1)
    assert.are.equal(path .. ".1", p1) -- the planted link's name is taken: the next name
    local w2, p2 = core._tb_open(path, 1)
    assert.are.equal(path .. ".2", p2) -- two writers of one name in one second: two files
    w1:close(); w2:close()
    f = assert(io.open(victim, "r")); assert.are.equal("victim", f:read("*a")); f:close()
    assert.is_true(#assert(io.open(p1, "rb")):read("*a") > 0)
  end)

  it("writes an event file that an independent reader parses: CRCs, steps, wall times, scalars", function()
    local dir = tmpdir()
    local tb = lt.loggers.TensorBoardLogger { save_dir = dir, name = "tb" }
    local js = lt.loggers.JSONLinesLogger { save_dir = dir, name = "j" }
    local m = fit_with { tb, js } -- several loggers at once: each gets every row
    local path = tb.event_file_path
    assert.is_truthy(path:find(dir .. "/tb/version_0/events.out.tfevents.", 1, true), path)
    local ev = read_events(path)
    -- file_version; the model's hparams (the Trainer's log_hyperparams at fit start): hp_metric = -1 at step 0
    -- and the HParams plugin's three summaries; then one event per logged step
    assert.are.equal(17, #ev)
    assert.are.equal("brain.Event:2", ev[1].file_version)
    assert.are.same({ hp_metric = -1 }, ev[2].scalars)
    assert.are.equal(0, ev[2].step)
    local exp, ssi = hparams_events(ev, 3)
    assert.are.same({ { "layers", "DATA_TYPE_STRING" }, { "lr", "DATA_TYPE_FLOAT64" } }, exp.hparams)
    assert.are.same({ layers = { string_value = "[3,1]" }, lr = { number_value = 0.05 } }, ssi.hparams)
    local now = os.time()
    for i = 6, 17 do
      local e = ev[i]
      assert.are.equal(i - 6, e.step)
      -- a simple_value is a float32: the loss as float32
      local f32 = lt.tensor({ m.losses[i - 5] }):item()
      assert.is_true(math.abs(e.scalars.loss - f32) <= 1e-7 * math.abs(f32), i)
      assert.is_true(math.abs(e.wall_time - now) < 120, i)
    end
    assert.is_truthy(io.open(dir .. "/j/version_0/metrics.jsonl")) -- the other logger wrote too
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("is refused by the reader when a byte of the file changes (the CRCs are checked)", function()
    local dir = tmpdir()
    local tb = lt.loggers.TensorBoardLogger { save_dir = dir }
    tb:log_metrics({ acc = 0.5 }, 3)
    tb:finalize("success")
    local f = assert(io.open(tb.event_file_path, "rb"))
    local data = f:read("*a")
    f:close()
    local n = #data
    f = assert(io.open(tb.event_file_path, "wb"))
    f:write(data:sub(1, n - 6), string.char((data:byte(n - 5) + 1) % 256), data:sub(n - 4)) -- in the last value
    f:close()
    local out, ok = sh("/usr/bin/python3 tests/tfevents_reader.py '" .. tb.event_file_path .. "'")
    assert.is_falsy(ok)
    assert.is_truthy(out:find("record 1: bad data CRC", 1, true), out)
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("log_hyperparams writes the HParams plugin's summaries: names, types, values (flattened), metric tags", function()
    local dir = tmpdir()
    local tb = lt.loggers.TensorBoardLogger { save_dir = dir, prefix = "p" }
    tb:log_hyperparams({ lr = 0.001, batch = 32, name = "adam", nesterov = false, layers = { 64, 32 },
      optim = { betas = { 0.9, 0.999 }, sched = { gamma = 0.5, kind = "step" } }, scale = lt.tensor({ 2.5 }),
      weights = lt.zeros(2, 3), act = print }, { acc = 0.75, loss = lt.tensor({ 0.25 }) })
    local ev = read_events(tb.event_file_path)
    assert.are.equal(5, #ev) -- file_version, the metrics at step 0, the three summaries
    -- the metrics as scalars at step 0, and as the Experiment's MetricInfo tags: the prefix is theirs too
    assert.are.equal(0, ev[2].step)
    assert.are.same({ ["p-acc"] = 0.75, ["p-loss"] = 0.25 }, ev[2].scalars)
    local exp, ssi, sei = hparams_events(ev, 3)
    assert.are.same({ "p-acc", "p-loss" }, exp.metrics)
    local act = tostring(print)
    assert.are.same({
      { "act", "DATA_TYPE_STRING" }, { "batch", "DATA_TYPE_FLOAT64" }, { "layers", "DATA_TYPE_STRING" },
      { "lr", "DATA_TYPE_FLOAT64" }, { "name", "DATA_TYPE_STRING" }, { "nesterov", "DATA_TYPE_BOOL" },
      { "optim/betas", "DATA_TYPE_STRING" }, { "optim/sched/gamma", "DATA_TYPE_FLOAT64" },
      { "optim/sched/kind", "DATA_TYPE_STRING" }, { "scale", "DATA_TYPE_FLOAT64" },
      { "weights", "DATA_TYPE_STRING" },
    }, exp.hparams)
    assert.are.same({
      act = { string_value = act }, batch = { number_value = 32 }, layers = { string_value = "[64,32]" },
      lr = { number_value = 0.001 }, name = { string_value = "adam" }, nesterov = { bool_value = false },
      ["optim/betas"] = { string_value = "[0.9,0.999]" }, ["optim/sched/gamma"] = { number_value = 0.5 },
      ["optim/sched/kind"] = { string_value = "step" }, scale = { number_value = 2.5 },
      weights = { string_value = "tensor [2 x 3]" },
    }, ssi.hparams)
    assert.are.same({ status = "STATUS_SUCCESS" }, sei)
    -- hparams.yaml as before: every hyper-parameter, nested as given
    local yaml = assert(io.open(tb.log_dir .. "/hparams.yaml")):read("*a")
    assert.is_truthy(yaml:find("\noptim:\n  betas:\n    %- 0%.9\n    %- 0%.999\n  sched:\n", 1), yaml)
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("log_hyperparams: hp_metric = -1 by default, a number as hp_metric, nothing with default_hp_metric=false", function()
    local dir = tmpdir()
    local tb = lt.loggers.TensorBoardLogger { save_dir = dir, name = "a" }
    tb:log_hyperparams { lr = 0.1 }
    tb:log_hyperparams({ wd = 0.01 }, 0.5) -- a number is hp_metric's value
    tb:log_hyperparams() -- Lightning's None: no params, the default metric still
    tb:finalize("success")
    local ev = read_events(tb.event_file_path)
    assert.are.equal(13, #ev)
    for i, want in ipairs { -1, 0.5, -1 } do
      local at = 2 + 4 * (i - 1)
      assert.are.same({ hp_metric = want }, ev[at].scalars)
      assert.are.equal(0, ev[at].step)
      local exp, ssi = hparams_events(ev, at + 1)
      assert.are.same({ "hp_metric" }, exp.metrics)
      local names = ({ { { "lr", "DATA_TYPE_FLOAT64" } }, { { "wd", "DATA_TYPE_FLOAT64" } }, {} })[i]
      assert.are.same(names, exp.hparams) -- each call's own params (Lightning's), not the merged ones
      assert.are.same(({ { lr = { number_value = 0.1 } }, { wd = { number_value = 0.01 } }, {} })[i], ssi.hparams)
    end
    assert.are.same({ lr = 0.1, wd = 0.01 }, tb.hparams) -- merged, as hparams.yaml
    assert.are.equal("lr: 0.1\nwd: 0.01\n", assert(io.open(tb.log_dir .. "/hparams.yaml")):read("*a"))

    local off = lt.loggers.TensorBoardLogger { save_dir = dir, name = "b", default_hp_metric = false }
    off:log_hyperparams { lr = 0.1 }
    off:log_hyperparams({ lr = 0.2 }, {}) -- an empty table of metrics: nothing either
    assert.is_nil(off.event_file_path) -- no event written, so no file opened
    assert.are.equal("lr: 0.2\n", assert(io.open(off.log_dir .. "/hparams.yaml")):read("*a"))
    off:log_metrics({ loss = 1 }, 4)
    ev = read_events(off.event_file_path)
    assert.are.equal(2, #ev)
    assert.are.same({ loss = 1 }, ev[2].scalars)
    assert.is_nil(ev[2].plugins)
    off:log_hyperparams({ lr = 0.3 }, 0.875) -- metrics given: written with default_hp_metric off too
    ev = read_events(off.event_file_path)
    assert.are.equal(6, #ev)
    assert.are.same({ hp_metric = 0.875 }, ev[3].scalars) -- (a float32 exactly)
    local _, ssi = hparams_events(ev, 4)
    assert.are.same({ lr = { number_value = 0.3 } }, ssi.hparams)
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("log_hyperparams names a metric that is not a number, and writes nothing then", function()
    local dir = tmpdir()
    local tb = lt.loggers.TensorBoardLogger { save_dir = dir }
    assert.has_error(function() tb:log_hyperparams({ lr = 0.1 }, { acc = "high" }) end,
      "TensorBoardLogger:log_hyperparams: metric 'acc' must be a number or a one-element tensor, got string")
    assert.has_error(function() tb:log_hyperparams({ lr = 0.1 }, "high") end,
      "TensorBoardLogger:log_hyperparams: metrics must be a table, a number or a one-element tensor, got string")
    assert.has_error(function() tb:log_hyperparams({ lr = 0.1 }, lt.zeros(2)) end,
      "TensorBoardLogger: a logged tensor must have one element, got shape [2]")
    assert.has_error(function() tb:log_hyperparams("lr") end,
      "TensorBoardLogger:log_hyperparams: expected a table, got string")
    assert.are.same({}, tb.hparams)
    assert.is_nil(tb.event_file_path)
    -- the writer's own checks (core/bind/l_tb.c), behind the logger's
    local w = tb:_writer()
    assert.has_error(function() w:hparams(0, { "a" }, { {} }, {}) end,
      "TensorBoardLogger: hyper-parameter 'a' must be a number, string or boolean, got table")
    assert.has_error(function() w:hparams(0, { "a", "b" }, { 1 }, {}) end,
      "TensorBoardLogger: 2 hyper-parameter names but 1 values")
    assert.has_error(function() w:hparams(0, {}, {}, { 7 }) end, "TensorBoardLogger: metric tag 1 is not a string")
    w:close()
    assert.has_error(function() w:hparams(0, {}, {}, {}) end, "TensorBoardLogger: the event file is closed")
    rawset(tb, "_w", nil)
    assert.is_nil(io.open(dir .. "/lutra_logs/version_0/hparams.yaml"))
    assert.are.equal(1, #read_events(tb.event_file_path)) -- (the writer opened above: its file_version only)
    assert.has_error(function() lt.loggers.TensorBoardLogger { default_hp_metric = 1 } end,
      "TensorBoardLogger: option 'default_hp_metric' must be a boolean, got number")
    assert.has_error(function() lt.loggers.TensorBoardLogger { hp_metric = true } end,
      "TensorBoardLogger: unknown option 'hp_metric' (known options: default_hp_metric, flush_secs, name, prefix, "
        .. "save_dir, version)")
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("names a metric that is not a number and a directory it cannot create", function()
    local tb = lt.loggers.TensorBoardLogger { save_dir = tmpdir() }
    assert.has_error(function() tb:log_metrics({ name = "x" }, 1) end,
      "TensorBoardLogger:log_metrics: metric 'name' must be a number or a one-element tensor, got string")
    local bad = lt.loggers.TensorBoardLogger { save_dir = "/proc/no/such" }
    local ok, err = pcall(bad.log_metrics, bad, { a = 1 }, 0)
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("TensorBoardLogger: cannot create the log directory", 1, true), err)
  end)
end)
