-- lutra.trainer.model — what the trainer adds to a model table, and configure_optimizers' return value.
--
-- A model is a plain table, maybe with a metatable (a class). While a trainer uses it, the model answers
-- self.trainer, self.current_epoch, self.global_step, self:log(...), self:log_dict(...),
-- self:optimizers(), self:lr_schedulers(), self:manual_backward(loss), self:toggle_optimizer(opt, idx),
-- self:untoggle_optimizer(idx), self.automatic_optimization (true
-- unless set) and self.truncated_bptt_steps (0 unless set) through a metatable whose __index asks the
-- user's own metatable first (a copy of it, with __metatable set so getmetatable(model) still returns the
-- user's). Fields the user sets on the table always win: nothing is written into the model table.
local lt = require "lutra"

local M = {}

-- model -> trainer, weak both ways: LuaJIT's weak-key tables are not ephemerons, so with strong values
-- the trainer (which holds trainer.model) kept its own key alive, and every fitted trainer, its model and
-- its loaders stayed in memory forever (found by tests/alloc_fail_spec.lua). model.trainer lasts as long
-- as something else holds the trainer.
local attached = setmetatable({}, { __mode = "kv" })

local provided = {}

function provided.trainer(model) return attached[model] end
function provided.current_epoch(model) local t = attached[model]; return t and t.current_epoch or 0 end
function provided.global_step(model) local t = attached[model]; return t and t.global_step or 0 end
function provided.automatic_optimization() return true end
function provided.truncated_bptt_steps() return 0 end

local methods = {}

local function trainer_of(model, what)
  local t = attached[model]
  if not t then error(what .. ": the model is not attached to a trainer", 3) end
  return t
end

function methods.log(self, name, value, opts)
  trainer_of(self, "log"):_log(name, value, opts)
end

function methods.log_dict(self, dict, opts)
  if type(dict) ~= "table" then error("log_dict: expected a table of name = value, got " .. type(dict), 2) end
  local t = trainer_of(self, "log_dict")
  local mt = getmetatable(dict) -- an lt.metrics.MetricCollection: each metric object under its key
  if type(mt) == "table" and rawget(mt, "__lutra_metric_collection") then dict = dict:_named_metrics() end
  local names = {}
  for k in pairs(dict) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do t:_log(k, dict[k], opts) end
end

function methods.optimizers(self, use_pl_optimizer)
  local t = trainer_of(self, "optimizers")
  local list = use_pl_optimizer == false and t.optimizers or t:_wrapped_optimizers()
  if #list == 1 then return list[1] end
  return list
end

function methods.lr_schedulers(self)
  local t = trainer_of(self, "lr_schedulers")
  local list = {}
  for i, c in ipairs(t.lr_scheduler_configs or {}) do list[i] = c.scheduler end
  if #list == 0 then return nil end
  if #list == 1 then return list[1] end
  return list
end

-- Lightning's toggle_optimizer / untoggle_optimizer. The trainer calls them around each optimizer's
-- closure when there are several (automatic optimization); a model may override them, or call them itself
-- under manual optimization. toggle: only the parameters of `optimizer` require grad (a GAN's generator
-- step computes no gradients for the discriminator), remembering every parameter's state; untoggle: the
-- parameters of the other optimizers get their state back.
local function each_param(opt, fn)
  local ok, groups = pcall(function() return opt.param_groups end)
  if not ok or type(groups) ~= "table" then return end
  for _, g in ipairs(groups) do
    for _, p in ipairs(g.params or {}) do fn(p) end
  end
end

local toggled = setmetatable({}, { __mode = "k" }) -- model -> {param -> requires_grad before toggling}

function methods.toggle_optimizer(self, optimizer, _optimizer_idx)
  local t = trainer_of(self, "toggle_optimizer")
  if optimizer == nil then error("toggle_optimizer: expected an optimizer, got nil", 2) end
  local state = {}
  for _, opt in ipairs(t.optimizers or {}) do
    each_param(opt, function(p)
      if state[p] == nil then
        state[p] = p:requires_grad()
        p:requires_grad(false)
      end
    end)
  end
  -- self:optimizers() hands out wrappers ({optimizer = opt, _idx = i}); the trainer passes the optimizer
  local raw = type(optimizer) == "table" and rawget(optimizer, "_idx") ~= nil and optimizer.optimizer or optimizer
  each_param(raw, function(p) if state[p] ~= nil then p:requires_grad(state[p]) end end)
  toggled[self] = state
end

function methods.untoggle_optimizer(self, optimizer_idx)
  local t = trainer_of(self, "untoggle_optimizer")
  local state = toggled[self]
  if not state then return end
  for i, opt in ipairs(t.optimizers or {}) do
    if i - 1 ~= optimizer_idx then
      each_param(opt, function(p) if state[p] ~= nil then p:requires_grad(state[p]) end end)
    end
  end
  toggled[self] = nil
