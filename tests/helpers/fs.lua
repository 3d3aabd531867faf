-- tests/helpers/fs.lua — files and shell helpers the specs share: temporary directories, reading and
-- writing whole files, shell quoting.
local M = {}

--- A new empty directory under /tmp (remove it with rmrf).
function M.tmpdir()
  local d = os.tmpname()
  os.remove(d)
  require("lutra")._io.mkdirs(d)
  return d
end

--- A string quoted for sh.
function M.q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

function M.rmrf(d) os.execute("rm -rf " .. M.q(d)) end

--- The whole file, or nil when it cannot be opened.
function M.slurp(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

--- Writes text to path (replacing it); returns path.
function M.spit(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return path
end

function M.exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

return M
