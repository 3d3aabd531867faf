-- metrics_bench.lua — the per-update cost of lt.metrics' counting (one C call per batch, core/src/metrics.c),
-- lutra side of bench/metrics_bench_torch.py (same workloads and output "name microseconds", best of 9 rounds of
-- 10000 updates). The whole update is timed: argument checks, contiguity, the kernel.
--   luajit bench/metrics_bench.lua    (with the built module on package.cpath, see tests/run)
local lt = require "lutra"
local clock = os.clock
local ok, ffi = pcall(require, "ffi")
if ok then
  ffi.cdef [[ typedef struct { long tv_sec; long tv_nsec; } lt_ts_m; int clock_gettime(int, lt_ts_m *); ]]
  local ts = ffi.new("lt_ts_m")
  clock = function() ffi.C.clock_gettime(1, ts); return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9 end
end
lt.set_num_threads(1)
lt.manual_seed(0)
local N, C = 32, 10
local scores, target = lt.randn(N, C), lt.randint(1, C + 1, { N })
local bp, bt = lt.rand(N), lt.randint(0, 2, { N })
local M = lt.metrics
local cases = {
  { "confmat_C10_N32", M.ConfusionMatrix { task = "multiclass", num_classes = C }, scores, target },
  { "stat_scores_C10_N32", M.F1Score { task = "multiclass", num_classes = C, average = "macro" }, scores, target },
  { "binary_N32", M.Accuracy { task = "binary" }, bp, bt },
}
for _, c in ipairs(cases) do
  local m, p, t = c[2], c[3], c[4]
  for _ = 1, 100 do m:update(p, t) end
  local best = math.huge
  for _ = 1, 9 do
    local t0 = clock()
    for _ = 1, 10000 do m:update(p, t) end
    best = math.min(best, (clock() - t0) / 10000 * 1e6)
  end
  print(string.format("%s %.3f", c[1], best))
end
