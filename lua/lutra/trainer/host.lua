-- lutra.trainer.host — the Lua side of the C loops' host: what core/bind/l_loop_host.c's and
-- l_loop_dispatch.c's lt_host functions (h_*) call in Lua, through trainer._env:
--   refresh          env.deprecated_outputs()                 an on_train_epoch_end takes outputs (once)
--   call             env.hook_args(name, batch_idx, dl, opt_idx, sched_idx), env.hook_after(name, result, n,
--                    sched_idx): the arguments and defaults of the hooks that live here (LUA_SIDE below)
--   h_data_start     env.data_start(kind, dl)                  a loader's iterator into the run's R table
--   h_split_batch    env.split_batch(steps)                    TBPTT splits of the batch
--   h_training_step  env.keep_hiddens(output)                  (with TBPTT: the hiddens for the next split)
--   h_eval_step      env.default_predict_step(batch, batch_idx, dl)           (no predict_step: forward)
--   h_opt_params     env.opt_params(i)                         a Lua optimizer's parameters
--   h_event          env.event(name, a, b) -> M.event, env.batch_output(), env.keep_output()
--   h_run_custom     env.run_custom(slot)                      a Lua loop in a slot
-- Every hook is called by the C dispatcher (l_hook_dispatch; from Lua lp:call_hook). The run's values live
-- in env.R, whose slots core._seam().run names.
local lt = require "lutra"
local core = require "lutra.core"
local loops = require "lutra.trainer.loops"

local M = {}
local hook_args, hook_after -- (the Lua-side hooks, below)

local fmt = string.format
local RUN = core._seam().run

function M.merge(dst, src) for k, v in pairs(src) do dst[k] = v end end
local merge = M.merge

local DEPRECATION = "lutra: on_train_epoch_end(self, outputs) is deprecated; define training_epoch_end(self, outputs) " ..
  "to receive the epoch's outputs"
local deprecation_printed = false

-- ---- batch outputs ----------------------------------------------------------------------------------

-- Detached copies of the tensors in v (a tensor that needs no grad is kept as it is: same object).
local function detach_all(v)
  if lt.is_tensor(v) then
    if v:requires_grad() or v:grad_fn() then return v:detach() end
    return v
  end
  if type(v) == "table" and getmetatable(v) == nil then
    local t = {}
    for k, x in pairs(v) do t[k] = detach_all(x) end
    return t
  end
  return v
end

-- One training_step return value as Lightning keeps it: detached, no hiddens, the loss as lp:output_loss
-- keeps it (the rule the C side applies to the common case, core/bind/l_loop.c). nil when there is no loss
-- (automatic).
local function process_output(self, raw)
  if raw == nil then return nil end
  if lt.is_tensor(raw) then return { loss = self._lp:output_loss(raw) } end
  if type(raw) ~= "table" then return nil end
  if self._automatic and raw.loss == nil then return nil end
  local out = {}
  for k, v in pairs(raw) do
    if k ~= "hiddens" then
      if k == "loss" and lt.is_tensor(v) then out.loss = self._lp:output_loss(v)
      else out[k] = detach_all(v) end
    end
  end
  return out
end

