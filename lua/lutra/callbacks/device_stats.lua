-- callbacks/device_stats.lua — lt.callbacks.DeviceStatsMonitor: lutra's memory and thread statistics, sent to
-- the trainer's loggers (Lightning 1.6's DeviceStatsMonitor, for lutra's one device: the CPU).
--
--   lt.Trainer{callbacks = {lt.callbacks.DeviceStatsMonitor{}}, log_every_n_steps = 10}
--   -- metrics.csv gains on_train_batch_start/live_bytes, on_train_batch_end/live_tensors, ...
--
-- At on_train_batch_start and on_train_batch_end (every log_every_n_steps batches, as Lightning) and at
-- on_train_epoch_end, each statistic is logged as "<hook>/<name>" at the logger's step:
--   live_bytes, cached_bytes, total_allocated, system_allocs, cache_hits, live_tensors   (lt.memory_stats())
--   num_threads (lt.get_num_threads(): lutra's compute pool), lua_heap_bytes (collectgarbage "count"),
--   rss_bytes (the process's resident set, from /proc/self/status; absent where there is none)
-- Options: cpu_stats=true (false: only lutra's own statistics, without rss_bytes and lua_heap_bytes).
-- Needs a logger: fitting with logger=false and this callback is an error (as Lightning's).
local lt = require "lutra"
local cbs = require "lutra.callbacks"

local DeviceStatsMonitor = cbs.Callback:extend("DeviceStatsMonitor")

function DeviceStatsMonitor:init(opts)
  opts = cbs.check_options("DeviceStatsMonitor", opts, { cpu_stats = "boolean" }, 3)
  self.cpu_stats = opts.cpu_stats ~= false
end

local function rss_bytes()
  local f = io.open("/proc/self/status", "r")
  if not f then return nil end
  local text = f:read("*a")
  f:close()
  local kb = text:match("VmRSS:%s*(%d+)%s*kB")
  return kb and tonumber(kb) * 1024 or nil
end

--- stats() -> {name = value}: the statistics as logged (without the hook's prefix).
function DeviceStatsMonitor:stats()
  local s = {}
  for k, v in pairs(lt.memory_stats()) do s[k] = v end
  s.num_threads = lt.get_num_threads()
  if self.cpu_stats then
    s.lua_heap_bytes = math.floor(collectgarbage("count") * 1024)
    s.rss_bytes = rss_bytes()
  end
  return s
end

function DeviceStatsMonitor:setup(trainer, _, stage)
  if stage ~= "fit" then return end
  if #cbs._loggers_of(trainer) == 0 then
    error("DeviceStatsMonitor: cannot log device stats with a Trainer that has no logger (logger=false)", 0)
  end
end

function DeviceStatsMonitor:_log(trainer, hook)
  local out = {}
  for k, v in pairs(self:stats()) do out[hook .. "/" .. k] = v end
  local step = cbs._logging_step(trainer)
  for _, lg in ipairs(cbs._loggers_of(trainer)) do lg:log_metrics(out, step) end
end

function DeviceStatsMonitor:on_train_batch_start(trainer)
  if cbs._should_update_logs(trainer) then self:_log(trainer, "on_train_batch_start") end
end

function DeviceStatsMonitor:on_train_batch_end(trainer)
  if cbs._should_update_logs(trainer) then self:_log(trainer, "on_train_batch_end") end
end

function DeviceStatsMonitor:on_train_epoch_end(trainer) self:_log(trainer, "on_train_epoch_end") end

return DeviceStatsMonitor
