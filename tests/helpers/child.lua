-- tests/helpers/child.lua — runs a Lua chunk in a fresh lutra process and returns what it printed.
-- For checks of process-wide counters (live tensors): in the busted process, objects of earlier specs can be
-- released at any later collection and move those counters under the test's feet.
local M = {}

--- M.run(source[, arg1]): arg1 (a word) is the script's arg[1].
function M.run(source, arg1)
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(source)
  f:close()
  local cmd
  if rawget(_G, "jit") then
    cmd = "'" .. (os.getenv("LUTRA_BIN") or "build/bin/release/cli/lutra") .. "' '" .. script .. "'"
  else -- PUC Lua (tests/run --lua 5.4): no lutra binary; the same interpreter with the module's paths
    cmd = string.format("%s -e %q '%s'", require("helpers.puc").lua_exe,
      "package.path = [[" .. package.path .. "]] package.cpath = [[" .. package.cpath .. "]]", script)
  end
  if arg1 then cmd = cmd .. " '" .. arg1 .. "'" end
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("*a")
  p:close()
  os.remove(script)
  return out
end

return M