end

function methods.manual_backward(self, loss)
  local t = trainer_of(self, "manual_backward")
  t:_manual_backward(self, loss)
end

--- Lightning's LightningModule.clip_gradients, for a configure_gradient_clipping override.
function methods.clip_gradients(self, optimizer, gradient_clip_val, gradient_clip_algorithm)
  if gradient_clip_val == nil or gradient_clip_val == 0 then return end
  local algo = gradient_clip_algorithm or "norm"
  if algo ~= "norm" and algo ~= "value" then
    error("clip_gradients: gradient_clip_algorithm must be \"norm\" or \"value\", got " .. tostring(algo), 2)
  end
  local params = {}
  local groups = optimizer and optimizer.param_groups
  if type(groups) ~= "table" then error("clip_gradients: expected an optimizer with param_groups", 2) end
  for _, g in ipairs(groups) do
    for _, p in ipairs(g.params or {}) do params[#params + 1] = p end
  end
  require("lutra.core")._clip_gradients(params, gradient_clip_val, algo)
end

-- lightning: self:save_hyperparameters(...) on a plain model table too (lua/lutra/nn/module.lua)
function methods.save_hyperparameters(self, ...) return require("lutra.nn.module").save_hyperparameters(self, ...) end

local function provide(model, k)
  local f = provided[k]
  if f then return f(model) end
  return methods[k]
end

--- Makes the trainer's fields and methods answer on the model (idempotent).
function M.attach(model, trainer)
  if type(model) ~= "table" then
    error("fit: the model must be a table (with training_step and configure_optimizers), got " .. type(model), 3)
  end
  attached[model] = trainer
  local mt = debug.getmetatable(model)
  if mt and rawget(mt, "__lutra_model") then return end
  local newmt = {}
  if mt then
    for k, v in pairs(mt) do newmt[k] = v end
    if newmt.__metatable == nil then newmt.__metatable = mt end
  end
  local uidx = mt and mt.__index
  newmt.__lutra_model = true
  if uidx == nil then
    newmt.__index = provide
  elseif type(uidx) == "function" then
    newmt.__index = function(t, k)
      local v = uidx(t, k)
      if v ~= nil then return v end
      return provide(t, k)
    end
  else
    newmt.__index = function(t, k)
      local v = uidx[k]
      if v ~= nil then return v end
      return provide(t, k)
    end
  end
  debug.setmetatable(model, newmt)
end

function M.trainer_of(model) return attached[model] end

-- ---- configure_optimizers ----------------------------------------------------------------------------

local function is_optimizer(x)
  local tx = type(x)
  if tx ~= "table" and tx ~= "userdata" then return false end
  if lt.is_tensor(x) then return false end
  local ok, step, zg = pcall(function() return x.step, x.zero_grad end)
  return ok and type(step) == "function" and type(zg) == "function"
end
M.is_optimizer = is_optimizer

local function is_scheduler(x)
  if type(x) ~= "table" then return false end
  return type(x.step) == "function" and x.optimizer ~= nil and type(x.zero_grad) ~= "function"
end

local EXPECTED = "return an optimizer, a list of optimizers, {optimizers, schedulers}, " ..
  "{optimizer = ..., lr_scheduler = ...} or a list of such tables"

local SCHED_KEYS = { scheduler = true, interval = true, frequency = true, monitor = true, strict = true, name = true,
  opt_idx = true, reduce_on_plateau = true }

local function sched_config(s, monitor, where)
  local c
  if is_scheduler(s) then
    c = { scheduler = s }
  elseif type(s) == "table" and s.scheduler ~= nil then
    for k in pairs(s) do
      if not SCHED_KEYS[k] then
        error(string.format("configure_optimizers: unknown key '%s' in the lr scheduler config%s (expected scheduler, " ..
          "interval, frequency, monitor, strict, name)", tostring(k), where), 0)
      end
    end
    if not is_scheduler(s.scheduler) then
      error("configure_optimizers: the lr scheduler config's 'scheduler' is not a scheduler" .. where, 0)
    end
    c = {}
    for k, v in pairs(s) do c[k] = v end
  else
    error("configure_optimizers: expected an lr scheduler or {scheduler = ..., interval = ...}" .. where ..
      ", got " .. type(s), 0)
  end
  c.interval = c.interval or "epoch"
  if c.interval ~= "epoch" and c.interval ~= "step" then
    error(string.format("configure_optimizers: the lr scheduler's interval must be \"epoch\" or \"step\", got %s",
      tostring(c.interval)), 0)
  end
  c.frequency = c.frequency or 1
  if type(c.frequency) ~= "number" or c.frequency < 1 or c.frequency ~= math.floor(c.frequency) then
    error("configure_optimizers: the lr scheduler's frequency must be a positive integer, got " .. tostring(c.frequency), 0)
  end
  c.monitor = c.monitor or monitor
  c.reduce_on_plateau = c.scheduler.is_plateau == true
  if c.reduce_on_plateau and c.monitor == nil then
    error("configure_optimizers: a ReduceLROnPlateau scheduler needs a monitor: return {optimizer = opt, " ..
      "lr_scheduler = {scheduler = sched, monitor = \"val_loss\"}}", 0)
  end
  if c.strict == nil then c.strict = true end
  return c
end

local OPT_KEYS = { optimizer = true, lr_scheduler = true, frequency = true, monitor = true }

local function check_opt_keys(d, where)
  for k in pairs(d) do
    if not OPT_KEYS[k] then
      error(string.format("configure_optimizers: unknown key '%s' in the optimizer config%s (expected optimizer, " ..
        "lr_scheduler, frequency, monitor)", tostring(k), where), 0)
    end
  end
end

--- Reads configure_optimizers' return value: optimizers list, scheduler configs and the optimizers'
--- frequencies (a list of {optimizer = ..., frequency = k}: one optimizer per batch, k batches each in turn;
--- empty when none is given).
function M.parse_optimizers(ret)
  local opts, scheds, freqs = {}, {}, {}
  if ret == nil then error("configure_optimizers returned nil: " .. EXPECTED, 0) end
  if is_optimizer(ret) then
    opts[1] = ret
  elseif type(ret) == "table" and ret.optimizer ~= nil then
    if not is_optimizer(ret.optimizer) then
      error("configure_optimizers: the 'optimizer' field is not an optimizer (" .. EXPECTED .. ")", 0)
    end
    check_opt_keys(ret, "")
    opts[1] = ret.optimizer
    if ret.lr_scheduler ~= nil then scheds[1] = sched_config(ret.lr_scheduler, ret.monitor, "") end
  elseif type(ret) == "table" and #ret == 2 and type(ret[1]) == "table" and not is_optimizer(ret[1])
      and ret[1].optimizer == nil and type(ret[2]) == "table" then
    for i, o in ipairs(ret[1]) do
      if not is_optimizer(o) then error(string.format("configure_optimizers: optimizers[%d] is not an optimizer", i), 0) end
      opts[i] = o
    end
    for i, s in ipairs(ret[2]) do scheds[i] = sched_config(s, nil, string.format(" (schedulers[%d])", i)) end
    if is_scheduler(ret[2]) or (ret[2].scheduler ~= nil) then scheds = { sched_config(ret[2], nil, "") } end
  elseif type(ret) == "table" and #ret > 0 then
    for i, o in ipairs(ret) do
      if is_optimizer(o) then
        opts[#opts + 1] = o
      elseif type(o) == "table" and o.optimizer ~= nil then
        if not is_optimizer(o.optimizer) then
          error(string.format("configure_optimizers: element %d's 'optimizer' is not an optimizer", i), 0)
        end
        check_opt_keys(o, string.format(" (element %d)", i))
        opts[#opts + 1] = o.optimizer
        if o.frequency ~= nil then
          local f = o.frequency
          if type(f) ~= "number" or f < 1 or f ~= math.floor(f) then
            error(string.format("configure_optimizers: element %d's frequency must be a positive integer, got %s", i,
              tostring(f)), 0)
          end
          freqs[#opts] = f
        end
        if o.lr_scheduler ~= nil then
          local c = sched_config(o.lr_scheduler, o.monitor, string.format(" (element %d)", i))
          c.opt_idx = #opts - 1
          scheds[#scheds + 1] = c
        end
      else
        error(string.format("configure_optimizers: element %d is a %s, not an optimizer (%s)", i, type(o), EXPECTED), 0)
      end
    end
  else
    error("configure_optimizers returned a " .. type(ret) .. " that is not an optimizer: " .. EXPECTED, 0)
  end
  if #opts == 0 then error("configure_optimizers returned no optimizer: " .. EXPECTED, 0) end
  local nf = 0
  for _ in pairs(freqs) do nf = nf + 1 end
  if nf > 0 and nf ~= #opts then
    error(string.format("configure_optimizers: a frequency must be given to each optimizer (%d of %d have one)", nf,
      #opts), 0)
  end
  for _, c in ipairs(scheds) do
    if c.opt_idx == nil then
      c.opt_idx = 0
      for i, o in ipairs(opts) do if rawequal(o, c.scheduler.optimizer) then c.opt_idx = i - 1 end end
    end
  end
  return opts, scheds, freqs
end

return M
