-- lutra.thread (lt.thread): workers, each a fresh Lua state with lutra loaded on an OS thread of its own, and
-- the messages between them (docs/reference/thread.md). The mechanism is C: core/bind/l_thread.c (threads,
-- queues, stopping) and core/bind/l_carry.c (what a value becomes in another state).
local core = require "lutra.core"

local M = {}

--- lt.thread.spawn(fn, ...) -> a worker running fn(...) in a new state; fn and the arguments are carried
--- (bytecode and upvalues, tables copied, tensors shared).
function M.spawn(fn, ...)
  return core._thread_spawn(fn, ...)
end

--- lt.thread.current() -> this worker's id, or nil in a state that is not a worker.
function M.current()
  return core._thread_id()
end

-- inside a worker: the other end of its queues
if core._thread_id() then
  M.parent = {
    send = function(_, v) return core._thread_psend(v) end,
    receive = function(_, timeout_s) return core._thread_preceive(timeout_s) end,
  }
end

return M
