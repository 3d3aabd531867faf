-- gemm_ulimit_spec.lua — a GEMM under a memory limit lutra cannot meet ends in an error, not a hang: OpenBLAS
-- 0.3.21 retries its workspace map forever, so lutra checks that the workspace can be had before its first GEMM
-- (lt_blas_ready, core/src/lt_blas.h). The GEMM runs in a child process under `ulimit -v`, itself under
-- `timeout`, so a hang fails the test (exit status 124) instead of hanging the suite.
local lt = require "lutra"

-- the child: the lutra binary under LuaJIT; under a PUC Lua (tests/run --lua 5.4), that interpreter with the module
-- built for it (the binary embeds LuaJIT)
local puc = require "helpers.puc"
local CONFIG = os.getenv("LUTRA_CONFIG") or "release"
local RUNNER = rawget(_G, "jit") and (os.getenv("LUTRA_BIN") or "build/bin/release/cli/lutra")
  or "env " .. puc.module_env(CONFIG) .. puc.lua_exe
-- AddressSanitizer reserves terabytes of address space for its shadow memory: no `ulimit -v` run under it
local SANITIZED = os.getenv("LUTRA_SANITIZER") ~= nil

-- runs source in a lutra process limited to kb KB of address space, for at most 30 s; returns output, seconds, status
local function run_limited(kb, source)
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(source)
  f:close()
  local t0 = lt._wall_time and lt._wall_time() or os.time()
  local p = io.popen(string.format("(ulimit -v %d; exec timeout 30 %s '%s') 2>&1; echo \"status=$?\"", kb, RUNNER,
    script))
  local out = p:read("*a")
  p:close()
  local t1 = lt._wall_time and lt._wall_time() or os.time()
  os.remove(script)
  return out, t1 - t0, tonumber(out:match("status=(%d+)"))
end

local MATMUL = [[
local lt = require "lutra"
local ok, e = pcall(function() return lt.ones(256, 256):matmul(lt.ones(256, 256)):sum():item() end)
print(ok and ("result " .. e) or ("error " .. tostring(e)))
]]

describe("a GEMM under ulimit -v", function()
  if SANITIZED then
    pending("skipped under the sanitizers (their shadow memory does not fit a ulimit -v)")
    return
  end

  it("is an out-of-memory error naming the GEMM workspace, within seconds", function()
    local out, secs, status = run_limited(300000, MATMUL)
    assert.are_not.equal(124, status, "the GEMM hung until the timeout:\n" .. out)
    assert.is.truthy(out:find("^error [^\n]*out of memory: GEMM workspace: OpenBLAS needs %d+ buffers? of 128 MiB"), out)
    assert.is_true(secs < 20, "took " .. secs .. " s")
  end)

  it("runs when the limit leaves room for the workspace", function()
    local out, _, status = run_limited(4000000, MATMUL)
    assert.are.equal(0, status, out)
    assert.is.truthy(out:find("result 16777216", 1, true), out) -- 256 x 256 entries of 256
  end)
end)
