-- bench/rest_f32_count.lua — the float32 work of the pools, group norm and attention kernels (core/src/nn_pool.c,
-- nn_group_norm.c, nn_attention.c), forward + backward on one thread, for CPU time or instruction counts
-- (callgrind) before/after a change to them. Prints the CPU seconds taken by one family.
--   luajit bench/rest_f32_count.lua pools|group_norm|attention [reps]   (LUTRA_CPATH="<dir>/?.so;": another build)
--   valgrind --tool=callgrind --callgrind-out-file=/dev/null luajit bench/rest_f32_count.lua attention
--   bench/f32_rest_before_after OLD_DIR     (all three families, old/new CPU-time ratios)
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("LUTRA_CPATH") or "./build/bin/release/?.so;") .. package.cpath
local lt = require "lutra"
local F = lt.F
lt.set_num_threads(1)
local family = arg and arg[1] or "pools"
local reps = tonumber(arg and arg[2] or "") or 1
lt.manual_seed(0)
local function fb(f, ...)
  local ins = { ... }
  return function()
    local y = f(unpack(ins))
    y:sum():backward()
    for _, x in ipairs(ins) do x:zero_grad(true) end
  end
end
local function leaf(...) return lt.randn(...):requires_grad(true) end
local FAMILIES = {
  pools = { -- the 2x2 rows, the general max loop (padding, ceil mode, dilation), the average loop
    fb(function(x) return F.max_pool2d(x, 2) end, leaf(16, 32, 32, 32)),
    fb(function(x) return F.max_pool2d(x, 3, { stride = 2, padding = 1, ceil_mode = true }) end, leaf(16, 32, 32, 32)),
    fb(function(x) return F.max_pool2d(x, 3, { dilation = 2 }) end, leaf(16, 16, 32, 32)),
    fb(function(x) return F.avg_pool2d(x, 3, { stride = 2, padding = 1 }) end, leaf(16, 32, 32, 32)),
  },
  group_norm = {
    fb(function(x, w, b) return F.group_norm(x, 8, w, b) end, leaf(16, 64, 32, 32), leaf(64), leaf(64)),
    fb(function(x) return F.instance_norm(x) end, leaf(16, 32, 16, 16)),
  },
  attention = {
    fb(function(q, k, v) return F.scaled_dot_product_attention(q, k, v) end, leaf(4, 4, 256, 32), leaf(4, 4, 256, 32),
      leaf(4, 4, 256, 32)),
    fb(function(q, k, v) return F.scaled_dot_product_attention(q, k, v, { is_causal = true }) end, leaf(4, 4, 256, 32),
      leaf(4, 4, 256, 32), leaf(4, 4, 256, 32)),
  },
}
local work = assert(FAMILIES[family], "family: pools, group_norm or attention")
for _, f in ipairs(work) do f() end -- warm up (allocator, page faults)
local t0 = os.clock()
for _ = 1, reps do
  for _, f in ipairs(work) do f() end
end
io.write(("%.4f\n"):format(os.clock() - t0))
