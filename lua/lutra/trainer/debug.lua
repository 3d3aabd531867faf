-- lutra.trainer.debug — the Trainer's debugging options (Lightning 1.6's): detect_anomaly, track_grad_norm,
-- max_time (docs/reference/trainer.md).
--
--   detect_anomaly=true   while a run of the trainer is going, every op the autograd records checks its output
--                         and every backward kernel its gradients (core/src/autograd.c): the first op that makes
--                         a NaN/inf fails, named ("detect_anomaly: the backward of 'log' produced nan ...").
--                         Off: the ops test one flag.
--   track_grad_norm=p     after backward, before the optimizer step: the p-norm of each parameter's gradient,
--                         logged as grad_<p>_norm_<name>, and of all of them, grad_<p>_norm_total (p as Python
--                         prints a float: 2 -> "2.0", math.huge or "inf" -> "inf"); on_step and on_epoch, as
--                         Lightning's log_grad_norm. -1 (default): off.
--   max_time=d            a Timer callback (lua/lutra/callbacks/timer.lua) with that duration, checked after
--                         each training batch: fit stops cleanly at the batch boundary (checkpoints as usual).
--                         d: "DD:HH:MM:SS", {days=, hours=, minutes=, seconds=} or seconds.
local lt = require "lutra"
local core = require "lutra.core"

local M = {}
local fmt = string.format

function M.check_grad_norm(v)
  if v == -1 or v == "inf" or v == math.huge then return nil end
  if type(v) == "number" and v > 0 and v < math.huge then return nil end
  return 'must be -1 (off), a number p > 0, math.huge or "inf"'
end

local function timer_options(v)
  if type(v) == "number" then return { duration_seconds = v, interval = "step" } end
  return { duration = v, interval = "step" }
end

function M.check_max_time(v)
  local tv = type(v)
  if tv ~= "string" and tv ~= "table" and not (tv == "number" and v >= 0) then
    return 'must be a "DD:HH:MM:SS" string, a table {days=, hours=, minutes=, seconds=} or seconds >= 0'
  end
  local ok, err = pcall(function() return require("lutra.callbacks").Timer(timer_options(v)) end)
  if not ok then return "is not a duration (" .. tostring(err):gsub("^.-Timer: ", "") .. ")" end
end

-- p as Python's str(float(p)) writes it
local function p_name(p)
  if p == math.huge or p == "inf" then return "inf" end
  if p == math.floor(p) then return fmt("%d.0", p) end
  for d = 1, 17 do
    local s = fmt("%." .. d .. "g", p)
    if tonumber(s) == p then return s end
  end
  return tostring(p)
end
M.p_name = p_name

local function round4(v)
  if v ~= v or v == math.huge then return v end
  return math.floor(v * 1e4 + 0.5) / 1e4
end

--- grad_norm(model, p) -> {["grad_<p>_norm_<name>"] = v, ..., ["grad_<p>_norm_total"] = v} (Lightning 1.6's
--- utilities.grads.grad_norm: values rounded to 4 decimals; parameters without a gradient are left out).
function M.grad_norm(model, p)
  local pn = p_name(p)
  local pv = (p == "inf") and math.huge or p
  local byname, order = lt.nn.named_parameters(model)
  local norms, parts = {}, {}
  for _, name in ipairs(order) do
    local g = byname[name].grad
    if g ~= nil then
      local v = g:norm(pv):item()
      parts[#parts + 1] = v
      norms[fmt("grad_%s_norm_%s", pn, name)] = v
    end
  end
  if #parts > 0 then
    local total
    if pv == math.huge then
      total = 0
      for _, v in ipairs(parts) do if v > total then total = v end end
    else
      total = lt.tensor(parts):norm(pv):item()
    end
    norms[fmt("grad_%s_norm_total", pn)] = total
  end
  for k, v in pairs(norms) do norms[k] = round4(v) end
  return norms
end

-- The tracker: a built-in callback, so its hook runs through the one dispatcher like any other.
local GradNormTracker
local function tracker_class()
  if GradNormTracker then return GradNormTracker end
  GradNormTracker = require("lutra.callbacks").Callback:extend("GradNormTracker")
  function GradNormTracker:on_before_optimizer_step(_, model)
    local norms = M.grad_norm(model, self.p)
    local names = {}
    for k in pairs(norms) do names[#names + 1] = k end
    table.sort(names)
    for _, k in ipairs(names) do
      model:log(k, norms[k], { on_step = true, on_epoch = true, prog_bar = false, logger = true })
    end
  end
  return GradNormTracker
end

function M.init(trainer, o)
  trainer.detect_anomaly = o.detect_anomaly == true
  trainer.track_grad_norm = o.track_grad_norm or -1
  trainer.max_time = o.max_time
  local cbs = trainer._base_callbacks
  if trainer.track_grad_norm ~= -1 then
    local t = tracker_class() {}
    t.p = trainer.track_grad_norm
    cbs[#cbs + 1] = t
  end
  if o.max_time ~= nil then
    local cbm = require "lutra.callbacks"
    local has = false
    for _, cb in ipairs(cbs) do if getmetatable(cb) == cbm.Timer then has = true end end
    if not has then cbs[#cbs + 1] = cbm.Timer(timer_options(o.max_time)) end -- Lightning: a given Timer wins
  end
end

-- A run starts / ends (trainer.lua's _begin_run, _end_run): anomaly detection on for the run only.
function M.begin_run(trainer)
  if trainer.detect_anomaly and trainer._anomaly_was == nil then trainer._anomaly_was = core._detect_anomaly(true) end
end

function M.end_run(trainer)
  if trainer._anomaly_was ~= nil then
    core._detect_anomaly(trainer._anomaly_was)
    trainer._anomaly_was = nil
  end
end

return M
