-- lt.optim.lr_scheduler — learning-rate schedulers over an optimizer's param_groups, following
-- PyTorch 1.13's step() exactly (its chainable forms; `sched:step(epoch)` with an explicit epoch uses the
-- closed forms, as PyTorch does):
--
--   local sched = lt.optim.lr_scheduler.StepLR(opt, {step_size = 30, gamma = 0.1})  -- or StepLR(opt, 30, 0.1)
--   for epoch = 1, 100 do train(); opt:step() ...; sched:step() end
--
-- Arguments after the optimizer as PyTorch 1.13's, positionally in its order or by name in an options table:
-- StepLR{step_size, gamma = 0.1}, MultiStepLR{milestones, gamma = 0.1}, ExponentialLR{gamma},
-- CosineAnnealingLR{T_max, eta_min = 0}, LambdaLR(fn | {fn, ...} | {lr_lambda = ...}),
-- OneCycleLR{max_lr, total_steps | epochs + steps_per_epoch, pct_start = 0.3, anneal_strategy = "cos",
--   cycle_momentum = true, base_momentum = 0.85, max_momentum = 0.95, div_factor = 25,
--   final_div_factor = 1e4, three_phase = false},
-- ReduceLROnPlateau{mode = "min", factor = 0.1, patience = 10, threshold = 1e-4, threshold_mode = "rel",
--   cooldown = 0, min_lr = 0, eps = 1e-8}: sched:step(metric).
--
-- LinearLR, ConstantLR, MultiplicativeLR, PolynomialLR (factor.lua), CosineAnnealingWarmRestarts, CyclicLR
-- (cyclic.lua), SequentialLR and ChainedScheduler (chained.lua) are in this folder, on the same base.
--
-- Every scheduler has sched.optimizer, sched.last_epoch (0 after construction), sched.base_lrs,
-- get_last_lr(), state_dict()/load_state_dict(sd) (plain numbers, strings and lists: JSON-safe; LambdaLR
-- leaves out its functions). ReduceLROnPlateau has sched.is_plateau = true.
local util = require "lutra.utils.check"

local M = {}

-- ---- helpers -----------------------------------------------------------------------------------------

local function is_optimizer(opt)
  if type(opt) == "table" and type(opt.param_groups) == "table" then return true end
  local ok, groups = pcall(function() return opt.param_groups end)
  return ok and type(groups) == "table"
end

local function check_optimizer(name, opt)
  if not is_optimizer(opt) then
    error(name .. ": expected an optimizer (with param_groups), got " .. type(opt), 4)
  end
end

-- Checks the options table against spec = {name = {type, default, required}} and returns the resolved
-- options. Errors name the option.
local function options(name, opts, spec)
  local types = {}
  for k, s in pairs(spec) do types[k] = s[1] end
  opts = util.check_options(name, opts, types, 4)
  local r = {}
  for k, s in pairs(spec) do
    local v = opts[k]
    if v == nil then
      if s.required then error(string.format("%s: option '%s' is required", name, k), 4) end
      v = s.default
    end
    r[k] = v
  end
  return r
end

local function deepcopy(v)
  if type(v) ~= "table" then return v end
  local r = {}
  for k, x in pairs(v) do r[k] = deepcopy(x) end
  return r
end

local function groups_of(opt)
  return opt.param_groups
end

-- ---- the base: PyTorch's _LRScheduler ----------------------------------------------------------------

local Base = {}
Base.__index = Base

-- Fields that are not state (never in state_dict).
local NOT_STATE = { optimizer = true, lr_lambdas = true }

local function init_base(self, opt)
  self.optimizer = opt
  local base = {}
  for i, g in ipairs(groups_of(opt)) do
    if g.initial_lr == nil then g.initial_lr = g.lr end
    base[i] = g.initial_lr
  end
  self.base_lrs = base
  self.last_epoch = -1
  self._step_count = 0
  self:step() -- the initial step: last_epoch becomes 0
  return self
end

