-- bench/host_data_bench.lua — a DataLoader batch's time under whichever Lua runs it (LuaJIT or PUC Lua
-- 5.1/5.3/5.4: docs/guide-puc-lua.md). A TensorDataset of x [4096 x 32] float32 and y [4096], batch 64,
-- shuffled; prints µs per batch. Compare the lines of one run on the same machine:
--   luajit bench/host_data_bench.lua
--   lua5.4 -e 'package.cpath="./build-lua5.4/bin/release/?.so;"..package.cpath' bench/host_data_bench.lua
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local lt = require "lutra"
local now = require("lutra.core")._io.now

lt.manual_seed(0)
local ds = lt.data.TensorDataset(lt.randn(4096, 32), lt.arange(1, 4097))
local loader = lt.data.DataLoader(ds, { batch_size = 64, shuffle = true })

local function run(budget)
  local n, t0 = 0, now()
  while now() - t0 < budget do
    for batch in loader:iter() do
      assert(batch[1])
      n = n + 1
    end
  end
  return (now() - t0) / n * 1e6, n
end

run(0.3) -- warm up
local us, n = run(tonumber(arg and arg[1]) or 2)
print(string.format("%s: DataLoader batch %.2f us (%d batches)", jit and jit.version or _VERSION, us, n))
