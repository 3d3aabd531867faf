-- tests/loggers_more_spec.lua — JSONLinesLogger and TensorBoardLogger: the files read back by independent
-- readers (Python's json for metrics.jsonl; tests/tfevents_reader.py, python3-protobuf, for the event file:
-- framing, both masked CRC-32Cs, Event/Summary fields), several loggers at once, and the errors.
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
  it("writes an event file that an independent reader parses: CRCs, steps, wall times, scalars", function()
    local dir = tmpdir()
    local tb = lt.loggers.TensorBoardLogger { save_dir = dir, name = "tb" }
    local js = lt.loggers.JSONLinesLogger { save_dir = dir, name = "j" }
    local m = fit_with { tb, js } -- several loggers at once: each gets every row
    local path = tb.event_file_path
    assert.is_truthy(path:find(dir .. "/tb/version_0/events.out.tfevents.", 1, true), path)
    local out, ok = sh("/usr/bin/python3 tests/tfevents_reader.py '" .. path .. "'")
    assert.is_true(ok, out)
    local lines = {}
    for line in out:gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.are.equal(13, #lines) -- file_version, then one event per logged step
    assert.is_truthy(lines[1]:find('"file_version": "brain.Event:2"', 1, true), lines[1])
    local now = os.time()
    for i = 2, 13 do
      local step = tonumber(lines[i]:match('"step": (%d+)'))
      local loss = tonumber(lines[i]:match('"loss": ([^,}]+)'))
      local wall = tonumber(lines[i]:match('"wall_time": ([^,}]+)'))
      assert.are.equal(i - 2, step)
      -- a simple_value is a float32: the loss as float32
      local f32 = lt.tensor({ m.losses[i - 1] }):item()
      assert.is_true(math.abs(loss - f32) <= 1e-7 * math.abs(f32), lines[i])
      assert.is_true(math.abs(wall - now) < 120, lines[i])
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
