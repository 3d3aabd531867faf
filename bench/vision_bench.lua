-- bench/vision_bench.lua — forward+backward timings of the vision layers (grouped, depthwise and dilated
-- convolutions, Conv1d, ConvTranspose2d, GroupNorm, ceil-mode pooling) at batch 16, lutra and then PyTorch
-- (bench/vision_bench_torch.py: same shapes, same protocol as bench/nn_bench.lua — median of timed repetitions
-- after a warm-up, gradients reset to none each iteration, 2 threads, OMP_WAIT_POLICY=PASSIVE), with the ratios.
--   ./lutra bench/vision_bench.lua [--no-torch]
local lt = require "lutra"
local nn = lt.nn

local ffi = require "ffi"
ffi.cdef [[ typedef struct { long tv_sec; long tv_nsec; } lt_vbench_ts; int clock_gettime(int, lt_vbench_ts *); ]]
local ts = ffi.new("lt_vbench_ts")
local function now() ffi.C.clock_gettime(1, ts); return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9 end

local results = {}
local function bench(name, m, x, reps)
  local params = m:parameters()
  params[#params + 1] = x
  local g
  local function step()
    local y = m(x)
    g = g or lt.ones(y:shape())
    y:backward(g)
    for _, p in ipairs(params) do p:zero_grad(true) end
  end
  for _ = 1, 5 do step() end
  local t = {}
  for i = 1, reps do
    local t0 = now()
    step()
    t[i] = (now() - t0) * 1e3
  end
  table.sort(t)
  local ms = t[math.floor((#t + 1) / 2)]
  results[#results + 1] = { name = name, ms = ms }
  print(string.format("%-44s %8.3f ms", name, ms))
end

lt.manual_seed(0)
local B = 16
local function x4(c, h, w) return lt.randn(B, c, h, w):requires_grad(true) end
bench("Conv2d depthwise 32, k3 pad 1, 28x28", nn.Conv2d(32, 32, 3, { padding = 1, groups = 32 }), x4(32, 28, 28), 50)
bench("Conv2d 32->64 k3 groups 4 dilation 2, 14x14", nn.Conv2d(32, 64, 3, { groups = 4, dilation = 2, padding = 2 }),
  x4(32, 14, 14), 50)
bench("Conv1d 64->64 k5 pad 2, L 100", nn.Conv1d(64, 64, 5, { padding = 2 }), lt.randn(B, 64, 100):requires_grad(true),
  50)
bench("ConvTranspose2d 32->16 k4 s2 p1, 14x14", nn.ConvTranspose2d(32, 16, 4, { stride = 2, padding = 1 }),
  x4(32, 14, 14), 50)
bench("GroupNorm(8, 32) 28x28", nn.GroupNorm(8, 32), x4(32, 28, 28), 50)
bench("MaxPool2d(3, 2, ceil_mode) 28x28 x32", nn.MaxPool2d(3, 2, { ceil_mode = true }), x4(32, 28, 28), 50)
bench("AdaptiveAvgPool2d(5) 28x28 x32", nn.AdaptiveAvgPool2d(5), x4(32, 28, 28), 50)

print(string.format("(lutra %s, threads %d, BLAS %s)", lt.version, lt.get_num_threads(), lt.blas_info().coretype))
if arg and arg[1] == "--no-torch" then return end
local dir = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
local p = io.popen("OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 " .. dir .. "/vision_bench_torch.py 2>&1")
local torch_out = p:read("*a")
p:close()
io.write("\n-- PyTorch --\n", torch_out)
local torch_ms = {}
for line in torch_out:gmatch("[^\n]+") do
  local name, ms = line:match("^(.-)%s+([%d.]+) ms$")
  if name then torch_ms[name] = tonumber(ms) end
end
print("\n-- lutra / PyTorch (lower is better for lutra) --")
for _, r in ipairs(results) do
  local t = torch_ms[r.name]
  if t then print(string.format("%-44s %8.3f / %8.3f ms = %5.2fx", r.name, r.ms, t, r.ms / t)) end
end
