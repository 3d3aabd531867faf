-- fsync_spec: an atomic save whose fsync of the temporary file fails (core/src/fileio.c) must fail with a clear
-- error, leave the previous file intact and remove the temporary file. The failing fsync comes from an
-- LD_PRELOAD shim built here with gcc: it fails fsync on regular files with EIO and passes directories through,
-- so nothing in the library needs a test hook.
local LUA_EXE = require("helpers.puc").lua_exe -- luajit, or lua5.4 under tests/run --lua 5.4
local lt = require "lutra"
local fs = require "helpers.fs"
local q = fs.q

local SHIM = [[
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/stat.h>
int fsync(int fd) {
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) { errno = EIO; return -1; }
  int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  return real(fd);
}
]]

-- saves {w = [7, 8, 9]} over arg[1], printing "ok" or the error
local CHILD = [[
local lt = require "lutra"
local ok, err = pcall(lt.save, arg[1], { w = lt.tensor { 7, 8, 9 } })
io.write(ok and "ok" or tostring(err))
]]

describe("atomic save with a failing fsync", function()
  local dir, shim
  setup(function()
    dir = fs.tmpdir()
    fs.spit(dir .. "/shim.c", SHIM)
    fs.spit(dir .. "/child.lua", CHILD)
    shim = dir .. "/fsync_fails.so"
    assert(os.execute("gcc -shared -fPIC -o " .. q(shim) .. " " .. q(dir .. "/shim.c") .. " -ldl") == 0,
      "cannot build the fsync shim with gcc")
  end)
  teardown(function() fs.rmrf(dir) end)

  local function child(preload, path)
    -- the shim goes after what is preloaded already (the sanitizer runtimes, which must come first, under asan)
    local pre = os.getenv("LD_PRELOAD")
    pre = pre and pre ~= "" and pre .. ":" .. shim or shim
    local cmd = string.format("%s" .. LUA_EXE .. " -e %s %s %s 2>&1", preload and "LD_PRELOAD=" .. q(pre) .. " " or "",
      q("package.path = [[" .. package.path .. "]] package.cpath = [[" .. package.cpath .. "]]"),
      q(dir .. "/child.lua"), q(path))
    local p = assert(io.popen(cmd, "r"))
    local out = p:read("*a")
    p:close()
    return out
  end

  it("fails naming the file and the fsync, keeps the previous file, removes the temporary file", function()
    local path = dir .. "/weights.safetensors"
    lt.save(path, { w = lt.tensor { 1, 2, 3 } })
    local before = fs.slurp(path)
    assert.are.equal("ok", child(false, dir .. "/other.safetensors")) -- the child saves without the shim
    local out = child(true, path)
    local P = path:gsub("%p", "%%%0")
    assert.matches("^lt%.save: " .. P .. ": cannot fsync temporary file " .. P .. "%.tmp%.%d+%.%d+%.%x+: Input/output error", out)
    assert.are.equal(before, fs.slurp(path))
    assert.are.same({ 1, 2, 3 }, lt.load(path).w:tolist())
    local p = assert(io.popen("ls " .. q(dir)))
    local names = p:read("*a")
    p:close()
    assert.is_nil(names:match("%.tmp%."), names)
  end)
end)
