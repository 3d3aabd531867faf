-- lutra.trainer.logging — self:log / self:log_dict and the metrics they feed (Lightning 1.6's
-- ResultCollection and logger connector, in small).
--
-- Each self:log(name, value, opts) call lands in the results of the loop that runs (training, or the
-- evaluation that runs): one entry per (hook, name, dataloader) with the last value (the step value) and
-- the epoch reduction (batch-size-weighted mean, sum, max or min). Metrics are read from the results:
--   step metrics:  entries with on_step; named `name_step` when on_epoch is also set (forked).
--   epoch metrics: entries with on_epoch, once the epoch's end is reached; `name_epoch` when forked.
-- trainer.callback_metrics (both names, plus `name`), logged_metrics (what went to the logger) and
-- progress_bar_metrics (prog_bar entries) are dictionaries of numbers updated as Lightning does.
-- With several evaluation loaders a name gets the suffix `/dataloader_idx_<k>`.
local lt = require "lutra"

local util = require "lutra.utils.check"
local RUN = require("lutra.core")._seam().run -- the slots of the run's R table (core/bind/l_loop.c)

local M = {}

-- Where logging is allowed and its defaults: {allowed on_step, allowed on_epoch, default on_step,
-- default on_epoch}. nil: logging is forbidden in the hook (Lightning 1.6's _FxValidator).
local BOTH, STEP_ONLY_FALSE, EPOCH_TRUE = { false, true }, { false }, { true }
local function fx(s, e, ds, de) return { on_step = s, on_epoch = e, default_on_step = ds, default_on_epoch = de } end
local train_like = fx(BOTH, BOTH, true, false)
local eval_like = fx(BOTH, BOTH, false, true)
local epoch_start = fx(BOTH, EPOCH_TRUE, false, true)
local epoch_end = fx(STEP_ONLY_FALSE, EPOCH_TRUE, false, true)
local run_start = fx(STEP_ONLY_FALSE, EPOCH_TRUE, false, true)

M.FUNCTIONS = {
  training_step = train_like, on_train_batch_start = train_like, on_train_batch_end = train_like,
  on_before_backward = train_like, on_after_backward = train_like, on_before_optimizer_step = train_like,
  on_before_zero_grad = train_like,
  validation_step = eval_like, test_step = eval_like, on_validation_batch_start = eval_like,
  on_validation_batch_end = eval_like, on_test_batch_start = eval_like, on_test_batch_end = eval_like,
  on_train_epoch_start = epoch_start, on_validation_epoch_start = epoch_start, on_test_epoch_start = epoch_start,
  on_train_epoch_end = epoch_end, on_validation_epoch_end = epoch_end, on_test_epoch_end = epoch_end,
  training_epoch_end = epoch_end, validation_epoch_end = epoch_end, test_epoch_end = epoch_end,
  on_train_start = run_start, on_validation_start = run_start, on_test_start = run_start,
}
-- Hooks where logging is forbidden (listed for the message; any hook not in FUNCTIONS is forbidden).

local REDUCE = { mean = true, max = true, min = true, sum = true }
local OPTS = { on_step = "boolean", on_epoch = "boolean", prog_bar = "boolean", logger = "boolean",
  reduce_fx = "string", batch_size = function(v) -- the weight of this value in the epoch mean: a count
    if not (type(v) == "number" and v >= 1 and v == math.floor(v) and v < math.huge) then
      return "must be an integer >= 1, got " .. (type(v) == "number" and tostring(v) or type(v))
    end
  end, sync_dist = "boolean", add_dataloader_idx = "boolean",
  enable_graph = "boolean", rank_zero_only = "boolean", metric_attribute = "string", sync_dist_group = "any" }

local function fmt_bool(b) return b and "True" or "False" end

local function allowed_str(list)
  local t = {}
  for i, v in ipairs(list) do t[i] = fmt_bool(v) end
  return "(" .. table.concat(t, ", ") .. ")"
end

local function contains(list, v)
  for _, x in ipairs(list) do if x == v then return true end end
  return false
end

local log_metric -- (below)

local function to_number(name, value)
  local tv = type(value)
  if tv == "number" then return value end
  if tv == "boolean" then return value and 1 or 0 end
  if lt.is_tensor(value) then
    if value:numel() ~= 1 then
      local s = value:shape()
      for i = 1, #s do s[i] = tostring(s[i]) end
      error(string.format("log: the value of '%s' must be a number or a one-element tensor, got a tensor of shape [%s]",
        name, table.concat(s, " x ")), 4)
    end
    return value:item()
  end
  error(string.format("log: the value of '%s' must be a number or a one-element tensor, got a %s", name, tv), 4)
end

-- ---- metric objects (lt.metrics) -----------------------------------------------------------------------
-- self:log(name, metric) as Lightning's: the step value is the batch value of the metric's last forward
-- (`m(preds, target)`), or its compute() so far when it was only updated; the epoch value is its compute()
-- at the epoch's end (its states summed over the DDP ranks first), after which it is reset. A metric logged
-- with on_step only is reset after each step's value.
local function is_metric(v)
  local mt = getmetatable(v)
  return type(mt) == "table" and rawget(mt, "__lutra_metric") == true
end

local function metric_value(name, metric, f)
  local ok, v = pcall(f, metric)
  if not ok then error(string.format("log: computing the metric '%s': %s", name, tostring(v)), 0) end
  return to_number(name, v)
end

local function local_compute(m) return m:_compute() end -- a step value stays the rank's own, as Lightning's

function log_metric(trainer, e, metric, name)
  if e.on_step then
    local v = metric._forward_cache
    if v == nil then v = metric_value(name, metric, local_compute) else v = to_number(name, v) end
    metric._forward_cache = nil
    e.value, e.fresh = v, true
    if not e.on_epoch then metric:reset() end
    trainer._env.R[RUN.log_dirty] = true
  end
  if e.on_epoch then e.count = e.count + 1 end
end

-- The epoch value of a metric entry: computed once (a collective under DDP), then the metric is reset.
local function metric_epoch_value(e)
  if e.computed == nil then
    e.computed = metric_value(e.name, e.metric, e.metric.compute)
    e.metric:reset()
  end
  return e.computed
end

-- A results collection: entries keyed by hook .. "\0" .. name .. "\0" .. dataloader.
local Results = {}
Results.__index = Results

function M.new_results(training)
  return setmetatable({ entries = {}, order = {}, training = training, epoch_end_reached = false }, Results)
end

function Results:reset()
  for _, e in pairs(self.entries) do -- a metric logged but never computed (the sanity check) starts afresh
    if e.metric and e.computed == nil then e.metric:reset() end
  end
  self.entries, self.order, self.epoch_end_reached = {}, {}, false
end

local function infer_batch_size(batch)
  if type(batch) == "table" then
    local x = batch[1]
    if lt.is_tensor(x) and x:dim() > 0 then return x:size(1) end
  elseif lt.is_tensor(batch) and batch:dim() > 0 then
    return batch:size(1)
  end
  return 1
end

-- The trainer's log: `ctx` has fx (the hook), dataloader_idx, n_dataloaders, batch.
function M.log(trainer, ctx, results, name, value, opts)
  if type(name) ~= "string" then error("log: the name must be a string, got " .. type(name), 3) end
  opts = util.check_options("log", opts, OPTS, 3)
  local fxname = ctx.fx
  if fxname == nil then
    error(string.format("log: self:log('%s') was called outside the trainer's hooks", name), 3)
  end
  local conf = M.FUNCTIONS[fxname]
  if not conf then error(string.format("log: you can't self:log() inside '%s'", fxname), 3) end
  local on_step, on_epoch = opts.on_step, opts.on_epoch
  if on_step == nil then on_step = conf.default_on_step end
  if on_epoch == nil then on_epoch = conf.default_on_epoch end
  if not contains(conf.on_step, on_step) then
    error(string.format("log: you can't self:log('%s', ..., {on_step=%s}) inside '%s', must be one of %s", name,
      tostring(on_step), fxname, allowed_str(conf.on_step)), 3)
  end
  if not contains(conf.on_epoch, on_epoch) then
    error(string.format("log: you can't self:log('%s', ..., {on_epoch=%s}) inside '%s', must be one of %s", name,
      tostring(on_epoch), fxname, allowed_str(conf.on_epoch)), 3)
  end
  local reduce = opts.reduce_fx or "mean"
  if type(reduce) ~= "string" or not REDUCE[reduce] then
    error(string.format("log: reduce_fx must be \"mean\", \"max\", \"min\" or \"sum\", got %s", tostring(reduce)), 3)
  end
  local metric = is_metric(value) and value or nil
  local v = not metric and to_number(name, value) or nil
  local dl = ctx.n_dataloaders and ctx.n_dataloaders > 1 and ctx.dataloader_idx or nil
  if opts.add_dataloader_idx == false then dl = nil end
  local key = fxname .. "\0" .. name .. "\0" .. tostring(dl)
  local e = results.entries[key]
  local prog_bar, logger = opts.prog_bar == true, opts.logger ~= false
  if e == nil then
    e = { name = name, fx = fxname, dl = dl, on_step = on_step, on_epoch = on_epoch, prog_bar = prog_bar,
      logger = logger, reduce = reduce, sum = 0, weight = 0, count = 0, metric = metric }
    results.entries[key] = e
    results.order[#results.order + 1] = key
  elseif e.on_step ~= on_step or e.on_epoch ~= on_epoch or e.reduce ~= reduce or e.metric ~= metric then
    error(string.format("log: you called self:log('%s', ...) twice in '%s' with different arguments", name, fxname), 3)
  end
  e.prog_bar, e.logger = prog_bar, logger
  if metric then return log_metric(trainer, e, metric, name) end
  local bs = on_epoch and reduce == "mean" and (opts.batch_size or infer_batch_size(ctx.batch)) or nil
  local wsum
  if opts.sync_dist and trainer._ddp then
    -- ddp: reduced across ranks now (every rank logs it alike): the step value with reduce_fx over ranks,
    -- a mean's epoch contribution as the sums of value * batch_size and batch_size over ranks
    local sum, weight
    v, sum, weight = trainer._ddp:reduce_log(v, bs or 1, reduce)
    if bs then wsum, bs = sum, weight end
  end
  e.value = v
  e.fresh = true
  if on_epoch then
    if reduce == "mean" then
      e.sum = e.sum + (wsum or v * bs)
      e.weight = e.weight + bs
    elseif reduce == "sum" then
      e.sum = e.sum + v
    elseif reduce == "max" then
      e.sum = (e.count == 0 or v > e.sum) and v or e.sum
    else
      e.sum = (e.count == 0 or v < e.sum) and v or e.sum
    end
    e.count = e.count + 1
  end
  if on_step then trainer._env.R[RUN.log_dirty] = true end -- step values to log
end

local function epoch_value(e)
  if e.count == 0 then return nil end
  if e.metric then return metric_epoch_value(e) end
  if e.reduce == "mean" then return e.weight > 0 and e.sum / e.weight or 0 end
  return e.sum
end

-- Lightning's ResultCollection.metrics(on_step): {callback=, log=, pbar=}
function Results:metrics(on_step, only_fresh)
  local m = { callback = {}, log = {}, pbar = {} }
  for _, key in ipairs(self.order) do
    local e = self.entries[key]
    local value
    if on_step then
      if e.on_step and (not only_fresh or e.fresh) then value = e.value end
    elseif e.on_epoch then
      value = epoch_value(e)
    end
    if value ~= nil then
      local name = e.name
      local forked = name
      if e.on_step and e.on_epoch then forked = name .. (on_step and "_step" or "_epoch") end
      if e.dl ~= nil then
        local suffix = "/dataloader_idx_" .. e.dl
        name, forked = name .. suffix, forked .. suffix
      end
      if e.logger then m.log[forked] = value end
      if self.training or (e.on_epoch and not on_step) then
        m.callback[name] = value
        m.callback[forked] = value
      end
      if e.prog_bar then m.pbar[forked] = value end
    end
  end
  return m
end

function Results:clear_fresh()
  for _, e in pairs(self.entries) do e.fresh = false end
end

return M