--- sched:step([epoch]): advances one epoch (or sets it, using the closed form where there is one).
function Base:step(epoch)
  self._step_count = self._step_count + 1
  local values
  if epoch == nil then
    self.last_epoch = self.last_epoch + 1
    values = self:get_lr()
  else
    if type(epoch) ~= "number" then
      error(self.name .. ": step expects nothing or an epoch number, got " .. type(epoch), 2)
    end
    self.last_epoch = epoch
    values = self.closed_form_lr and self:closed_form_lr() or self:get_lr()
  end
  local last = {}
  for i, g in ipairs(groups_of(self.optimizer)) do
    g.lr = values[i]
    last[i] = g.lr
  end
  self._last_lr = last
end

function Base:get_last_lr() return deepcopy(self._last_lr) end

function Base:state_dict()
  local sd = {}
  for k, v in pairs(self) do
    if not NOT_STATE[k] and type(v) ~= "function" then sd[k] = deepcopy(v) end
  end
  return sd
end

function Base:load_state_dict(sd)
  if type(sd) ~= "table" then error(self.name .. ": load_state_dict expects a table, got " .. type(sd), 2) end
  for k, v in pairs(sd) do
    if NOT_STATE[k] then error(self.name .. ": load_state_dict: unexpected entry '" .. tostring(k) .. "'", 2) end
    local cur = rawget(self, k)
    if cur ~= nil and v ~= nil and type(cur) ~= type(v) then -- a wrong type would fail later, in step(), far from here
      error(string.format("%s: load_state_dict: entry '%s' must be a %s, got %s", self.name, tostring(k), type(cur),
        type(v)), 2)
    end
  end
  for k, v in pairs(sd) do
    self[k] = deepcopy(v)
  end
end

function Base:__tostring()
  return string.format("%s (last_epoch %d, lr %s)", self.name, self.last_epoch,
    table.concat((function()
      local t = {}
      for i, v in ipairs(self._last_lr or {}) do t[i] = string.format("%.6g", v) end
      return t
    end)(), ", "))
end

local function class(name)
  local C = setmetatable({}, { __index = Base })
  C.__index = C
  C.__tostring = Base.__tostring
  C.name = name
  return C
end

local function current_lrs(self)
  local r = {}
  for i, g in ipairs(groups_of(self.optimizer)) do r[i] = g.lr end
  return r
end

-- ---- StepLR ------------------------------------------------------------------------------------------

local StepLR = class("StepLR")

function M.StepLR(opt, opts)
  check_optimizer("StepLR", opt)
  local o = options("StepLR", opts, { step_size = { "integer", required = true }, gamma = { "number", default = 0.1 } })
  if o.step_size < 1 then error("StepLR: step_size must be a positive integer, got " .. o.step_size, 3) end
  local self = setmetatable({ step_size = o.step_size, gamma = o.gamma }, StepLR)
  return init_base(self, opt)
end

function StepLR:get_lr()
  local lrs = current_lrs(self)
  if self.last_epoch == 0 or self.last_epoch % self.step_size ~= 0 then return lrs end
  for i = 1, #lrs do lrs[i] = lrs[i] * self.gamma end
  return lrs
end

function StepLR:closed_form_lr()
  local r = {}
  for i, b in ipairs(self.base_lrs) do r[i] = b * self.gamma ^ math.floor(self.last_epoch / self.step_size) end
  return r
end

-- ---- MultiStepLR -------------------------------------------------------------------------------------

local MultiStepLR = class("MultiStepLR")

function M.MultiStepLR(opt, opts)
  check_optimizer("MultiStepLR", opt)
  local o = options("MultiStepLR", opts, { milestones = { "table", required = true }, gamma = { "number", default = 0.1 } })
  local ms = {}
  for i, m in ipairs(o.milestones) do
    if type(m) ~= "number" or m ~= math.floor(m) then
      error("MultiStepLR: milestones[" .. i .. "] must be an integer, got " .. tostring(m), 3)
    end
    ms[i] = m
  end
  table.sort(ms)
  local self = setmetatable({ milestones = ms, gamma = o.gamma }, MultiStepLR)
  return init_base(self, opt)
end

function MultiStepLR:get_lr()
  local lrs = current_lrs(self)
  local count = 0
  for _, m in ipairs(self.milestones) do if m == self.last_epoch then count = count + 1 end end
  if count == 0 then return lrs end
  for i = 1, #lrs do lrs[i] = lrs[i] * self.gamma ^ count end
  return lrs
