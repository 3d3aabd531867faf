-- gemm_shapes.lua — the GEMMs of the training workloads, alone, on the same shapes as
-- bench/gemm_shapes_torch.py: the LSTM's per-step recurrent product (h [32 x 256] times W_hh^T [256 x 1024]),
-- the MLP's layers at batch 64, and the 2-D matmul 1024x128x128. Prints "matmul MxNxK microseconds" (median of
-- 7 rounds; BENCH_THREADS threads, default 2).
local lt = require "lutra"
local ffi = require "ffi"
ffi.cdef [[ typedef struct { long tv_sec; long tv_nsec; } gs_ts; int clock_gettime(int, gs_ts *); ]]
local ts = ffi.new("gs_ts")
local function clock() ffi.C.clock_gettime(1, ts); return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9 end
local function median(t) table.sort(t); return t[math.ceil(#t / 2)] end

lt.set_num_threads(tonumber(os.getenv("BENCH_THREADS") or "2"))
lt.manual_seed(0)
-- M, N, K, label: A [M x K] times B^T with B [N x K] stored (a Linear's weight, the LSTM's W_hh)
local shapes = { { 32, 1024, 256, "lstm_step" }, { 64, 512, 784, "mlp_fc1" }, { 64, 256, 512, "mlp_fc2" },
  { 1024, 128, 128, "square_2d" } }
for _, s in ipairs(shapes) do
  local a, w = lt.randn(s[1], s[3]), lt.randn(s[2], s[3])
  local wt = w:t()
  local n = math.max(20, math.floor(4e8 / (s[1] * s[2] * s[3])))
  for _ = 1, n do lt.matmul(a, wt) end
  local times = {}
  for _ = 1, 7 do
    local t0 = clock()
    for _ = 1, n do lt.matmul(a, wt) end
    times[#times + 1] = (clock() - t0) / n * 1e6
  end
  print(("matmul %s %dx%dx%d %.3f"):format(s[4], s[1], s[2], s[3], median(times)))
end
