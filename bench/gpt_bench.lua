-- gpt_bench.lua — the tiny GPT's training step (models/gpt.lua: 2 layers, 4 heads, width 128, context 64,
-- batch 16, vocabulary 65, AdamW), lutra side of bench/gpt_bench_torch.py (same model, batch and protocol).
-- Prints "name microseconds" lines: the step and its phases (forward + loss, backward, optimizer step), each
-- the mean over the 10 steps of the least disturbed of ROUNDS rounds (the machine is shared), and the CPU time
-- of a step (all threads, over every timed round: on a loaded machine the fairer figure, since a process that
-- waits for the CPU does not count the wait).
--   lutra bench/gpt_bench.lua        (bench/run --only gpt runs both sides)
local repo = (arg and arg[0] or ""):match("^(.-)bench/[^/]*$")
if repo then package.path = repo .. "?.lua;" .. package.path end
local lt = require "lutra"
local GPT = require "models.gpt"
local clock = os.clock
local ok, ffi = pcall(require, "ffi")
if ok then
  ffi.cdef [[ typedef struct { long tv_sec; long tv_nsec; } lt_gb_ts; int clock_gettime(int, lt_gb_ts *); ]]
  local ts = ffi.new("lt_gb_ts")
  clock = function() ffi.C.clock_gettime(1, ts); return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9 end
end

lt.set_num_threads(tonumber(os.getenv("BENCH_THREADS") or "2"))
local ROUNDS, STEPS = tonumber(os.getenv("BENCH_ROUNDS") or "15"), 10
lt.manual_seed(0)
local model = GPT { vocab_size = 65, block_size = 64, n_layer = 2, n_head = 4, n_embd = 128 }
local opt = lt.optim.AdamW(lt.nn.parameters(model), { lr = 1e-3, betas = { 0.9, 0.99 }, weight_decay = 0.1 })
local x, y = lt.randint(1, 66, { 16, 64 }), lt.randint(1, 66, { 16, 64 })

local best = { fwd = math.huge, bwd = math.huge, opt = math.huge, step = math.huge }
local cpu0
for r = 0, ROUNDS do
  if r == 1 then cpu0 = os.clock() end
  local acc = { fwd = 0, bwd = 0, opt = 0, step = 0 }
  for _ = 1, STEPS do
    local t0 = clock()
    opt:zero_grad(true)
    local _, loss = model:forward(x, y)
    local t1 = clock()
    loss:backward()
    local t2 = clock()
    opt:step()
    local t3 = clock()
    acc.fwd, acc.bwd, acc.opt, acc.step = acc.fwd + t1 - t0, acc.bwd + t2 - t1, acc.opt + t3 - t2, acc.step + t3 - t0
  end
  if r > 0 then -- round 0 warms up (JIT traces, buffer cache)
    for k, v in pairs(acc) do best[k] = math.min(best[k], v / STEPS) end
  end
end
local cpu = (os.clock() - cpu0) / (ROUNDS * STEPS)
print(string.format("gpt train step %.1f", best.step * 1e6))
print(string.format("gpt train step cpu %.1f", cpu * 1e6))
print(string.format("gpt forward+loss %.1f", best.fwd * 1e6))
print(string.format("gpt backward %.1f", best.bwd * 1e6))
print(string.format("gpt adamw step %.1f", best.opt * 1e6))
