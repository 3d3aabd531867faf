-- lutra.trainer — lt.Trainer: PyTorch Lightning 1.6's Trainer over lutra's C loops (docs/reference/trainer.md, hooks.md).
--
--   local trainer = lt.Trainer{max_epochs = 3, callbacks = {...}}
--   trainer:fit(model, train_loader, val_loader)          -- or {ckpt_path = "last.ckpt"} as 4th argument
--   trainer:validate(model, loader) / trainer:test(model, {l1, l2}) / trainer:predict(model, loader)
--   local run = trainer:fit_run(model, train_loader)      -- stepwise: run:advance{batches = 1}
--
-- How it is built. The loops are C state machines (core/src/lt_loop.h) that call hooks through the
-- dispatch of core/bind/l_loop.c; this file computes the loops' configuration from the options and the
-- data (Lightning's connectors), runs the stages around them (setup, configure_optimizers, on_fit_start,
-- the sanity check, on_fit_end, teardown), and does what needs Lua tables: batch outputs, the epoch-output
-- rule, logging, LR schedulers, evaluation results.
--
-- For callbacks, loggers and checkpoints (internals other lutra modules use; stable names):
--   trainer.callbacks        the callbacks list, in the dispatch order of the current run (a built-in
--                            ModelCheckpoint last); trainer.checkpoint_callback(s), trainer.logger(s)
--   trainer.optimizers, trainer.lr_scheduler_configs ({scheduler, interval, frequency, monitor, opt_idx,
--                            reduce_on_plateau}), trainer.model (the model of the current or last run)
--   trainer.fit_loop, validate_loop, test_loop, predict_loop: loop objects (lutra.trainer.loops) with
--                            .progress, :state_dict(), :load_state_dict(sd), .restarting
--   trainer.callback_metrics / logged_metrics / progress_bar_metrics: {name = number}
--   trainer.state = {fn = "fit"|"validate"|"test"|"predict", stage = ..., status = "running"|"finished"|
--                   "interrupted"|"failed"}; trainer.sanity_checking, trainer.training, trainer.validating ...
--   trainer:save_checkpoint(path)            -> require("lutra.checkpoint").save_trainer(trainer, path)
--   fit{ckpt_path = p}                        -> require("lutra.checkpoint").restore_trainer(trainer, p),
--                                                called after configure_optimizers, before on_fit_start
--   trainer:_loops_state_dict() / _loops_load_state_dict(sd): the fit loop's state (Lightning's layout)
--   trainer.num_training_batches, num_val_batches, num_sanity_val_batches, val_check_batch
local lt = require "lutra"
local core = require "lutra.core"
local compat = require "lutra._compat"
local pack, unpack, xpcall = compat.pack, compat.unpack, compat.xpcall
local logging = require "lutra.trainer.logging"
local host = require "lutra.trainer.host"
local modelmod = require "lutra.trainer.model"
local loops = require "lutra.trainer.loops"

local RUN = core._seam().run -- the slots of the run's R table (env.R), named by core/bind/l_loop.c

local Trainer = {}
local TrainerMT = {}

local util = require "lutra.utils.check"

local fmt = string.format
local INF = math.huge

-- ---- options -----------------------------------------------------------------------------------------

local function is_int(v) return type(v) == "number" and v == math.floor(v) and v > -2 ^ 53 and v < 2 ^ 53 end

local function int_ge(min)
  return function(v)
    if not is_int(v) or v < min then return fmt("must be an integer >= %d", min) end
  end
end
local function limit(v) -- int count or fraction in [0, 1]
  if type(v) ~= "number" or not (v >= 0) or (v > 1 and not is_int(v)) then -- (NaN fails v >= 0)
    return "must be an integer count of batches or a fraction in [0, 1]"
  end
end
local function boolean(v) if type(v) ~= "boolean" then return "must be a boolean" end end
local function number_ge0(v) if type(v) ~= "number" or not (v >= 0) then return "must be a number >= 0" end end
local function str(v) if type(v) ~= "string" then return "must be a string" end end

local function strategy(v) return require("lutra.distributed")._check_strategy(v) end -- ddp: lt.distributed
local function callbacks(v)
  if type(v) ~= "table" then return "must be a callback or a list of callbacks" end
  for i, cb in ipairs(v) do
    if type(cb) ~= "table" then return fmt("must be a list of callback tables (element %d is a %s)", i, type(cb)) end
  end
end
local function logger(v)
  if type(v) == "boolean" then return nil end
  if type(v) == "table" then
    if type(v.log_metrics) == "function" then return nil end
    for i, l in ipairs(v) do
      if type(l) ~= "table" or type(l.log_metrics) ~= "function" then
        return fmt("must be true, false, a logger (a table with log_metrics) or a list of loggers (element %d is not)", i)
      end
    end
    if #v > 0 then return nil end
  end
  return "must be true, false, a logger (a table with log_metrics) or a list of loggers"
end

-- The Trainer's options, the one table that the checks, the defaults of new() and the config CLI's --help
-- (lua/lutra/cli/init.lua) read: {name, check, type (what the command line parses), default (nil: computed or
-- unset; a plain value is filled in by new), shown (the default as --help prints it, when not a plain value),
-- help}. type "table": not settable from the command line.
local OPTIONS = {
  { "max_epochs", int_ge(-1), "integer", nil, "1000 unless max_steps", "stop after this many epochs (-1: no limit)" },
  { "min_epochs", int_ge(0), "integer", nil, "1 unless min_steps", "train at least this many epochs" },
  { "max_steps", int_ge(-1), "integer", -1, nil, "stop after this many optimizer steps (-1: no limit)" },
  { "min_steps", int_ge(0), "integer", nil, "0", "train at least this many steps" },
  { "limit_train_batches", limit, "number", nil, "1.0", "batches per epoch: a count, or a fraction of the loader" },
  { "limit_val_batches", limit, "number", nil, "1.0", "validation batches: a count or a fraction" },
  { "limit_test_batches", limit, "number", nil, "1.0", "test batches: a count or a fraction" },
  { "limit_predict_batches", limit, "number", nil, "1.0", "predict batches: a count or a fraction" },
  { "val_check_interval", function(v)
    if type(v) ~= "number" or not (v > 0) or (v > 1 and not is_int(v)) then
      return "must be a fraction in (0, 1] of the epoch or an integer count of batches"
    end
  end, "number", nil, "1.0", "validate every fraction of an epoch, or every n batches" },
  { "check_val_every_n_epoch", int_ge(1), "integer", 1, nil, "validate every n epochs" },
  { "num_sanity_val_steps", int_ge(-1), "integer", 2, nil, "validation batches before training (-1: all)" },
  { "accumulate_grad_batches", int_ge(1), "integer", 1, nil, "accumulate gradients over n batches per step" },
  { "gradient_clip_val", number_ge0, "number", nil, "nil", "clip gradients at this value (0 or nil: off)" },
  { "gradient_clip_algorithm", function(v)
    if v ~= "norm" and v ~= "value" then return 'must be "norm" or "value"' end
  end, "string", "norm", nil, '"norm" or "value"' },
  { "fast_dev_run", function(v)
    if type(v) ~= "boolean" and not (is_int(v) and v >= 0) then return "must be a boolean or an integer >= 0" end
  end, "boolean|integer", nil, "false", "run n batches of everything once (true: 1), no logger, no checkpoints" },
  { "overfit_batches", limit, "number", 0, nil, "train and validate on this many training batches" },
  { "log_every_n_steps", int_ge(1), "integer", 50, nil, "log step metrics every n steps" },
  { "reload_dataloaders_every_n_epochs", int_ge(0), "integer", 0, nil,
    "ask the data hooks for new loaders every n epochs (0: never)" },
  { "callbacks", callbacks, "table", nil, "{}", "callbacks (a list, or one callback)" },
  { "logger", logger, "boolean", nil, "true", "true (a CSVLogger), false, a logger or a list of loggers" },
  { "enable_checkpointing", boolean, "boolean", true, nil, "add a ModelCheckpoint when none is given" },
  { "enable_progress_bar", boolean, "boolean", nil, "on a terminal", "show the progress bar" },
  { "enable_model_summary", boolean, "boolean", nil, "true (false when embedded)", "print the model summary" },
  { "default_root_dir", str, "string", ".", nil, "where logs and checkpoints go" },
  { "seed", function(v) if not is_int(v) then return "must be an integer" end end, "integer", nil, "nil",
    "seed lutra's RNG when the trainer is built" },
  { "strategy", strategy, "string", nil, '"auto"', '"auto", "ddp" or "none" (lt.distributed)' },
  -- [tools: profiler, debugging options] lua/lutra/trainer/profilers.lua, lua/lutra/trainer/debug.lua
  { "profiler", function(v) return require("lutra.trainer.profilers")._check_option(v) end, "string", nil, "nil",
    '"simple", "advanced" or a profiler object: time per action (docs/reference/profiler.md)' },
  { "precision", function(v) return require("lutra.trainer.precision").check(v) end, "string", "32-true", nil,
    '"32-true" or "bf16-mixed": bfloat16 autocast in the GEMM-based ops (docs/reference/autocast.md)' },
  { "detect_anomaly", boolean, "boolean", false, nil, "name the first op that makes a NaN/inf (forward or backward)" },
  { "track_grad_norm", function(v) return require("lutra.trainer.debug").check_grad_norm(v) end, "number", -1, nil,
    "log the gradients' p-norm (-1: off)" },
  { "max_time", function(v) return require("lutra.trainer.debug").check_max_time(v) end, "string", nil, "nil",
    'stop fit after this long: "DD:HH:MM:SS", {days=, hours=, minutes=, seconds=} or seconds' },
}
local OPTION_CHECKS = {}
for _, o in ipairs(OPTIONS) do OPTION_CHECKS[o[1]] = o[2] end

