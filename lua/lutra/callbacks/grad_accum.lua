-- callbacks/grad_accum.lua — lt.callbacks.GradientAccumulationScheduler: Lightning 1.6's, the number of
-- batches to accumulate per epoch (docs/reference/callbacks.md).
--
--   lt.callbacks.GradientAccumulationScheduler{scheduling = {[0] = 1, [4] = 2, [8] = 4}}
--
-- scheduling maps 0-based epochs to factors: from epoch 4 on, 2 batches per step; from 8 on, 4. Epochs
-- before the first key accumulate 1 (Lightning adds {0: 1}). The factor is set at each training epoch's
-- start (trainer.accumulate_grad_batches follows it) and changes the loops' rule of SPEC §8 from then on.
local cbs = require "lutra.callbacks"

local fmt = string.format

local GAS = cbs.Callback:extend("GradientAccumulationScheduler")

function GAS:init(opts)
  opts = cbs.check_options("GradientAccumulationScheduler", opts, { scheduling = "table" }, 3)
  local sched = opts.scheduling
  if sched == nil or next(sched) == nil then
    error("GradientAccumulationScheduler: option 'scheduling' must be a non-empty table {[epoch] = factor}", 3)
  end
  local epochs = {}
  for e, f in pairs(sched) do
    if type(e) ~= "number" or e ~= math.floor(e) or e < 0 then
      error(fmt("GradientAccumulationScheduler: epoch %s in 'scheduling' must be an integer >= 0", tostring(e)), 3)
    end
    if type(f) ~= "number" or f ~= math.floor(f) or f < 1 then
      error(fmt("GradientAccumulationScheduler: the factor for epoch %d must be an integer >= 1, got %s", e,
        tostring(f)), 3)
    end
    epochs[#epochs + 1] = e
  end
  table.sort(epochs)
  self.scheduling = {}
  for k, v in pairs(sched) do self.scheduling[k] = v end
  if self.scheduling[0] == nil then self.scheduling[0] = 1 end
  if epochs[1] ~= 0 then table.insert(epochs, 1, 0) end
  self.epochs = epochs
end

--- The factor for a 0-based epoch.
function GAS:get_accumulate_grad_batches(epoch)
  local f = 1
  for _, e in ipairs(self.epochs) do
    if epoch >= e then f = self.scheduling[e] end
  end
  return f
end

function GAS:on_train_epoch_start(trainer)
  local f = self:get_accumulate_grad_batches(trainer.current_epoch)
  if f ~= trainer.accumulate_grad_batches then trainer:_set_accumulate_grad_batches(f) end
end

return GAS
