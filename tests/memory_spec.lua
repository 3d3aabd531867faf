-- memory_spec: C memory stays flat over a long run without collectgarbage() in user code — the
-- binding gives the Lua GC work in proportion to the bytes tensors allocate.
local lt = require "lutra"

local function rss_kb()
  local f = assert(io.open("/proc/self/statm"))
  local _, resident = f:read("*n", "*n")
  f:close()
  return resident * 4 -- pages of 4 KiB
end

describe("memory", function()
  it("stays flat over 100k steps of a hand-written MLP with no collectgarbage()", function()
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
    assert.is_true(last:item() < first_loss, "the MLP trained")
    -- the bytes held by live tensors stay bounded (garbage is collected as C memory is allocated)
    assert(live_max <= live_1k * 1.5 + 4 * 1024 * 1024,
      ("live tensor bytes grew from %d after 1k steps to a peak of %d"):format(live_1k, live_max))
    -- RSS: not meaningful under AddressSanitizer, whose quarantine keeps freed memory on purpose
    if not os.getenv("LUTRA_SANITIZER") then
      assert(rss_100k <= rss_1k * 1.10,
        ("RSS grew from %d KiB after 1k steps to %d KiB after 100k"):format(rss_1k, rss_100k))
    end
  end)

  it("reuses freed buffers from the size-class cache (no malloc in a steady step)", function()
    local a = lt.randn(128, 128)
    for _ = 1, 50 do local _ = (a * 2 + 1):relu() end
    local before = lt.memory_stats().system_allocs
    for _ = 1, 200 do local _ = (a * 2 + 1):relu() end
    local after = lt.memory_stats().system_allocs
    assert.is_true(after - before <= 10, ("system allocations in steady state: %d"):format(after - before))
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
end)
