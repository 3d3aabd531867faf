-- helpers/puc.lua — specs that cannot run under a PUC Lua host (tests/run --lua 5.4) say so and why:
--   local skip = require("helpers.puc").needs_luajit("runs the lutra binary, which embeds LuaJIT")
--   if skip then describe("cli", function() pending(skip) end) return end
local M = {}

--- nil under LuaJIT; under PUC Lua the reason the spec is skipped ("skipped under Lua 5.4: <why>").
function M.needs_luajit(why)
  if rawget(_G, "jit") then return nil end
  return "skipped under " .. _VERSION .. ": " .. why
end

--- The interpreter running the specs, for the child processes a spec starts ("luajit", "lua5.4", ...).
M.lua_exe = rawget(_G, "jit") and "luajit" or ("lua" .. _VERSION:match("%d+%.%d+"))

--- The build folder of the module for that interpreter: build/ for LuaJIT, build-lua5.4/ for lua5.4 ...
M.build_dir = rawget(_G, "jit") and "build" or ("build-" .. M.lua_exe)

--- The environment assignments, as a shell prefix ending in a space, under which a child process of lua_exe
--- loads lutra from this tree: its Lua files and the module built for that interpreter in `config`.
function M.module_env(config)
  return "LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' LUA_CPATH='./" .. M.build_dir .. "/bin/" .. config .. "/?.so;;' "
end

return M
