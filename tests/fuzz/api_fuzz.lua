-- api_fuzz.lua — the API fuzzer: seeded random call sequences over lutra's public API (lt.*, tensor methods,
-- lt.F.*) with hostile arguments (negative, zero, huge, NaN and infinite sizes; wrong types; empty tensors;
-- views; 0-dim tensors; int64 tensors). Each call must follow the rule of tests/fuzz/api_rule.lua (it works, or
-- its error names the function); a crash or a sanitizer report ends the process, which tests/fuzz/api_run (the
-- ASan build) reports. Each sequence is a fresh pool of values and `CALLS` calls drawn from its seed alone, so a
-- seed replays exactly.
--
--   luajit tests/fuzz/api_fuzz.lua SECONDS [seed-file]     replays the seeds of seed-file, then random seeds
--   luajit tests/fuzz/api_fuzz.lua --seed N [--verbose]     one sequence; --verbose prints each call first
--
-- Prints "seed N" (flushed) before each sequence, "VIOLATION seed N call K: ..." for a call that breaks the
-- rule, and at the end "api_fuzz: S sequences, C calls, V violations".
local lt = require "lutra"
local rule = dofile("tests/fuzz/api_rule.lua")
if jit then jit.off() end -- the watchdog's count hook runs only in interpreted code

local CALLS = 40          -- calls per sequence
local POOL = 24           -- values a sequence keeps
local MAX_NUMEL = 1e5     -- a result larger than this is not kept: computing on it would be slow, not wrong
local MAX_INSTRUCTIONS = 5e7 -- a call running this many Lua instructions is a hang (a finding)

-- A Park-Miller generator: the same numbers on every Lua (doubles hold its products exactly).
local function rng(seed)
  local x = seed % 2147483646 + 1
  return function(n) -- 1..n
    x = (x * 48271) % 2147483647
    return x % n + 1
  end
end

-- ---- what is called ----------------------------------------------------------------------------------------

-- Not called: what writes files or changes the process (the walk of tests/api_args_spec.lua covers their
-- arguments), what blocks, what loads a whole dataset.
local SKIP = {
  save = true, interrupt = true, set_interactive = true, set_num_threads = true, set_flush_denormal = true,
  set_rng_state = true, manual_seed = true, seed_everything = true, empty_cache = true, run_active = true,
  no_grad = true, enable_grad = true, -- (they call their argument: a function from the pool is not a lutra call)
}

local function public(ns)
  local ks = {}
  for k, v in pairs(ns) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" and type(v) == "function" and not SKIP[k] then ks[#ks + 1] = k end
  end
  table.sort(ks)
  return ks
end

