-- tests/thread_spec.lua — lt.thread (docs/reference/thread.md): workers in Lua states of their own, values
-- carried between states (core/bind/l_carry.c: copies, tensors shared, functions as bytecode and upvalues,
-- lutra's and the standard library's functions by name), refusals naming the path, timeouts, errors with the
-- worker's traceback, and no thread left behind (counted in /proc/self/task).
local lt = require "lutra"

local function tasks()
  local p = io.popen("ls /proc/" .. (io.open("/proc/self/stat"):read("*l"):match("^(%d+)")) .. "/task | wc -l")
  local n = tonumber(p:read("*a"))
  p:close()
  return n
end

-- a worker that sends back whatever it receives until it receives "stop"
local function echo()
  return lt.thread.spawn(function()
    local parent = require("lutra").thread.parent
    while true do
      local v = parent:receive()
      if v == "stop" then return "stopped" end
      parent:send(v)
    end
  end)
end

local function roundtrip(w, v)
  assert(w:send(v))
  return w:receive(5)
end

describe("lt.thread", function()
  local w
  setup(function() w = echo() end)
  teardown(function()
    w:send("stop")
    assert.are.equal("stopped", w:join())
  end)

  describe("carries", function()
    it("nil, booleans, numbers and strings with zero bytes", function()
      local v, why = roundtrip(w, nil)
      assert.is_nil(v)
      assert.is_nil(why) -- a received nil, not a timeout
      assert.are.equal(true, roundtrip(w, true))
      assert.are.equal(false, roundtrip(w, false))
      assert.are.equal(1.5, roundtrip(w, 1.5))
      assert.are.equal(-0x1p60, roundtrip(w, -0x1p60))
      assert.are.equal(math.huge, roundtrip(w, math.huge))
      local nan = roundtrip(w, 0 / 0)
      assert.is_true(nan ~= nan)
      assert.are.equal("a\0b\0", roundtrip(w, "a\0b\0"))
      assert.are.equal(("x"):rep(100000), roundtrip(w, ("x"):rep(100000)))
    end)

    it("integers as integers on Lua 5.3+", function()
      local mtype, maxint = rawget(math, "type"), rawget(math, "maxinteger")
      if not mtype then return pending("no integer subtype in " .. _VERSION) end
      local i = roundtrip(w, maxint)
      assert.are.equal("integer", mtype(i))
      assert.are.equal(maxint, i)
      assert.are.equal("float", mtype(roundtrip(w, 3.0)))
    end)

    it("nested tables, a shared subtable as one table, cycles, metatables", function()
      local shared = { 1, 2 }
      local t = { a = { b = { c = "deep" } }, s1 = shared, s2 = shared, [3] = "three", [true] = 0.5 }
      t.self = t
      local class = { __index = { hello = function(self) return "hi " .. self.name end } }
      t.obj = setmetatable({ name = "x" }, class)
      local r = roundtrip(w, t)
      assert.are_not.equal(t, r)
      assert.are.equal("deep", r.a.b.c)
      assert.are.same({ 1, 2 }, r.s1)
      assert.are.equal(r.s1, r.s2)
      assert.are.equal(r, r.self)
      assert.are.equal("three", r[3])
      assert.are.equal(0.5, r[true])
      assert.are.equal("hi x", r.obj:hello())
    end)

    it("tensors: the same storage (zero copy), detached on arrival, one box for one tensor", function()
      local x = lt.randn(4, 5):requires_grad(true)
      local y = x * 2
      local r = roundtrip(w, { x = x, y = y, again = x, v = x:narrow(1, 2, 2) })
      assert.are.equal(x:data_ptr(), r.x:data_ptr())
      assert.are.equal(y:data_ptr(), r.y:data_ptr())
      assert.are.equal(x:narrow(1, 2, 2):data_ptr(), r.v:data_ptr())
      assert.are.same({ 2, 5 }, r.v:shape())
      assert.are.equal(r.x, r.again)
      assert.is_false(r.x:requires_grad())
      assert.is_nil(r.y:grad_fn())
      assert.is_true(r.y:is_leaf())
      assert.are.same(x:detach():totable(), r.x:totable())
      -- a write through one is seen through the other: the same memory
      lt.no_grad(function() x:fill_(7) end)
      assert.are.equal(7, r.x:totable()[1][1])
    end)

    it("functions: bytecode with carried upvalues, recursive local functions, shared upvalue cells", function()
      local base = 10
      local function fact(n) return n <= 1 and 1 or n * fact(n - 1) end
      local count = 0
      local function inc() count = count + 1 return count end
      local function get() return count end
      local r = roundtrip(w, { add = function(v) return v + base end, fact = fact, inc = inc, get = get })
      assert.are.equal(15, r.add(5))
      assert.are.equal(120, r.fact(5))
      r.inc()
      r.inc()
      assert.are.equal(0, count) -- a copy
      if rawget(_G, "jit") or _VERSION ~= "Lua 5.1" then assert.are.equal(2, r.get()) end
    end)

    it("lutra's and the standard library's functions and tables by name", function()
      local r = roundtrip(w, { lt = lt, zeros = lt.zeros, fmt = string.format, floor = math.floor, print = print,
        nn = lt.nn, Linear = lt.nn.Linear })
      assert.are.equal(lt, r.lt)
      assert.are.equal(lt.zeros, r.zeros)
      assert.are.equal(string.format, r.fmt)
      assert.are.equal(math.floor, r.floor)
      assert.are.equal(print, r.print)
      assert.are.equal(lt.nn.Linear, r.Linear)
    end)

    it("a function's globals are the receiving state's", function()
      local w2 = lt.thread.spawn(function(x)
        -- a fresh state: the globals of the spec runner are not there, the standard library is
        return rawget(_G, "describe") == nil, type(string.rep), x
      end, 3)
      assert.are.same({ true, "function", 3 }, { w2:join() })
    end)
  end)

  describe("refuses, naming where the value sits", function()
    it("a coroutine, a userdata, a light userdata, a C function that is not lutra's nor the standard library's",
      function()
        local co = coroutine.create(function() end)
        assert.has_error(function() w:send({ a = { co } }) end,
          "send: cannot carry argument #1, key 'a', key 1: a coroutine cannot cross to another state")
        assert.has_error(function() w:send(io.stdout) end,
          "send: cannot carry argument #1: a userdata that is not a tensor nor one of lutra's data objects cannot cross "
            .. "to another state")
        local it = ("abc"):gmatch("b")
        assert.has_error(function() w:send({ hooks = { draw = it } }) end,
          "send: cannot carry argument #1, key 'hooks', key 'draw': a C function that is not lutra's nor the "
            .. "standard library's")
        local light = require("lutra.core")._carry_pack(1)
        local ok, err = pcall(w.send, w, light)
        require("lutra.core")._carry_unpack(light)
        assert.is_false(ok)
        assert.matches("a light userdata cannot cross", err)
      end)

    it("an upvalue of a function, with the function's place", function()
      local cfg = { x = coroutine.create(function() end) }
      local function work() return cfg end
      local ok, err = pcall(lt.thread.spawn, work)
      assert.is_false(ok)
      assert.matches("^lt.thread.spawn: cannot carry argument #1, upvalue 'cfg' of the function at .*thread_spec.lua:%d+, "
        .. "key 'x': a coroutine cannot cross to another state", err)
    end)

    it("spawn of anything but a Lua function", function()
      assert.has_error(function() lt.thread.spawn(print) end,
        "lt.thread.spawn: argument #1 must be a Lua function, got a C function")
      assert.has_error(function() lt.thread.spawn(1) end,
        "lt.thread.spawn: argument #1 must be a Lua function, got number")
    end)
  end)

  describe("receive", function()
    it("times out: 0 polls, t > 0 waits about t, a bad timeout is an error", function()
      local v, why = w:receive(0)
      assert.is_nil(v)
      assert.are.equal("timeout", why)
      local now = require("lutra.core")._io.now
      local t0 = now()
      local _, why2 = w:receive(0.05)
      local dt = now() - t0
      assert.are.equal("timeout", why2)
      assert.is_true(dt >= 0.045, "waited " .. dt .. " s")
      assert.has_error(function() w:receive(-1) end, "receive: the timeout must be >= 0 seconds, got -1")
      assert.has_error(function() w:receive("x") end, "receive: the timeout must be a number of seconds, got string")
    end)

    it("says closed once the worker has ended and its messages are taken", function()
      local w2 = lt.thread.spawn(function()
        require("lutra").thread.parent:send("last")
      end)
      assert.are.equal("last", w2:receive(5))
      local v, why = w2:receive()
      assert.is_nil(v)
      assert.are.equal("closed", why)
      assert.are.equal("done", w2:status())
      local ok, why2 = w2:send(1)
      assert.is_nil(ok)
      assert.are.equal("closed", why2)
    end)
  end)

  describe("join", function()
    it("returns the function's results, again on a second join", function()
      local w2 = lt.thread.spawn(function(a, b) return a + b, { a, b }, nil, "end" end, 1, 2)
      local r = { w2:join() }
      assert.are.same({ 3, { 1, 2 }, nil, "end" }, r)
      assert.are.equal(4, select("#", w2:join()))
      assert.are.equal(3, (w2:join()))
    end)

    it("raises the worker's error with its traceback", function()
      local w2 = lt.thread.spawn(function()
        local function inner() error("bad image 'img/137.png'") end
        inner()
      end)
      local ok, err = pcall(w2.join, w2)
      assert.is_false(ok)
      assert.matches("^lt.thread: worker %d+ failed: .*thread_spec.lua:%d+: bad image 'img/137.png'\nworker traceback:", err)
      assert.matches("in [%a ]*'inner'", err) -- LuaJIT: "function 'inner'", 5.4: "local 'inner'"
      assert.are.equal("error", w2:status())
    end)

    it("raises a table error as a table", function()
      local w2 = lt.thread.spawn(function() error({ code = 7 }) end)
      local ok, err = pcall(w2.join, w2)
      assert.is_false(ok)
      assert.are.same({ code = 7 }, err)
    end)

    it("refuses a result that cannot cross, naming it", function()
      local w2 = lt.thread.spawn(function() return 1, coroutine.create(function() end) end)
      local ok, err = pcall(w2.join, w2)
      assert.is_false(ok)
      assert.matches("lt.thread: cannot carry return value #2: a coroutine cannot cross", err)
    end)
  end)

  describe("in the worker", function()
    it("lt.thread.current() is the worker's id and lt.thread.parent its queues; nil in the main state", function()
      assert.is_nil(lt.thread.current())
      assert.is_nil(lt.thread.parent)
      local w2 = lt.thread.spawn(function()
        local thread = require("lutra").thread
        return thread.current(), type(thread.parent)
      end)
      local id, p = w2:join()
      assert.are.equal(w2:id(), id)
      assert.are.equal("table", p)
    end)
  end)

  describe("no thread outlives its owner", function()
    local function blocked()
      return lt.thread.spawn(function()
        require("lutra").thread.parent:receive() -- waits for ever
      end)
    end

    it("after join, close, and collection of a worker blocked in receive", function()
      collectgarbage()
      local before = tasks()
      local a = lt.thread.spawn(function() return 1 end)
      a:join()
      local b = blocked()
      local held = { blocked() }
      assert.are.equal("running", held[1]:status())
      assert.is_true(tasks() >= before + 2)
      b:close()
      assert.has_error(function() b:send(1) end, "send: the worker was closed")
      held[1] = nil
      collectgarbage()
      collectgarbage()
      assert.are.equal(before, tasks())
    end)

    it("a worker's own workers are stopped when its state closes", function()
      collectgarbage()
      local before = tasks()
      local a = lt.thread.spawn(function()
        local inner = require("lutra").thread.spawn(function() require("lutra").thread.parent:receive() end)
        return inner:status()
      end)
      assert.are.equal("running", a:join())
      assert.are.equal(before, tasks())
    end)

    it("a worker busy in interpreted Lua code is stopped", function()
      local a = lt.thread.spawn(function()
        if rawget(_G, "jit") then jit.off() end -- LuaJIT runs no hooks in compiled code (reference/thread.md)
        local x = 0
        while true do x = (x + 1) % 7 ; if x == 8 then break end ; local _ = tostring(x) end
      end)
      local before = tasks()
      a:close()
      assert.are.equal(before - 1, tasks())
    end)
  end)
end)
