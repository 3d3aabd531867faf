-- private_entries_spec.lua — lt.thread's worker entries (lt._thread_run, lt._thread_fail) are reachable by anyone
-- who lists lt. Called with the wrong things (a float64 tensor, numbers, a table) they must raise, never crash:
-- _thread_run read a tensor's box as a worker struct and segfaulted. The calls run in a child process so that a crash names the
-- function instead of ending busted.
local child = require "helpers.child"

describe("lt's private entries", function()
  it("raise or return on hostile arguments, never crash the process", function()
    local out = child.run [[
local lt = require "lutra"
local unpack = table.unpack or unpack -- (PUC Lua 5.4 has only table.unpack)
local x = lt.tensor({ { 0.5, 2, -1 }, { 3, 0.25, 1.5 } }, "float64")
for _, n in ipairs { "_thread_run", "_thread_fail" } do
  io.write("calling ", n, "\n")
  io.flush()
  for _, args in ipairs { { x }, { x, {} }, { 1, 2 }, { {} }, {} } do pcall(lt[n], unpack(args)) end
end
print("survived 2")
]]
    local last = out:match(".*calling (%S+)") or "(none)"
    local n = out:match("survived (%d+)")
    assert(n, "the process died in lt." .. last .. ":\n" .. out:sub(-2000))
  end)

  it("say which internal entry was called wrongly", function()
    local lt = require "lutra"
    local ok, err = pcall(lt._thread_run, lt.zeros(2))
    assert.is_false(ok)
    assert.matches("_thread_run: lutra's internal entry for lt.thread's workers, not for calls (got userdata)",
      tostring(err), 1, true)
  end)
end)
