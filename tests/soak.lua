-- tests/soak.lua — a soak run: a real Trainer workload (fit with validation, a CSV logger, a ModelCheckpoint
-- saving every epoch, a LearningRateMonitor, a scheduler, dropout, shuffling) repeated for a given time, with
-- stepwise advance{batches} in between as a host would drive it. After a warm-up it samples the process's
-- RSS, its open file descriptors and the Lua heap after a full collection, and fails when any of them grows
-- past its margin. Not a spec: the run is long by design. `.ci/run` runs it for 60 s; run it for an hour
-- with `./lutra tests/soak.lua 3600`. Prints the samples, then "1 passed, 0 failed" (or "0 passed, 1 failed").
local lt = require "lutra"
io.stdout:setvbuf("line") -- the samples show while it runs

local seconds = tonumber(arg and arg[1]) or 60
local dir = os.tmpname()
os.remove(dir)
lt._io.mkdirs(dir)

local function rss_kb()
  local f = assert(io.open("/proc/self/statm"))
  local _, resident = f:read("*n", "*n")
  f:close()
  return resident * 4
end

local function open_fds()
  return #lt._io.listdir("/proc/self/fd") -- includes the listing's own descriptor: the same in every sample
end

-- LuaJIT's compiled traces live in the Lua heap's count: they grow while the JIT keeps finding hot paths (by 600
-- KiB and more when a loaded CI machine warms up slowly) and are bounded by its maxtrace/maxmcode, not a leak.
-- Flushing them before each sample leaves only what lutra and the script hold (1214 -> 1215 KiB over 1860 rounds here).
local function lua_heap_kb()
  if jit then jit.flush() end
  collectgarbage()
  collectgarbage()
  return collectgarbage("count")
end

lt.seed_everything(0)
local model = { net = lt.nn.Sequential { lt.nn.Linear(32, 64), lt.nn.ReLU(), lt.nn.Dropout(0.1), lt.nn.Linear(64, 4) } }
function model:forward(x) return self.net(x) end
function model:training_step(batch)
  local loss = lt.F.cross_entropy(self:forward(batch[1]), batch[2])
  self:log("train_loss", loss)
  return loss
end
function model:validation_step(batch)
  local logits = self:forward(batch[1])
  self:log("val_loss", lt.F.cross_entropy(logits, batch[2]))
  self:log("val_acc", logits:argmax(2):eq(batch[2]):float():mean())
end
function model:configure_optimizers()
  local opt = lt.optim.Adam(self.net:parameters(), { lr = 1e-3 })
  return { optimizer = opt, lr_scheduler = lt.optim.lr_scheduler.StepLR(opt, { step_size = 5, gamma = 0.9 }) }
end

local x = lt.randn(512, 32)
local y = x:narrow(2, 1, 4):argmax(2)
local train = lt.data.DataLoader(lt.data.TensorDataset(x, y), { batch_size = 32, shuffle = true })
local val = lt.data.DataLoader(lt.data.TensorDataset(x:narrow(1, 1, 128), y:narrow(1, 1, 128)), { batch_size = 64 })

local function one_round(epochs)
  local trainer = lt.Trainer {
    max_epochs = epochs, default_root_dir = dir, enable_progress_bar = false, enable_model_summary = false,
    log_every_n_steps = 4, logger = lt.loggers.CSVLogger { save_dir = dir, version = 0 }, -- one directory, rewritten each round
    callbacks = { lt.callbacks.ModelCheckpoint { dirpath = dir .. "/ckpt", monitor = "val_loss", save_last = true },
      lt.callbacks.LearningRateMonitor() },
  }
  local run = trainer:fit_run(model, train, val)
  while not run:advance { batches = 3 } do end
  trainer:validate(model, val)
  lt.save(dir .. "/weights.safetensors", model)
  lt.load(dir .. "/weights.safetensors", model)
end

local wall = os.time()
local function elapsed() return os.time() - wall end
-- warm-up (a fifth of the time, at most a minute): the caches fill, the Lua heap finds its level
while elapsed() < math.min(60, seconds * 0.2) do one_round(2) end
local base = { rss = rss_kb(), fds = open_fds(), heap = lua_heap_kb() }
local peak = { rss = base.rss, fds = base.fds, heap = base.heap }
local rounds = 0
print(string.format("soak: %d s; after warm-up RSS %d KiB, %d fds, Lua heap %.0f KiB", seconds, base.rss, base.fds,
  base.heap))
local next_sample = elapsed() + math.max(5, math.floor(seconds / 12))
while elapsed() < seconds do
  one_round(2)
  rounds = rounds + 1
  if elapsed() >= next_sample or elapsed() >= seconds then
    local s = { rss = rss_kb(), fds = open_fds(), heap = lua_heap_kb() }
    for k, v in pairs(s) do peak[k] = math.max(peak[k], v) end
    print(string.format("  t=%4d s  rounds %5d  RSS %d KiB  fds %d  Lua heap %.0f KiB", elapsed(), rounds, s.rss, s.fds,
      s.heap))
    next_sample = elapsed() + math.max(5, math.floor(seconds / 12))
  end
end
os.execute("rm -rf '" .. dir .. "'")

-- margins: RSS within 5% + 4 MiB of the warmed-up level (allocator noise), not one fd more, the Lua heap (without
-- the JIT's traces) within 2% + 64 KiB: one leaked table per round would pass that within a few hundred rounds
local fails = {}
if not os.getenv("LUTRA_SANITIZER") and peak.rss > base.rss * 1.05 + 4096 then
  fails[#fails + 1] = string.format("RSS grew from %d to %d KiB", base.rss, peak.rss)
end
if peak.fds > base.fds then fails[#fails + 1] = string.format("open fds grew from %d to %d", base.fds, peak.fds) end
if peak.heap > base.heap * 1.02 + 64 then
  fails[#fails + 1] = string.format("the Lua heap grew from %.0f to %.0f KiB", base.heap, peak.heap)
end
print(string.format("soak: %d rounds (%d epochs); peak RSS %d KiB (%+.1f%%), fds %d, Lua heap %.0f KiB (%+.1f%%)",
  rounds, rounds * 2, peak.rss, 100 * (peak.rss / base.rss - 1), peak.fds, peak.heap, 100 * (peak.heap / base.heap - 1)))
for _, f in ipairs(fails) do print("not ok - " .. f) end
print(#fails == 0 and "1 passed, 0 failed" or "0 passed, 1 failed")
os.exit(#fails == 0 and 0 or 1)
