-- bench/nn_bench.lua — forward+backward timings of nn layers at LeNet / MLP shapes (batch 64), lutra
-- and then PyTorch (bench/nn_bench_torch.py: same shapes, same protocol — median of timed repetitions
-- after a warm-up, gradients reset to none each iteration, 2 threads, OMP_WAIT_POLICY=PASSIVE) in one
-- run, with the ratios.
--   luajit bench/nn_bench.lua [--no-torch]     (with the built module on package.cpath/path)
--   ./lutra bench/nn_bench.lua
local lt = require "lutra"
local nn, F = lt.nn, lt.F

local function now() return os.clock() end -- fallback; wall time below (CPU time counts BLAS threads)
local ffi_ok, ffi = pcall(require, "ffi")
if ffi_ok then
  ffi.cdef [[ typedef struct { long tv_sec; long tv_nsec; } lt_bench_ts; int clock_gettime(int, lt_bench_ts *); ]]
  local ts = ffi.new("lt_bench_ts")
  now = function() ffi.C.clock_gettime(1, ts); return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9 end
end

local function median(xs)
  table.sort(xs)
  return xs[math.floor((#xs + 1) / 2)]
end

local results = {}

local function bench(name, params, step, reps)
  for _ = 1, 5 do step(); for _, p in ipairs(params) do p:zero_grad(true) end end
  local ts = {}
  for i = 1, reps do
    local t0 = now()
    step()
    ts[i] = (now() - t0) * 1e3
    for _, p in ipairs(params) do p:zero_grad(true) end
  end
  local ms = median(ts)
  results[#results + 1] = { name = name, ms = ms }
  print(string.format("%-44s %8.3f ms", name, ms))
end

lt.set_num_threads(2)
lt.manual_seed(0)
local B = 64

local lin = nn.Linear(784, 512)
local xl = lt.randn(B, 784)
local gl = lt.ones(B, 512)
bench("Linear(784->512) fwd+bwd", lin:parameters(), function() lin(xl):backward(gl) end, 200)

local c1 = nn.Conv2d(1, 6, 5, { padding = 2 })
local x1 = lt.randn(B, 1, 28, 28)
local g1 = lt.ones(B, 6, 28, 28)
bench("Conv2d(1->6, k5, pad 2) 28x28 fwd+bwd", c1:parameters(), function() c1(x1):backward(g1) end, 100)

local c2 = nn.Conv2d(6, 16, 5)
local x2 = lt.randn(B, 6, 14, 14):requires_grad(true)
local g2 = lt.ones(B, 16, 10, 10)
local p2 = c2:parameters()
p2[#p2 + 1] = x2
bench("Conv2d(6->16, k5) 14x14 fwd+bwd (+input grad)", p2, function() c2(x2):backward(g2) end, 100)

local lenet = nn.Sequential {
  nn.Conv2d(1, 6, 5, { padding = 2 }), nn.ReLU(), nn.MaxPool2d(2),
  nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
  nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10),
}
local labels = {}
for i = 1, B do labels[i] = (i % 10) + 1 end
local y = lt.tensor(labels, "int64")
bench("LeNet-5 fwd+cross_entropy+bwd", lenet:parameters(), function() F.cross_entropy(lenet(x1), y):backward() end, 100)

print(string.format("(lutra %s, threads %d, BLAS %s)", lt.version, lt.get_num_threads(), lt.blas_info().coretype))

if arg and arg[1] == "--no-torch" then return end
local dir = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
local p = io.popen("OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 " .. dir .. "/nn_bench_torch.py 2>&1")
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
