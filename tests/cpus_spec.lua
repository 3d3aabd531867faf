-- cpus_spec.lua — lutra starts with as many threads as the CPUs the process can use (core/src/cpus.c): a process
-- under `taskset -c 0` gets 1 thread (lutra's pool and OpenBLAS), and lt.blas_info() says which limit applied.
-- The child runs as gemm_ulimit_spec's does: the lutra binary, or the PUC interpreter with the module built for it.
local lt = require "lutra"
local puc = require "helpers.puc"
local CONFIG = os.getenv("LUTRA_CONFIG") or "release"
local RUNNER = rawget(_G, "jit") and (os.getenv("LUTRA_BIN") or "build/bin/release/cli/lutra")
  or "env " .. puc.module_env(CONFIG) .. puc.lua_exe

local function child(prefix)
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write('local lt = require "lutra"; io.write(lt.get_num_threads(), " ", lt.blas_info().threads, " ", ',
    'lt.blas_info().threads_reason)')
  f:close()
  local p = io.popen(string.format("%s %s '%s' 2>&1", prefix, RUNNER, script))
  local out = p:read("*a")
  p:close()
  os.remove(script)
  return out
end

describe("the starting thread count", function()
  it("is 1 under an affinity mask of one CPU, and says why", function()
    if os.execute("command -v taskset >/dev/null 2>&1") ~= 0 and os.execute("command -v taskset >/dev/null 2>&1")
      ~= true then
      pending("no taskset")
      return
    end
    local out = child("taskset -c 0")
    local threads, blas, why = out:match("^(%d+) (%d+) (%S+)$")
    assert(threads, "child said: " .. out)
    assert.are.equal("1", threads)
    assert.are.equal("1", blas)
    local all = tonumber((child(""):match("^(%d+)")))
    assert.is_true(all ~= nil and all >= 1)
    if all > 1 then assert.are.equal("affinity", why) end
  end)

  it("is what lt.blas_info() reports in this process, with a reason", function()
    local I = lt.blas_info()
    assert.is_true(I.threads >= 1)
    assert.is_truthy(({ online = true, affinity = true, ["cgroup quota"] = true })[I.threads_reason])
  end)
end)
