-- bench/host_heap.lua — lutra inside a host whose Lua heap is large (a game with a million entity tables):
-- the same frames of run:advance{seconds = 0.004} with an empty heap and with a ~200 MB heap, in one run,
-- then frames of inference alone. The GC pacing (core/bind/l_util.c) gives the collector work in proportion
-- to the bytes of tensors handed to Lua, so a frame's length must not follow the heap's size; the pace
-- estimate of advance{seconds=} (core/src/loop_fit.c) must not be thrown off by a slow batch.
--
--   lutra bench/host_heap.lua [frames=1000] [budget=0.004] [entities=1000000] [threads=1]
--
-- Prints, per phase, p50/p99/max of the wall time of a frame and the steps trained, then the ratios
-- heap/empty and the bar: p99 within 2x and steps within 30% of the empty-heap run.
local lt = require "lutra"
local now = require("lutra.core")._io.now

local o = { frames = "1000", budget = "0.004", entities = "1000000", threads = "1" }
for _, a in ipairs(arg or {}) do
  local k, v = a:match("^([%w_]+)=(.*)$")
  if not k or o[k] == nil then
    error("host_heap: bad argument '" .. a .. "' (known: frames, budget, entities, threads)")
  end
  o[k] = v
end
local FRAMES, BUDGET = tonumber(o.frames), tonumber(o.budget)
lt.set_num_threads(tonumber(o.threads))

local function percentiles(ts)
  local s = {}
  for i = 1, #ts do s[i] = ts[i] end
  table.sort(s)
  local function p(q) return s[math.max(1, math.ceil(q * #s))] end
  return { p50 = p(0.5), p99 = p(0.99), max = s[#s] }
end

-- a small game AI: 16 features -> 64 -> 4 actions, batch 32, as a host learning online would
local function new_run()
  lt.manual_seed(0)
  local x = lt.randn(4096, 16)
  local y = (x:narrow(2, 1, 4) * 2):argmax(2) -- labels from the first four features
  local loader = lt.data.DataLoader(lt.data.TensorDataset(x, y), { batch_size = 32, shuffle = true })
  local model = { net = lt.nn.Sequential { lt.nn.Linear(16, 64), lt.nn.ReLU(), lt.nn.Linear(64, 4) } }
  function model:training_step(b) return lt.F.cross_entropy(self.net(b[1]), b[2]) end
  function model:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), { lr = 0.05, momentum = 0.9 }) end
  local trainer = lt.Trainer { max_epochs = -1, logger = false, enable_checkpointing = false,
    enable_progress_bar = false, enable_model_summary = false }
  local run = trainer:fit_run(model, loader)
  run:advance { batches = 20 } -- the run's start and the first batches, outside the count
  return run, trainer, model
end

local function train_frames()
  local run, trainer = new_run()
  local times = {}
  local before = trainer.global_step
  for f = 1, FRAMES do
    local t0 = now()
    run:advance { seconds = BUDGET }
    times[f] = now() - t0
  end
  local r = percentiles(times)
  r.steps = trainer.global_step - before
  return r
end

local function infer_frames()
  local _, _, model = new_run()
  local x = lt.randn(256, 16)
  local times = {}
  lt.no_grad(function()
    for f = 1, FRAMES do
      local t0 = now()
      for _ = 1, 20 do local _ = model.net(x):argmax(2) end
      times[f] = now() - t0
    end
  end)
  return percentiles(times)
end

local function phase(name)
  collectgarbage()
  local r = { name = name, heap_mb = collectgarbage("count") / 1024, train = train_frames(), infer = infer_frames() }
  print(string.format("%-6s heap %6.1f MB  advance: p50 %6.2f ms  p99 %6.2f ms  max %6.2f ms  steps %6d" ..
    "  | inference: p50 %5.2f ms  p99 %5.2f ms  max %6.2f ms", name, r.heap_mb, r.train.p50 * 1e3,
    r.train.p99 * 1e3, r.train.max * 1e3, r.train.steps, r.infer.p50 * 1e3, r.infer.p99 * 1e3, r.infer.max * 1e3))
  return r
end

local empty = phase("empty")
local entities = {}
for i = 1, tonumber(o.entities) do
  entities[i] = { id = i, x = i * 0.5, y = -i * 0.5, vx = 0, vy = 1, kind = "npc" }
end
local heap = phase("heap")
assert(#entities == tonumber(o.entities))
entities = nil -- luacheck: ignore 311 (dropped, so that the last phase runs with an empty heap again)
local after = phase("after")

local function ratio(a, b) return a / b end
local p99 = ratio(heap.train.p99, empty.train.p99)
local steps = ratio(heap.train.steps, empty.train.steps)
print(string.format("RESULT heap/empty: advance p50 %.2fx  p99 %.2fx  max %.2fx  steps %.2fx" ..
  "  | inference p99 %.2fx  max %.2fx  | after/empty (the machine's drift): steps %.2fx",
  ratio(heap.train.p50, empty.train.p50), p99, ratio(heap.train.max, empty.train.max), steps,
  ratio(heap.infer.p99, empty.infer.p99), ratio(heap.infer.max, empty.infer.max),
  ratio(after.train.steps, empty.train.steps)))
print(string.format("BAR p99 within 2x: %s; steps within 30%%: %s", p99 <= 2 and "yes" or "NO",
  math.abs(steps - 1) <= 0.3 and "yes" or "NO"))
