-- memory_spec: C memory stays flat over a long run without collectgarbage() in user code — the
-- binding gives the Lua GC work in proportion to the bytes tensors allocate.
local lt = require "lutra"

local CHILD = [==[
local lt = require "lutra"
local function rss_kb()
  local f = assert(io.open("/proc/self/statm"))
  local _, resident = f:read("*n", "*n")
  f:close()
  return resident * 4 -- pages of 4 KiB
end
local checks = {}
checks.flat = function()
  lt.manual_seed(0)
  local w1 = lt.param(lt.randn(16, 32) * 0.25)
  local b1 = lt.param(lt.zeros(32))
  local w2 = lt.param(lt.randn(32, 1) * 0.25)
  local x = lt.randn(64, 16)
  local y = x:sum(2, true):tanh()
  local params = {w1, b1, w2}
  local function step()
    local h = (x:matmul(w1) + b1):relu()
    local loss = ((h:matmul(w2) - y) ^ 2):mean()
    loss:backward()
    lt.no_grad(function()
      for _, p in ipairs(params) do
        p:add_(p.grad, -0.01)
        p.grad:zero_()
      end
    end)
    return loss
  end
  local first_loss
  for i = 1, 1000 do
    local l = step()
    if i == 1 then first_loss = l:item() end
  end
  local rss_1k, live_1k = rss_kb(), lt.memory_stats().live_bytes
  local last
  local live_max = 0
  for i = 1, 99000 do
    last = step()
    if i % 1000 == 0 then live_max = math.max(live_max, lt.memory_stats().live_bytes) end
  end
  local rss_100k = rss_kb()
  assert(last:item() < first_loss, "the MLP trained")
  -- the bytes held by live tensors stay bounded (garbage is collected as C memory is allocated): a cycle
  -- starts once 4 MB of tensors came after the last (L_GC_REST_MIN_KB, core/bind/l_util.c) and runs while
  -- about as much more comes, so dead tensors stay under ~8 MB
  assert(live_max <= live_1k * 1.5 + 8 * 1024 * 1024,
    ("live tensor bytes grew from %d after 1k steps to a peak of %d"):format(live_1k, live_max))
  -- RSS: not meaningful under AddressSanitizer, whose quarantine keeps freed memory on purpose
  if not os.getenv("LUTRA_SANITIZER") then
    assert(rss_100k <= rss_1k * 1.10,
      ("RSS grew from %d KiB after 1k steps to %d KiB after 100k"):format(rss_1k, rss_100k))
  end
end
checks.cache = function()
  local a = lt.randn(128, 128)
  for _ = 1, 50 do local _ = (a * 2 + 1):relu() end
  local before = lt.memory_stats().system_allocs
  for _ = 1, 200 do local _ = (a * 2 + 1):relu() end
  local after = lt.memory_stats().system_allocs
  assert(after - before <= 10, ("system allocations in steady state: %d"):format(after - before))
end
-- the same after the host switches its collector (Lua 5.4: from the interpreter's generational mode to
-- incremental, after lutra was loaded; elsewhere there is one mode and this is the check above)
checks.cache_incremental = function()
  pcall(collectgarbage, "incremental")
  checks.cache()
end
-- an op whose node saves its output (softmax, tanh, Linear+ReLU) hands Lua a storage held twice: its bytes
-- are counted for the collector all the same, so a loop of 1 MB softmaxes with backward stays within the GC
-- pacing's few MB of dead tensors (uncounted, every step's output stayed alive until some other allocation
-- started a collection: +1 MB of live tensors per step, and fresh pages faulted in by the next backward)
checks.saved_output = function()
  local x = lt.randn(16, 4, 64, 64):requires_grad(true)
  local g = lt.randn(16, 4, 64, 64)
  for _ = 1, 10 do x:softmax(4):backward(g); x:zero_grad(true) end
  local live0, peak = lt.memory_stats().live_bytes, 0
  for _ = 1, 100 do
    local y = x:softmax(4)
    y:backward(g)
    x:zero_grad(true)
    peak = math.max(peak, lt.memory_stats().live_bytes)
  end
  assert(peak <= live0 + 12 * 1024 * 1024, ("live tensor bytes grew from %d to a peak of %d"):format(live0, peak))
end
checks[arg[1]]()
io.write("ok")
]==]

