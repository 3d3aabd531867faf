-- tests/config_cli_spec.lua — the config CLI end to end through the binary: `lutra fit CONFIG.lua` with
-- --trainer/--model/--data overrides, test with --ckpt_path, --print_config, --help (from the Trainer's
-- option table), and the errors (unknown keys with a "did you mean", values of the wrong type).
local skip = require("helpers.puc").needs_luajit("runs the lutra binary, which embeds LuaJIT")
if skip then describe("config CLI", function() pending(skip) end) return end
local fs = require "helpers.fs"
local q, slurp, spit = fs.q, fs.slurp, fs.spit
local BIN = os.getenv("LUTRA_BIN") or "build/bin/release/cli/lutra"
local ABS_BIN = BIN:sub(1, 1) == "/" and BIN or (os.getenv("PWD") .. "/" .. BIN)

local CONFIG = [[
local lt = require "lutra"
local model = { net = lt.nn.Linear(2, 1), lr = 0.1, tag = "lin" }
function model:training_step(b) return lt.F.mse_loss(self.net(b[1]), b[2]) end
function model:test_step(b) self:log("test_loss", lt.F.mse_loss(self.net(b[1]), b[2])) end
function model:configure_optimizers() return lt.optim.SGD(self.net:parameters(), { lr = self.lr }) end
lt.manual_seed(0)
local x = lt.randn(16, 2)
local ds = lt.data.TensorDataset(x, x:sum(2, true))
local Data = lt.DataModule:extend("Data")
function Data:init() self.batch_size = 4 end
function Data:train_dataloader() return lt.data.DataLoader(ds, { batch_size = self.batch_size }) end
function Data:test_dataloader() return lt.data.DataLoader(ds, { batch_size = self.batch_size }) end
return { model = model, data = Data(), trainer = { max_epochs = 1, enable_progress_bar = false,
  enable_model_summary = false } }
]]

local dir
local function run(args)
  local out, err = os.tmpname(), os.tmpname()
  local words = {}
  for i, a in ipairs(args) do words[i] = q(a) end
  local p = io.popen("cd " .. q(dir) .. " && " .. q(ABS_BIN) .. " " .. table.concat(words, " ") .. " >" .. q(out) ..
    " 2>" .. q(err) .. "; echo $?")
  local code = tonumber(p:read("*a"):match("(%d+)%s*$"))
  p:close()
  local r = { code = code, out = slurp(out) or "", err = slurp(err) or "" }
  os.remove(out); os.remove(err)
  return r
end

