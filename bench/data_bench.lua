-- bench/data_bench.lua — is data loading ever the bottleneck? Measures, on the Fashion-MNIST train set:
--   1. the DataLoader alone (batch 64, shuffled: one C row gather per tensor and batch), batches/s;
--   2. the same through a Lua dataset (get(i) per sample + stacking), batches/s, for comparison;
--   3. what MLP 784-512-256-10 training consumes at batch 64 (forward, backward, SGD step), batches/s.
-- The bar (issue 5): loader alone >= 20x the batches/s that MLP training consumes.
--   ./lutra bench/data_bench.lua [--seconds 3]
--
-- Measured (2 cores, shared with other jobs: load average 4-6, so training is slower than on an idle machine):
--   C gather 16000-25000 batches/s, Lua dataset 4000-4800 batches/s, MLP training 189-195 batches/s:
--   the loader alone delivers 86-128x what training consumes, about 1% of a training step. A prefetch
--   thread would hide at most that 1%, so there is none (issue 5: "only where it measurably helps").
local lt = require "lutra"
local ffi = require "ffi"
ffi.cdef [[ typedef struct { long tv_sec; long tv_nsec; } lt_bench_timespec;
            int clock_gettime(int clk, lt_bench_timespec *ts); ]]
local function now()
  local ts = ffi.new("lt_bench_timespec")
  ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local seconds = 3
if arg and arg[1] == "--seconds" then seconds = tonumber(arg[2]) end

local train = lt.data.FashionMNIST { train = true }

-- Runs body(batch) over epochs of loader until `budget` seconds pass; returns batches/s.
local function rate(loader, budget, body)
  local n, t0 = 0, now()
  while true do
    for batch in loader:iter() do
      if body then body(batch) end
      n = n + 1
      if n % 16 == 0 and now() - t0 > budget then return n / (now() - t0), n end
    end
  end
end

lt.manual_seed(0)
local loader = lt.data.DataLoader(train, { batch_size = 64, shuffle = true })
rate(loader, 0.3) -- warm up (JIT, allocator caches)
local loader_rate, nl = rate(loader, seconds)

local lua_ds = setmetatable({
  get = function(_, i) return { train.data[i], train.targets[i] } end,
}, { __len = function() return #train end })
local lua_loader = lt.data.DataLoader(lua_ds, { batch_size = 64, shuffle = true })
local lua_rate, nlua = rate(lua_loader, seconds)

local model = require("models.mlp") { hidden = { 512, 256 }, lr = 0.01, momentum = 0.9 }
local opt = model:configure_optimizers()
local function step(batch)
  opt:zero_grad()
  local loss = model:training_step(batch, 0)
  loss:backward()
  opt:step()
end
rate(loader, 0.5, step) -- warm up
local train_rate, nt = rate(loader, seconds, step)

print(string.format("threads: %s", lt.get_num_threads and lt.get_num_threads() or "?"))
print(string.format("DataLoader, TensorDataset (C gather), batch 64 shuffled: %9.0f batches/s (%d batches)", loader_rate, nl))
print(string.format("DataLoader, Lua dataset (get + stack), batch 64 shuffled: %8.0f batches/s (%d batches)", lua_rate, nlua))
print(string.format("MLP 784-512-256-10 training (fwd+bwd+SGD), batch 64:    %8.0f batches/s (%d batches)", train_rate, nt))
local ratio = loader_rate / train_rate
print(string.format("loader / training = %.1fx (bar: >= 20x) %s", ratio, ratio >= 20 and "PASS" or "FAIL"))