--- The Trainer's options for the config CLI's --help and its parser: a list of {name=, type=, default=, help=}
--- (default: the text --help prints), in the documented order.
function Trainer._option_list()
  local list = {}
  for i, o in ipairs(OPTIONS) do
    local shown = o[5]
    if shown == nil then shown = type(o[4]) == "string" and fmt("%q", o[4]) or tostring(o[4]) end
    list[i] = { name = o[1], type = o[3], default = shown, help = o[6], check = o[2] }
  end
  return list
end

local function type_name(v)
  if type(v) == "string" then return fmt("%q (string)", v) end
  return fmt("%s (%s)", tostring(v), type(v))
end

-- the option checks with the value in the message: "must be an integer >= 1, got 0 (number)"
local CHECKS = {}
for k, check in pairs(OPTION_CHECKS) do
  CHECKS[k] = function(v)
    local msg = check(v)
    if msg then return msg .. ", got " .. type_name(v) end
  end
end

local function check_options(opts)
  if opts == nil then return {} end
  local checked = util.check_options("Trainer", opts, CHECKS, 3) -- (not a tail call: levels are the same on every Lua)
  return checked
end

-- A module that is absent gives nil; one that fails to load raises its own error (and may be required
-- again: without clearing package.loaded every later require would say only "loop or previous error").
local function try_require(name)
  local ok, m = pcall(require, name)
  if ok then return m end
  package.loaded[name] = nil
  if tostring(m):find("module '" .. name .. "' not found", 1, true) then return nil end
  error(m, 0)
end

-- through lutra.core, not LuaJIT's ffi, so that it answers under PUC Lua too
local function stdout_is_tty() return core._io.isatty(1) == true end

-- ---- construction -------------------------------------------------------------------------------------

--- obj is an instance of cls (a lutra class: instances have cls, or a subclass of it, as metatable).
function Trainer._is_instance(obj, cls)
  if type(obj) ~= "table" or cls == nil then return false end
  local mt = getmetatable(obj)
  local seen = 0
  while type(mt) == "table" and seen < 32 do
    if mt == cls then return true end
    local parent = getmetatable(mt)
    mt = type(parent) == "table" and parent.__index or nil
    seen = seen + 1
  end
  return false
end

-- The options as a trainer runs with them: Lightning 1.6's defaults filled in, fast_dev_run and
-- overfit_batches applied. new() reads it, and so does the config CLI's --print_config (Trainer._resolve_options).
-- An option still nil is its documented default that no value writes down (the whole loader, no clipping ...).
local function resolve_options(opts)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  -- Lightning 1.6's defaults
  for _, spec in ipairs(OPTIONS) do -- the plain defaults of the option table
    if o[spec[1]] == nil and spec[4] ~= nil then o[spec[1]] = spec[4] end
  end
  if o.max_epochs == nil then o.max_epochs = (o.max_steps == -1) and 1000 or -1 end
  if o.min_epochs == nil and o.min_steps == nil then o.min_epochs = 1 end
  o.min_epochs = o.min_epochs or 0
  o.min_steps = o.min_steps or 0
  -- a host that embeds lutra (docs/guide-embedding.md) gets no output it did not ask for: no summary, no progress bar
  local embedded = rawget(core, "embedded") and core.embedded() or false
  if o.enable_model_summary == nil then o.enable_model_summary = not embedded end
  if o.fast_dev_run == true then o.fast_dev_run = 1 end
  if o.fast_dev_run == false then o.fast_dev_run = 0 end
  o.fast_dev_run = o.fast_dev_run or 0
  if o.fast_dev_run > 0 then -- Lightning: n batches of everything, one epoch, no sanity check, no logger
    local n = o.fast_dev_run
    o.limit_train_batches, o.limit_val_batches, o.limit_test_batches, o.limit_predict_batches = n, n, n, n
    o.max_steps, o.max_epochs, o.num_sanity_val_steps, o.val_check_interval = n, 1, 0, nil
    o.logger, o.enable_checkpointing = false, false
  end
  if o.overfit_batches > 0 then
    o.limit_train_batches = o.overfit_batches
    o.limit_val_batches = o.overfit_batches
  end
  if o.logger == nil then o.logger = true end
  return o, embedded
end

-- enable_progress_bar's default (resolved apart: an explicit false, unlike this default, removes a user's ProgressBar)
local function default_progress_bar(embedded) return stdout_is_tty() and not embedded end

--- The Trainer's options as lt.Trainer(opts) would run with them, for the config CLI's --print_config.
function Trainer._resolve_options(opts)
  local o, embedded = resolve_options(check_options(opts))
  if o.enable_progress_bar == nil then o.enable_progress_bar = default_progress_bar(embedded) end
  return o
end

