-- bench/thread_messages.lua — what lt.thread costs (docs/reference/thread.md): starting a worker (a new Lua
-- state with lutra loaded), and a message's round trip to a worker and back for a number, a table of 1000
-- numbers, and tensors of 4 KB and 4 MB. Tensors cross without copying, so the 4 MB tensor's round trip over
-- the 4 KB one's is the figure to read (about 1: the cost is per message, not per byte).
--   luajit bench/thread_messages.lua [rounds=5]     (or build/bin/release/cli/lutra bench/thread_messages.lua)
local lt = require "lutra"
local now = require("lutra.core")._io.now

local rounds = tonumber(arg and arg[1]) or 5

local function median(xs)
  table.sort(xs)
  return xs[math.floor((#xs + 1) / 2)]
end

local spawn = {}
for i = 1, rounds do
  local t0 = now()
  local w = lt.thread.spawn(function() return require("lutra") ~= nil end)
  w:join()
  spawn[i] = now() - t0
end

local w = lt.thread.spawn(function()
  local parent = require("lutra").thread.parent
  while true do
    local v = parent:receive()
    if v == "stop" then return end
    parent:send(v)
  end
end)

local function round_trip(v, n)
  local times = {}
  for r = 1, rounds do
    local t0 = now()
    for _ = 1, n do
      w:send(v)
      w:receive()
    end
    times[r] = (now() - t0) / n
  end
  return median(times)
end

local numbers = {}
for i = 1, 1000 do numbers[i] = i * 0.5 end
local n = 2000
local r_num = round_trip(1.5, n)
local r_tab = round_trip(numbers, n / 10)
local r_small = round_trip(lt.zeros(1024), n)
local r_big = round_trip(lt.zeros(1024 * 1024), n)
w:send("stop")
w:join()

print(string.format("spawn and join a worker (lutra loaded in it): %.1f ms (median of %d)", median(spawn) * 1e3, rounds))
print(string.format("round trip, a number:             %7.1f us", r_num * 1e6))
print(string.format("round trip, a table of 1000:      %7.1f us", r_tab * 1e6))
print(string.format("round trip, a 4 KB tensor:        %7.1f us", r_small * 1e6))
print(string.format("round trip, a 4 MB tensor:        %7.1f us", r_big * 1e6))
print(string.format("ratio 4 MB / 4 KB tensor: %.2fx (zero copy: ~1)", r_big / r_small))