describe("memory", function()
  -- These two run in a child process with lutra's own small Lua heap: the GC pacing lets dead tensors hold up
  -- to ~1.5x the Lua heap (core/bind/l_util.c), and the busted process's heap is whatever earlier specs left.
  local function in_child(name) assert.are.equal("ok", require("helpers.child").run(CHILD, name)) end

  it("stays flat over 100k steps of a hand-written MLP with no collectgarbage()", function() in_child("flat") end)

  it("reuses freed buffers from the size-class cache (no malloc in a steady step)", function() in_child("cache") end)

  it("does so after the host switches the collector's mode", function() in_child("cache_incremental") end)

  it("counts an output its node saved (softmax's) for the collector: steady over 100 backward steps", function()
    in_child("saved_output")
  end)

  it("releases every tensor of a step once the Lua values are collected", function()
    -- a fresh process: the live-tensor count is process-wide (see tests/helpers/child.lua)
    local out = require("helpers.child").run([[
      local lt = require "lutra"
      local function count() collectgarbage(); collectgarbage(); return lt.memory_stats().live_tensors end
      local function step()
        local w = lt.param(lt.randn(10, 10))
        local loss = (w:matmul(w):tanh()):sum()
        loss:backward()
      end
      step() -- first use creates lutra's lazily made objects (e.g. the random generator's state)
      local live0 = count()
      step()
      io.write("COUNT ", live0, " ", count(), "\n")
    ]])
    local before, after = out:match("COUNT (%d+) (%d+)")
    assert(before, "child process failed: " .. out)
    assert.are.equal(tonumber(before), tonumber(after))
  end)

  it("holding a result does not keep the graph of the step alive", function()
    collectgarbage()
    collectgarbage()
    local w = lt.param(lt.randn(256, 256))
    local kept = {}
    local live_before
    for i = 1, 5 do
      local h = w:matmul(w):relu():matmul(w)
      local loss = h:sum()
      loss:backward()
      kept[i] = loss -- the user keeps the loss tensor
      collectgarbage()
      collectgarbage()
      if i == 2 then live_before = lt.memory_stats().live_bytes end
    end
    assert.are.equal(5, #kept) -- (the losses are still held here)
    local live_after = lt.memory_stats().live_bytes
    -- three more kept scalars, nothing of the size of an activation (256 KiB)
    assert.is_true(live_after - live_before < 64 * 1024,
      ("live bytes grew by %d while holding losses"):format(live_after - live_before))
  end)

  -- In a child process: "an empty heap" must be lutra's own small one, not the busted process's (which holds
  -- every spec loaded so far and grows with the suite).
  describe("GC pacing inside a host with a large Lua heap", function()
    it("gives the collector steps in proportion to the bytes, whatever the heap; finishes no cycle early", function()
      assert.are.equal("ok", require("helpers.child").run([==[
local lt = require "lutra"
local core = require "lutra.core"
-- hands `mb` MB of tensors to Lua (64 KB each, dropped at once); returns the GC work asked for
local function allocate(mb)
  core._gc_stats(true)
  for _ = 1, mb * 16 do local _ = lt.zeros(16384) end
  return core._gc_stats(true)
end
local function host_heap(n) -- n small tables, as a game's entities
  local t = {}
  for i = 1, n do t[i] = { x = i, y = -i, name = "e" .. i } end
  return t
end
collectgarbage()
local empty = allocate(32)
local heap = host_heap(400000)
local heap_mb = collectgarbage("count") / 1024
assert(heap_mb > 40, "host heap of " .. heap_mb .. " MB")
local big = allocate(32)
if big.generational then
  -- Lua 5.4 in generational mode (lua5.4's interpreter): no steps, a major collection each time the
  -- bytes handed out reach the heap (or the live tensors); the cycles below are those
  assert(big.steps == 0, "steps in generational mode: " .. big.steps)
else
  -- steps of 64 KB (and one tensor), none larger, and no more work than the bytes handed out
  assert(big.max_step_kb <= 64 + 65, "largest step: " .. big.max_step_kb .. " KB")
  assert(big.step_kb <= 32 * 1024 + 128, "KB of steps: " .. big.step_kb) -- (+ the debt carried in)
  assert(big.steps >= 1, "no step")
end
-- with lutra's small heap the cycles follow each other; 32 MB of tensors is not enough work to go
-- through a host heap larger than that (the old pacing finished a cycle every 2 MB: 16 of them)
assert(empty.cycles >= 2, "cycles with an empty heap: " .. empty.cycles)
assert(big.cycles <= 1, "cycles with a " .. math.floor(heap_mb) .. " MB heap: " .. big.cycles)
-- and the garbage still goes: once the host heap is traversed, the tensors' memory comes back
local live0 = lt.memory_stats().live_bytes
local more = allocate(200)
assert(more.cycles >= 1, "cycles over 200 MB: " .. more.cycles)
assert(lt.memory_stats().live_bytes < live0 + 1.6 * heap_mb * 1024 * 1024,
  "live tensor bytes after 200 MB more: " .. lt.memory_stats().live_bytes - live0)
assert(#heap == 400000)
io.write("ok")
]==]))
    end)
  end)
end)
