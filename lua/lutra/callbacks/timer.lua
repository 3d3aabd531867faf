-- callbacks/timer.lua — lt.callbacks.Timer: measures the time of each stage and stops fitting when a
-- duration has passed (Lightning 1.6's Timer).
--
--   local timer = lt.callbacks.Timer{duration = "00:12:00:00"}     -- DD:HH:MM:SS
--   lt.callbacks.Timer{duration_seconds = 90}                        -- or seconds
--   lt.callbacks.Timer{duration = {hours = 1, minutes = 30}}
--   timer:time_elapsed("train"); timer:time_remaining(); timer:start_time("validate")
--
-- Options: duration (a "DD:HH:MM:SS" string or {days, hours, minutes, seconds}) or duration_seconds,
-- interval "step" (check after each training batch) | "epoch" (after each training epoch), verbose
-- (true: a message on stderr when the time is up). Without a duration it only measures.
-- Stages: "train", "validate", "test", "predict" (the sanity check is not counted). The elapsed training
-- time is its state: a resumed run continues the count.
local lt = require "lutra"
local cbs = require "lutra.callbacks"

local fmt = string.format
local now = lt._io.now

local Timer = cbs.Callback:extend("Timer")

local OPTIONS = { duration = { "string", "table" }, duration_seconds = "number", interval = "string", verbose = "boolean" }
local STAGES = { train = true, validate = true, test = true, predict = true }

local function parse_duration(d)
  if type(d) == "string" then
    local dd, hh, mm, ss = d:match("^(%d+):(%d%d):(%d%d):(%d%d)$")
    if not dd then
      error(fmt("Timer: option 'duration' must be a \"DD:HH:MM:SS\" string, got %q", d), 4)
    end
    return tonumber(dd) * 86400 + tonumber(hh) * 3600 + tonumber(mm) * 60 + tonumber(ss)
  end
  local total = 0
  for k, v in pairs(d) do
    local mult = ({ days = 86400, hours = 3600, minutes = 60, seconds = 1 })[k]
    if not mult then
      error(fmt("Timer: unknown field '%s' in option 'duration' (expected days, hours, minutes, seconds)", tostring(k)), 4)
    end
    if type(v) ~= "number" or v < 0 then error(fmt("Timer: duration.%s must be a number >= 0", k), 4) end
    total = total + v * mult
  end
  return total
end

function Timer:init(opts)
  opts = cbs.check_options("Timer", opts, OPTIONS, 3)
  if opts.duration ~= nil and opts.duration_seconds ~= nil then
    error("Timer: give either option 'duration' or option 'duration_seconds', not both", 3)
  end
  if opts.duration ~= nil then self._duration = parse_duration(opts.duration) end
  if opts.duration_seconds ~= nil then
    if opts.duration_seconds < 0 then error("Timer: option 'duration_seconds' must be >= 0", 3) end
    self._duration = opts.duration_seconds
  end
  self._interval = opts.interval or "step"
  if self._interval ~= "step" and self._interval ~= "epoch" then
    error(fmt("Timer: option 'interval' must be \"step\" or \"epoch\", got %q", self._interval), 3)
  end
  self._verbose = opts.verbose ~= false
  self._start = {}
  self._end = {}
  self._offset = 0
end

local function check_stage(stage)
  stage = stage or "train"
  if not STAGES[stage] then
    error(fmt("Timer: unknown stage %q (expected train, validate, test or predict)", tostring(stage)), 3)
  end
  return stage
end

function Timer:start_time(stage) return self._start[check_stage(stage)] end
function Timer:end_time(stage) return self._end[check_stage(stage)] end

--- Seconds spent in the stage ("train" by default; includes the time of a run resumed from).
function Timer:time_elapsed(stage)
  stage = check_stage(stage)
  local s, e = self._start[stage], self._end[stage]
  local offset = stage == "train" and self._offset or 0
  if s == nil then return offset end
  if e == nil then return now() - s + offset end
  return e - s + offset
end

--- Seconds left of the duration (nil without a duration).
function Timer:time_remaining(stage)
  if self._duration == nil then return nil end
  return self._duration - self:time_elapsed(stage)
end

function Timer:on_train_start() self._start.train = now(); self._end.train = nil end
function Timer:on_train_end() self._end.train = now() end
function Timer:on_validation_start(trainer)
  if trainer.sanity_checking then return end
  self._start.validate = now(); self._end.validate = nil
end
function Timer:on_validation_end(trainer)
  if trainer.sanity_checking then return end
  self._end.validate = now()
end
function Timer:on_test_start() self._start.test = now(); self._end.test = nil end
function Timer:on_test_end() self._end.test = now() end
function Timer:on_predict_start() self._start.predict = now(); self._end.predict = nil end
function Timer:on_predict_end() self._end.predict = now() end

function Timer:on_fit_start(trainer)
  -- a resumed run that is already over its time stops at once
  if self._duration ~= nil and self._offset >= self._duration then trainer.should_stop = true end
end

function Timer:_check_time_remaining(trainer)
  if self._duration == nil then return end
  local should_stop = self:time_elapsed() >= self._duration
  if trainer._ddp then should_stop = trainer._ddp:reduce_boolean(should_stop) end -- ddp: all ranks stop together
  if should_stop and not trainer.should_stop then
    trainer.should_stop = true
    if self._verbose then
      local s = math.floor(self:time_elapsed())
      lt._note(fmt("Time limit reached. Elapsed time is %d:%02d:%02d. Signaling Trainer to stop.",
        math.floor(s / 3600), math.floor(s / 60) % 60, s % 60))
    end
  end
end

function Timer:on_train_batch_end(trainer)
  if self._interval == "step" then self:_check_time_remaining(trainer) end
end

function Timer:on_train_epoch_end(trainer)
  if self._interval == "epoch" then self:_check_time_remaining(trainer) end
end

function Timer:state_dict()
  local te = {}
  for st in pairs(STAGES) do te[st] = self:time_elapsed(st) end
  return { time_elapsed = te }
end

function Timer:load_state_dict(sd)
  if type(sd) ~= "table" then error("Timer:load_state_dict: expected a table, got " .. type(sd), 2) end
  local te = sd.time_elapsed or {}
  self._offset = te.train or 0
end

return Timer