describe("config CLI (lutra fit|validate|test|predict CONFIG.lua)", function()
  setup(function()
    dir = os.tmpname(); os.remove(dir); os.execute("mkdir -p " .. q(dir))
    spit(dir .. "/config.lua", CONFIG)
  end)
  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  it("--print_config shows the config with the overrides applied, typed", function()
    local r = run { "fit", "config.lua", "--trainer.max_epochs", "3", "--model.lr=0.05", "--data.batch_size", "8",
      "--model.tag", "other", "--print_config" }
    assert.are.equal(0, r.code, r.err)
    assert.matches("trainer:\n", r.out, 1, true)
    assert.matches("  max_epochs: 3\n", r.out, 1, true)
    assert.matches("  lr: 0.05\n", r.out, 1, true)
    assert.matches("  tag: other\n", r.out, 1, true)
    assert.matches("data:\n  batch_size: 8\n", r.out, 1, true)
  end)

  it("--print_config shows the resolved config: every Trainer option with the value it runs with", function()
    local r = run { "fit", "config.lua", "--trainer.max_steps", "10", "--print_config" }
    assert.are.equal(0, r.code, r.err)
    local trainer = r.out:match("\ntrainer:\n(.-)\nmodel:\n")
    assert.truthy(trainer, r.out)
    local lines = {}
    for line in trainer:gmatch("[^\n]+") do lines[#lines + 1] = line end
    local names = {}
    for _, o in ipairs(require("lutra").Trainer._option_list()) do names[#names + 1] = o.name end
    local keys = {}
    for _, line in ipairs(lines) do keys[#keys + 1] = line:match("^  ([%w_]+):") end
    assert.are.same(names, keys) -- all of them, in the documented order
    for _, want in ipairs {
      "  max_epochs: 1", -- the config's
      "  max_steps: 10", -- the command line's
      "  min_epochs: 1", "  min_steps: 0", "  accumulate_grad_batches: 1", "  num_sanity_val_steps: 2", -- defaults
      "  logger: true", "  enable_checkpointing: true", "  enable_progress_bar: false", "  fast_dev_run: 0",
      "  limit_train_batches: null  # default 1.0", "  seed: null", '  default_root_dir: "."' } do
      assert.matches("\n" .. want .. "\n", "\n" .. trainer .. "\n", 1, true)
    end
    assert.matches("\nckpt_path: null\n$", r.out)
    -- a computed default: max_epochs is -1 with max_steps set and no max_epochs
    spit(dir .. "/steps.lua", (CONFIG:gsub("max_epochs = 1, ", "")))
    r = run { "fit", "steps.lua", "--trainer.max_steps", "10", "--print_config" }
    assert.matches("\n  max_epochs: %-1\n", r.out)
    r = run { "fit", "steps.lua", "--print_config" }
    assert.matches("\n  max_epochs: 1000\n", r.out)
  end)

  it("fit trains for --trainer.max_epochs and saves checkpoints; test --ckpt_path evaluates those weights", function()
    local before = run { "test", "config.lua" }
    assert.are.equal(0, before.code, before.err)
    local loss0 = tonumber(before.out:match("test_loss (%S+)"))
    local r = run { "fit", "config.lua", "--trainer.max_epochs", "3", "--model.lr", "0.05" }
    assert.are.equal(0, r.code, r.err)
    local p = io.popen("ls " .. q(dir) .. "/lutra_logs/*/checkpoints/*.ckpt")
    local ck = p:read("*l")
    p:close()
    assert.matches("/epoch=2%-step=12%.ckpt$", ck) -- 3 epochs of 4 batches
    local after = run { "test", "config.lua", "--ckpt_path", ck }
    assert.are.equal(0, after.code, after.err)
    local loss1 = tonumber(after.out:match("test_loss (%S+)"))
    assert.is_true(loss1 < loss0 * 0.5, ("trained %s vs untrained %s"):format(loss1, loss0))
  end)

  it("--help lists every Trainer option with its type and default, and the config's model and data fields", function()
    local r = run { "fit", "config.lua", "--help" }
    assert.are.equal(0, r.code, r.err)
    local trainer_opts = 0
    for _ in r.out:gmatch("\n  %-%-trainer%.") do trainer_opts = trainer_opts + 1 end
    local lt = require "lutra"
    assert.are.equal(#lt.Trainer._option_list(), trainer_opts)
    assert.matches("%-%-trainer%.accumulate_grad_batches%s+INTEGER%s+default 1:", r.out)
    assert.matches("%-%-trainer%.max_epochs%s+INTEGER%s+default 1 %(config; default 1000 unless max_steps%)", r.out)
    assert.matches("%-%-trainer%.gradient_clip_algorithm%s+STRING%s+default \"norm\"", r.out)
    assert.matches("%-%-model%.lr%s+NUMBER%s+default 0.1", r.out)
    assert.matches("%-%-model%.tag%s+STRING%s+default \"lin\"", r.out)
    assert.matches("%-%-data%.batch_size%s+INTEGER%s+default 4", r.out)
    assert.matches("--print_config", r.out, 1, true)
  end)

  it("errors: unknown keys with a did-you-mean, wrong types, a missing config, a bad section", function()
    local r = run { "fit", "config.lua", "--trainer.max_epoch", "3" }
    assert.are.equal(1, r.code)
    assert.matches("lutra fit: unknown Trainer option --trainer.max_epoch (did you mean 'max_epochs'?)", r.err, 1, true)
    r = run { "fit", "config.lua", "--model.lrr", "3" }
    assert.matches("lutra fit: unknown model option --model.lrr (did you mean 'lr'?) (known: lr, tag)", r.err, 1, true)
    r = run { "fit", "config.lua", "--model.lr", "fast" }
    assert.matches("lutra fit: --model.lr expects number, got 'fast' (its value in the config is 0.1)", r.err, 1, true)
    r = run { "fit", "config.lua", "--trainer.max_epochs", "-5" }
    assert.matches("lutra fit: --trainer.max_epochs must be an integer >= -1, got -5", r.err, 1, true)
    r = run { "fit", "config.lua", "--trainer.callbacks", "x" }
    assert.matches("--trainer.callbacks cannot be set from the command line (set it in the config)", r.err, 1, true)
    r = run { "fit", "config.lua", "--traner.max_epochs", "3" }
    assert.matches("unknown option --traner.max_epochs (did you mean 'trainer'?)", r.err, 1, true)
    r = run { "fit", "missing.lua" }
    assert.are.equal(1, r.code)
    assert.matches("lutra fit: cannot load the config missing.lua", r.err, 1, true)
    r = run { "fit", "config.lua", "--trainer.max_epochs" }
    assert.matches("lutra fit: option --trainer.max_epochs needs a value", r.err, 1, true)
    spit(dir .. "/bad.lua", "return { model = {}, modle = 1 }")
    r = run { "fit", "bad.lua" }
    assert.matches("the config bad.lua: unknown key 'modle' (did you mean 'model'?) (known keys: data, model, trainer)",
      r.err, 1, true)
  end)
end)
