-- bench/bf16.lua — bfloat16 mixed precision on one thread (issue "bf16"): the training steps of the MLP
-- (784-512-256-10, batch 64), LeNet-5 (batch 64) and the tiny GPT (models/gpt.lua: 2 layers, 4 heads, width 128,
-- batch 16, context 64, AdamW) in lutra fp32 and under lt.autocast("bfloat16"), against PyTorch 1.13 fp32 and
-- torch.autocast("cpu", dtype=torch.bfloat16) (bench/bf16_torch.py, same models and protocol); then the GFLOP/s
-- of the bf16 GEMM against sgemm on the GPT step's 12 GEMMs and the MLP's. Each figure is the median over ROUNDS
-- rounds (BENCH_ROUNDS, default 5) of the mean of 10 steps, in CPU time; fp32 and bf16 rounds alternate.
--   ./lutra bench/bf16.lua            (~1.5 minutes; BENCH_NO_TORCH=1: lutra only)
local repo = (arg and arg[0] or ""):match("^(.-)bench/[^/]*$") or "./"
package.path = repo .. "?.lua;" .. package.path
local lt = require "lutra"
local GPT = require "models.gpt"
local nn = lt.nn

-- CPU time of the process (os.clock): one thread computes, so it is the step's time without the waits for a
-- core that a loaded machine adds to wall-clock time
local clock = os.clock

lt.set_num_threads(1)
local ROUNDS, STEPS = tonumber(os.getenv("BENCH_ROUNDS") or "5"), 10
local info = lt._bf16_info()
print(string.format("cpu: %s; AVX512-BF16 %s; bf16 GEMM %s", (io.open("/proc/cpuinfo") or io.stdin):read("*a")
  :match("model name%s*:%s*([^\n]+)") or "?", info.supported and "yes" or "no", info.active and "on" or "off (fp32)"))

local function median(t)
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  table.sort(s)
  local n = #s
  return n % 2 == 1 and s[(n + 1) / 2] or (s[n / 2] + s[n / 2 + 1]) / 2
end

