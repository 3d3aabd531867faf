-- examples/custom_loop.lua — a training loop of your own, written in Lua, in the place of lutra's epoch loop
-- (docs/reference/lutra.md, lt.Loop): `trainer.fit_loop:connect{epoch_loop = my_loop}`.
--
-- This epoch loop trains in "rounds": it draws batches from the loader, trains on each with lutra's own
-- batch loop (so training_step, the optimizer, gradient clipping and every hook behave as usual), and after
-- every `val_every` batches runs validation itself and prints the metrics. It also ends an epoch early
-- once the training loss has been below `target_loss` for `patience` batches in a row (a custom stopping
-- rule that Lightning's built-in loop has no option for).
--
--   ./lutra examples/custom_loop.lua [--epochs N] [--fast]
-- models/ sits next to examples/: find it wherever the script is run from
local repo = (arg and arg[0] or ""):match("^(.-)examples/[^/]*$")
if repo then package.path = repo .. "?.lua;" .. package.path end
local lt = require "lutra"

local args = require("examples.cli_args")(arg, "usage: lutra examples/custom_loop.lua [--epochs N] [--fast]",
  { epochs = "number" }, { fast = true }, { epochs = 3 })
local fast, epochs = args.fast, args.fast and 2 or args.epochs

lt.manual_seed(0)
local full = lt.data.FashionMNIST { train = true, limit = fast and 1200 or 12000 }
local n_val = fast and 200 or 2000
local train, val = require("examples.holdout")(full, n_val)
local train_loader = lt.data.DataLoader(train, { batch_size = 64, shuffle = true })
local val_loader = lt.data.DataLoader(val, { batch_size = 500 })

local model = require("models.mlp") { hidden = { 256 }, lr = 0.05, momentum = 0.9 }

-- ---- the custom epoch loop --------------------------------------------------------------------------
local RoundsEpochLoop = lt.Loop:extend()

function RoundsEpochLoop:init(loader, opts)
  self.loader = loader
  self.val_every = opts.val_every
  self.target_loss, self.patience = opts.target_loss, opts.patience
end

-- Lightning's template: reset, then advance until done (one advance = one batch here)
function RoundsEpochLoop:reset()
  self.batch_idx = 0
  self.next_batch = self.loader:iter()
  self.good_batches = 0
  self.finished = false
end

function RoundsEpochLoop:done() return self.finished end

function RoundsEpochLoop:advance()
  local batch = self.next_batch()
  if batch == nil then
    self.finished = true
    return lt.Loop.StopIteration
  end
  -- lutra's batch loop: on_train_batch_start, training_step, backward, optimizer step, on_train_batch_end
  self.batch_loop:run(batch, self.batch_idx)
  self.batch_idx = self.batch_idx + 1
  local loss = self.trainer.callback_metrics.train_loss
  if loss and loss < self.target_loss then self.good_batches = self.good_batches + 1 else self.good_batches = 0 end
  if self.batch_idx % self.val_every == 0 then self:validate() end
  if self.good_batches >= self.patience then
    print(string.format("  epoch %d: train_loss below %.2f for %d batches: ending the epoch after %d of %d batches",
      self.trainer.current_epoch, self.target_loss, self.patience, self.batch_idx, #self.loader))
    self.finished = true
  end
end

function RoundsEpochLoop:validate()
  self.val_loop:run()
  local m = self.trainer.callback_metrics
  print(string.format("  epoch %d batch %3d: train_loss %.4f  val_loss %.4f  val_acc %.4f", self.trainer.current_epoch,
    self.batch_idx, m.train_loss or 0 / 0, m.val_loss or 0 / 0, m.val_acc or 0 / 0))
  io.stdout:flush()
end

function RoundsEpochLoop:on_run_end()
  if self.batch_idx % self.val_every ~= 0 then self:validate() end -- validate the end of every epoch
end

local trainer = lt.Trainer { max_epochs = epochs, num_sanity_val_steps = 0, enable_model_summary = false,
  enable_progress_bar = false, logger = false, enable_checkpointing = false }
local loop = RoundsEpochLoop(train_loader, { val_every = fast and 5 or 40, target_loss = fast and 0.05 or 0.25,
  patience = 20 })
-- the loop's children: lutra's C batch loop and validation loop, taken from the slot it replaces
local builtin = trainer.fit_loop.epoch_loop
loop:connect { batch_loop = builtin.batch_loop, val_loop = builtin.val_loop }
trainer.fit_loop:connect { epoch_loop = loop }

trainer:fit(model, train_loader, val_loader)
print(string.format("done: %d epochs, %d optimizer steps, val_acc %.4f", trainer.current_epoch, trainer.global_step,
  trainer.callback_metrics.val_acc or 0 / 0))
