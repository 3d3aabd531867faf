-- callbacks/model_summary.lua — lt.callbacks.ModelSummary: prints the model summary table (lutra.trainer.summary)
-- when fitting starts. The Trainer adds one unless enable_model_summary = false or the callbacks already
-- hold one.
--
--   lt.Trainer{callbacks = {lt.callbacks.ModelSummary{max_depth = 2}}}
--
-- Options: max_depth (1: the model's direct sub-modules; -1: all; 0: totals only), stream (io.stdout).
local cbs = require "lutra.callbacks"
local summary = require "lutra.trainer.summary"

local ModelSummary = cbs.Callback:extend("ModelSummary")

function ModelSummary:init(opts)
  opts = cbs.check_options("ModelSummary", opts, { max_depth = "integer", stream = true }, 3)
  self.max_depth = opts.max_depth or 1
  if self.max_depth < -1 then error("ModelSummary: option 'max_depth' must be >= -1", 3) end
  self.stream = opts.stream or io.stdout
end

function ModelSummary:on_fit_start(trainer, model)
  local text = summary.summarize(model, { max_depth = self.max_depth })
  self.stream:write(text, "\n")
  self.stream:flush()
end

return ModelSummary