local targets = {} -- { label, name, f, method }
for _, k in ipairs(public(lt)) do targets[#targets + 1] = { "lt." .. k, k, lt[k], false } end
for _, k in ipairs(public(lt.Tensor.methods)) do targets[#targets + 1] = { "x:" .. k, k, lt.Tensor.methods[k], true } end
for _, k in ipairs(public(lt.F)) do targets[#targets + 1] = { "lt.F." .. k, k, lt.F[k], false } end

-- ---- hostile values ----------------------------------------------------------------------------------------

local NAN, INF = -(0 / 0), math.huge
-- (no size that is large but possible, 2^31: it would allocate and fill gigabytes, slow but right)
local NUMBERS = { 0, 1, 2, 3, 5, -1, -2, -3, 0.5, -0.5, 1.5, NAN, INF, -INF, -2 ^ 31, 2 ^ 53, 2 ^ 62, 2 ^ 63,
  -2 ^ 63, 2 ^ 64, 1e300, -1e300, 4.9e-324 }
local STRINGS = { "", "x", "float32", "int64", "none", "mean", "sum", "tanh", "ij->ji", "..." }

local function describe_value(v)
  if lt.is_tensor(v) then return string.format("tensor%s %s", lt.Tensor.methods.shape_str(v), v:dtype()) end
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) == "table" then
    local parts = {}
    for i = 1, #v do parts[i] = describe_value(v[i]) end
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  return tostring(v)
end

-- Fresh tensors: the shapes that break kernels (empty, 0-dim, one element, a size-1 dim) and their views.
local function fresh_tensor(r)
  local k = r(12)
  if k == 1 then return lt.zeros(0) end
  if k == 2 then return lt.ones(2, 0, 3) end
  if k == 3 then return lt.tensor(3.5) end -- 0-dim
  if k == 4 then return lt.randn(1) end
  if k == 5 then return lt.randn(2, 3) end
  if k == 6 then return lt.randn(3, 1, 4) end
  if k == 7 then return lt.randn(4, 3):t() end -- a transposed view
  if k == 8 then return lt.randn(5, 4):narrow(1, 2, 3) end -- an offset view
  if k == 9 then return lt.randn(1, 3):expand(4, 3) end -- stride 0
  if k == 10 then return lt.tensor({ { 1, 2, 3 }, { 0, -1, 4 } }, "int64") end
  if k == 11 then return lt.tensor({ NAN, INF, -INF, 0, -0.0, 1e-40 }) end -- NaN, infinities, a denormal
  return lt.randn(2, 3, 4, 5):permute(4, 2, 1, 3) -- a 4-dim permuted view
end

local function fresh_value(r, pool)
  local k = r(10)
  if k <= 3 then return fresh_tensor(r) end
  if k <= 5 then return NUMBERS[r(#NUMBERS)] end
  if k == 6 then return STRINGS[r(#STRINGS)] end
  if k == 7 then -- a list: of sizes (hostile ones too), or of tensors (cat, stack)
    local t = {}
    if r(2) == 1 then
      for i = 1, r(4) - 1 do t[i] = NUMBERS[r(#NUMBERS)] end
    else
      for i = 1, r(3) do t[i] = pool[r(#pool)] end
    end
    return t
  end
  if k == 8 then return r(2) == 1 end
  if k == 9 then return nil end
  return { reduction = STRINGS[r(#STRINGS)], dim = NUMBERS[r(#NUMBERS)], keepdim = r(2) == 1 } -- options
end

-- ---- one sequence ------------------------------------------------------------------------------------------

-- A hang is remembered as well as raised: a composed op that renames its inner errors (util.named) would
-- otherwise pass the watchdog's error off as its own.
local hung = false
local function too_long()
  hung = true
  error("api_fuzz: the call ran " .. MAX_INSTRUCTIONS .. " Lua instructions (a hang)", 0)
end

local function run_sequence(seed, verbose, report)
  local r = rng(seed)
  lt.manual_seed(seed % 2 ^ 31)
  local pool = {}
  for i = 1, POOL do pool[i] = fresh_tensor(r) end
  local calls = 0
  for c = 1, CALLS do
    local t = targets[r(#targets)]
    local n = r(4) - 1 + (t[4] and 1 or 0)
    local args = { n = n }
    for i = 1, n do
      -- mostly values of the pool (results of earlier calls: views of views), sometimes a fresh hostile one
      if (i == 1 and r(4) > 1) or r(3) == 1 then args[i] = pool[r(#pool)] else args[i] = fresh_value(r, pool) end
    end
    if t[4] and not lt.is_tensor(args[1]) then args[1] = pool[r(#pool)] end -- a method's self is a tensor
    if verbose then
      local parts = {}
      for i = 1, n do parts[i] = describe_value(args[i]) end
      io.write(string.format("call %d: %s(%s)\n", c, t[1], table.concat(parts, ", ")))
      io.flush()
    end
    hung = false
    debug.sethook(too_long, "", MAX_INSTRUCTIONS)
    local ok, res = pcall(t[3], unpack(args, 1, n))
    debug.sethook()
    if hung then ok, res = false, "api_fuzz: the call ran " .. MAX_INSTRUCTIONS .. " Lua instructions (a hang)" end
    lt.set_grad_enabled(true)
    calls = calls + 1
    if verbose then io.write("  -> ", ok and describe_value(res) or "error: " .. tostring(res):gsub("\n.*", ""), "\n") end
    local bad = rule.violation(ok, res, { t[2] })
    if bad then report(seed, c, t[1], bad) end
    if ok and lt.is_tensor(res) and res:numel() <= MAX_NUMEL then pool[r(POOL)] = res end
  end
  return calls
end

-- ---- the command line --------------------------------------------------------------------------------------

local violations = 0
local function report(seed, c, label, msg)
  violations = violations + 1
  io.write(string.format("VIOLATION seed %d call %d: %s -> %s\n", seed, c, label, (msg:gsub("\n.*", ""))))
  io.flush()
end

local sequences, calls = 0, 0
local function one(seed, verbose)
  io.write("seed ", string.format("%d", seed), "\n")
  io.flush()
  calls = calls + run_sequence(seed, verbose, report)
  sequences = sequences + 1
  if sequences % 20 == 0 then collectgarbage() end
end

if arg[1] == "--seed" then
  one(assert(tonumber(arg[2]), "--seed N"), arg[3] == "--verbose")
else
  local seconds = assert(tonumber(arg[1]), "usage: api_fuzz.lua SECONDS [seed-file] | --seed N [--verbose]")
  local deadline = os.time() + seconds
  if arg[2] then
    for line in io.lines(arg[2]) do
      local s = tonumber(line:match("^%s*(%d+)"))
      if s then one(s) end
    end
  end
  local draw = rng(os.time())
  while os.time() < deadline do one(draw(2147483646)) end
end
io.write(string.format("api_fuzz: %d sequences, %d calls, %d violations\n", sequences, calls, violations))
os.exit(violations == 0 and 0 or 1)
