-- loggers_spec.lua — lt.loggers.CSVLogger: version directories, metrics.csv rows and columns
-- (epoch and step, a header that grows), hparams.yaml, the Trainer's default logger, option errors, and
-- the SVG of a real run's metrics (parsed as XML, one path per metric).
local lt = require "lutra"
local loggers = lt.loggers

local fs = require "helpers.fs"
local tmpdir, rmrf = fs.tmpdir, fs.rmrf

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

describe("CSVLogger", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmrf(dir) end)

  it("logs into <save_dir>/lutra_logs/version_N, N the next free number", function()
    local a = loggers.CSVLogger { save_dir = dir }
    assert.are.equal(dir .. "/lutra_logs/version_0", a.log_dir)
    assert.are.equal(0, a.version)
    assert.are.equal("lutra_logs", a.name)
    a:log_metrics({ x = 1 }, 0)
    lt._io.mkdirs(dir .. "/lutra_logs/version_7")
    lt._io.mkdirs(dir .. "/lutra_logs/version_x")
    local b = loggers.CSVLogger { save_dir = dir }
    assert.are.equal(dir .. "/lutra_logs/version_8", b.log_dir)
    assert.are.equal(dir .. "/exp/version_3", loggers.CSVLogger { save_dir = dir, name = "exp", version = 3 }.log_dir)
    assert.are.equal(dir .. "/exp/mine", loggers.CSVLogger { save_dir = dir, name = "exp", version = "mine" }.log_dir)
    assert.are.equal(dir .. "/version_0", loggers.CSVLogger { save_dir = dir, name = "" }.log_dir)
  end)

  it("writes one row per call with epoch and step first; a new metric rewrites the header and pads old rows", function()
    local lg = loggers.CSVLogger { save_dir = dir, version = 0 }
    lg:log_metrics({ loss = 0.5, epoch = 0 }, 0)
    lg:log_metrics({ loss = lt.tensor(0.25), epoch = 0 }, 1)
    assert.are.equal("epoch,step,loss\n0,0,0.5\n0,1,0.25\n", read(lg.log_dir .. "/metrics.csv"))
    lg:log_metrics({ val_loss = 0.75, val_acc = 0.125, epoch = 0 }, 1)
    lg:log_metrics({ loss = 1 / 3, epoch = 1 }, 2)
    lg:finalize("success")
    assert.are.equal("epoch,step,loss,val_acc,val_loss\n0,0,0.5,,\n0,1,0.25,,\n0,1,,0.125,0.75\n" ..
      "1,2,0.3333333333333333,,\n", read(lg.log_dir .. "/metrics.csv"))
  end)

  it("writes each row at once (a crash loses nothing logged) and starts a reused version afresh", function()
    local lg = loggers.CSVLogger { save_dir = dir, version = 1 }
    lg:log_metrics({ a = 1 }, 5)
    assert.are.equal("step,a\n5,1\n", read(lg.log_dir .. "/metrics.csv"))
    local again = loggers.CSVLogger { save_dir = dir, version = 1 }
    again:log_metrics({ b = 2 }, 0)
    assert.are.equal("step,b\n0,2\n", read(lg.log_dir .. "/metrics.csv"))
  end)

  it("writes hyper-parameters to hparams.yaml (nested tables and lists)", function()
    local lg = loggers.CSVLogger { save_dir = dir }
    lg:log_hyperparams { lr = 0.001, layers = { 784, 128, 10 }, name = "mlp", opt = { kind = "adam", betas = { 0.9, 0.999 } },
      flag = true, odd = "a: b", fn = print }
    lg:log_hyperparams { batch_size = 64 }
    assert.are.equal(table.concat({
      "batch_size: 64", "flag: true", "layers:", "  - 784", "  - 128", "  - 10", "lr: 0.001", "name: mlp", 'odd: "a: b"',
      "opt:", "  betas:", "    - 0.9", "    - 0.999", "  kind: adam", "" }, "\n"), read(lg.log_dir .. "/hparams.yaml"))
  end)

  it("rejects unknown options and bad values, and names an unwritable directory", function()
    local ok, err = pcall(loggers.CSVLogger, { save_dri = "x" })
    assert.is_false(ok)
    assert.matches("CSVLogger: unknown option 'save_dri' (known options: flush_logs_every_n_steps, name, prefix, " ..
      "save_dir, version)", err, 1, true)
    ok, err = pcall(loggers.CSVLogger, { version = -1 })
    assert.is_false(ok)
    assert.matches("CSVLogger: option 'version' must be an integer >= 0 or a string, got -1", err, 1, true)
    ok, err = pcall(loggers.CSVLogger, { save_dir = 3 })
    assert.is_false(ok)
    assert.matches("CSVLogger: option 'save_dir' must be a string, got number", err, 1, true)
    local f = assert(io.open(dir .. "/file", "w"))
    f:close()
    local lg = loggers.CSVLogger { save_dir = dir .. "/file" }
    ok, err = pcall(lg.log_metrics, lg, { a = 1 }, 0)
    assert.is_false(ok)
    assert.matches("CSVLogger: cannot create the log directory: mkdir: " .. dir .. "/file", err, 1, true)
  end)
