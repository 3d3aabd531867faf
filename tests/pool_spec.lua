-- pool_spec.lua — how lutra's compute threads wait (core/src/pool.c, core/src/blas.c), seen from Lua: within
-- milliseconds of a GEMM and an element-wise op the other threads of the process are asleep (no thread spins or
-- yields on after a job; states read from /proc/PID/task/TID/stat), and thousands of parallel ops in a row, with
-- pauses that let the workers park, all give the right answer (no lost wake-up, no part run twice).
local lt = require "lutra"

local function first_field(path)
  local f = io.open(path)
  if not f then return nil end
  local s = f:read("*l")
  f:close()
  return s and s:match("^(%d+)")
end

-- the states (R running or runnable, S sleeping, ...) of the process's threads but the calling one, by thread id
local function task_paths()
  local pid, me = first_field("/proc/self/stat"), first_field("/proc/thread-self/stat")
  local p = pid and me and io.popen("ls /proc/" .. pid .. "/task")
  if not p then return nil end
  local paths = {}
  for tid in p:read("*a"):gmatch("%d+") do
    if tid ~= me then paths[#paths + 1] = "/proc/" .. pid .. "/task/" .. tid .. "/stat" end
  end
  p:close()
  return paths
end

local function runnable(paths)
  local n = 0
  for _, path in ipairs(paths) do
    local f = io.open(path)
    if f then
      n = n + (f:read("*a"):match("%) (%a)") == "R" and 1 or 0)
      f:close()
    end
  end
  return n
end

local ok_ffi, ffi = pcall(require, "ffi")
if ok_ffi then
  ffi.cdef [[ typedef struct { long tv_sec; long tv_nsec; } pool_spec_ts; int nanosleep(const pool_spec_ts *, pool_spec_ts *); ]]
end
local function nap(ms) ffi.C.nanosleep(ffi.new("pool_spec_ts", 0, ms * 1000000), nil) end

describe("lutra's threads after a job", function()
  it("sleep within milliseconds of a GEMM and an element-wise op (nothing spins or yields on)", function()
    if not ok_ffi or not first_field("/proc/thread-self/stat") then
      pending("needs LuaJIT's ffi and /proc/thread-self")
      return
    end
    lt.set_num_threads(2)
    local a, b, x = lt.randn(256, 512), lt.randn(512, 512), lt.randn(1024, 1024)
    local asleep, samples = 0, 0
    for _ = 1, 5 do
      for _ = 1, 10 do
        lt.matmul(a, b) -- split over the pool on 2 CPUs (on OpenBLAS's own threads before)
        local _ = x + x
      end
      local paths = task_paths()
      -- samples 10 to 50 ms after the last job: a thread that yields in a loop for a while after a job (OpenBLAS's
      -- did for ~0.1 s) is runnable in them; a parked one sleeps (a loaded machine may leave one runnable a while)
      for _ = 1, 5 do
        nap(10)
        samples = samples + 1
        asleep = asleep + (runnable(paths) == 0 and 1 or 0)
      end
    end
    assert.is_true(asleep >= samples * 0.6, ("all other threads asleep in %d of %d samples"):format(asleep, samples))
  end)
end)

describe("many parallel ops in a row", function()
  it("give the right answer every time, with pauses around the time a worker parks", function()
    lt.set_num_threads(2)
    local n = 262144 -- above the element-wise split (2^16 units): every add is a job on the pool
    local x = lt.ones(n)
    local bad = 0
    for r = 1, 1500 do
      if r % 7 == 0 and ok_ffi then nap(r % 3) end -- 0 to 2 ms: the workers spinning, parking or parked
      local y = x + x
      if y:sum():item() ~= 2 * n then bad = bad + 1 end
    end
    assert.are.equal(0, bad)
    local a, b = lt.ones(64, 784), lt.ones(784, 512)
    for _ = 1, 100 do
      local c = lt.matmul(a, b) -- a split GEMM: every element 784
      assert.are.equal(784 * 64 * 512, c:sum():item())
    end
  end)
end)
