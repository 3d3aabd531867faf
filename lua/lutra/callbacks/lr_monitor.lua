-- callbacks/lr_monitor.lua — lt.callbacks.LearningRateMonitor: logs the learning rate of each optimizer
-- through the trainer's logger (Lightning 1.6's LearningRateMonitor).
--
--   lt.Trainer{callbacks = {lt.callbacks.LearningRateMonitor{logging_interval = "step"}}}
--   -- metrics.csv gains a column "lr-Adam" (several param groups: "lr-Adam/pg1", "lr-Adam/pg2";
--   -- two optimizers of one kind: "lr-Adam", "lr-Adam-1")
--
-- Options: logging_interval nil (each scheduler at its own interval: "step" schedulers every logging
-- step, "epoch" ones at each epoch start) | "step" | "epoch"; log_momentum (also "lr-Adam-momentum" from
-- betas[1] or momentum). Optimizers without a scheduler are logged at every logging point.
-- Needs a logger: fitting with logger=false and this callback is an error. The callback keeps only the last
-- value of each name (`cb.last_lrs[name]`): the history is the logger's, so a long run holds nothing per epoch.
local cbs = require "lutra.callbacks"

local fmt = string.format

local LearningRateMonitor = cbs.Callback:extend("LearningRateMonitor")

local OPTIONS = { logging_interval = "string", log_momentum = "boolean" }

function LearningRateMonitor:init(opts)
  opts = cbs.check_options("LearningRateMonitor", opts, OPTIONS, 3)
  local li = opts.logging_interval
  if li ~= nil and li ~= "step" and li ~= "epoch" then
    error(fmt("LearningRateMonitor: option 'logging_interval' must be \"step\", \"epoch\" or nil, got %q", li), 3)
  end
  self.logging_interval = li
  self.log_momentum = opts.log_momentum or false
  self.last_lrs = {}
end

local loggers_of = cbs._loggers_of

local function optimizer_name(opt)
  local ok, k = pcall(function() return opt.kind end)
  if ok and type(k) == "string" then return k end
  local mt = getmetatable(opt)
  if type(mt) == "table" and type(mt.__name) == "string" then return mt.__name end
  return "Optimizer"
end

-- {opt = optimizer, names = {group name...}, interval = "step"|"epoch"|"any"} for every optimizer
function LearningRateMonitor:_entries(trainer)
  local entries, seen, counts = {}, {}, {}
  local function add(opt, interval)
    local base = "lr-" .. optimizer_name(opt)
    counts[base] = (counts[base] or 0) + 1
    local name = counts[base] > 1 and (base .. "-" .. (counts[base] - 1)) or base
    local groups = opt.param_groups
    local n = groups and #groups or 1
    local names = {}
    for g = 1, n do names[g] = n > 1 and fmt("%s/pg%d", name, g) or name end
    entries[#entries + 1] = { opt = opt, names = names, interval = interval }
  end
  for _, cfg in ipairs(trainer.lr_scheduler_configs or {}) do
    local sched = cfg.scheduler
    local opt = sched and sched.optimizer
    if opt ~= nil and not seen[opt] then
      seen[opt] = true
      add(opt, cfg.interval or "epoch")
    end
  end
  for _, opt in ipairs(trainer.optimizers or {}) do
    if not seen[opt] then
      seen[opt] = true
      add(opt, "any")
    end
  end
  return entries
end

function LearningRateMonitor:on_train_start(trainer)
  if #loggers_of(trainer) == 0 then
    error("LearningRateMonitor: cannot log learning rates with a Trainer that has no logger (logger=false)", 0)
  end
  self._entries_cache = self:_entries(trainer)
end

function LearningRateMonitor:_extract(trainer, interval)
  local stats, any = {}, false
  for _, e in ipairs(self._entries_cache or self:_entries(trainer)) do
    if interval == "any" or e.interval == "any" or e.interval == interval then
      for g, name in ipairs(e.names) do
        local group = e.opt.param_groups[g]
        local lr = group.lr
        stats[name] = lr
        any = true
        self.last_lrs[name] = lr
        if self.log_momentum then
          local m = group.momentum
          local betas = group.betas
          if betas ~= nil then m = betas[1] end
          stats[name .. "-momentum"] = m or 0
        end
      end
    end
  end
  return any and stats or nil
end

local logging_step, should_update_logs = cbs._logging_step, cbs._should_update_logs

function LearningRateMonitor:_log(trainer, stats)
  for _, lg in ipairs(loggers_of(trainer)) do lg:log_metrics(stats, logging_step(trainer)) end
end

function LearningRateMonitor:on_train_batch_start(trainer)
  if self.logging_interval == "epoch" then return end
  if not should_update_logs(trainer) then return end
  local stats = self:_extract(trainer, self.logging_interval == nil and "step" or "any")
  if stats then self:_log(trainer, stats) end
end

function LearningRateMonitor:on_train_epoch_start(trainer)
  if self.logging_interval == "step" then return end
  local stats = self:_extract(trainer, self.logging_interval == nil and "epoch" or "any")
  if stats then self:_log(trainer, stats) end
end

return LearningRateMonitor