end)

describe("the Trainer's default logger", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmrf(dir) end)

  local function run(extra)
    lt.manual_seed(4)
    local ds = lt.data.TensorDataset(lt.randn(40, 3), lt.randn(40, 1))
    local train = lt.data.DataLoader(ds, { batch_size = 4 })
    local val = lt.data.DataLoader(ds, { batch_size = 20 })
    local model = { fc = lt.nn.Linear(3, 1), hparams = { lr = 0.05, note = "tiny" } }
    function model:training_step(b)
      local l = lt.F.mse_loss(self.fc(b[1]), b[2])
      self:log("train_loss", l, { on_step = true, on_epoch = true })
      return l
    end
    function model:validation_step(b)
      local y = self.fc(b[1])
      self:log("val_loss", lt.F.mse_loss(y, b[2]))
      self:log("val_mae", lt.F.l1_loss(y, b[2]))
    end
    function model:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), { lr = self.hparams.lr }) end
    local o = { max_epochs = 3, default_root_dir = dir, log_every_n_steps = 5, enable_progress_bar = false,
      enable_model_summary = false, enable_checkpointing = false }
    for k, v in pairs(extra or {}) do o[k] = v end
    local t = lt.Trainer(o)
    t:fit(model, train, val)
    return t
  end

  it("writes <default_root_dir>/lutra_logs/version_0/metrics.csv with epoch, step and every metric, and hparams.yaml", function()
    local t = run()
    assert.are.equal(dir .. "/lutra_logs/version_0", t.logger.log_dir)
    local csv = read(dir .. "/lutra_logs/version_0/metrics.csv")
    local header = csv:match("^([^\n]*)\n")
    local cols = {}
    for c in (header .. ","):gmatch("([^,]*),") do cols[c] = true end
    for _, c in ipairs { "epoch", "step", "train_loss_step", "train_loss_epoch", "val_loss", "val_mae" } do
      assert.is_true(cols[c], "no column " .. c .. " in " .. header)
    end
    assert.is_true(header:match("^epoch,step,") ~= nil)
    local rows = select(2, csv:gsub("\n", "")) - 1
    -- 10 batches x 3 epochs, a row every 5 steps (6), plus per epoch one validation row and one train epoch row
    assert.are.equal(12, rows)
    assert.are.equal("lr: 0.05\nnote: tiny\n", read(dir .. "/lutra_logs/version_0/hparams.yaml"))
    local t2 = run()
    assert.are.equal(dir .. "/lutra_logs/version_1", t2.logger.log_dir)
  end)

  it("logger = false writes nothing", function()
    run { logger = false }
    assert.is_nil(lt._io.stat(dir .. "/lutra_logs"))
  end)

  it("the SVG of the run parses as XML with one path per metric, the losses on one axis", function()
    local f = io.open("/usr/bin/python3", "rb")
    if not f then pending("no /usr/bin/python3") return end
    f:close()
    local t = run()
    local csv = t.logger.log_dir .. "/metrics.csv"
    local out, n = require("lutra.plot").svg(csv, dir .. "/curves.svg")
    assert.are.equal(4, n) -- train_loss_step, train_loss_epoch, val_loss, val_mae
    local p = io.popen("/usr/bin/python3 -c \"import sys, xml.etree.ElementTree as ET; r = ET.parse(sys.argv[1]).getroot(); " ..
      "ns = '{http://www.w3.org/2000/svg}'; print(r.tag, len([p for p in r.iter(ns + 'path')]), " ..
      "len([g for g in r.iter(ns + 'g') if g.get('class') == 'panel']))\" '" .. out .. "' 2>&1")
    local res = p:read("*a")
    p:close()
    -- two panels: train_loss_step, train_loss_epoch and val_loss share the loss axis; val_mae has its own
    assert.are.equal("{http://www.w3.org/2000/svg}svg 4 2\n", res)
  end)
end)