end

function MultiStepLR:closed_form_lr()
  local passed = 0 -- bisect_right: milestones <= last_epoch
  for _, m in ipairs(self.milestones) do if m <= self.last_epoch then passed = passed + 1 end end
  local r = {}
  for i, b in ipairs(self.base_lrs) do r[i] = b * self.gamma ^ passed end
  return r
end

-- ---- ExponentialLR -----------------------------------------------------------------------------------

local ExponentialLR = class("ExponentialLR")

function M.ExponentialLR(opt, opts)
  check_optimizer("ExponentialLR", opt)
  local o = options("ExponentialLR", opts, { gamma = { "number", required = true } })
  return init_base(setmetatable({ gamma = o.gamma }, ExponentialLR), opt)
end

function ExponentialLR:get_lr()
  local lrs = current_lrs(self)
  if self.last_epoch == 0 then return lrs end
  for i = 1, #lrs do lrs[i] = lrs[i] * self.gamma end
  return lrs
end

function ExponentialLR:closed_form_lr()
  local r = {}
  for i, b in ipairs(self.base_lrs) do r[i] = b * self.gamma ^ self.last_epoch end
  return r
end

-- ---- CosineAnnealingLR -------------------------------------------------------------------------------

local CosineAnnealingLR = class("CosineAnnealingLR")

function M.CosineAnnealingLR(opt, opts)
  check_optimizer("CosineAnnealingLR", opt)
  local o = options("CosineAnnealingLR", opts, { T_max = { "number", required = true }, eta_min = { "number", default = 0 } })
  if not (o.T_max > 0) then error("CosineAnnealingLR: T_max must be > 0, got " .. o.T_max, 3) end
  return init_base(setmetatable({ T_max = o.T_max, eta_min = o.eta_min }, CosineAnnealingLR), opt)
end

function CosineAnnealingLR:get_lr()
  local e, T, eta = self.last_epoch, self.T_max, self.eta_min
  local lrs = current_lrs(self)
  if e == 0 then return lrs end
  local r = {}
  if self._step_count == 1 and e > 0 then
    for i, b in ipairs(self.base_lrs) do r[i] = eta + (b - eta) * (1 + math.cos(e * math.pi / T)) / 2 end
  elseif (e - 1 - T) % (2 * T) == 0 then
    for i, b in ipairs(self.base_lrs) do r[i] = lrs[i] + (b - eta) * (1 - math.cos(math.pi / T)) / 2 end
  else
    for i = 1, #lrs do
      r[i] = (1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T)) * (lrs[i] - eta) + eta
    end
  end
  return r
end

