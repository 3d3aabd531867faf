-- lutra.metrics (lt.metrics) — metrics with torchmetrics' meaning, for training scripts and self:log:
--
--   local acc = lt.metrics.Accuracy{task = "multiclass", num_classes = 10}
--   acc:update(logits, y)              -- or acc(logits, y): updates and returns the batch's accuracy
--   print(acc:compute()); acc:reset()
--   self:log("val_acc", acc)           -- computed over the epoch and reset at its end (docs/reference/metrics.md)
--
-- Classification (lutra/metrics/classification.lua), curves (curves.lua), regression and aggregation
-- (regression.lua), MetricCollection (collection.lua); the shared Metric machinery in base.lua.
local names = require "lutra.names"

local M = {}
for _, mod in ipairs({ "lutra.metrics.classification", "lutra.metrics.curves", "lutra.metrics.regression" }) do
  for k, v in pairs(require(mod)) do M[k] = v end
end
M.MetricCollection = require("lutra.metrics.collection").MetricCollection

--- true when v is a metric object of lt.metrics (what self:log computes and resets itself)
M.is_metric = require("lutra.metrics.base").is_metric

return names.strict(M, "lt.metrics")
