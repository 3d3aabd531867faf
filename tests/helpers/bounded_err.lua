-- tests/helpers/bounded_err.lua — the message of the error that f(...) raises within a budget of Lua instructions
-- (a spec failure when it raises none, or when it runs past the budget: a call refusing a huge size must not
-- loop over it first). A count, not a time: the same on a loaded machine. LuaJIT's compiled code runs no count
-- hook, so the JIT is off (and its traces flushed) during the call.
--
--   local bounded_err = require "tests.helpers.bounded_err"
--   assert.matches("^diag: offset", bounded_err(lt.diag, x, 2 ^ 31))
local BUDGET = 1e6 -- Lua instructions; the refusals take a few thousand

return function(f, ...)
  local over = false
  local function hook()
    over = true
    error("bounded_err: the call ran past " .. BUDGET .. " Lua instructions", 0)
  end
  if jit then
    jit.off()
    jit.flush()
  end
  debug.sethook(hook, "", BUDGET)
  local ok, e = pcall(f, ...)
  debug.sethook()
  if jit then jit.on() end
  assert(not over, "the call ran past " .. BUDGET .. " Lua instructions (it loops over a size it should refuse)")
  assert(not ok, "expected an error")
  return tostring(e)
end