local function batch_output(self)
  local env = self._env
  local raw = env.R[RUN.train_out]
  local nopt = self._automatic and #self.optimizers or 1
  local nsplit = env.num_splits or 1
  if nopt <= 1 and nsplit == 1 then return process_output(self, raw[1]) end
  local out = {}
  if self._automatic and #(self.optimizer_frequencies or {}) > 0 then
    -- one optimizer ran (Lightning drops the others' empty places): a list of its output per split
    local k = self._lp:get("active_optimizer") + 1 -- the loop's choice for this batch
    for s = 1, nsplit do out[s] = process_output(self, raw[(s - 1) * nopt + k]) end
    if nsplit == 1 then return { out[1] } end
    return { out }
  end
  if nsplit == 1 then
    for k = 1, nopt do out[k] = process_output(self, raw[k]) end
  elseif nopt <= 1 then
    for s = 1, nsplit do out[s] = process_output(self, raw[s]) end
  else
    for k = 1, nopt do
      local per = {}
      for s = 1, nsplit do per[s] = process_output(self, raw[(s - 1) * nopt + k]) end
      out[k] = per
    end
  end
  return out
end


local function make_iter(l)
  local f, s, c = l:iter()
  if s == nil and c == nil then return f end
  return function()
    local v = f(s, c)
    c = v
    return v
  end
end

function M.setup_env(self)
  local env = self._env
  env.cb_order = self._cb_order

  -- the epoch-output rule (core/bind/l_loop.c) found an on_train_epoch_end taking outputs: once per process
  function env.deprecated_outputs()
    if deprecation_printed then return end
    deprecation_printed = true
    lt._note(DEPRECATION)
  end

  -- training_step returned nil under automatic optimization: the C loops skip the batch and call this once
  -- per fit (Lightning 1.6's warning; its manual optimization expects nil and says nothing)
  function env.nil_training_step()
    lt._warn("training_step returned nil. If this was on purpose, ignore this warning... (the batch is skipped: " ..
      "no backward, the weights do not change; said once per fit)")
  end

  function env.data_start(kind, dl)
    if kind == "train" then
      env.R[RUN.train_iter] = make_iter(self._train_loader)
    else
      local l = self._eval_loaders[dl + 1]
      env.R[RUN.eval_iter] = make_iter(l)
    end
  end

  -- the batch's outputs, into R[RUN.batch_out] (the C side builds the common case itself)
  function env.batch_output()
    env.R[RUN.batch_out] = batch_output(self)
  end

  function env.keep_output()
    local out = env.R[RUN.batch_out]
    if out == nil or (type(out) == "table" and next(out) == nil) then return false end
    local list = self._outputs
    list[#list + 1] = out
    return true
  end

  function env.split_batch(steps)
    local batch = env.R[RUN.train_batch]
    env.R[RUN.hiddens] = nil
    local splits, n = {}, 0
    if type(batch) ~= "table" then
      error("training_step: truncated_bptt_steps needs batches that are tables of tensors", 0)
    end
    for _, v in pairs(batch) do
      if lt.is_tensor(v) and v:dim() >= 2 then
        local T = v:size(2)
        local m = math.ceil(T / steps)
        if m > n then n = m end
      end
    end
    if n == 0 then n = 1 end
    for s = 1, n do
      local piece = {}
      for k, v in pairs(batch) do
        if lt.is_tensor(v) and v:dim() >= 2 then
          local T = v:size(2)
          local start = (s - 1) * steps + 1
          if start <= T then piece[k] = v:narrow(2, start, math.min(steps, T - start + 1)) end
        else
          piece[k] = v
        end
      end
      splits[s] = piece
    end
    env.R[RUN.splits], env.num_splits = splits, n
    return n
  end

  -- truncated backprop: training_step's hiddens (its output's) for the next split, detached
  function env.keep_hiddens(out)
    if type(out) == "table" and not lt.is_tensor(out) then env.R[RUN.hiddens] = detach_all(out.hiddens)
    else env.R[RUN.hiddens] = nil end
  end

  function env.default_predict_step(batch)
    local model = self.model
    local f = model.forward
    if type(f) ~= "function" then error("the model has no predict_step and no forward", 0) end
    local x = batch
    if type(batch) == "table" and not lt.is_tensor(batch) then x = batch[1] end
    return f(model, x)
  end

  function env.opt_params(i)
    local opt = self.optimizers[i + 1]
    local list = {}
    local groups = opt and opt.param_groups
    if type(groups) == "table" then
      for _, g in ipairs(groups) do
        for _, p in ipairs(g.params or {}) do list[#list + 1] = p end
      end
    end
    return list
  end

  function env.hook_args(name, batch_idx, dl, opt_idx, sched_idx)
    return hook_args(self, name, batch_idx, dl, opt_idx, sched_idx)
  end

  function env.hook_after(name, res, n, sched_idx)
    return hook_after(self, name, res, n, sched_idx)
  end

  function env.event(name, a, b)
    return M.event(self, name, a, b)
  end

  function env.run_custom(slot)
    return loops.run_custom(self, slot)
  end
end

-- The predictions of each loader, from the run state; kept in self._predictions for predict()'s result, which
-- must not depend on whether some target defines on_predict_epoch_end (its hook, when defined, comes first).
local function collect_predictions(self)
  if self._predictions == nil then
    local per = self._env.R[RUN.eval_outputs]
    local results = {}
    for i = 1, (self._n_eval_loaders or 1) do results[i] = per[i] or {} end
    self._predictions = results
  end
  return self._predictions
end

local function eval_outputs(self)
  local per = self._env.R[RUN.eval_outputs]
  local n = self._n_eval_loaders or 1
  if n <= 1 then return per[1] or {} end
  local outputs = {}
  for i = 1, n do outputs[i] = per[i] or {} end
  return outputs
end

local function must_return_nil(name)
  return function(_, r) if r ~= nil then error(name .. " must return nil (remove its return statement)", 0) end end
end

-- The scheduler config of lr_scheduler_step and its monitored metric (nil unless ReduceLROnPlateau).
local function scheduler_of(self, sched_idx)
  local config = self.lr_scheduler_configs[sched_idx + 1]
  if not config.reduce_on_plateau then return config, nil end
  local m = self.callback_metrics
  local metric = m[config.monitor]
  if metric == nil then
    local avail = {}
    for k in pairs(m) do avail[#avail + 1] = k end
    table.sort(avail)
    error(fmt("ReduceLROnPlateau conditioned on metric '%s' which is not available. Available metrics are: " ..
      "[%s]. Set the monitor with lr_scheduler = {scheduler = ..., monitor = ...}", tostring(config.monitor),
      table.concat(avail, ", ")), 0)
  end
  return config, metric
end

local function model_mode(train)
  return {
    args = function() end,
    after = function(self, _, n) -- the default, when no target defines the hook
      if n > 0 then return end
      if train then lt.nn.train(self.model, true) else lt.nn.eval(self.model) end
    end,
  }
end

-- The hooks whose arguments (args) or defaults and checks of the result (after) live on the Lua side: for the
-- dispatcher of the C loops (core/bind/l_loop_dispatch.c), through env.hook_args and env.hook_after. Which
-- hooks these are is declared once, in C (core._seam().hooks[name].lua_side); the check below keeps this
-- table equal to it. args(self, batch_idx, dl, opt_idx, sched_idx) -> the hook's arguments;
-- after(self, model_result, n_targets, sched_idx). (An on_train_epoch_end without an outputs parameter is
-- called without them: the dispatcher's rule.)
local LUA_SIDE = {
  training_epoch_end = { args = function(self) return self._outputs end, after = must_return_nil("training_epoch_end") },
  on_train_epoch_end = { args = function(self) return self._outputs end },
  validation_epoch_end = { args = eval_outputs, after = must_return_nil("validation_epoch_end") },
  test_epoch_end = { args = eval_outputs, after = must_return_nil("test_epoch_end") },
  on_predict_epoch_end = { args = collect_predictions },
  lr_scheduler_step = {
    args = function(self, _, _, opt_idx, sched_idx)
      local config, metric = scheduler_of(self, sched_idx)
      return config.scheduler, opt_idx, metric
    end,
    after = function(self, _, n, sched_idx)
      if n > 0 then return end -- the default
      local config, metric = scheduler_of(self, sched_idx)
      if config.reduce_on_plateau then config.scheduler:step(metric) else config.scheduler:step() end
    end,
  },
  toggle_optimizer = { args = function(self, _, _, opt_idx) return self.optimizers[opt_idx + 1], opt_idx end },
  untoggle_optimizer = { args = function(_, _, _, opt_idx) return opt_idx end },
  on_validation_model_eval = model_mode(false), on_validation_model_train = model_mode(true),
  on_test_model_eval = model_mode(false), on_test_model_train = model_mode(true),
  on_predict_model_eval = model_mode(false), on_predict_model_train = model_mode(true),
}
for name, h in pairs(core._seam().hooks) do
  if (LUA_SIDE[name] ~= nil) ~= h.lua_side then
    error(fmt("lutra.trainer.host: hook '%s' is %sLua-side in core/bind/l_loop_dispatch.c", name,
      h.lua_side and "" or "not "), 0)
  end
end
M.LUA_SIDE = LUA_SIDE

function hook_args(self, name, batch_idx, dl, opt_idx, sched_idx)
  return LUA_SIDE[name].args(self, batch_idx, dl, opt_idx, sched_idx)
end

function hook_after(self, name, res, n, sched_idx)
  local after = LUA_SIDE[name].after
  if after then after(self, res, n, sched_idx) end
end

-- A Lua-side hook called from Lua (lutra.checkpoint replays lr_scheduler_step): the steps of the C loops'
-- dispatch, through lp:call_hook.
function M.lua_hook(self, name, batch_idx, dl, opt_idx, sched_idx)
  local res, n = self._lp:call_hook(name, hook_args(self, name, batch_idx, dl, opt_idx, sched_idx))
  hook_after(self, name, res, n, sched_idx)
end

function M.event(self, name, _a, b)
  local env = self._env
  local R = env.R
  if name == "train_step" then
    -- Lightning's on_batch_end + update_train_step_metrics: the step values update the metrics and go
    -- to the logger every log_every_n_steps batches that stepped
    R[RUN.log_dirty] = false
    local m = self._results_train:metrics(true)
    merge(self._callback_metrics, m.callback)
    merge(self._progress_bar_metrics, m.pbar)
    local st = self._lp:state()
    if st.should_accumulate and self._automatic then return end
    if (st.batches_that_stepped + 1) % self.log_every_n_steps == 0 or st.should_stop or self.fast_dev_run > 0 then
      self:_log_metrics(m.log, st.batches_that_stepped)
    end
  elseif name == "save_logger" then
    for _, lg in ipairs(self.loggers) do if lg.save then lg:save() end end
  elseif name == "train_epoch_start" then
    self._results_train:reset()
    self._outputs = {}
    local n = self.reload_dataloaders_every_n_epochs
    if n and n > 0 and self._loaders_from_hooks then
      local epoch = self.current_epoch
      if epoch - (self._loaders_epoch or 0) >= n then self:_reload_dataloaders(epoch) end
    end
  elseif name == "sanity_loaders" or name == "fit_loaders" then
    -- the data hooks' loaders (lua/lutra/trainer/init.lua's _load_fit_loaders): a hook's error as it is, the
    -- trainer's own (configuration) errors as the trainer raises them, without a traceback
    local ok, err = pcall(self._load_fit_loaders, self, name == "sanity_loaders")
    if not ok then error(type(err) == "table" and err or { lutra_hook_error = true, msg = err }, 0) end
  elseif name == "train_epoch_end_reached" then
    self._results_train.epoch_end_reached = true
    local raw = R[RUN.train_out] -- the last batch's raw outputs are not needed any more
    for k in pairs(raw) do raw[k] = nil end
  elseif name == "train_epoch_end" then
    local m = self._results_train:metrics(false)
    merge(self._callback_metrics, m.callback)
    merge(self._progress_bar_metrics, m.pbar)
    self._outputs = {}
  elseif name == "train_epoch_log" then
    local m = self._results_train:metrics(false)
    self:_log_metrics(m.log, self._lp:get("batches_that_stepped"))
  elseif name == "eval_start" then
    self._saved_active = self._eval_active
    self._eval_active = true
    self._results_eval:reset()
    R[RUN.eval_outputs] = {}
    self._eval_kind = b
    self.validating = b == "validation" and not self._standalone
    self.testing = b == "test"
    self.predicting = b == "predict"
  elseif name == "eval_step" then
    R[RUN.log_dirty] = false
    if self.sanity_checking then return end
    local r = self._results_eval
    local m = r:metrics(true, true)
    r:clear_fresh()
    self._eval_log_step = (self._eval_log_step or -1) + 1
    self:_log_metrics(m.log, self._eval_log_step)
  elseif name == "eval_dataloader_end" then
    R[RUN.eval_out] = nil -- the last step's output is not needed any more
    self._results_eval.epoch_end_reached = true
  elseif name == "eval_epoch_end" then
    local r = self._results_eval
    r.epoch_end_reached = true
    if self.sanity_checking then return end
    local m = r:metrics(false)
    merge(self._callback_metrics, m.callback)
    merge(self._progress_bar_metrics, m.pbar)
    if self._eval_kind == "predict" then
      collect_predictions(self)
    else
      self:_log_metrics(m.log, self._lp:get("batches_that_stepped"))
      local n = self._n_eval_loaders or 1
      local results = {}
      for i = 1, n do
        local d = {}
        for k, v in pairs(m.callback) do
          if not k:find("dataloader_idx", 1, true) or k:find("dataloader_idx_" .. (i - 1), 1, true) then d[k] = v end
        end
        results[i] = d
      end
      self._eval_results = results
    end
  elseif name == "eval_end" then
    R[RUN.eval_batch], R[RUN.eval_out] = nil, nil
    self._eval_active = self._saved_active
    self.validating = false
    if self._eval_kind ~= "predict" then R[RUN.eval_outputs] = {} end
  end
end

return M
