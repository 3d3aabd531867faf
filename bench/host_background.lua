-- bench/host_background.lua — a LuaJIT host (a game) with a large Lua heap, training with lt.background
-- (docs/reference/background.md, docs/guide-hosts.md "When to train in the background"). The job fits a small
-- MLP in its own state for `seconds`; the host runs frames that do a little game work, pull the weights with
-- job:load_into every `every`-th frame and run one batch-1 forward of its own copy of the model. The same run
-- with no entity heap, then with `heap_mb` of entity tables (arrays of 4096 tables, as games keep them).
--
--   lutra bench/host_background.lua [rounds=1] [seconds=6] [heap_mb=1024] [every=5] [frame=0.005]
--   (or luajit with lutra on package.path / package.cpath)
--
-- One summary line per figure (medians over the rounds; after a 1 s warm-up, the empty-heap phases run first,
-- then the heap is built once and the heap phases run; ~35 s for one round):
--   job steps heap/empty (bar >= 0.9x), p99 of the host's lutra time per frame heap/empty (bar <= 1.2x),
--   RSS growth during a heap phase (the largest over the rounds; bar <= 150 MB).
local lt = require "lutra"
local ffi = require "ffi"
local now = require("lutra.core")._io.now

local o = { rounds = "1", seconds = "6", heap_mb = "1024", every = "5", frame = "0.005" }
for _, a in ipairs(arg or {}) do
  local k, v = a:match("^([%w_]+)=(.*)$")
  if not k or o[k] == nil then
    error("host_background: bad argument '" .. a .. "' (known: rounds, seconds, heap_mb, every, frame)")
  end
  o[k] = v
end
local ROUNDS, SECONDS, HEAP_MB = tonumber(o.rounds), tonumber(o.seconds), tonumber(o.heap_mb)
local EVERY, FRAME = tonumber(o.every), tonumber(o.frame)

