-- bench/data_workers.lua — DataLoader{num_workers = 2} against num_workers = 0 (docs/reference/data.md): a Lua
-- dataset whose get(i) does ~0.1 ms of Lua work (calibrated at start), batches of 32, 64 batches per epoch.
-- Reports the epoch time of each, alternating, medians of `rounds` epochs after one warm-up epoch each:
--   - persistent workers (the steady state: the worker states are started once);
--   - workers started with each epoch (persistent_workers = false, PyTorch's default: + ~20 ms per state);
-- and lutra's system allocations (lt.memory_stats().system_allocs, process-wide) per batch over the timed
-- persistent epochs (the steady state's bar: 0). The bar (issue 27): >= 1.6x on 2 cores.
--   ./lutra bench/data_workers.lua [rounds [batches]]   (default 5 rounds of 64-batch epochs; the same with
--   build/bin/release/cli/lutra; a longer epoch, e.g. 640 batches, shows the per-epoch start amortised)
local lt = require "lutra"
local now = require("lutra.core")._io.now

local rounds = tonumber(arg and arg[1]) or 5
local BATCH, BATCHES, ITEM_S = 32, tonumber(arg and arg[2]) or 64, 1e-4

local function median(xs)
  local s = {}
  for i, x in ipairs(xs) do s[i] = x end
  table.sort(s)
  return s[math.floor((#s + 1) / 2)]
end

-- the dataset: item i is 16 floats from `work` iterations of arithmetic, and a label
local ds = { n = BATCH * BATCHES, work = 1000 }
function ds:len() return self.n end
function ds:get(i)
  local acc, row = i, {}
  for j = 1, self.work do acc = (acc * 1.000001 + j) % 9973 end
  for j = 1, 16 do row[j] = (acc + j) / 9973 end
  return { lt.tensor(row), i % 10 + 1 }
end

-- calibration: `work` for ~0.1 ms of CPU per item in this state (CPU time: the machine may be loaded; the
-- workers run the same code)
for _ = 1, 4 do
  local t0 = os.clock()
  for i = 1, 2000 do ds:get(i) end
  local per = (os.clock() - t0) / 2000
  ds.work = math.max(10, math.floor(ds.work * ITEM_S / per))
end
do
  local t0 = os.clock()
  for i = 1, 2000 do ds:get(i) end
  io.write(string.format("data_workers: get(i) %.3f ms of CPU per item (work %d), batch %d, %d batches per epoch\n",
    (os.clock() - t0) / 2000 * 1e3, ds.work, BATCH, BATCHES))
end

local function epoch(loader)
  local t0, n = now(), 0
  for b in loader:iter() do n = n + b[1]:size(1) end
  assert(n == ds.n)
  return now() - t0
end

local l0 = lt.data.DataLoader(ds, { batch_size = BATCH, shuffle = true, seed = 1 })
local lp = lt.data.DataLoader(ds, { batch_size = BATCH, shuffle = true, seed = 1, num_workers = 2,
  persistent_workers = true })
local ln = lt.data.DataLoader(ds, { batch_size = BATCH, shuffle = true, seed = 1, num_workers = 2 })
epoch(l0); epoch(lp); epoch(ln) -- warm-up: JIT, the allocator's cache, the persistent workers

local t0s, tps, tns, cpu0, cpup = {}, {}, {}, {}, {}
local allocs, batches = 0, 0
for r = 1, rounds do
  local c = os.clock()
  t0s[r] = epoch(l0)
  cpu0[r] = os.clock() - c
  local s0 = lt.memory_stats().system_allocs
  c = os.clock()
  tps[r] = epoch(lp)
  cpup[r] = os.clock() - c
  allocs, batches = allocs + lt.memory_stats().system_allocs - s0, batches + BATCHES
  tns[r] = epoch(ln)
end
lp:close()

local m0, mp, mn = median(t0s), median(tps), median(tns)
print(string.format("data_workers: num_workers=2 vs 0: %.2fx persistent (%.1f against %.1f ms/epoch), %.2fx "
  .. "started per epoch (%.1f ms); CPU %.1f against %.1f ms/epoch; system_allocs/batch %.2f (median of %d rounds)",
  m0 / mp, mp * 1e3, m0 * 1e3, m0 / mn, mn * 1e3, median(cpup) * 1e3, median(cpu0) * 1e3, allocs / batches, rounds))