local function workload(name)
  lt.manual_seed(0)
  local net, x, y, opt, loss_of
  if name == "mlp" then
    net = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))
    x, y = lt.randn(64, 1, 28, 28), lt.randint(1, 11, { 64 })
  elseif name == "lenet" then
    net = nn.Sequential(nn.Conv2d(1, 6, 5, { padding = 2 }), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
      nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    x, y = lt.randn(64, 1, 28, 28), lt.randint(1, 11, { 64 })
  else
    net = GPT { vocab_size = 65, block_size = 64, n_layer = 2, n_head = 4, n_embd = 128 }
    x, y = lt.randint(1, 66, { 16, 64 }), lt.randint(1, 66, { 16, 64 })
  end
  if name == "gpt" then
    opt = lt.optim.AdamW(nn.parameters(net), { lr = 1e-3, betas = { 0.9, 0.99 }, weight_decay = 0.1 })
    loss_of = function() local _, l = net:forward(x, y) return l end
  else
    opt = lt.optim.SGD(nn.parameters(net), { lr = 0.01, momentum = 0.9 })
    loss_of = function() return lt.F.cross_entropy(net(x), y) end
  end
  local function step()
    opt:zero_grad(true)
    loss_of():backward()
    opt:step()
  end
  return function(bf16)
    local t0 = clock()
    for _ = 1, STEPS do
      if bf16 then lt.autocast("bfloat16", step) else step() end
    end
    return (clock() - t0) / STEPS
  end
end

local lutra = {}
for _, name in ipairs { "mlp", "lenet", "gpt" } do
  local run = workload(name)
  run(false)
  run(true) -- warm-up
  local t = { fp32 = {}, bf16 = {} }
  for _ = 1, ROUNDS do
    t.fp32[#t.fp32 + 1] = run(false)
    t.bf16[#t.bf16 + 1] = run(true)
  end
  lutra[name] = { fp32 = median(t.fp32) * 1e6, bf16 = median(t.bf16) * 1e6 }
  print(string.format("lutra %s fp32 %.1f", name, lutra[name].fp32))
  print(string.format("lutra %s bf16 %.1f", name, lutra[name].bf16))
  io.stdout:flush()
end

local torch = {}
if os.getenv("BENCH_NO_TORCH") ~= "1" then
  local p = io.popen("/usr/bin/python3 " .. repo .. "bench/bf16_torch.py")
  for line in p:lines() do
    print(line)
    local name, mode, us = line:match("^torch (%a+) (%w+) ([%d.]+)")
    if name then torch[name] = torch[name] or {}; torch[name][mode] = tonumber(us) end
  end
  p:close()
end

-- GEMM throughput on the step's shapes: {m, n, k, transa, transb}
local GPT_GEMMS = { -- per linear layer of a block (rows 1024 = 16 x 64): forward x W^T, dX = g W, dW = g^T x
  { 1024, 384, 128, false, true }, { 1024, 128, 384, false, false }, { 384, 128, 1024, true, false },
  { 1024, 128, 128, false, true }, { 1024, 128, 128, false, false }, { 128, 128, 1024, true, false },
  { 1024, 512, 128, false, true }, { 1024, 128, 512, false, false }, { 512, 128, 1024, true, false },
  { 1024, 128, 512, false, true }, { 1024, 512, 128, false, false }, { 128, 512, 1024, true, false },
}
local MLP_GEMMS = { { 64, 512, 784, false, true }, { 64, 784, 512, false, false }, { 512, 784, 64, true, false } }
local function gemm_time(s, bf16)
  local m, n, k, ta, tb = s[1], s[2], s[3], s[4], s[5]
  local A = ta and lt.randn(k, m) or lt.randn(m, k)
  local B = tb and lt.randn(n, k) or lt.randn(k, n)
  local C = lt.zeros(m, n)
  local reps = math.max(3, math.floor(2e8 / (m * n * k)))
  local t = {}
  for r = 0, ROUNDS do
    local t0 = clock()
    for _ = 1, reps do
      if bf16 then lt.autocast("bfloat16", lt._gemm, C, A, B, ta, tb, 1, 0) else lt._gemm(C, A, B, ta, tb, 1, 0) end
    end
    if r > 0 then t[#t + 1] = (clock() - t0) / reps end
  end
  return median(t)
end
local function gemm_set(name, set)
  local tf, tb = 0, 0
  for _, s in ipairs(set) do
    local a, b = gemm_time(s, false), gemm_time(s, true)
    tf, tb = tf + a, tb + b
    print(string.format("gemm %dx%dx%d%s%s sgemm %.0f GFLOP/s, bf16 %.0f GFLOP/s (x%.2f)", s[1], s[2], s[3],
      s[4] and " A^T" or "", s[5] and " B^T" or "", 2 * s[1] * s[2] * s[3] / a / 1e9, 2 * s[1] * s[2] * s[3] / b / 1e9,
      a / b))
  end
  print(string.format("summary: %s GEMMs sgemm %.2f ms, bf16 %.2f ms: x%.2f", name, tf * 1e3, tb * 1e3, tf / tb))
end
gemm_set("GPT step's 12", GPT_GEMMS)
gemm_set("MLP step's 3 (first layer)", MLP_GEMMS)

for _, name in ipairs { "mlp", "lenet", "gpt" } do
  local l, t = lutra[name], torch[name] or {}
  print(string.format("summary: %s step, 1 thread: lutra fp32 %.0f us, bf16 %.0f us (x%.2f)%s", name, l.fp32, l.bf16,
    l.fp32 / l.bf16, t.bf16 and string.format("; torch fp32 %.0f us, autocast %.0f us (x%.2f); lutra bf16 vs torch "
      .. "autocast x%.2f", t.fp32, t.bf16, t.fp32 / t.bf16, t.bf16 / l.bf16) or ""))
end
