-- callbacks/early_stopping.lua — lt.callbacks.EarlyStopping: stops fitting when a monitored metric stops
-- improving (Lightning 1.6's EarlyStopping).
--
--   lt.callbacks.EarlyStopping{monitor = "val_loss", patience = 3, mode = "min", min_delta = 0}
--
-- Options: monitor (required: a key of trainer.callback_metrics), min_delta (0: an improvement must beat
-- the best by more than this), patience (3 checks without improvement), mode "min"|"max", strict (true: a
-- missing metric is an error; false: the check is skipped), check_finite (true: stop when the metric is
-- NaN or infinite), stopping_threshold (stop once the metric is better than this), divergence_threshold
-- (stop once it is worse than this), check_on_train_epoch_end (default: true when validation runs once per
-- epoch at its end; else the check runs at on_validation_end), verbose (messages on stderr).
-- The check sets trainer.should_stop; the fit loop stops only once min_epochs / min_steps are met.
-- Fields (wait_count, stopped_epoch, best_score, patience) are its state_dict.
local cbs = require "lutra.callbacks"

local fmt = string.format
local to_number = cbs.to_number

local EarlyStopping = cbs.Callback:extend("EarlyStopping")

local OPTIONS = {
  monitor = "string", min_delta = "number", patience = "integer", verbose = "boolean", mode = "string",
  strict = "boolean", check_finite = "boolean", stopping_threshold = "number", divergence_threshold = "number",
  check_on_train_epoch_end = "boolean",
}

function EarlyStopping:init(opts)
  opts = cbs.check_options("EarlyStopping", opts, OPTIONS, 3)
  if opts.monitor == nil then error("EarlyStopping: option 'monitor' is required (the metric to watch, e.g. \"val_loss\")", 3) end
  self.monitor = opts.monitor
  self.mode = opts.mode or "min"
  if self.mode ~= "min" and self.mode ~= "max" then
    error(fmt("EarlyStopping: option 'mode' must be \"min\" or \"max\", got %q", self.mode), 3)
  end
  self.patience = opts.patience or 3
  if self.patience < 0 then error("EarlyStopping: option 'patience' must be >= 0", 3) end
  local md = opts.min_delta or 0
  if md < 0 then error("EarlyStopping: option 'min_delta' must be >= 0", 3) end
  self.min_delta = self.mode == "max" and md or -md
  self.verbose = opts.verbose or false
  self.strict = opts.strict ~= false
  self.check_finite = opts.check_finite ~= false
  self.stopping_threshold = opts.stopping_threshold
  self.divergence_threshold = opts.divergence_threshold
  self._check_on_train_epoch_end = opts.check_on_train_epoch_end
  self.wait_count = 0
  self.stopped_epoch = 0
  self.best_score = self.mode == "min" and math.huge or -math.huge
end

function EarlyStopping:state_key()
  return fmt("EarlyStopping{monitor=%s,mode=%s}", self.monitor, self.mode)
end

local function better(mode, a, b)
  if mode == "min" then return a < b end
  return a > b
end

local function show(v)
  if v ~= v then return "nan" end
  if v == math.huge then return "inf" end
  if v == -math.huge then return "-inf" end
  return fmt("%.3f", v)
end

function EarlyStopping:setup(trainer, model, stage)
  if self._check_on_train_epoch_end == nil then
    local vci, cve = trainer.val_check_interval, trainer.check_val_every_n_epoch
    self._check_on_train_epoch_end = (vci == nil or vci == 1.0) and (cve == nil or cve == 1)
  end
end

local function skip(trainer)
  local st = trainer.state
  if type(st) == "table" and st.fn ~= nil and st.fn ~= "fit" then return true end
  return trainer.sanity_checking
end

function EarlyStopping:on_train_epoch_end(trainer)
  if not self._check_on_train_epoch_end or skip(trainer) then return end
  self:_run_check(trainer)
end

function EarlyStopping:on_validation_end(trainer)
  if self._check_on_train_epoch_end or skip(trainer) then return end
  self:_run_check(trainer)
end

function EarlyStopping:_run_check(trainer)
  local logs = trainer.callback_metrics or {}
  local fdr = trainer.fast_dev_run
  if fdr ~= nil and fdr ~= false and fdr ~= 0 then return end
  local raw = logs[self.monitor]
  if raw == nil then
    local keys = {}
    for k in pairs(logs) do keys[#keys + 1] = k end
    table.sort(keys)
    local msg = fmt("EarlyStopping: conditioned on metric %q which is not available; available metrics: %s", self.monitor,
      #keys > 0 and table.concat(keys, ", ") or "(none)")
    if self.strict then error(msg, 0) end
    if self.verbose then io.stderr:write("lutra: warning: ", msg, "\n") end
    return
  end
  local current = to_number(raw)
  if current == nil then
    error(fmt("EarlyStopping: the monitored metric %q is a %s, expected a number", self.monitor, type(raw)), 0)
  end
  local should_stop, reason = self:evaluate(current)
  if trainer._ddp then should_stop = trainer._ddp:reduce_boolean(should_stop) end -- ddp: all ranks stop together
  trainer.should_stop = trainer.should_stop or should_stop
  if should_stop then self.stopped_epoch = trainer.current_epoch end
  if reason and self.verbose then io.stderr:write(reason, "\n") end
end

--- evaluate(current) -> should_stop, reason: one check against the state (which it updates).
function EarlyStopping:evaluate(current)
  local order = self.mode == "min" and "<" or ">"
  if self.check_finite and (current ~= current or current == math.huge or current == -math.huge) then
    return true, fmt("Monitored metric %s = %s is not finite. Previous best value was %s. Signaling Trainer to stop.",
      self.monitor, show(current), show(self.best_score))
  elseif self.stopping_threshold ~= nil and better(self.mode, current, self.stopping_threshold) then
    return true, fmt("Stopping threshold reached: %s = %s %s %s. Signaling Trainer to stop.", self.monitor,
      show(current), order, show(self.stopping_threshold))
  elseif self.divergence_threshold ~= nil and better(self.mode, -current, -self.divergence_threshold) then
    return true, fmt("Divergence threshold reached: %s = %s %s %s. Signaling Trainer to stop.", self.monitor,
      show(current), order, show(self.divergence_threshold))
  elseif better(self.mode, current - self.min_delta, self.best_score) then
    local reason
    if self.best_score ~= math.huge and self.best_score ~= -math.huge then
      reason = fmt("Metric %s improved by %s >= min_delta = %s. New best score: %s", self.monitor,
        show(math.abs(self.best_score - current)), show(math.abs(self.min_delta)), show(current))
    else
      reason = fmt("Metric %s improved. New best score: %s", self.monitor, show(current))
    end
    self.best_score = current
    self.wait_count = 0
    return false, reason
  end
  self.wait_count = self.wait_count + 1
  if self.wait_count >= self.patience then
    return true, fmt("Monitored metric %s did not improve in the last %d records. Best score: %s. Signaling Trainer to stop.",
      self.monitor, self.wait_count, show(self.best_score))
  end
  return false, nil
end

function EarlyStopping:state_dict()
  return { wait_count = self.wait_count, stopped_epoch = self.stopped_epoch, best_score = self.best_score,
    patience = self.patience }
end

function EarlyStopping:load_state_dict(sd)
  if type(sd) ~= "table" then error("EarlyStopping:load_state_dict: expected a table, got " .. type(sd), 2) end
  self.wait_count = sd.wait_count or 0
  self.stopped_epoch = sd.stopped_epoch or 0
  if sd.best_score ~= nil then self.best_score = sd.best_score end
  if sd.patience ~= nil then self.patience = sd.patience end
end

return EarlyStopping