local function new(_, opts)
  opts = check_options(opts)
  local self = {}
  local o, embedded = resolve_options(opts)
  self._opts = o
  -- ddp: strategy "ddp" (or "auto" under mpirun with several ranks) initialises MPI, sets world_size,
  -- global_rank, is_global_zero, and turns off logger, progress bar and summary on ranks other than 0
  require("lutra.distributed")._trainer_init(self, o)
  if o.seed ~= nil then lt.manual_seed(o.seed) end

  -- callbacks: the user's, then built-ins (Lightning's callback connector): a ModelCheckpoint when
  -- checkpointing is enabled (and lutra.checkpoint can save a trainer), a ModelSummary, a ProgressBar on a
  -- terminal (or when asked)
  local cbs = {}
  local given = o.callbacks or {}
  -- one callback instead of a list (Lightning accepts `callbacks=cb`): a table with no list part
  if next(given) ~= nil and given[1] == nil then given = { given } end
  for i, cb in ipairs(given) do cbs[i] = cb end
  local cbm = try_require("lutra.callbacks")
  if cbm then
    local function has(cls)
      for _, cb in ipairs(cbs) do if Trainer._is_instance(cb, cls) then return true end end
      return false
    end
    local ck = try_require("lutra.checkpoint")
    if o.enable_checkpointing and ck and type(ck.save_trainer) == "function" and not has(cbm.ModelCheckpoint) then
      cbs[#cbs + 1] = cbm.ModelCheckpoint {}
    end
    if o.enable_model_summary and not has(cbm.ModelSummary) then cbs[#cbs + 1] = cbm.ModelSummary {} end
    local bar = o.enable_progress_bar
    if bar == nil then bar = default_progress_bar(embedded) end
    if bar and not has(cbm.ProgressBar) then cbs[#cbs + 1] = cbm.ProgressBar {} end
    if o.enable_progress_bar == false then -- [checkpoint] only an explicit false removes a user's ProgressBar
      for i = #cbs, 1, -1 do if Trainer._is_instance(cbs[i], cbm.ProgressBar) then table.remove(cbs, i) end end
    end
  end
  self._base_callbacks = cbs
  self.callbacks = cbs

  -- loggers
  local loggers = {}
  if o.logger == nil or o.logger == true then
    local lm = try_require("lutra.loggers")
    if lm and lm.CSVLogger then loggers[1] = lm.CSVLogger { save_dir = o.default_root_dir } end
  elseif type(o.logger) == "table" then
    if type(o.logger.log_metrics) == "function" then loggers[1] = o.logger
    else for i, l in ipairs(o.logger) do loggers[i] = l end end
  end
  self.loggers = loggers
  self.logger = loggers[1]

  self.default_root_dir = o.default_root_dir
  self.max_epochs, self.min_epochs, self.max_steps, self.min_steps = o.max_epochs, o.min_epochs, o.max_steps, o.min_steps
  self.gradient_clip_val, self.gradient_clip_algorithm = o.gradient_clip_val, o.gradient_clip_algorithm
  self.log_every_n_steps = o.log_every_n_steps
  self.check_val_every_n_epoch = o.check_val_every_n_epoch
  self.num_sanity_val_steps = o.num_sanity_val_steps == -1 and INF or o.num_sanity_val_steps
  self.fast_dev_run = o.fast_dev_run
  self.limit_train_batches = o.limit_train_batches or 1.0
  self.limit_val_batches = o.limit_val_batches or 1.0
  self.limit_test_batches = o.limit_test_batches or 1.0
  self.limit_predict_batches = o.limit_predict_batches or 1.0
  self.val_check_interval = o.val_check_interval or 1.0
  self.overfit_batches = o.overfit_batches
  self.reload_dataloaders_every_n_epochs = o.reload_dataloaders_every_n_epochs
  self.interrupted = false
  self.optimizers = {}
  self.lr_scheduler_configs = {}
  self.state = { fn = nil, stage = nil, status = "initializing" }
  self.training, self.validating, self.testing, self.predicting = false, false, false, false
  self.num_training_batches, self.num_val_batches, self.num_sanity_val_batches = 0, {}, {}
  self._callback_metrics, self._logged_metrics, self._progress_bar_metrics = {}, {}, {}
  self._results_train = logging.new_results(true)
  self._results_eval = logging.new_results(false)
  self._lp = core._loops_new()
  self._lp:set_cfg({ accumulate_grad_batches = o.accumulate_grad_batches }) -- (the loops own it: dynamic below)
  self._env = {}
  -- [tools: profiler, debugging options]
  self.profiler = require("lutra.trainer.profilers")._from_option(o.profiler)
  self.profiler:_attach(self)
  require("lutra.trainer.debug").init(self, o)
  self.precision = require("lutra.trainer.precision").normalize(o.precision) -- "32-true" or "bf16-mixed"
  setmetatable(self, TrainerMT)
  self.fit_loop, self.validate_loop, self.test_loop, self.predict_loop = loops.build(self)
  return self
end

setmetatable(Trainer, { __call = new })

-- ---- fields computed on read ------------------------------------------------------------------------

local dynamic = {}
function dynamic.current_epoch(t) return t._lp:get("current_epoch") end
function dynamic.global_step(t) return t._lp:get("global_step") end
function dynamic.should_stop(t) return t._lp:get("should_stop") end
function dynamic.sanity_checking(t) return t._lp:get("sanity_checking") end
function dynamic.callback_metrics(t) return t:_refresh_metrics()._callback_metrics end
function dynamic.progress_bar_metrics(t) return t:_refresh_metrics()._progress_bar_metrics end
function dynamic.logged_metrics(t) return t._logged_metrics end
function dynamic.lightning_module(t) return t.model end
function dynamic.checkpoint_callbacks(t)
  local cbm = try_require("lutra.callbacks")
  local list = {}
  if cbm and cbm.is_model_checkpoint then
    for _, cb in ipairs(t.callbacks) do if cbm.is_model_checkpoint(cb) then list[#list + 1] = cb end end
  end
  return list
end
function dynamic.checkpoint_callback(t) return dynamic.checkpoint_callbacks(t)[1] end
function dynamic.is_last_batch(t) return t._lp:state().is_last_batch end
-- the loops' config owns it (set by the constructor's option and GradientAccumulationScheduler)
function dynamic.accumulate_grad_batches(t) return t._lp:get("accumulate_grad_batches") end

TrainerMT.__index = function(t, k)
  local f = dynamic[k]
  if f then return f(t) end
  return Trainer[k]
end
TrainerMT.__newindex = function(t, k, v)
  if k == "should_stop" then
    t._lp:set("should_stop", v and true or false)
  elseif k == "accumulate_grad_batches" then -- into the loops' config, its owner (checked there)
    local ok, err = pcall(t._lp.set_epoch_data, t._lp, { accumulate_grad_batches = v == nil and false or v })
    if not ok then error(err, 2) end
  elseif dynamic[k] then
    error(fmt("Trainer: field '%s' is read-only", k), 2)
  else
    rawset(t, k, v)
  end
end
TrainerMT.__tostring = function(t) return fmt("Trainer(max_epochs=%s, max_steps=%s)", t.max_epochs, t.max_steps) end

-- ---- hooks called from Lua --------------------------------------------------------------------------

-- Every hook the trainer calls goes through the C loops' dispatch lists (core/bind/l_loop.c, lp:call_hook):
-- the callbacks defining it in dispatch order, then the model; one order and one error text for all. It
-- returns the model's first result and how many targets ran.
local function call_hook(self, name, ...) return self._lp:call_hook(name, ...) end
-- Whether obj defines hook name: the dispatcher's own test (core/bind/l_loop_dispatch.c), for the checks made
-- before its lists exist.
local defines = core._hook_defined

-- ---- the env: functions the C loops call -------------------------------------------------------------

local function loader_len(l, what)
  local tl = type(l)
  if tl == "userdata" then
    local ok, n = pcall(function() return #l end)
    if ok and type(n) == "number" then return n end
  elseif tl == "table" then
    if type(l.len) == "function" then return l:len() end
    local mt = getmetatable(l)
    if mt and mt.__len then return mt.__len(l) end
    if type(l.iter) == "function" then return INF end
  end
  error(fmt("%s: the loader must have a length (#loader) and iter(), got a %s", what, tl), 0)
end

-- (level: as error's, for a check made before the run starts; none inside a run, whose errors carry no position)
local function check_loader(l, what, level)
  local ok, it = pcall(function() return l.iter end)
  if not ok or type(it) ~= "function" then
    error(fmt("%s: expected a DataLoader (a table with iter() and a length), got a %s", what, type(l)),
      level and level + 1 or 0)
  end
end

-- ---- logging ------------------------------------------------------------------------------------------

function Trainer:_log(name, value, opts)
  local R = self._env.R
  local eval = self._eval_active
  local ctx = { fx = self._lp:get("current_hook"), n_dataloaders = eval and self._n_eval_loaders or 1,
    dataloader_idx = eval and self._lp:get("eval_dl") or nil,
    batch = R and (eval and R[RUN.eval_batch] or R[RUN.train_batch]) }
  logging.log(self, ctx, eval and self._results_eval or self._results_train, name, value, opts)
end

local merge = host.merge

function Trainer:_refresh_metrics()
  local r = self._eval_active and self._results_eval or self._results_train
  if self._running then
    local m = r:metrics(not r.epoch_end_reached)
    merge(self._callback_metrics, m.callback)
    merge(self._progress_bar_metrics, m.pbar)
  end
  return self
end

function Trainer:_log_metrics(metrics, step)
  if next(metrics) == nil then return end
  merge(self._logged_metrics, metrics)
  if #self.loggers == 0 then return end
  local row = {}
  for k, v in pairs(metrics) do row[k] = v end
  if row.epoch == nil then row.epoch = self.current_epoch end
  step = step or self._lp:get("batches_that_stepped")
  for _, lg in ipairs(self.loggers) do lg:log_metrics(row, step) end
end

-- ---- manual optimization -------------------------------------------------------------------------------

Trainer._lua_hook = host.lua_hook -- (lutra.checkpoint replays lr_scheduler_step through it)
Trainer._event = host.event

function Trainer:_wrapped_optimizers()
  if self._wrapped and self._wrapped_for == self.optimizers then return self._wrapped end
  local list = {}
  local trainer = self
  for i, opt in ipairs(self.optimizers) do
    local w = { optimizer = opt, _idx = i - 1 }
    function w.step(_, closure)
      local lp = trainer._lp
      local manual = not trainer._automatic
      if manual then lp:manual_step(false) end
      local loss
      if closure ~= nil then
        -- as Lightning: the closure goes to the optimizer (LBFGS calls it several times), the hook follows each call
        loss = opt:step(function()
          local l = closure()
          call_hook(trainer, "on_before_optimizer_step", opt, i - 1)
          return l
        end)
      else
        call_hook(trainer, "on_before_optimizer_step", opt, i - 1)
        opt:step()
      end
      if manual then lp:manual_step(true) end
      return loss
    end
    function w.zero_grad(_, set_to_none) return opt:zero_grad(set_to_none) end
    setmetatable(w, {
      __index = function(_, k)
        local v = opt[k]
        if type(v) == "function" then return function(_, ...) return v(opt, ...) end end
        return v
      end,
      __tostring = function() return "LightningOptimizer(" .. tostring(opt) .. ")" end,
    })
    list[i] = w
  end
  self._wrapped, self._wrapped_for = list, self.optimizers
  return list
end

function Trainer:_manual_backward(_model, loss)
  if not lt.is_tensor(loss) then error("manual_backward: expected a loss tensor, got " .. type(loss), 3) end
  call_hook(self, "on_before_backward", loss)
  local _, n = call_hook(self, "backward", loss, nil, nil)
  if n == 0 then loss:backward() end
  call_hook(self, "on_after_backward")
end

-- ---- data and configuration ------------------------------------------------------------------------------

local function as_list(loaders)
  if loaders == nil then return {} end
  local ok, it = pcall(function() return loaders.iter end)
  if ok and type(it) == "function" then return { loaders } end
  if type(loaders) == "table" then return loaders end
  return { loaders }
end

-- Lightning's limit_*_batches: 0 = none, an integer = a count of batches (1 is one batch: 1 and 1.0 are
-- the same number in Lua, so leave the option out for the whole loader), a fraction in (0, 1) = that part.
local function limited(n, lim, what)
  if lim == 0 then return 0 end
  if is_int(lim) then return math.min(n, lim) end
  if n == INF then error(fmt("%s: a fractional limit needs a loader with a length", what), 0) end
  local m = math.floor(n * lim)
  if m == 0 and n > 0 then
    error(fmt("%s: a limit of %g of %d batches is less than one batch; use a larger fraction or an integer count",
      what, lim, n), 0)
  end
  return m
end

function Trainer:_limit(n, opt_name, what)
  local user = self._opts[opt_name]
  if user == nil then return n end -- the default: the whole loader
  return limited(n, user, what)
end

-- The fit's configuration from its loaders (Lightning's reset_train_dataloader / reset_val_dataloader), in
-- three parts, as the data hooks' loaders may arrive one at a time (Trainer:_load_fit_loaders below).
local function configure_train(self, train)
  check_loader(train, "fit")
  self._train_loader = train
  local ntrain = loader_len(train, "fit")
  self.num_training_batches = self:_limit(ntrain, "limit_train_batches", "limit_train_batches")
end

local function configure_val(self, model, val)
  local o = self._opts
  local vals = as_list(val)
  if o.overfit_batches and o.overfit_batches > 0 then vals = { self._train_loader } end
  self._val_loaders = vals
  self._eval_loaders = vals
  self._n_eval_loaders = #vals
  local nval = {}
  for i, l in ipairs(vals) do
    check_loader(l, "fit (val loader " .. i .. ")")
    nval[i] = self:_limit(loader_len(l, "fit"), "limit_val_batches", "limit_val_batches")
  end
  self.num_val_batches = nval
  local total_val = 0
  for _, n in ipairs(nval) do total_val = total_val + n end
  local enable_val = #vals > 0 and defines(model, "validation_step") and total_val > 0
  self.enable_validation = enable_val
  local sanity = {}
  for i, n in ipairs(nval) do sanity[i] = math.min(self.num_sanity_val_steps, n) end
  self.num_sanity_val_batches = sanity
end

local function configure_val_check(self)
  local vci = self._opts.val_check_interval
  local vcb
  if vci == nil then
    vcb = self.num_training_batches == INF and INF or math.max(1, self.num_training_batches)
  elseif is_int(vci) and vci >= 1 then
    vcb = vci
    if self.num_training_batches ~= INF and vcb > self.num_training_batches then
      error(fmt("Trainer: val_check_interval (%d) must be less than or equal to the number of the training batches " ..
        "(%d). If you want to disable validation set limit_val_batches to 0 instead.", vci, self.num_training_batches), 0)
    end
  else
    if self.num_training_batches == INF then
      error("Trainer: a fractional val_check_interval needs a training loader with a length", 0)
    end
    vcb = math.max(1, math.floor(self.num_training_batches * vci))
  end
  self.val_check_batch = vcb
end

function Trainer:_configure_fit(model, train, val)
  configure_train(self, train)
  configure_val(self, model, val)
  configure_val_check(self)
end

local function eval_config(self, kind, loaders, what)
  local lim_name = kind == "validation" and "limit_val_batches" or kind == "test" and "limit_test_batches"
    or "limit_predict_batches"
  local list = as_list(loaders)
  if #list == 0 then error(what .. ": no dataloader given", 0) end
  local n = {}
  for i, l in ipairs(list) do
    check_loader(l, what .. " (loader " .. i .. ")")
    n[i] = self:_limit(loader_len(l, what), lim_name, lim_name)
  end
  return list, n
end

local function cfg_for(self, extra)
  local schedulers = {}
  for i, c in ipairs(self.lr_scheduler_configs) do
    schedulers[i] = { interval = c.interval == "step" and 0 or 1, frequency = c.frequency, opt_idx = c.opt_idx,
      plateau = c.reduce_on_plateau and 1 or 0 }
  end
  local cfg = {
    max_epochs = self.max_epochs, min_epochs = self.min_epochs, max_steps = self.max_steps, min_steps = self.min_steps,
    num_training_batches = self.num_training_batches, val_check_batch = self.val_check_batch,
    check_val_every_n_epoch = self.check_val_every_n_epoch, enable_validation = self.enable_validation and 1 or 0,
    val_loaders_pending = self._sanity_loaders_pending and 1 or 0,
    num_val_batches = self.num_val_batches, num_sanity_val_batches = self.num_sanity_val_batches,
    n_optimizers = math.max(1, #self.optimizers),
    frequencies = self.optimizer_frequencies or {},
    automatic_optimization = self._automatic and 1 or 0, tbptt_steps = self._tbptt or 0,
    gradient_clip_val = self.gradient_clip_val or 0,
    gradient_clip_algorithm = self.gradient_clip_algorithm == "value" and 1 or 0,
    log_every_n_steps = self.log_every_n_steps, has_logger = #self.loggers > 0 and 1 or 0, schedulers = schedulers,
  }
  if extra then for k, v in pairs(extra) do cfg[k] = v end end
  return cfg
end

-- The callbacks of a run: the trainer's, then those of the model's configure_callbacks (replacing any of
-- the same class), in dispatch order: list order, a built-in ModelCheckpoint moved last.
local function order_callbacks(self, extra)
  local cbm = try_require("lutra.callbacks")
  local MC = cbm and cbm.ModelCheckpoint
  local list = {}
  for _, cb in ipairs(self._base_callbacks) do list[#list + 1] = cb end
  if extra then
    for _, cb in ipairs(extra) do
      local cls = getmetatable(cb)
      for i = #list, 1, -1 do
        if cls ~= nil and getmetatable(list[i]) == cls then table.remove(list, i) end
      end
      list[#list + 1] = cb
    end
  end
  local first, last = {}, {}
  for _, cb in ipairs(list) do
    if MC and Trainer._is_instance(cb, MC) then last[#last + 1] = cb else first[#first + 1] = cb end
  end
  for _, cb in ipairs(last) do first[#first + 1] = cb end
  self.callbacks = first
  self._cb_order = first
  if self._env then self._env.cb_order = first end
  require("lutra.trainer.profilers")._set_names(self) -- [tools: profiler] the names of the dispatch targets' actions
end

local function check_status(_, status, err)
  if status == "error" then error({ lutra_hook_error = true, msg = err }, 0) end
  return status
end

local function model_callbacks(self)
  local extra = call_hook(self, "configure_callbacks")
  if extra == nil then return end
  if type(extra) ~= "table" then error("configure_callbacks must return a list of callbacks, got " .. type(extra), 0) end
  for i, cb in ipairs(extra) do
    if type(cb) ~= "table" then
      error(fmt("configure_callbacks: element %d is a %s, not a callback table", i, type(cb)), 0)
    end
  end
  order_callbacks(self, extra)
  check_status(self, self._lp:refresh(false)) -- the model's callbacks join the dispatch lists
end

-- ---- re-entrancy ----------------------------------------------------------------------------------------
-- A trainer runs one stage at a time: its loops' state is one struct, so a fit, validate, test or predict
-- started from inside the trainer's own run (a hook, a dataloader, a custom loop) would overwrite the outer
-- run's counters and slots. It is refused at once, before anything changes: a hook that catches the error
-- lets the outer run go on as if nothing had happened.
local function check_idle(self, what, level)
  local busy = rawget(self, "_busy")
  if busy == nil then return end
  local hook = self._lp:get("current_hook")
  error(fmt("%s: called %s while this trainer runs %s; a trainer runs one stage at a time: call %s after %s returns",
    what, hook and fmt("from the hook '%s'", hook) or "from inside its run", busy, what, busy), level + 1)
end

-- The model's trainer (the one it is attached to) must not be in the middle of a run of its own: the model
-- would answer self.trainer, self:log and self:optimizers for this trainer inside the other one's hooks.
local function check_model_free(self, model, what, level)
  local other = modelmod.trainer_of(model)
  if other == nil or other == self or rawget(other, "_busy") == nil then return end
  local hook = other._lp:get("current_hook")
  error(fmt("%s: the model is in use by another Trainer's running %s (called %s); run it after that %s returns, " ..
    "or give this trainer a copy of the model", what, other._busy,
    hook and fmt("from its hook '%s'", hook) or "from inside that run", other._busy), level + 1)
end

-- Starts a run: attach model and loops (the references live until _end_run).
function Trainer:_begin_run(model, fn)
  modelmod.attach(model, self)
  self.model = model
  self._running = true
  self.state = { fn = fn, stage = fn, status = "running" }
  self.interrupted = false
  self._automatic = model.automatic_optimization ~= false
  local tb = model.truncated_bptt_steps
  self._tbptt = (type(tb) == "number" and tb > 0) and tb or 0
  order_callbacks(self)
  self._lp:attach(self._env, self, model)
  host.setup_env(self)
  require("lutra.trainer.debug").begin_run(self) -- [tools: detect_anomaly]
  require("lutra.trainer.precision").begin_run(self) -- precision = "bf16-mixed"
  check_status(self, self._lp:refresh(false)) -- the dispatch lists of the run's first hooks
end

function Trainer:_end_run(status)
  self.profiler:_clock(false) -- [tools: profiler]
  require("lutra.trainer.debug").end_run(self) -- [tools: detect_anomaly]
  require("lutra.trainer.precision").end_run(self) -- precision = "bf16-mixed"
  if self._ddp then self._ddp:teardown(self, status) end -- ddp
  self._running = false
  self._busy = nil
  self._eval_active = false
  self._lp:detach()
  local data = package.loaded["lutra.data.workers"] and package.loaded["lutra.data"]
  if data then -- DataLoader worker states of iterators the run left before their end: stopped now
    data._stop_iterators(rawget(self, "_train_loader"))
    for _, l in ipairs(rawget(self, "_eval_loaders") or {}) do data._stop_iterators(l) end
  end
  self._env.R = nil
  self._env.num_splits = nil
  self._outputs = nil
  self.state.status = status
  self.training, self.validating, self.testing, self.predicting = false, false, false, false
end

local function unwrap_error(e)
  if type(e) == "table" and e.lutra_hook_error then return e.msg end
  return e
end

-- on_exception for every callback, through the dispatcher's collecting mode: each target runs whatever the
-- others raise, and their errors are dropped (the original error wins).
function Trainer:_on_exception(err)
  self._lp:call_hook_all("on_exception", err)
end

local function keep_error(e) return e end

-- Runs fn() (a stage); on error: on_exception, end the run, raise the error. Hook errors carry their
-- hook's name and traceback already; the trainer's own errors (configuration) are raised as they are.
function Trainer:_guard(fn, ...)
  local res = pack(xpcall(fn, keep_error, ...))
  if not res[1] then
    local err = unwrap_error(res[2])
    self.state.status = "failed"
    self:_on_exception(err)
    if self._run then self._run._failed = true end
    self._run = nil
    self:_end_run("failed")
    if self._ddp then self._ddp:abort(err) end -- ddp: end the whole job, naming this rank
    error(err, 0)
  end
  return unpack(res, 2, res.n)
end

-- ---- fit ------------------------------------------------------------------------------------------------

local Run = {}
Run.__index = Run

local DataModule = require "lutra.data.datamodule"
local is_datamodule = DataModule._is_datamodule

local FIT_OPTS = { ckpt_path = true, datamodule = function(v)
  if not is_datamodule(v) then return "must be a lt.DataModule (or a table with *_dataloader methods), got " .. type(v) end
end }

-- Errors point at the line that called fit or fit_run: both call new_run, which calls this (level 4).
local function check_fit_args(model, train, val, opts)
  if type(model) ~= "table" then error("fit: the model must be a table, got " .. type(model), 4) end
  util.check_options("fit", opts, FIT_OPTS, 4)
  local dm = opts and opts.datamodule
  if dm ~= nil then
    if train ~= nil or val ~= nil then
      error("fit: give the loaders or a datamodule, not both (fit(model, {datamodule = dm}))", 4)
    end
    return
  end
  if train == nil then
    if defines(model, "train_dataloader") then return end -- the model's own data hooks
    error("fit: no training dataloader given (fit(model, train_loader[, val_loader]), fit(model, {datamodule = dm}) " ..
      "or a train_dataloader hook)", 4)
  end
  -- the loaders are checked here too, so fit_run refuses what fit refuses when it is called, not at the
  -- first run:advance (start_fit checks them again after a ddp strategy has sharded them)
  check_loader(train, "fit", 4)
  for i, l in ipairs(as_list(val)) do check_loader(l, "fit (val loader " .. i .. ")", 4) end
end

local function is_options(t)
  return type(t) == "table" and (t.ckpt_path ~= nil or t.datamodule ~= nil) and t.iter == nil
end

-- fit's and fit_run's arguments as Lightning takes them: (model, train[, val][, opts]), (model, opts),
-- (model, datamodule[, opts]) -> train, val, opts
local function fit_args(train, val, opts)
  if opts == nil and is_options(val) then val, opts = nil, val end
  if opts == nil and val == nil and is_options(train) then train, opts = nil, train end
  if is_datamodule(train) then
    local o = {}
    for k, v in pairs(opts or {}) do o[k] = v end
    if o.datamodule ~= nil then error("fit: two datamodules given (positional and {datamodule = ...})", 3) end
    o.datamodule, train = train, nil
    opts = o
  end
  return train, val, opts
end

--- trainer:fit_run(model, train[, val][, {ckpt_path=, datamodule=}]): a run to advance step by step.
local function new_run(self, model, train, val, opts) -- (called by fit and fit_run: see check_fit_args)
  check_fit_args(model, train, val, opts)
  local run = setmetatable({ trainer = self, model = model, train = train, val = val, opts = opts or {},
    stage = "new" }, Run)
  return run
end

function Trainer:fit_run(model, train, val, opts)
  train, val, opts = fit_args(train, val, opts)
  local run = new_run(self, model, train, val, opts)
  return run
end

-- The run's datamodule (Lightning's trainer.datamodule; the dispatcher calls its hooks: env.datamodule).
local function attach_datamodule(self, dm)
  rawset(self, "datamodule", dm)
  self._env.datamodule = dm
  if dm ~= nil then rawset(dm, "trainer", self) end
end

-- The loaders that a data hook returns (the datamodule's, else the model's): nil when no target defines it.
local function hook_loaders(self, hook)
  local loaders, n = call_hook(self, hook)
  if n == 0 then return nil end
  if loaders == nil then error(hook .. " returned nil (return a DataLoader or a list of them)", 0) end
  return loaders
end

function Run:done() return self.stage == "done" end

-- The loaders of the data hooks (the datamodule's, else the model's) for fit, and the configuration from them.
function Trainer:_load_hook_loaders(run)
  if run.train_from_hook then
    run.train = hook_loaders(self, "train_dataloader")
    if run.train == nil then error("fit: the datamodule has no train_dataloader", 0) end
  end
  if run.val_from_hook then run.val = hook_loaders(self, "val_dataloader") end
  if self._ddp then self._ddp:shard_loaders(self, run.train, run.val) end
  self:_configure_fit(self.model, run.train, run.val)
end

-- ---- the data hooks' loaders of a fit, when the loops ask for them (Lightning 1.6's order) ----------------
-- A fit whose loaders come from the data hooks (the datamodule's, else the model's) asks for them where
-- Lightning's loops do: val_dataloader at the sanity check's start (after on_sanity_check_start, the
-- sanity_loaders event of core/src/loop_fit.c), train_dataloader at the fit loop's start (before
-- on_train_start, the fit_loaders event) and val_dataloader there too when no sanity check asked for it. So
-- whatever on_fit_start sets up (a callback that downloads the data, fills the datamodule's fields) is there
-- when the loaders are built. Until they arrive the loops hold provisional counts (pending_fit_config), and
-- a checkpoint's loader states and RNG wait for them (lutra.checkpoint's restore_pending).

-- Whether the run's validation source defines val_dataloader (Lightning's _DataLoaderSource.is_defined).
local function val_source_defined(self, model)
  local dm = rawget(self, "datamodule")
  if dm ~= nil then return defines(dm, "val_dataloader") end
  return defines(model, "val_dataloader")
end

-- The counts before the loaders arrive: the fit loop is not skipped (no count of training batches yet, as
-- Lightning's inf) unless limit_train_batches = 0, which asks for no loader; a sanity check is due when the
-- validation source is defined, validation_step too, limit_val_batches > 0 and num_sanity_val_steps > 0.
local function pending_fit_config(self, run)
  local o = self._opts
  if run.train_pending then
    self._train_loader = nil
    self.num_training_batches = o.limit_train_batches == 0 and 0 or INF
    self.val_check_batch = INF
  end
  if run.val_pending then
    self._val_loaders, self._eval_loaders, self._n_eval_loaders = {}, {}, 0
    self.num_val_batches, self.num_sanity_val_batches = {}, {}
    local source = run.val ~= nil or o.overfit_batches > 0 or val_source_defined(self, run.model)
    local due = source and defines(run.model, "validation_step") and o.limit_val_batches ~= 0
    self.enable_validation = due
    self._sanity_loaders_pending = due and self.num_sanity_val_steps > 0
  end
end

local function restore_pending(self)
  if rawget(self, "_ckpt_pending") then require("lutra.checkpoint").restore_pending(self) end
end

local function load_train(self, run)
  if not run.train_pending then return end
  run.train_pending = false
  run.train = hook_loaders(self, "train_dataloader")
  if run.train == nil then error("fit: the datamodule has no train_dataloader", 0) end
  if self._ddp then self._ddp:shard_loaders(self, run.train, nil) end
  configure_train(self, run.train)
  configure_val_check(self)
  if self._ddp then self._ddp:check_batches(self) end -- ddp: the same number of batches on every rank
end

local function load_val(self, run)
  if not run.val_pending then return end
  run.val_pending = false
  self._sanity_loaders_pending = false
  if self._opts.overfit_batches > 0 then load_train(self, run) end -- (validation runs on the training loader)
  if run.val_from_hook then run.val = hook_loaders(self, "val_dataloader") end
  if self._ddp and run.val ~= nil then self._ddp:shard_loaders(self, nil, run.val) end
  configure_val(self, run.model, run.val)
end

-- the sanity_loaders event (after on_sanity_check_start) and the fit_loaders event (before on_train_start)
function Trainer:_load_fit_loaders(sanity)
  local run = self._run
  if run == nil or not (run.train_pending or run.val_pending) then return end
  if sanity then
    load_val(self, run)
  else
    load_train(self, run)
    load_val(self, run)
  end
  self._lp:set_epoch_data(cfg_for(self))
  restore_pending(self)
end

-- The fit's training loader now, asked for at once when the data hook's has not come yet (for
-- lutra.callbacks.LearningRateFinder, whose range test runs at on_fit_start on the fit's training loader).
function Trainer:_fit_train_loader()
  local run = self._run
  if run and run.train_pending then
    load_train(self, run)
    self._lp:set_epoch_data(cfg_for(self))
    restore_pending(self)
  end
  return self._train_loader
end

-- reload_dataloaders_every_n_epochs: at a training epoch's start (host.event), new loaders from the data hooks
-- and the loops' batch counts from them (Lightning reloads the training loader at the fit loop's advance
-- start and the validation loaders at the validation loop's start: the same epochs).
function Trainer:_reload_dataloaders(epoch)
  self:_load_hook_loaders(self._run)
  self._loaders_epoch = epoch
  self._lp:set_epoch_data(cfg_for(self))
end

-- GradientAccumulationScheduler: accumulate_grad_batches from this epoch on (called at a training epoch start).
function Trainer:_set_accumulate_grad_batches(n)
  if not self._automatic and n > 1 then
    error("GradientAccumulationScheduler: accumulate_grad_batches > 1 is not supported with manual optimization", 0)
  end
  self._lp:set_epoch_data({ accumulate_grad_batches = n })
end

-- The stages before the loops: Lightning's _run up to the sanity check.
local function start_fit(run)
  local self, model = run.trainer, run.model
  attach_datamodule(self, run.opts.datamodule)
  self:_begin_run(model, "fit")
  self._run = run
  self:_guard(function()
    if not defines(model, "training_step") then
      error("fit: the model has no training_step (define function model:training_step(batch, batch_idx))", 0)
    end
    if not defines(model, "configure_optimizers") then
      error("fit: the model has no configure_optimizers (define it to return an optimizer)", 0)
    end
    if not self._automatic then
      if self.accumulate_grad_batches > 1 then
        error("Trainer: accumulate_grad_batches > 1 is not supported with manual optimization " ..
          "(self.automatic_optimization = false): accumulate in training_step yourself", 0)
      end
      if self.gradient_clip_val and self.gradient_clip_val > 0 then
        error("Trainer: gradient_clip_val is not supported with manual optimization " ..
          "(self.automatic_optimization = false): clip in training_step yourself", 0)
      end
    end
    -- configure_callbacks, prepare_data, setup
    model_callbacks(self)
    call_hook(self, "prepare_data")
    -- the data hooks give the loaders when the loops start (_load_fit_loaders): the training loader when none
    -- was given (a datamodule, or the model's train_dataloader), the validation loaders when none were given
    -- and the source defines val_dataloader (Lightning's _DataLoaderSource: the datamodule, else the model)
    self._sanity_loaders_pending, self._ckpt_pending = false, nil
    run.train_from_hook = run.train == nil
    run.val_from_hook = run.val == nil and (run.train_from_hook or defines(model, "val_dataloader"))
    local from_hooks = run.train_from_hook or run.val_from_hook
    if not from_hooks then
      if self._ddp then self._ddp:shard_loaders(self, run.train, run.val) end -- ddp: each rank its share
      self:_configure_fit(model, run.train, run.val)
    end
    call_hook(self, "setup", "fit")
    -- configure_optimizers
    local ret = call_hook(self, "configure_optimizers")
    local okp, opts, scheds, freqs = pcall(modelmod.parse_optimizers, ret)
    if not okp then error(opts, 0) end
    self.optimizers, self.lr_scheduler_configs, self.optimizer_frequencies = opts, scheds, freqs
    self._loaders_from_hooks = from_hooks
    if from_hooks then -- the data hooks are asked when the loops start (_load_fit_loaders); given loaders now
      run.train_pending, run.val_pending = run.train_from_hook, run.val_from_hook
      if self._opts.overfit_batches > 0 and run.train_pending then run.val_pending = true end -- (val = train)
      local train, val = (not run.train_pending) and run.train or nil, (not run.val_pending) and run.val or nil
      if self._ddp then self._ddp:shard_loaders(self, train, val) end -- ddp: each rank its share
      if train ~= nil then
        configure_train(self, train)
        configure_val_check(self)
      end
      if not run.val_pending then configure_val(self, model, val) end
      pending_fit_config(self, run)
      self._loaders_epoch = 0
    end
    self._wrapped = nil
    self._lp:set_optimizers(opts)
    self._lp:set_cfg(cfg_for(self))
    if run.opts.ckpt_path then
      local ck = require "lutra.checkpoint"
      if type(ck.restore_trainer) ~= "function" then
        error("fit: ckpt_path needs lutra.checkpoint.restore_trainer, which is not available", 0)
      end
      local restored = ck.restore_trainer(self, run.opts.ckpt_path)
      run.ckpt_stopped = type(restored) == "table" and restored.should_stop == true -- (for nothing_trained)
    end
    if self._ddp then self._ddp:setup_fit(self, model, run.train_pending) end -- ddp: rank 0's weights, gradient reducer
    if model.hparams ~= nil then
      for _, lg in ipairs(self.loggers) do if lg.log_hyperparams then lg:log_hyperparams(model.hparams) end end
    end
    check_status(self, self._lp:refresh(false))
    self._lp:fit_begin()
    call_hook(self, "on_fit_start")
    -- sanity check
    self.training = false
    local st, msg = self._lp:sanity_check()
    if st == "error" then error({ lutra_hook_error = true, msg = msg }, 0) end
    self._callback_metrics, self._progress_bar_metrics, self._logged_metrics = {}, {}, {}
    self._results_eval:reset()
    if self._ckpt_metrics then -- [checkpoint] a resumed fit: the metrics saved in the checkpoint
      for field, t in pairs(self._ckpt_metrics) do for k, v in pairs(t) do self[field][k] = v end end
      self._ckpt_metrics = nil
    end
    lt.nn.train(model, true)
    self.training = true
  end)
  run.batches_before = self._lp:progress(loops.ID.fit_epoch).total.started
  run.stage = "fit"
end

-- A fit that trained no batch says why (Lightning's loop would stop as silently): the trainer had already
-- reached max_epochs / max_steps (fit called again on a finished trainer), should_stop was set (by a callback,
-- or kept from the checkpoint it resumed), or the training loader is empty. nil: nothing to say (a fit that
-- trained, or limit_train_batches = 0, which asks for no training).
local function nothing_trained(self, run)
  if self._lp:progress(loops.ID.fit_epoch).total.started ~= run.batches_before then return nil end
  local o = self._opts
  local why
  if self.num_training_batches == 0 then
    if o.limit_train_batches == 0 then return nil end
    why = "the training loader has no batches"
  elseif self.should_stop and run.ckpt_stopped then
    why = fmt("the checkpoint %s was saved after trainer.should_stop was set (EarlyStopping or another callback " ..
      "stopped that run at global_step %d) and a resumed run keeps that decision, as the run would have " ..
      "stopped there without the interruption; to train on, fit from the start or from an earlier checkpoint",
      tostring(rawget(self, "ckpt_path") or run.opts.ckpt_path), self.global_step)
  elseif self.should_stop then
    why = "trainer.should_stop was set before the first batch (by a callback or the model)"
  elseif self.max_steps ~= -1 and self.global_step >= self.max_steps then
    why = fmt("max_steps=%d reached (global_step %d%s); raise trainer.max_steps to train more", self.max_steps,
      self.global_step, run.opts.ckpt_path and ", restored from the checkpoint" or "")
  elseif self.max_epochs ~= -1 and self.current_epoch >= self.max_epochs then
    why = fmt("max_epochs=%d reached (current_epoch %d%s); raise trainer.max_epochs to train more, " ..
      "or use a new Trainer to start again", self.max_epochs, self.current_epoch,
      run.opts.ckpt_path and ", restored from the checkpoint" or "")
  else
    return nil
  end
  return "fit: nothing to train: " .. why
end

local function finish_fit(run)
  local self = run.trainer
  local idle = nothing_trained(self, run)
  if idle then lt._note("lutra: " .. idle) end
  self:_guard(function()
    self.training = false
    call_hook(self, "on_fit_end")
    call_hook(self, "teardown", "fit")
    for _, lg in ipairs(self.loggers) do if lg.finalize then lg:finalize("success") end end
  end)
  self.profiler:_clock(false) -- [tools: profiler] the fit's table, printed or written
  self.profiler:_report("fit")
  run.stage = "done"
  self._run = nil
  self:_end_run("finished")
end

-- Where an interrupted fit stopped and how to go on (Lightning says "Detected KeyboardInterrupt, attempting
-- graceful shutdown..."; lutra's fit stops at a batch boundary and can continue).
local function interrupted_at(self, run)
  local done = self._lp:progress(loops.ID.fit_epoch).current.completed
  local n = self.num_training_batches
  return fmt("fit interrupted in epoch %d after %s batches (global_step %d); %s continues from there", self.current_epoch,
    (n ~= INF and n > 0) and fmt("%d of %d", done, n) or tostring(done), self.global_step,
    run.from_fit and "trainer:fit(model, ...) again with this trainer and model" or "run:advance()")
end

-- run:advance{batches = n} | {seconds = s} | nil (to the end)
function Run:advance(budget)
  local nb, secs = 0, 0
  if budget ~= nil then
    if type(budget) ~= "table" then error("advance: expected {batches = n} or {seconds = s}, got " .. type(budget), 2) end
    util.check_options("advance", budget, { batches = true, seconds = true })
    for k, v in pairs(budget) do
      -- (NaN fails v > 0; a count of batches is an integer the C loop holds: no fraction, inf or 1e300)
      if k == "batches" and not (is_int(v) and v > 0) then
        error(fmt("advance: 'batches' must be an integer > 0, got %s", tostring(v)), 2)
      end
      if type(v) ~= "number" or not (v > 0) then error(fmt("advance: '%s' must be a number > 0, got %s", k, tostring(v)), 2) end
    end
    nb, secs = budget.batches or 0, budget.seconds or 0
  end
  local trainer = self.trainer
  check_idle(trainer, "advance", 2)
  if self.stage == "done" then return true end
  if self._failed then error("advance: this run failed; start a new one with trainer:fit_run", 2) end
  if trainer._run ~= self then
    if trainer._run ~= nil and trainer._run.stage ~= "new" and trainer._run.stage ~= "done" then
      error("advance: the trainer is running another fit; finish it first", 2)
    end
  end
  check_model_free(trainer, self.model, "fit", 2)
  trainer._busy = "fit" -- until the advance returns (_end_run clears it on the other ways out)
  trainer.profiler:_clock(true) -- [tools: profiler] the advance's wall time (stopped on every way out)
  if self.stage == "new" then start_fit(self) end
  trainer.interrupted = false
  trainer.state.status = "running"
  -- {seconds = s} starts no batch expected (at the pace of the last ones) to end after s: a host's frame
  -- budget holds; run.overrun = true trains until s is spent instead (the first batch boundary after it)
  local st, msg = trainer._lp:fit_advance(nb, secs, true, self.overrun ~= true)
  if st == "error" then
    trainer:_guard(function() error({ lutra_hook_error = true, msg = msg }, 0) end)
  elseif st == "interrupted" then
    lt.interrupt_clear()
    trainer.interrupted = true
    trainer.state.status = "interrupted"
    trainer:_on_exception("interrupted")
    lt._note("lutra: " .. interrupted_at(trainer, self))
    trainer._busy = nil
    trainer.profiler:_clock(false)
    return false
  elseif st == "done" then
    finish_fit(self)
    return true
  end
  trainer._busy = nil
  trainer.profiler:_clock(false)
  return false
end

--- trainer:fit(model, train_loader[, val_loader][, {ckpt_path=}])
function Trainer:fit(model, train, val, opts)
  check_idle(self, "fit", 2)
  train, val, opts = fit_args(train, val, opts)
  local run = self._run
  if run and run.model == model and run.stage == "fit" then
    -- an interrupted (or stepwise) fit of this model continues where it stopped
    run:advance()
    return
  end
  run = new_run(self, model, train, val, opts)
  run.from_fit = true -- (an interruption says "trainer:fit again", not "run:advance")
  run:advance()
end

-- ---- validate / test / predict ------------------------------------------------------------------------------

local STAGE_OF = { validation = "validate", test = "test", predict = "predict" }
local STEP_OF = { validation = "validation_step", test = "test_step", predict = "predict_step" }

-- The checkpoint that validate/test/predict{ckpt_path=} names: a path, "best" (the ModelCheckpoint's best
-- model) or "last" (its last saved checkpoint), as Lightning's.
local function eval_ckpt_path(self, what, p)
  if p ~= "best" and p ~= "last" then return p end
  local cb = self.checkpoint_callback
  if cb == nil then
    error(fmt('%s: ckpt_path = "%s" needs a ModelCheckpoint callback (none is configured)', what, p), 0)
  end
  local path = p == "best" and cb.best_model_path or cb.last_model_path
  if path == nil or path == "" then
    error(fmt('%s: ckpt_path = "%s": the ModelCheckpoint has not saved a %s checkpoint yet%s', what, p, p,
      p == "last" and " (save_last = true keeps one)" or " (fit first)"), 0)
  end
  return path
end

local EVAL_OPTS = { ckpt_path = function(v)
  if type(v) ~= "string" then return 'must be a path, "best" or "last", got ' .. type(v) end
end, datamodule = FIT_OPTS.datamodule }
local HOOK_OF = { validation = "val_dataloader", test = "test_dataloader", predict = "predict_dataloader" }
local function check_eval_opts(what, opts)
  local checked = util.check_options(what, opts, EVAL_OPTS, 4) -- (not a tail call: levels are the same on every Lua)
  return checked
end

function Trainer:_eval(kind, model, loaders, opts)
  local what = STAGE_OF[kind]
  check_idle(self, what, 3)
  if type(model) ~= "table" then error(what .. ": the model must be a table, got " .. type(model), 3) end
  check_model_free(self, model, what, 3)
  if opts == nil and is_options(loaders) then loaders, opts = nil, loaders end
  if is_datamodule(loaders) then
    local o = {}
    for k, v in pairs(opts or {}) do o[k] = v end
    o.datamodule, loaders = loaders, nil
    opts = o
  end
  opts = check_eval_opts(what, opts)
  if opts.datamodule ~= nil and loaders ~= nil then
    error(fmt("%s: give the loaders or a datamodule, not both", what), 3)
  end
  if loaders == nil and opts.datamodule == nil and type(model[HOOK_OF[kind]]) ~= "function" then
    error(fmt("%s: no dataloader given (%s(model, loaders), {datamodule = dm} or a %s hook)", what, what,
      HOOK_OF[kind]), 3)
  end
  if self._run and self._run.stage == "fit" then
    error(what .. ": a fit run is in progress (interrupted or stepwise); finish it first", 3)
  end
  if kind ~= "predict" and type(model[STEP_OF[kind]]) ~= "function" then
    error(fmt("%s: the model has no %s", what, STEP_OF[kind]), 3)
  end
  -- "best"/"last" resolved now, so that a refused call leaves the model as it was; the weights are loaded
  -- after setup (below), as Lightning 1.6 restores them: a model that builds its layers in setup has them
  local ckpt = opts.ckpt_path ~= nil and eval_ckpt_path(self, what, opts.ckpt_path) or nil
  self._busy = what
  attach_datamodule(self, opts.datamodule)
  self.profiler:_clock(true) -- [tools: profiler] validate/test/predict are timed too
  self:_begin_run(model, what)
  self._standalone = true
  local results = self:_guard(function()
    local list
    local function configure(given)
      local n
      list, n = eval_config(self, kind, given, what)
      self._eval_loaders = list
      self._n_eval_loaders = #list
      -- [checkpoint] Lightning's num_{val,test,predict}_batches (the progress bar's totals)
      if kind == "test" then self.num_test_batches = n
      elseif kind == "predict" then self.num_predict_batches = n
      else self.num_val_batches = n end
      self._lp:set_cfg(cfg_for(self, { num_eval_batches = n }))
    end
    if loaders ~= nil then configure(loaders) end
    self._eval_results, self._predictions = nil, nil
    model_callbacks(self)
    call_hook(self, "prepare_data")
    call_hook(self, "setup", what)
    if ckpt ~= nil then require("lutra.checkpoint").load(ckpt, model) end
    if loaders == nil then -- the data hooks, after setup (as Lightning's evaluation loop asks for them)
      local given = hook_loaders(self, HOOK_OF[kind])
      if given == nil then error(fmt("%s: the datamodule has no %s", what, HOOK_OF[kind]), 0) end
      configure(given)
    end
    check_status(self, self._lp:refresh(false))
    local st, msg = self._lp:eval_run(kind, true)
    if st == "error" then error({ lutra_hook_error = true, msg = msg }, 0) end
    if st == "interrupted" then
      lt.interrupt_clear()
      self.interrupted = true
      self:_on_exception("interrupted")
      lt._note(fmt("lutra: %s interrupted; its %s cover the batches before the interruption", what,
        kind == "predict" and "predictions" or "results"))
    end
    call_hook(self, "teardown", what)
    if kind ~= "predict" then
      for _, lg in ipairs(self.loggers) do if lg.finalize then lg:finalize("success") end end
    end
    if kind == "predict" then
      local p = self._predictions or {}
      if #list == 1 then return p[1] or {} end
      return p
    end
    local r = self._eval_results
    if r == nil then
      r = {}
      for i = 1, #list do r[i] = {} end
    end
    return r
  end)
  self._standalone = false
  self:_end_run(self.interrupted and "interrupted" or "finished")
  self.profiler:_report(what) -- [tools: profiler]
  return results
end

-- (not tail calls: _eval's errors name the caller's line at level 3, which a tail call would skip on LuaJIT and 5.1)
function Trainer:validate(model, loaders, opts)
  local r = self:_eval("validation", model, loaders, opts)
  return r
end
function Trainer:test(model, loaders, opts)
  local r = self:_eval("test", model, loaders, opts)
  return r
end
function Trainer:predict(model, loaders, opts)
  local r = self:_eval("predict", model, loaders, opts)
  return r
end

-- ---- lightning: the learning-rate range test (lua/lutra/callbacks/lr_finder.lua) --------------------------

--- trainer:lr_find(model, train_loader[, opts]) or trainer:lr_find(model, {datamodule = dm, ...}): Lightning's
--- trainer.tuner.lr_find; opts: min_lr, max_lr, num_training, mode, early_stop_threshold, update_attr.
function Trainer:lr_find(model, data, opts)
  check_idle(self, "lr_find", 2)
  if type(model) ~= "table" then error("lr_find: the model must be a table, got " .. type(model), 2) end
  local finder = require "lutra.callbacks.lr_finder"
  local o = {}
  if type(data) == "table" and data.iter == nil and not is_datamodule(data) and opts == nil then
    -- lr_find(model, {datamodule = dm, min_lr = ...})
    for k, v in pairs(data) do if k ~= "datamodule" then o[k] = v end end
    data = { datamodule = data.datamodule }
    if data.datamodule == nil then error("lr_find: no training dataloader given (lr_find(model, train_loader[, opts]))", 2) end
  else
    for k, v in pairs(opts or {}) do o[k] = v end
    if is_datamodule(data) then data = { datamodule = data } end
    if data == nil then error("lr_find: no training dataloader given (lr_find(model, train_loader[, opts]))", 2) end
    if data.datamodule == nil then check_loader(data, "lr_find") end
  end
  return finder.run(self, model, data, finder.check("lr_find", o, 2))
end

-- ---- checkpoints (the seam for lutra.checkpoint) ----------------------------------------------------------

function Trainer:save_checkpoint(path, weights_only)
  local ck = require "lutra.checkpoint"
  if self._ddp and not self.is_global_zero then return end -- ddp: rank 0 writes checkpoints
  if type(ck.save_trainer) ~= "function" then
    error("save_checkpoint: lutra.checkpoint.save_trainer is not available", 2)
  end
  return ck.save_trainer(self, path, weights_only)
end

function Trainer:_loops_state_dict() return self.fit_loop:state_dict() end
function Trainer:_loops_load_state_dict(sd) return self.fit_loop:load_state_dict(sd) end

return Trainer
