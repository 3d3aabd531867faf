-- bench/infer_frame.lua — batch-1 inference of a 32-64-64-4 MLP (ReLU) once per "frame", as a game asks its policy
-- for an action: lt.infer's plan (plan:run over Lua tables, and plan(x) over tensors) against the same MLP written
-- as plain Lua tables, model(x), and the plan exported as plain Lua (lt.infer.export_lua); then a small transformer
-- (a TransformerEncoderLayer, d_model 32, 4 heads, feed-forward 64, 8 positions, batch 1): its plan against
-- model(x).
--
--   luajit bench/infer_frame.lua [calls=20000] [tcalls=2000] [rounds=3]     (or: lutra bench/infer_frame.lua ...)
--
-- Per variant: p50 and p99 of the time per call (each call timed alone with CLOCK_MONOTONIC, the timer's own cost
-- subtracted), the Lua bytes and lutra allocations per call (counted over 1000 calls with the collector stopped,
-- after a warm-up: LuaJIT's traces are compiled by then). Each figure is the median over the rounds. The bar of
-- the issue: plan p50 <= 0.6x and p99 <= 1.0x the plain-Lua MLP, 0 Lua bytes and 0 allocations per call.
local lt = require "lutra"
local ffi = require "ffi"
ffi.cdef [[
  typedef struct { long tv_sec; long tv_nsec; } if_ts;
  int clock_gettime(int, if_ts *);
]]
local ts = ffi.new("if_ts")
local function now() ffi.C.clock_gettime(1, ts); return tonumber(ts.tv_sec) * 1e6 + tonumber(ts.tv_nsec) * 1e-3 end

local o = { calls = "20000", tcalls = "2000", rounds = "3" }
for _, a in ipairs(arg or {}) do
  local k, v = a:match("^([%w_]+)=(.*)$")
  if not k or o[k] == nil then error("infer_frame: bad argument '" .. a .. "' (known: calls, tcalls, rounds)") end
  o[k] = v
end
local CALLS, TCALLS, ROUNDS = tonumber(o.calls), tonumber(o.tcalls), tonumber(o.rounds)
lt.set_num_threads(1)
lt.manual_seed(0)

local nn = lt.nn
local model = nn.Sequential { nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4) }
model:eval()
local x = lt.randn(1, 32)
local inp = x:view(-1):totable()

-- the plain-Lua MLP: the same weights as tables of rows, outputs into tables made once
local function rows(t)
  local r = t:totable()
  return r
end
local L = {}
for i, k in ipairs { 1, 3, 5 } do L[i] = { W = rows(model[k].weight), b = model[k].bias:totable() } end
local h1, h2, out_plain = {}, {}, {}
local function layer(l, x_, y, relu)
  local W, b = l.W, l.b
  for o_ = 1, #W do
    local w, s = W[o_], b[o_]
    for i = 1, #w do s = s + w[i] * x_[i] end
    if relu and s < 0 then s = 0 end
    y[o_] = s
  end
end
local function plain(xs)
  layer(L[1], xs, h1, true)
  layer(L[2], h1, h2, true)
  layer(L[3], h2, out_plain, false)
  return out_plain
end

local plan = lt.infer.compile(model, x)
local out_plan = {}
local path = os.tmpname()
lt.infer.export_lua(plan, path)
local exported = dofile(path)
os.remove(path)
local out_exp = {}

-- every variant computes the same outputs
local want = model(x):view(-1):totable()
for name, got in pairs { plain = plain(inp), plan_run = plan:run(inp, out_plan), plan_call = plan(x):view(-1):totable(),
  exported = exported(inp, out_exp) } do
  for i = 1, 4 do
    if math.abs(got[i] - want[i]) > 1e-5 then
      error(string.format("%s differs from model(x): %g vs %g", name, got[i], want[i]))
    end
  end
end

local variants = {
  { "plain Lua tables", function() plain(inp) end },
  { "plan:run (tables)", function() plan:run(inp, out_plan) end },
  { "plan(x) (tensor)", function() plan(x) end },
  { "exported Lua", function() exported(inp, out_exp) end },
  { "model(x)", function() model(x) end },
}

