-- optim_bench.lua — one optimizer step over 1M parameters (one [1000 x 1000] tensor) and over an MLP's first
-- layer ([256 x 784]), lutra side of
-- bench/optim_bench_torch.py (same configs and output format: "name size microseconds", the best of 9 blocks of
-- 50 steps; BENCH_ROUNDS and BENCH_STEPS change them).
--   luajit bench/optim_bench.lua    (with the built module on package.cpath, see tests/run)
local lt = require "lutra"
local clock = os.clock
local ok, ffi = pcall(require, "ffi")
if ok then
  ffi.cdef [[ typedef struct { long tv_sec; long tv_nsec; } lt_ts; int clock_gettime(int, lt_ts *); ]]
  local ts = ffi.new("lt_ts")
  clock = function() ffi.C.clock_gettime(1, ts); return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9 end
end

lt.set_num_threads(tonumber(os.getenv("BENCH_THREADS") or "2"))

local function best(t) table.sort(t); return t[1] end -- the least disturbed round (the machine is shared)

local configs = {
  { "sgd", "SGD", { lr = 0.01 } },
  { "sgd_momentum", "SGD", { lr = 0.01, momentum = 0.9 } },
  { "adam", "Adam", { lr = 1e-3 } },
  { "adamw", "AdamW", { lr = 1e-3 } },
  { "rmsprop", "RMSprop", { lr = 1e-2 } },
  { "adagrad", "Adagrad", { lr = 1e-2 } },
  { "adadelta", "Adadelta", {} },
  { "adamax", "Adamax", {} },
  { "nadam", "NAdam", {} },
  { "radam", "RAdam", {} },
  { "asgd", "ASGD", {} },
  { "zero_grad", "SGD", { lr = 0.01 } },
}
lt.manual_seed(0)

local function bench(name, kind, opts, rows, cols)
  local p = lt.param(lt.randn(rows, cols))
  p.grad = lt.randn(rows, cols):mul_(0.01)
  local opt = lt.optim[kind]({ p }, opts)
  local fn = name == "zero_grad" and function() opt:zero_grad() end or function() opt:step() end
  for _ = 1, 5 do fn() end -- state allocated, caches warm
  -- steps per block, blocks (bench/run passes fewer: its rounds already repeat the process)
  local n, times = tonumber(os.getenv("BENCH_STEPS") or "") or 50, {}
  for _ = 1, tonumber(os.getenv("BENCH_ROUNDS") or "") or 9 do
    local t0 = clock()
    for _ = 1, n do fn() end
    times[#times + 1] = (clock() - t0) / n * 1e6
  end
  print(("%s %dx%d %.1f"):format(name, rows, cols, best(times)))
end

for _, size in ipairs { { 1000, 1000 }, { 256, 784 } } do
  for _, cfg in ipairs(configs) do bench(cfg[1], cfg[2], cfg[3], size[1], size[2]) end
end
