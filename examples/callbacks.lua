-- examples/callbacks.lua — a callback of one's own that uses several hooks (docs/reference/callbacks.md): it measures
-- training throughput per epoch, remembers the best validation accuracy (and keeps it in checkpoints
-- through state_dict/load_state_dict), and after testing prints a per-class accuracy table from a
-- confusion matrix it builds batch by batch.
--
--   ./lutra examples/callbacks.lua [--epochs N] [--fast]
-- models/ sits next to examples/: find it wherever the script is run from
local repo = (arg and arg[0] or ""):match("^(.-)examples/[^/]*$")
if repo then package.path = repo .. "?.lua;" .. package.path end
local lt = require "lutra"

local args = require("examples.cli_args")(arg, "usage: lutra examples/callbacks.lua [--epochs N] [--fast]",
  { epochs = "number" }, { fast = true }, { epochs = 3 })
local fast, epochs = args.fast, args.fast and 2 or args.epochs

-- ---- the callback -----------------------------------------------------------------------------------
local TrainingReport = lt.callbacks.Callback:extend("TrainingReport")

function TrainingReport:init(opts)
  self.classes = opts.classes
  self.best_acc, self.best_epoch = nil, nil
end

-- wall-clock seconds (CLOCK_MONOTONIC through LuaJIT's FFI)
local ffi = require "ffi"
pcall(ffi.cdef, "typedef struct { long tv_sec; long tv_nsec; } example_timespec; int clock_gettime(int, example_timespec *);")
local function now()
  local ts = ffi.new("example_timespec")
  ffi.C.clock_gettime(1, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

function TrainingReport:on_fit_start(trainer, model)
  local n = 0
  for _, p in ipairs(lt.nn.parameters(model)) do n = n + p:numel() end
  print(string.format("TrainingReport: %d parameters, up to %d epochs", n, trainer.max_epochs or -1))
  self.fit_t0 = now()
end

function TrainingReport:on_train_epoch_start(trainer, model)
  self.t0, self.samples, self.loss_sum, self.batches = now(), 0, 0, 0
end

-- outputs is what training_step returned (a loss tensor here, or a table with .loss)
function TrainingReport:on_train_batch_end(trainer, model, outputs, batch, batch_idx)
  self.samples = self.samples + batch[1]:size(1)
  local loss = type(outputs) == "table" and outputs.loss or outputs
  if lt.is_tensor(loss) then
    self.loss_sum, self.batches = self.loss_sum + loss:item(), self.batches + 1
  end
end

function TrainingReport:on_validation_epoch_end(trainer, model)
  if trainer.sanity_checking then return end -- the sanity check's two batches are not an epoch
  local acc = trainer.callback_metrics.val_acc
  if acc and (self.best_acc == nil or acc > self.best_acc) then
    self.best_acc, self.best_epoch = acc, trainer.current_epoch
  end
end

-- runs after validation in the same epoch (docs/reference/hooks.md), so val_acc is this epoch's
function TrainingReport:on_train_epoch_end(trainer, model)
  local dt = math.max(now() - self.t0, 1e-9)
  print(string.format("epoch %d: %d samples in %.2f s (%.0f samples/s), mean train_loss %.4f, val_acc %.4f",
    trainer.current_epoch, self.samples, dt, self.samples / dt, self.loss_sum / math.max(self.batches, 1),
    trainer.callback_metrics.val_acc or 0 / 0))
  io.stdout:flush()
end

function TrainingReport:on_fit_end(trainer, model)
  print(string.format("TrainingReport: best val_acc %.4f at epoch %s; fit took %.1f s", self.best_acc or 0 / 0,
    tostring(self.best_epoch), now() - self.fit_t0))
end

function TrainingReport:on_test_epoch_start(trainer, model)
  local k = #self.classes
  self.confusion = {}
  for i = 1, k do
    self.confusion[i] = {}
    for j = 1, k do self.confusion[i][j] = 0 end
  end
end

function TrainingReport:on_test_batch_end(trainer, model, outputs, batch, batch_idx, dataloader_idx)
  local pred = lt.no_grad(function() return model:forward(batch[1]):argmax(2) end):flatten():tolist()
  local truth = batch[2]:flatten():tolist()
  for i = 1, #truth do
    local row = self.confusion[truth[i]]
    row[pred[i]] = row[pred[i]] + 1
  end
end

function TrainingReport:on_test_epoch_end(trainer, model)
  print("per-class test accuracy (most confused with):")
  for i, name in ipairs(self.classes) do
    local row, total, worst = self.confusion[i], 0, nil
    for j = 1, #row do
      total = total + row[j]
      if j ~= i and (worst == nil or row[j] > row[worst]) then worst = j end
    end
    print(string.format("  %-12s %.3f  (%s: %d)", name, total > 0 and row[i] / total or 0 / 0,
      self.classes[worst], row[worst]))
  end
end

function TrainingReport:on_exception(trainer, model, err)
  print("TrainingReport: training stopped by an error: " .. tostring(err):match("[^\n]*"))
end

-- kept in checkpoints under the callback's name, and restored by fit{ckpt_path = ...}
function TrainingReport:state_dict() return { best_acc = self.best_acc, best_epoch = self.best_epoch } end
function TrainingReport:load_state_dict(state) self.best_acc, self.best_epoch = state.best_acc, state.best_epoch end

-- ---- a run that uses it -------------------------------------------------------------------------------
lt.manual_seed(0)
local full = lt.data.FashionMNIST { train = true, limit = fast and 2000 or 20000 }
local test = lt.data.FashionMNIST { train = false, limit = fast and 1000 or nil }
local n_val = fast and 500 or 5000
local train, val = require("examples.holdout")(full, n_val)
local train_loader = lt.data.DataLoader(train, { batch_size = 64, shuffle = true })
local val_loader = lt.data.DataLoader(val, { batch_size = 500 })
local test_loader = lt.data.DataLoader(test, { batch_size = 500 })

local model = require("models.mlp") { hidden = { 256 }, lr = 0.05, momentum = 0.9 }
local report = TrainingReport { classes = full.classes }
local trainer = lt.Trainer { max_epochs = epochs, callbacks = { report }, enable_model_summary = false,
  enable_progress_bar = false, logger = false, enable_checkpointing = false }
trainer:fit(model, train_loader, val_loader)
local res = trainer:test(model, test_loader)
print(string.format("test accuracy: %.4f", res[1].test_acc))
