-- ew_threads.lua — elementwise and softmax kernels on 1 thread vs 2 (lt.set_num_threads), alternating in one
-- process so drift on a shared machine hits both alike. Prints "op elements t1_us t2_us t1/t2" per size (median
-- of rounds); below a kernel's split threshold (EW_PAR_MIN in core/src/ops_ew_internal.h, SM_PAR_MIN in
-- ops_softmax.c) both columns run one thread. Used to pick those thresholds (with the threshold set to 0).
--   ./lutra bench/ew_threads.lua [rounds]        EW_OPS=add,softmax: only ops whose name contains one of these
--   EW_GAP_US=200 ./lutra bench/ew_threads.lua   the pool's worker asleep at each call (see below)
local lt = require "lutra"
local ffi = require "ffi"
ffi.cdef [[ typedef struct { long tv_sec; long tv_nsec; } lt_ts; int clock_gettime(int, lt_ts *); ]]
local ts = ffi.new("lt_ts")
local function clock() ffi.C.clock_gettime(1, ts); return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9 end
local function median(t) table.sort(t); return t[math.ceil(#t / 2)] end

local rounds = tonumber(arg and arg[1]) or 9
local only = os.getenv("EW_OPS")
local ops = {
  { "mul_scalar", function(a) return a * 2 end },
  { "add", function(a, b) return a + b end },
  { "relu", function(a) return a:relu() end },
  { "exp", function(a) return a:exp() end },
  { "sigmoid", function(a) return a:sigmoid() end },
  { "log", function(a) return a:abs():log() end },
  { "add_", function(a, b) return a:add_(b) end },
  { "softmax", function(a) return a:softmax(2) end },
  { "log_softmax", function(a) return a:log_softmax(2) end },
}
local grads = {
  { "relu_bwd", function(a) return a:relu() end },
  { "sigmoid_bwd", function(a) return a:sigmoid() end },
  { "softmax_bwd", function(a) return a:softmax(2) end },
  { "log_softmax_bwd", function(a) return a:log_softmax(2) end },
}
local cols = 512
local sizes = { 8, 32, 64, 128, 256, 1024, 2048 } -- rows of 512: 4K .. 1M elements
lt.manual_seed(0)
-- EW_GAP_US=200: the caller spins that long between calls (timed out), so the pool's idle worker has gone to
-- sleep at each call, as between the GEMMs of a training step.
local gap = (tonumber(os.getenv("EW_GAP_US")) or 0) * 1e-6
local function time(fn, n)
  if gap > 0 then
    n = math.min(n, 200)
    local total = 0
    for _ = 1, n do
      local t = clock() + gap
      while clock() < t do end
      local t0 = clock()
      fn()
      total = total + clock() - t0
    end
    return total / n * 1e6
  end
  local t0 = clock()
  for _ = 1, n do fn() end
  return (clock() - t0) / n * 1e6
end
local function bench(name, make)
  if only then
    local hit = false
    for w in only:gmatch("[^,]+") do hit = hit or name:find(w, 1, true) ~= nil end
    if not hit then return end
  end
  for _, rows in ipairs(sizes) do
    local f = make(rows)
    local n = math.max(10, math.floor(4e6 / (rows * cols)))
    local t1, t2 = {}, {}
    for _ = 1, rounds do
      lt.set_num_threads(1); t1[#t1 + 1] = time(f, n)
      lt.set_num_threads(2); t2[#t2 + 1] = time(f, n)
    end
    local a, b = median(t1), median(t2)
    print(("%-16s %8d %10.2f %10.2f %6.2f"):format(name, rows * cols, a, b, a / b))
    io.stdout:flush()
  end
end
-- warm-up: the first op timed otherwise pays for the new worker thread's first placement
do
  local a = lt.randn(256, cols)
  lt.set_num_threads(2)
  local t = clock() + 0.3
  while clock() < t do local _ = a * 2 end
end
for _, op in ipairs(ops) do
  bench(op[1], function(rows)
    local a, b = lt.randn(rows, cols), lt.randn(rows, cols)
    return function() op[2](a, b) end
  end)
end
for _, op in ipairs(grads) do
  bench(op[1], function(rows)
    local a = lt.randn(rows, cols):requires_grad(true)
    local g = lt.randn(rows, cols)
    local y = op[2](a)
    return function() a.grad = nil; y = op[2](a); y:backward(g) end
  end)
end
