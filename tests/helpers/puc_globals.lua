-- helpers/puc_globals.lua — busted helper of the lua51/lua53/lua54 tasks (.busted): the specs are written in
-- LuaJIT's dialect of Lua 5.1; under 5.2+ this supplies the globals they use that 5.2+ moved or dropped.
-- lutra's own Lua code does not rely on it (lua/lutra/_compat.lua).
if not rawget(_G, "unpack") then rawset(_G, "unpack", table.unpack) end -- luacheck: ignore 143
if not rawget(_G, "loadstring") then rawset(_G, "loadstring", load) end