local function pct(t, p)
  table.sort(t)
  return t[math.max(1, math.ceil(p * #t))]
end
local function median(t)
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  return pct(s, .5)
end

local times = {}
for i = 1, 1000 do local a = now(); times[i] = now() - a end
local timer = pct(times, .5)

local function measure(fn, calls)
  for _ = 1, math.min(2000, calls) do fn() end -- warm-up: traces compiled, caches warm
  local t = {}
  for i = 1, calls do
    local a = now()
    fn()
    t[i] = now() - a - timer
  end
  local p50, p99 = pct(t, .5), pct(t, .99)
  collectgarbage()
  collectgarbage("stop")
  for _ = 1, 100 do fn() end
  local s0 = lt.memory_stats()
  local kb = collectgarbage("count")
  for _ = 1, 1000 do fn() end
  local kb2 = collectgarbage("count")
  local s1 = lt.memory_stats()
  collectgarbage("restart")
  local allocs = (s1.system_allocs + s1.cache_hits) - (s0.system_allocs + s0.cache_hits)
  return p50, p99, (kb2 - kb) * 1024 / 1000, allocs / 1000
end

local res = {}
for _, v in ipairs(variants) do res[v[1]] = { {}, {}, {}, {} } end
for _ = 1, ROUNDS do
  for _, v in ipairs(variants) do
    local r = { measure(v[2], CALLS) }
    for k = 1, 4 do table.insert(res[v[1]][k], r[k]) end
  end
end

print(string.format("infer_frame: MLP 32-64-64-4 (ReLU) at batch 1, %d calls per round, median of %d rounds, %s",
  CALLS, ROUNDS, jit and jit.version or _VERSION))
print(string.format("  %-20s %9s %9s %14s %16s", "variant", "p50 us", "p99 us", "Lua B/call", "lutra allocs/call"))
local base = {}
for _, v in ipairs(variants) do
  local r = res[v[1]]
  local p50, p99, bytes, allocs = median(r[1]), median(r[2]), median(r[3]), median(r[4])
  if v[1] == "plain Lua tables" then base = { p50, p99 } end
  print(string.format("  %-20s %9.2f %9.2f %14.1f %16.2f   (p50 %.2fx, p99 %.2fx the plain-Lua MLP)", v[1], p50, p99,
    bytes, allocs, p50 / base[1], p99 / base[2]))
  res[v[1]].m = { p50, p99, bytes, allocs }
end
local p = res["plan:run (tables)"].m
local pc = res["plan(x) (tensor)"].m
print(string.format("RESULT plain_p50_us=%.3f plain_p99_us=%.3f plan_run_p50_us=%.3f plan_run_p99_us=%.3f " ..
  "plan_call_p50_us=%.3f plan_call_p99_us=%.3f plan_run_lua_bytes=%.1f plan_run_allocs=%.2f", base[1], base[2], p[1],
  p[2], pc[1], pc[2], p[3], p[4]))
local pass = p[1] <= 0.6 * base[1] and p[2] <= base[2] and p[3] == 0 and p[4] == 0
print(string.format("BAR plan p50 <= 0.6x (%.2fx), p99 <= 1.0x (%.2fx), 0 Lua bytes (%.1f), 0 allocations (%.2f): %s",
  p[1] / base[1], p[2] / base[2], p[3], p[4], pass and "PASS" or "FAIL"))

-- a small transformer: the plan of a TransformerEncoderLayer against model(x)
local enc_layer = nn.TransformerEncoderLayer(32, 4, { dim_feedforward = 64, batch_first = true })
enc_layer:eval()
local tx = lt.randn(1, 8, 32)
local tplan = lt.infer.compile(enc_layer, tx)
local tin, tout = tx:view(-1):totable(), {}
local d = (tplan(tx) - enc_layer(tx)):abs():max():item()
if d > 1e-5 then error("infer_frame: the transformer plan differs from model(x) by " .. d) end
local tvariants = {
  { "plan:run (tables)", function() tplan:run(tin, tout) end },
  { "plan(x) (tensor)", function() tplan(tx) end },
  { "model(x)", function() enc_layer(tx) end },
}
local tres = {}
for _, v in ipairs(tvariants) do tres[v[1]] = { {}, {}, {}, {} } end
for _ = 1, ROUNDS do
  for _, v in ipairs(tvariants) do
    local r = { measure(v[2], TCALLS) }
    for k = 1, 4 do table.insert(tres[v[1]][k], r[k]) end
  end
end
print(string.format("infer_frame: TransformerEncoderLayer(32, 4 heads, ff 64) on [1 x 8 x 32], %d calls per round, " ..
  "median of %d rounds (%d plan steps)", TCALLS, ROUNDS, #tplan._steps))
print(string.format("  %-20s %9s %9s %14s %16s", "variant", "p50 us", "p99 us", "Lua B/call", "lutra allocs/call"))
local tm = {}
for _, v in ipairs(tvariants) do
  local r = tres[v[1]]
  tm[v[1]] = { median(r[1]), median(r[2]), median(r[3]), median(r[4]) }
end
local mb = tm["model(x)"]
for _, v in ipairs(tvariants) do
  local m = tm[v[1]]
  print(string.format("  %-20s %9.2f %9.2f %14.1f %16.2f   (p50 %.2fx, p99 %.2fx model(x))", v[1], m[1], m[2], m[3], m[4],
    m[1] / mb[1], m[2] / mb[2]))
end
local tp = tm["plan:run (tables)"]
print(string.format("RESULT transformer_model_p50_us=%.3f transformer_model_p99_us=%.3f transformer_plan_run_p50_us=%.3f " ..
  "transformer_plan_run_p99_us=%.3f transformer_plan_run_lua_bytes=%.1f transformer_plan_run_allocs=%.2f " ..
  "transformer_model_allocs=%.2f", mb[1], mb[2], tp[1], tp[2], tp[3], tp[4], mb[4]))
