-- models/classifier.lua — what the image classifiers (models.mlp, models.lenet) share: the steps of a
-- model table for lt.Trainer (docs/reference/hooks.md) around a network `self.net` that maps images to class logits.
--
--   training_step   cross-entropy loss, logs train_loss (on_step, prog_bar)
--   validation_step logs val_loss and val_acc (on_epoch)
--   test_step       logs test_loss and test_acc (on_epoch)
--   predict_step    the predicted classes (int64, 1-based: classes[pred] works on a Lua table)
--   configure_optimizers  SGD (lr, momentum, weight_decay, nesterov) or Adam/AdamW, with an optional
--                   cosine or step learning-rate schedule per epoch
--
-- Labels are int64 in 1..K (lutra's 1-based convention), so accuracy is argmax (1-based) == label. The steps also
-- work without a Trainer: self:log is used only when the trainer has provided it.
local lt = require "lutra"

local C = {}

local OPTIONS = {
  lr = "number", momentum = "number", weight_decay = "number", nesterov = "boolean",
  optimizer = "string", scheduler = "string", max_epochs = "number", step_size = "number", gamma = "number",
  num_classes = "number", dropout = "number",
}

--- Checks a factory's options: the shared ones above plus `extra` (name -> type), rejecting unknown names.
function C.check_options(name, opts, extra, defaults)
  opts = opts or {}
  if type(opts) ~= "table" then error(name .. ": options must be a table, got " .. type(opts), 3) end
  for k, v in pairs(opts) do
    local want = OPTIONS[k] or extra[k]
    if not want then
      local known = {}
      for n in pairs(OPTIONS) do known[#known + 1] = n end
      for n in pairs(extra) do known[#known + 1] = n end
      table.sort(known)
      error(string.format("%s: unknown option '%s' (known options: %s)", name, tostring(k), table.concat(known, ", ")), 3)
    end
    if type(v) ~= want then
      error(string.format("%s: option '%s' must be a %s, got %s", name, k, want, type(v)), 3)
    end
  end
  local out = {}
  for k, v in pairs(defaults) do out[k] = v end
  for k, v in pairs(opts) do out[k] = v end
  local opt = out.optimizer
  if opt ~= "sgd" and opt ~= "adam" and opt ~= "adamw" then
    error(string.format("%s: option 'optimizer' must be \"sgd\", \"adam\" or \"adamw\", got %q", name, tostring(opt)), 3)
  end
  local sch = out.scheduler
  if sch ~= nil and sch ~= "none" and sch ~= "cosine" and sch ~= "step" then
    error(string.format("%s: option 'scheduler' must be \"none\", \"cosine\" or \"step\", got %q", name, tostring(sch)), 3)
  end
  if sch == "cosine" and not out.max_epochs then
    error(name .. ": scheduler \"cosine\" needs max_epochs (the epochs of the run)", 3)
  end
  return out
end

--- Makes `model` (a table with .net and .hparams) a classifier model table.
function C.new(model)
  return setmetatable(model, C)
end

C.__index = C

function C:forward(x) return self.net(x) end

local function log(self, name, value, opts)
  local f = self.log
  if type(f) == "function" then f(self, name, value, opts) end
end

function C:training_step(batch, batch_idx)
  local logits = self:forward(batch[1])
  local loss = lt.F.cross_entropy(logits, batch[2])
  log(self, "train_loss", loss, { prog_bar = true })
  return loss
end

--- (loss, accuracy) of a batch, as tensors.
function C:evaluate(batch)
  local logits = self:forward(batch[1])
  local loss = lt.F.cross_entropy(logits, batch[2])
  local acc = logits:argmax(2):eq(batch[2]):mean()
  return loss, acc
end

function C:validation_step(batch, batch_idx)
  local loss, acc = self:evaluate(batch)
  local n = batch[1]:size(1)
  log(self, "val_loss", loss, { prog_bar = true, batch_size = n })
  log(self, "val_acc", acc, { prog_bar = true, batch_size = n })
end

function C:test_step(batch, batch_idx)
  local loss, acc = self:evaluate(batch)
  local n = batch[1]:size(1)
  log(self, "test_loss", loss, { batch_size = n })
  log(self, "test_acc", acc, { batch_size = n })
end

--- The predicted class of each image (int64 [N], 1-based).
function C:predict_step(batch, batch_idx)
  return self:forward(batch[1]):argmax(2)
end

function C:configure_optimizers()
  local h = self.hparams
  local params = lt.nn.parameters(self)
  local opt
  if h.optimizer == "sgd" then
    opt = lt.optim.SGD(params, { lr = h.lr, momentum = h.momentum, weight_decay = h.weight_decay,
      nesterov = h.nesterov })
  elseif h.optimizer == "adam" then
    opt = lt.optim.Adam(params, { lr = h.lr, weight_decay = h.weight_decay })
  else
    opt = lt.optim.AdamW(params, { lr = h.lr, weight_decay = h.weight_decay })
  end
  local sched
  if h.scheduler == "cosine" then
    sched = lt.optim.lr_scheduler.CosineAnnealingLR(opt, { T_max = h.max_epochs })
  elseif h.scheduler == "step" then
    sched = lt.optim.lr_scheduler.StepLR(opt, { step_size = h.step_size or 10, gamma = h.gamma or 0.1 })
  end
  if sched then return { optimizer = opt, lr_scheduler = { scheduler = sched, interval = "epoch" } } end
  return opt
end

return C
