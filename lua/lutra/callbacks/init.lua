-- lutra.callbacks — lt.callbacks: the Callback base and the built-in callbacks (docs/reference/callbacks.md).
--
--   local cb = lt.callbacks
--   lt.Trainer{callbacks = {
--     cb.ModelCheckpoint{monitor = "val_loss", save_top_k = 3, filename = "{epoch}-{val_loss:.3f}"},
--     cb.EarlyStopping{monitor = "val_loss", patience = 5},
--     cb.LearningRateMonitor{logging_interval = "step"},
--     cb.Timer{duration = "00:00:10:00"},
--   }}
--
--   -- a callback of one's own: any table of hooks, or a class made from the base
--   local Printer = lt.callbacks.Callback:extend("Printer")
--   function Printer:init(opts) self.every = opts.every end
--   function Printer:on_train_epoch_end(trainer, model) print(trainer.current_epoch) end
--   local p = Printer{every = 2}
--
-- The base defines no hooks (a hook that no target defines costs nothing); it gives classes a name
-- (`__name`, used as the key of the callback's state in checkpoints unless it has `state_key`), a
-- constructor (`Class{...}` calls `init`), and `tostring`.
local util = require "lutra.utils.check"

local M = {}


-- ---- base -----------------------------------------------------------------------------------------

local Callback = { __name = "Callback" }
Callback.__index = Callback
Callback.__tostring = function(self)
  local mt = getmetatable(self)
  return (mt and mt.__name or "Callback") .. "()"
end

local function construct(cls, ...)
  local o = setmetatable({}, cls)
  local init = cls.init
  if init then init(o, ...) end
  return o
end

--- Callback:extend(name) -> a new class (callable: Class{...} makes an instance and calls init).
function Callback:extend(name)
  if type(name) ~= "string" then error("Callback:extend: expected a class name (string), got " .. type(name), 2) end
  local cls = { __name = name, __tostring = self.__tostring }
  cls.__index = cls
  return setmetatable(cls, { __index = self, __call = construct })
end

setmetatable(Callback, { __call = construct })
M.Callback = Callback

-- ---- helpers shared by the built-ins ------------------------------------------------------------

--- Checks a table of named options (lutra.utils.check.check_options): allowed[k] is a type name, a list of type
--- names, or true (anything).
M.check_options = util.check_options

--- A metric as a Lua number (tensors with one element are read), or nil.
function M.to_number(v)
  if type(v) == "number" then return v end
  if type(v) == "userdata" then
    local lt = require "lutra"
    if lt.is_tensor(v) and v:numel() == 1 then return v:item() end
  end
  if type(v) == "boolean" then return v and 1 or 0 end
  return nil
end

--- Whether obj is an instance of cls or of a class extended from it.
function M.is_instance(obj, cls)
  if type(obj) ~= "table" or cls == nil then return false end
  local mt = getmetatable(obj)
  local guard = 0
  while type(mt) == "table" and guard < 32 do
    if mt == cls then return true end
    local up = getmetatable(mt)
    mt = type(up) == "table" and rawget(up, "__index") or nil
    guard = guard + 1
  end
  return false
end

--- Whether cb is a ModelCheckpoint (the Trainer moves those last and saves through them).
function M.is_model_checkpoint(cb)
  return M.is_instance(cb, M.ModelCheckpoint)
end

--- The key under which a callback's state is kept in a checkpoint.
function M.state_key(cb)
  local k = type(cb) == "table" and cb.state_key
  if type(k) == "function" then k = k(cb) end
  if type(k) == "string" then return k end
  local mt = getmetatable(cb)
  if type(mt) == "table" and type(mt.__name) == "string" then return mt.__name end
  if type(cb) == "table" and type(rawget(cb, "name")) == "string" then return rawget(cb, "name") end
  return "Callback"
end

-- The loggers a callback writes to directly (LearningRateMonitor, DeviceStatsMonitor): trainer.loggers.
function M._loggers_of(trainer)
  local list = trainer.loggers
  if type(list) == "table" and #list > 0 then return list end
  local lg = trainer.logger
  if type(lg) == "table" then return { lg } end
  return {}
end

-- the logger's step: batches that stepped (Lightning's _batches_that_stepped), else global_step
function M._logging_step(trainer)
  local lp = rawget(trainer, "_lp")
  if lp then
    local ok, b = pcall(lp.get, lp, "batches_that_stepped")
    if ok and type(b) == "number" then return b end
  end
  return trainer.global_step
end

-- Lightning's should_update_logs: every log_every_n_steps batches, and when the fit is stopping
function M._should_update_logs(trainer)
  local n = trainer.log_every_n_steps or 50
  if trainer.should_stop then return true end
  return (M._logging_step(trainer) + 1) % n == 0
end

-- ---- built-ins (loaded on first use) ---------------------------------------------------------------

local lazy = {
  ModelCheckpoint = "lutra.callbacks.model_checkpoint",
  EarlyStopping = "lutra.callbacks.early_stopping",
  LearningRateMonitor = "lutra.callbacks.lr_monitor",
  Timer = "lutra.callbacks.timer",
  ProgressBar = "lutra.callbacks.progress",
  ModelSummary = "lutra.callbacks.model_summary",
  -- lightning: more callbacks (docs/reference/callbacks.md)
  StochasticWeightAveraging = "lutra.callbacks.swa",
  EMA = "lutra.callbacks.ema",
  GradientAccumulationScheduler = "lutra.callbacks.grad_accum",
  BaseFinetuning = { "lutra.callbacks.finetuning", "BaseFinetuning" },
  BackboneFinetuning = { "lutra.callbacks.finetuning", "BackboneFinetuning" },
  LearningRateFinder = { "lutra.callbacks.lr_finder", "LearningRateFinder" },
  BasePredictionWriter = "lutra.callbacks.prediction_writer",
  RichProgressBar = "lutra.callbacks.rich_progress",
  DeviceStatsMonitor = "lutra.callbacks.device_stats", -- [tools]
}

return require("lutra.names").strict(M, "lt.callbacks", lazy)
