-- lutra._compat — the few library functions that differ between LuaJIT / Lua 5.1 and Lua 5.2+, so that
-- lua/lutra runs unchanged under LuaJIT and PUC Lua 5.1, 5.3, 5.4 (docs/guide-puc-lua.md).
local M = {}

M.unpack = table.unpack or unpack -- luacheck: ignore 143

--- maxn(t): the largest positive integer key of t, 0 if none (table.maxn, gone in 5.3+).
M.maxn = table.maxn or function(t)
  local n = 0
  for k in pairs(t) do
    if type(k) == "number" and k > n and k % 1 == 0 then n = k end
  end
  return n
end

--- pack(...) -> { n = select("#", ...), ... }: table.pack of 5.2+ (the count keeps trailing nils).
function M.pack(...) return { n = select("#", ...), ... } end

-- xpcall(f, handler, ...) passes the arguments to f in LuaJIT and 5.2+, not in PUC 5.1.
local passes_args = select(2, xpcall(function(a) return a end, tostring, true)) == true
if passes_args then
  M.xpcall = xpcall
else
  local unpack = M.unpack
  function M.xpcall(f, handler, ...)
    local args = { n = select("#", ...), ... }
    return xpcall(function() return f(unpack(args, 1, args.n)) end, handler)
  end
end

--- nparams(f): the number of named parameters of a Lua function (0 for a C function). LuaJIT and 5.2+ say it
--- in debug.getinfo(f, "u"); PUC 5.1 does not, so it is read from the function's header in string.dump:
--- after the 12-byte chunk header come the source name (a size_t length and the bytes), two ints (first and
--- last line), the upvalue count and the parameter count (one byte each).
function M.nparams(f)
  local info = debug.getinfo(f, "u")
  if info.nparams then return info.nparams end
  if info.what == "C" then return 0 end
  local ok, dump = pcall(string.dump, f)
  if not ok then return 0 end
  local sizeof_int, sizeof_size_t, little = dump:byte(8), dump:byte(9), dump:byte(7) == 1
  local len = 0
  for i = 0, sizeof_size_t - 1 do
    local b = dump:byte(13 + (little and i or sizeof_size_t - 1 - i))
    len = len + b * 256 ^ i
  end
  return dump:byte(13 + sizeof_size_t + len + 2 * sizeof_int + 1) or 0
end

--- newproxy(true): an empty userdata with its own metatable (gone in 5.2+: lutra.core provides one).
M.newproxy = newproxy or require("lutra.core")._newproxy -- luacheck: ignore 113

return M
