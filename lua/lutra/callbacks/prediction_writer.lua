-- callbacks/prediction_writer.lua — lt.callbacks.BasePredictionWriter: Lightning 1.6's, the base of
-- callbacks that write predictions as they come (docs/reference/callbacks.md).
--
--   local Writer = lt.callbacks.BasePredictionWriter:extend("Writer")
--   function Writer:write_on_batch_end(trainer, model, prediction, batch_indices, batch, batch_idx, dataloader_idx)
--     lt.save(("pred_%d_%d.safetensors"):format(dataloader_idx, batch_idx), {p = prediction})
--   end
--   trainer:predict(model, loader)  -- with callbacks = {Writer{write_interval = "batch"}}
--
-- write_interval: "batch" (write_on_batch_end after each predict batch), "epoch" (write_on_epoch_end with all
-- predictions at the end) or "batch_and_epoch". batch_indices: lutra's loaders do not report the dataset
-- indices of a batch, so it is nil (Lightning gives None too unless its sampler tracks them).
local cbs = require "lutra.callbacks"

local fmt = string.format

local Writer = cbs.Callback:extend("BasePredictionWriter")

local INTERVALS = { batch = { true, false }, epoch = { false, true }, batch_and_epoch = { true, true } }

function Writer:init(opts)
  opts = cbs.check_options("BasePredictionWriter", opts, { write_interval = "string" }, 3)
  local wi = opts.write_interval or "batch"
  if not INTERVALS[wi] then
    error(fmt('BasePredictionWriter: option \'write_interval\' must be "batch", "epoch" or "batch_and_epoch", got %q',
      wi), 3)
  end
  self.write_interval = wi
end

function Writer.write_on_batch_end()
  error("BasePredictionWriter: define write_on_batch_end(self, trainer, model, prediction, batch_indices, batch, " ..
    "batch_idx, dataloader_idx)", 0)
end

function Writer.write_on_epoch_end()
  error("BasePredictionWriter: define write_on_epoch_end(self, trainer, model, predictions, batch_indices)", 0)
end

function Writer:on_predict_batch_end(trainer, model, outputs, batch, batch_idx, dataloader_idx)
  if not INTERVALS[self.write_interval][1] then return end
  self:write_on_batch_end(trainer, model, outputs, nil, batch, batch_idx, dataloader_idx)
end

function Writer:on_predict_epoch_end(trainer, model, results)
  if not INTERVALS[self.write_interval][2] then return end
  self:write_on_epoch_end(trainer, model, results, nil)
end

return Writer