ffi.cdef [[
int usleep(unsigned int usec);
typedef struct { long tv_sec; long tv_nsec; } hb_timespec;
int clock_gettime(int clk, hb_timespec *ts);
]]
-- this thread's CPU time: what the host's lutra calls cost it, whatever else the machine is running
local CLOCK_THREAD_CPUTIME_ID = 3
local ts = ffi.new("hb_timespec")
local function cpu_now()
  ffi.C.clock_gettime(CLOCK_THREAD_CPUTIME_ID, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local function rss_mb()
  local f = io.open("/proc/self/status")
  local s = f:read("*a")
  f:close()
  return tonumber(s:match("VmRSS:%s*(%d+)")) / 1024
end

local function median(xs)
  local s = {}
  for i = 1, #xs do s[i] = xs[i] end
  table.sort(s)
  local n = #s
  return n % 2 == 1 and s[(n + 1) / 2] or (s[n / 2] + s[n / 2 + 1]) / 2
end

local function p99(xs)
  local s = {}
  for i = 1, #xs do s[i] = xs[i] end
  table.sort(s)
  return s[math.max(1, math.ceil(0.99 * #s))]
end

-- the job: a game AI, 16 features -> 64 -> 4 actions, batch 32 (carried into the job's state: only require)
local function setup()
  local lt = require "lutra" -- luacheck: ignore 431 (the job's own lt: its state's)
  lt.manual_seed(0)
  local x = lt.randn(4096, 16)
  local y = (x:narrow(2, 1, 4) * 2):argmax(2)
  local loader = lt.data.DataLoader(lt.data.TensorDataset(x, y), { batch_size = 32, shuffle = true })
  local model = { net = lt.nn.Sequential { lt.nn.Linear(16, 64), lt.nn.ReLU(), lt.nn.Linear(64, 4) } }
  function model:training_step(b) return lt.F.cross_entropy(self.net(b[1]), b[2]) end
  function model:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), { lr = 0.05, momentum = 0.9 }) end
  local trainer = lt.Trainer { max_epochs = -1, logger = false, enable_checkpointing = false,
    enable_progress_bar = false, enable_model_summary = false }
  return model, trainer, loader
end

-- the host's own entities, the same in both phases (the game work of a frame)
local live = {}
for i = 1, 4096 do live[i] = { x = i, y = 0, vx = 1, vy = 0.5, hp = 100 } end

local function game_work()
  for i = 1, #live do
    local e = live[i]
    e.x, e.y = e.x + e.vx, e.y + e.vy
  end
  local events = {} -- a frame's garbage
  for i = 1, 64 do events[i] = { kind = "hit", who = live[i] } end
  return events
end

local function phase(name, seconds)
  seconds = seconds or SECONDS
  local job = lt.background(setup)
  local host = { net = lt.nn.Sequential { lt.nn.Linear(16, 64), lt.nn.ReLU(), lt.nn.Linear(64, 4) } }
  local input = lt.randn(1, 16)
  while not job:load_into(host) do ffi.C.usleep(1000) end -- the job's state is up and has published
  for _ = 1, 20 do job:load_into(host) end -- the first calls (matching, traces) outside the count
  local rss0 = rss_mb()
  local st = job:status()
  local steps0, t_start = st.global_step, now()
  local times, cpu, frame = {}, {}, 0
  lt.no_grad(function()
    while now() - t_start < seconds do
      local f0 = now()
      frame = frame + 1
      game_work()
      local l0, c0 = now(), cpu_now()
      if frame % EVERY == 0 then job:load_into(host) end
      local _ = host.net(input):argmax(2)
      times[#times + 1] = now() - l0
      cpu[#cpu + 1] = cpu_now() - c0
      local left = FRAME - (now() - f0)
      if left > 0 then ffi.C.usleep(math.floor(left * 1e6)) end
    end
  end)
  job:status(st)
  local steps = st.global_step - steps0
  local grew = rss_mb() - rss0
  job:stop()
  job:join()
  local r = { steps = steps, p99_ms = p99(times) * 1000, p99_cpu_ms = p99(cpu) * 1000, rss_mb = grew, frames = frame }
  print(string.format("%-5s heap %7.1f MB  job steps %7d  frames %5d  host lutra p50 %.3f ms  p99 %.3f ms " ..
    "(thread CPU p99 %.3f ms)  RSS +%.1f MB", name, collectgarbage("count") / 1024, steps, frame,
    median(times) * 1000, r.p99_ms, r.p99_cpu_ms, grew))
  return r
end

local empty, heap = {}, {}
phase("warm", 1) -- (the first job's start, traces and caches; not counted)
for i = 1, ROUNDS do empty[i] = phase("empty") end

-- the heap: entity tables in arrays of 4096, until the Lua heap holds heap_mb
local t0 = now()
local world = {}
collectgarbage("stop") -- (a build with the collector running traverses the growing heap again and again)
while collectgarbage("count") / 1024 < HEAP_MB do
  local arr = {}
  for i = 1, 4096 do arr[i] = { x = i, y = 0, vx = 1, vy = 0.5, hp = 100, name = "e", tags = {} } end
  world[#world + 1] = arr
end
collectgarbage("restart")
collectgarbage()
print(string.format("built %d arrays of 4096 entities (%.0f MB of Lua heap) in %.1f s", #world,
  collectgarbage("count") / 1024, now() - t0))
for i = 1, ROUNDS do heap[i] = phase("heap") end

local function col(rs, k)
  local v = {}
  for i, r in ipairs(rs) do v[i] = r[k] end
  return v
end
local steps_e, steps_h = median(col(empty, "steps")), median(col(heap, "steps"))
local p99_e, p99_h = median(col(empty, "p99_ms")), median(col(heap, "p99_ms"))
local cpu_e, cpu_h = median(col(empty, "p99_cpu_ms")), median(col(heap, "p99_cpu_ms"))
local rss_max = math.max(unpack(col(heap, "rss_mb")))
local function verdict(ok) return ok and "PASS" or "FAIL" end
print(string.format("host_background: job steps heap/empty %.2fx (empty %d, heap %d in %g s; bar >= 0.9x) %s",
  steps_h / steps_e, steps_e, steps_h, SECONDS, verdict(steps_h / steps_e >= 0.9)))
print(string.format("host_background: p99 host lutra time per frame heap/empty %.2fx (empty %.3f ms, heap %.3f ms; " ..
  "bar <= 1.2x) %s", p99_h / p99_e, p99_e, p99_h, verdict(p99_h / p99_e <= 1.2)))
print(string.format("host_background: p99 host lutra thread CPU per frame heap/empty %.2fx (empty %.3f ms, heap %.3f ms; " ..
  "the same bar, robust to a loaded machine) %s", cpu_h / cpu_e, cpu_e, cpu_h, verdict(cpu_h / cpu_e <= 1.2)))
print(string.format("host_background: RSS growth during the %d MB phase %.1f MB (largest of %d rounds; bar <= 150 MB) %s",
  HEAP_MB, rss_max, ROUNDS, verdict(rss_max <= 150)))
world = nil -- luacheck: ignore 311