function CosineAnnealingLR:closed_form_lr()
  local r = {}
  for i, b in ipairs(self.base_lrs) do
    r[i] = self.eta_min + (b - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
  end
  return r
end

-- ---- LambdaLR ----------------------------------------------------------------------------------------

local LambdaLR = class("LambdaLR")

local function is_callable(f)
  if type(f) == "function" then return true end
  local mt = getmetatable(f)
  return type(mt) == "table" and mt.__call ~= nil
end

-- The per-group functions of LambdaLR / MultiplicativeLR from fn | {fn, ...} | {lr_lambda = ...}.
local function lambdas_of(name, opt, fn)
  local n = #groups_of(opt)
  if type(fn) == "table" and not is_callable(fn) and fn.lr_lambda ~= nil then
    util.check_options(name, fn, { lr_lambda = true }, 4) -- lambdas_of, the constructor, the wrapper, the caller
    fn = fn.lr_lambda
  end
  if is_callable(fn) then
    local fns = {}
    for i = 1, n do fns[i] = fn end
    return fns
  elseif type(fn) == "table" then
    if #fn ~= n then error(string.format("%s: expected %d lr_lambdas (one per param group), got %d", name, n, #fn), 4) end
    for i = 1, n do
      if not is_callable(fn[i]) then
        error(name .. ": lr_lambdas[" .. i .. "] must be a function, got " .. type(fn[i]), 4)
      end
    end
    return fn
  end
  error(name .. ": expected a function (epoch -> factor) or a list of them, got " .. type(fn), 4)
end

function M.LambdaLR(opt, fn)
  check_optimizer("LambdaLR", opt)
  return init_base(setmetatable({ lr_lambdas = lambdas_of("LambdaLR", opt, fn) }, LambdaLR), opt)
end

function LambdaLR:get_lr()
  local r = {}
  for i, b in ipairs(self.base_lrs) do
    local f = self.lr_lambdas[i](self.last_epoch)
    if type(f) ~= "number" then
      error("LambdaLR: lr_lambda(" .. self.last_epoch .. ") returned " .. type(f) .. ", expected a number", 3)
    end
    r[i] = b * f
  end
  return r
end

-- ---- OneCycleLR --------------------------------------------------------------------------------------

local OneCycleLR = class("OneCycleLR")

local function per_group(name, what, v, n)
  if type(v) == "table" then
    if #v ~= n then error(string.format("%s: expected %d values for %s, got %d", name, n, what, #v), 4) end
  end
  for i = 1, n do
    local x = type(v) == "table" and v[i] or v
    if type(x) ~= "number" or not (x >= 0 and x < math.huge) then
      error(string.format("%s: %s must be a finite number >= 0, got %s", name, what, tostring(x)), 4)
    end
  end
  if type(v) == "table" then return v end
  local r = {}
  for i = 1, n do r[i] = v end
  return r
end

function M.OneCycleLR(opt, opts)
  check_optimizer("OneCycleLR", opt)
  local o = options("OneCycleLR", opts, {
    max_lr = { "number|table", required = true }, total_steps = { "integer" }, epochs = { "integer" },
    steps_per_epoch = { "integer" }, pct_start = { "number", default = 0.3 },
    anneal_strategy = { "string", default = "cos" }, cycle_momentum = { "boolean", default = true },
    base_momentum = { "number|table", default = 0.85 }, max_momentum = { "number|table", default = 0.95 },
    div_factor = { "number", default = 25 }, final_div_factor = { "number", default = 1e4 },
    three_phase = { "boolean", default = false },
  })
  local total
  if o.total_steps == nil and (o.epochs == nil or o.steps_per_epoch == nil) then
    error("OneCycleLR: you must define either total_steps OR (epochs AND steps_per_epoch)", 3)
  elseif o.total_steps ~= nil then
    if o.total_steps <= 0 then error("OneCycleLR: expected positive integer total_steps, but got " .. o.total_steps, 3) end
    total = o.total_steps
  else
    if o.epochs <= 0 then error("OneCycleLR: expected positive integer epochs, but got " .. o.epochs, 3) end
    if o.steps_per_epoch <= 0 then
      error("OneCycleLR: expected positive integer steps_per_epoch, but got " .. o.steps_per_epoch, 3)
    end
    total = o.epochs * o.steps_per_epoch
  end
  if o.pct_start < 0 or o.pct_start > 1 then
    error("OneCycleLR: expected pct_start between 0 and 1, but got " .. o.pct_start, 3)
  end
  if o.anneal_strategy ~= "cos" and o.anneal_strategy ~= "linear" then
    error("OneCycleLR: anneal_strategy must be one of 'cos' or 'linear', instead got '" .. o.anneal_strategy .. "'", 3)
  end
  local phases
  if o.three_phase then
    phases = {
      { end_step = o.pct_start * total - 1, start_lr = "initial_lr", end_lr = "max_lr",
        start_momentum = "max_momentum", end_momentum = "base_momentum" },
      { end_step = 2 * o.pct_start * total - 2, start_lr = "max_lr", end_lr = "initial_lr",
        start_momentum = "base_momentum", end_momentum = "max_momentum" },
      { end_step = total - 1, start_lr = "initial_lr", end_lr = "min_lr",
        start_momentum = "max_momentum", end_momentum = "max_momentum" },
    }
  else
    phases = {
      { end_step = o.pct_start * total - 1, start_lr = "initial_lr", end_lr = "max_lr",
        start_momentum = "max_momentum", end_momentum = "base_momentum" },
      { end_step = total - 1, start_lr = "max_lr", end_lr = "min_lr",
        start_momentum = "base_momentum", end_momentum = "max_momentum" },
    }
  end
  local groups = groups_of(opt)
  local max_lrs = per_group("OneCycleLR", "max_lr", o.max_lr, #groups)
  for i, g in ipairs(groups) do
    g.initial_lr = max_lrs[i] / o.div_factor
    g.max_lr = max_lrs[i]
    g.min_lr = g.initial_lr / o.final_div_factor
  end
  local use_beta1 = false
  if o.cycle_momentum then
    local d = opt.defaults or {}
    if d.momentum == nil and d.betas == nil then
      error("OneCycleLR: optimizer must support momentum with `cycle_momentum` option enabled", 3)
    end
    use_beta1 = d.betas ~= nil
    local maxm = per_group("OneCycleLR", "max_momentum", o.max_momentum, #groups)
    local basem = per_group("OneCycleLR", "base_momentum", o.base_momentum, #groups)
    for i, g in ipairs(groups) do
      if use_beta1 then g.betas = { maxm[i], g.betas[2] } else g.momentum = maxm[i] end
      g.max_momentum = maxm[i]
      g.base_momentum = basem[i]
    end
  end
  local self = setmetatable({
    total_steps = total, _schedule_phases = phases, anneal_strategy = o.anneal_strategy,
    cycle_momentum = o.cycle_momentum, use_beta1 = use_beta1,
  }, OneCycleLR)
  return init_base(self, opt)
end

local function anneal(strategy, a, b, pct)
  if strategy == "linear" then return (b - a) * pct + a end
  return b + (a - b) / 2.0 * (math.cos(math.pi * pct) + 1)
end

function OneCycleLR:get_lr()
  local step = self.last_epoch
  if step > self.total_steps then
    error(string.format("OneCycleLR: tried to step %d times. The specified number of total steps is %d",
      step + 1, self.total_steps), 3)
  end
  local lrs = {}
  local phases = self._schedule_phases
  for gi, g in ipairs(groups_of(self.optimizer)) do
    local start, lr, mom = 0, nil, nil
    for i, ph in ipairs(phases) do
      if step <= ph.end_step or i == #phases then
        local pct = (step - start) / (ph.end_step - start)
        lr = anneal(self.anneal_strategy, g[ph.start_lr], g[ph.end_lr], pct)
        if self.cycle_momentum then
          mom = anneal(self.anneal_strategy, g[ph.start_momentum], g[ph.end_momentum], pct)
        end
        break
      end
      start = ph.end_step
    end
    lrs[gi] = lr
    if self.cycle_momentum then
      if self.use_beta1 then g.betas = { mom, g.betas[2] } else g.momentum = mom end
    end
  end
  return lrs
end

-- ---- ReduceLROnPlateau -------------------------------------------------------------------------------

local Plateau = { name = "ReduceLROnPlateau", is_plateau = true }
Plateau.__index = Plateau

function M.ReduceLROnPlateau(opt, opts)
  check_optimizer("ReduceLROnPlateau", opt)
  local o = options("ReduceLROnPlateau", opts, {
    mode = { "string", default = "min" }, factor = { "number", default = 0.1 }, patience = { "integer", default = 10 },
    threshold = { "number", default = 1e-4 }, threshold_mode = { "string", default = "rel" },
    cooldown = { "integer", default = 0 }, min_lr = { "number|table", default = 0 }, eps = { "number", default = 1e-8 },
  })
  if o.factor >= 1.0 then error("ReduceLROnPlateau: factor should be < 1.0, got " .. o.factor, 3) end
  if o.patience < 0 then error("ReduceLROnPlateau: patience must be >= 0, got " .. o.patience, 3) end
  if o.mode ~= "min" and o.mode ~= "max" then
    error("ReduceLROnPlateau: mode '" .. o.mode .. "' is unknown (expected \"min\" or \"max\")", 3)
  end
  if o.threshold_mode ~= "rel" and o.threshold_mode ~= "abs" then
    error("ReduceLROnPlateau: threshold_mode '" .. o.threshold_mode .. "' is unknown (expected \"rel\" or \"abs\")", 3)
  end
  local n = #groups_of(opt)
  local self = setmetatable({
    optimizer = opt, factor = o.factor, min_lrs = per_group("ReduceLROnPlateau", "min_lr", o.min_lr, n),
    patience = o.patience, cooldown = o.cooldown, cooldown_counter = 0, mode = o.mode, threshold = o.threshold,
    threshold_mode = o.threshold_mode, eps = o.eps, last_epoch = 0, num_bad_epochs = 0, best = nil,
  }, Plateau)
  self._last_lr = current_lrs(self)
  return self
end

-- `best` is nil until a first metric arrives (PyTorch: +-inf, which JSON cannot hold).
function Plateau:is_better(a)
  local best = self.best
  if best == nil then best = self.mode == "min" and math.huge or -math.huge end
  if self.mode == "min" and self.threshold_mode == "rel" then return a < best * (1 - self.threshold)
  elseif self.mode == "min" then return a < best - self.threshold
  elseif self.threshold_mode == "rel" then return a > best * (self.threshold + 1)
  else return a > best + self.threshold end
end

--- sched:step(metric[, epoch]): metric is a number or a one-element tensor.
function Plateau:step(metric, epoch)
  local current = metric
  if type(metric) ~= "number" then
    local ok, v = pcall(function() return metric:item() end)
    if not ok or type(v) ~= "number" then
      error("ReduceLROnPlateau: step expects the monitored metric (a number or a one-element tensor), got "
        .. type(metric), 2)
    end
    current = v
  end
  self.last_epoch = epoch or self.last_epoch + 1
  if self:is_better(current) then
    self.best = current
    self.num_bad_epochs = 0
  else
    self.num_bad_epochs = self.num_bad_epochs + 1
  end
  if self.cooldown_counter > 0 then
    self.cooldown_counter = self.cooldown_counter - 1
    self.num_bad_epochs = 0
  end
  if self.num_bad_epochs > self.patience then
    for i, g in ipairs(groups_of(self.optimizer)) do
      local old = g.lr
      local new = math.max(old * self.factor, self.min_lrs[i])
      if old - new > self.eps then g.lr = new end
    end
    self.cooldown_counter = self.cooldown
    self.num_bad_epochs = 0
  end
  self._last_lr = current_lrs(self)
end

-- LinearLR, ConstantLR, MultiplicativeLR, PolynomialLR (factor.lua), CosineAnnealingWarmRestarts, CyclicLR
-- (cyclic.lua), SequentialLR, ChainedScheduler (chained.lua): on the same base, in their own files
local function add_schedulers(into, helpers)
  for _, file in ipairs { "factor", "cyclic", "chained" } do require("lutra.optim.lr_scheduler." .. file)(into, helpers) end
end
add_schedulers(M, {
  class = class, options = options, init_base = init_base, check_optimizer = check_optimizer,
  current_lrs = current_lrs, groups_of = groups_of, deepcopy = deepcopy, per_group = per_group,
  lambdas_of = lambdas_of,
})

-- PyTorch's positional arguments after the optimizer (lua/lutra/utils/signatures.lua: StepLR(opt, 1, 0.7)), merged with
-- the options table by name; each constructor above reads one options table. As nn modules' constructors
-- (lua/lutra/nn/module.lua, signature_args): an ordinary call, not a tail call, so the constructors count this
-- wrapper in their error levels (a constructor's own check raises at level 3, a helper's at 4) and the errors
-- name the caller's line under every Lua (a tail call's frame has no line under PUC 5.1).
for name, names in pairs(require("lutra.utils.signatures").lr_scheduler) do
  local build = M[name]
  M[name] = function(opt, ...)
    local s = build(opt, util.merge_positional(name, names, 2, ...))
    return s
  end
end

Plateau.get_last_lr = Base.get_last_lr
Plateau.state_dict = Base.state_dict
Plateau.__tostring = function(self)
  return string.format("ReduceLROnPlateau (mode %s, best %s, num_bad_epochs %d)", self.mode, tostring(self.best),
    self.num_bad_epochs)
end

function Plateau:load_state_dict(sd)
  Base.load_state_dict(self, sd)
  if sd.best == nil then self.best = nil end
end

return require("lutra.names").strict(M, "lt.optim.lr_scheduler")
