-- bench/lstm_bench.lua — a word-level language model's training step, lutra side of bench/lstm_bench_torch.py
-- (same recipe and output format "name microseconds", best of 5 rounds of timed steps after a warm-up):
-- Embedding(V, E) -> LSTM(E, H, 2 layers) -> Linear(H, V) -> cross entropy over every position, then the
-- optimizer step (Adam, and SGD); the LSTM state is carried between steps, detached (truncated BPTT).
-- Also the forward+backward of the LSTM alone, to separate the recurrence from the embedding/softmax.
--   ./lutra bench/lstm_bench.lua [--small]     (BENCH_THREADS, default 2)
local lt = require "lutra"
local nn, F = lt.nn, lt.F
local clock = os.clock
local ok, ffi = pcall(require, "ffi")
if ok then
  ffi.cdef [[ typedef struct { long tv_sec; long tv_nsec; } lt_lstm_ts; int clock_gettime(int, lt_lstm_ts *); ]]
  local ts = ffi.new("lt_lstm_ts")
  clock = function() ffi.C.clock_gettime(1, ts); return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9 end
end

lt.set_num_threads(tonumber(os.getenv("BENCH_THREADS") or "2"))
local small = arg and arg[1] == "--small"
local V, E, Hd, T, B = 2000, 256, 256, 35, 32
if small then V, E, Hd, T, B = 500, 64, 64, 20, 8 end
-- timed blocks and steps per block (bench/run passes fewer: its rounds already repeat the process)
local ROUNDS = tonumber(os.getenv("BENCH_ROUNDS") or "") or 5
local STEPS = tonumber(os.getenv("BENCH_STEPS") or "") or (small and 3 or 5)

local function best(t) table.sort(t); return t[1] end

local function timed(name, fn)
  for _ = 1, 3 do fn() end
  local times = {}
  for r = 1, ROUNDS do
    local t0 = clock()
    for _ = 1, STEPS do fn() end
    times[r] = (clock() - t0) / STEPS * 1e6
  end
  print(("%s %.1f"):format(name, best(times)))
end

lt.manual_seed(0)
local tokens = lt.randint(1, V + 1, { T + 1, B })
local x, y = tokens:narrow(1, 1, T), tokens:narrow(1, 2, T):reshape(T * B)

for _, optname in ipairs { "Adam", "SGD" } do
  local model = { embed = nn.Embedding(V, E), lstm = nn.LSTM(E, Hd, { num_layers = 2 }), head = nn.Linear(Hd, V) }
  local opt = optname == "Adam" and lt.optim.Adam(nn.parameters(model), { lr = 1e-3 })
    or lt.optim.SGD(nn.parameters(model), { lr = 0.1 })
  local state
  timed(("lm_step_%s_V%d_H%d_T%d_B%d"):format(optname:lower(), V, Hd, T, B), function()
    opt:zero_grad()
    local out, s = model.lstm(model.embed(x), state)
    state = { s[1]:detach(), s[2]:detach() }
    local loss = F.cross_entropy(model.head(out):reshape(T * B, V), y)
    loss:backward()
    opt:step()
  end)
end

local lstm = nn.LSTM(E, Hd, { num_layers = 2 })
local xin = lt.randn(T, B, E):requires_grad(true)
local g = lt.randn(T, B, Hd)
timed(("lstm_fwd_bwd_E%d_H%d_T%d_B%d"):format(E, Hd, T, B), function()
  for _, p in ipairs(lstm:parameters()) do p:zero_grad(true) end
  xin:zero_grad(true)
  local out = lstm(xin)
  out:backward(g)
end)
timed(("lstm_fwd_E%d_H%d_T%d_B%d"):format(E, Hd, T, B), function()
  lt.no_grad(function() return lstm(xin) end)
end)
