-- helpers/puc_globals.lua — busted helper of the lua51/lua53/lua54 tasks (.busted): the specs are written in
-- LuaJIT's dialect of Lua 5.1; under 5.2+ this supplies the globals they use that 5.2+ moved or dropped.
-- lutra's own Lua code does not rely on it (lua/lutra/_compat.lua).
if not rawget(_G, "unpack") then rawset(_G, "unpack", table.unpack) end -- luacheck: ignore 143
if not rawget(_G, "loadstring") then rawset(_G, "loadstring", load) end
-- os.execute(cmd) returns the exit status as 5.1 does (0 on success), which the specs compare with 0.
if _VERSION ~= "Lua 5.1" then
  local execute = os.execute
  os.execute = function(cmd) -- luacheck: ignore 122
    if cmd == nil then return execute() end
    local ok, how, code = execute(cmd)
    if how == "signal" then return 128 + code end
    return ok and 0 or code
  end
end
