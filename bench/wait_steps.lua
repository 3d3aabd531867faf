-- bench/wait_steps.lua — wall and CPU time per training step of three workloads, for measuring how lutra's
-- threads wait (bench/wait.sh runs it quiet and beside busy processes, and under strace for the system calls).
--   lutra bench/wait_steps.lua mlp|lstm|gpt [steps]
-- Prints "WAIT <name> wall_us=<per step> cpu_us=<per step, all threads: user + system>" over `steps` timed
-- steps after a warm-up. Random data (the waiting, not the data, is measured); 2 threads (BENCH_THREADS).
local repo = (arg and arg[0] or ""):match("^(.-)bench/[^/]*$")
if repo then package.path = repo .. "?.lua;" .. package.path end
local lt = require "lutra"
local ffi = require "ffi"
ffi.cdef [[ typedef struct { long tv_sec; long tv_nsec; } wait_ts; int clock_gettime(int, wait_ts *); ]]
local ts = ffi.new("wait_ts")
local function clock(id) ffi.C.clock_gettime(id, ts); return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9 end
local MONOTONIC, PROCESS_CPU = 1, 2

local which, steps = arg[1] or "mlp", tonumber(arg[2] or "0")
lt.set_num_threads(tonumber(os.getenv("BENCH_THREADS") or "2"))
lt.manual_seed(0)
local nn, F = lt.nn, lt.F
local step
if which == "mlp" then -- bench/train_lutra.lua's MLP at batch 64, SGD with momentum
  local net = nn.Sequential { nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10) }
  local opt = lt.optim.SGD(net:parameters(), { lr = 0.01, momentum = 0.9 })
  local x, y = lt.rand(64, 784), (lt.rand(64) * 10):long() + 1
  step = function()
    opt:zero_grad()
    F.cross_entropy(net(x), y):backward()
    opt:step()
  end
  steps = steps > 0 and steps or 300
elseif which == "lstm" then -- bench/lstm_bench.lua's word model step (Adam)
  local V, E, Hd, T, B = 2000, 256, 256, 35, 32
  local tokens = lt.randint(1, V + 1, { T + 1, B })
  local x, y = tokens:narrow(1, 1, T), tokens:narrow(1, 2, T):reshape(T * B)
  local m = { embed = nn.Embedding(V, E), lstm = nn.LSTM(E, Hd, { num_layers = 2 }), head = nn.Linear(Hd, V) }
  local opt = lt.optim.Adam(nn.parameters(m), { lr = 1e-3 })
  local state
  step = function()
    opt:zero_grad()
    local out, s = m.lstm(m.embed(x), state)
    state = { s[1]:detach(), s[2]:detach() }
    F.cross_entropy(m.head(out):reshape(T * B, V), y):backward()
    opt:step()
  end
  steps = steps > 0 and steps or 30
elseif which == "gpt" then -- bench/gpt_bench.lua's tiny GPT step (AdamW)
  local GPT = require "models.gpt"
  local model = GPT { vocab_size = 65, block_size = 64, n_layer = 2, n_head = 4, n_embd = 128 }
  local opt = lt.optim.AdamW(nn.parameters(model), { lr = 1e-3, betas = { 0.9, 0.99 }, weight_decay = 0.1 })
  local x, y = lt.randint(1, 66, { 16, 64 }), lt.randint(1, 66, { 16, 64 })
  step = function()
    opt:zero_grad(true)
    local _, loss = model:forward(x, y)
    loss:backward()
    opt:step()
  end
  steps = steps > 0 and steps or 40
else
  error("wait_steps: unknown workload '" .. tostring(which) .. "' (mlp, lstm, gpt)")
end
for _ = 1, math.max(3, math.floor(steps / 5)) do step() end
local w0, c0 = clock(MONOTONIC), clock(PROCESS_CPU)
for _ = 1, steps do step() end
local w1, c1 = clock(MONOTONIC), clock(PROCESS_CPU)
print(("WAIT %s wall_us=%.1f cpu_us=%.1f"):format(which, (w1 - w0) / steps * 1e6, (c1 - c0) / steps * 1e6))
