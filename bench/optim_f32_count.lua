-- bench/optim_f32_count.lua — the float32 optimizer steps' work, for instruction counts (callgrind) or CPU time
-- before/after a change to core/src/optim*.c: 10 steps of RMSprop (plain, centered + momentum) and of every kind
-- of optim_adaptive.c over a 256K-element parameter, one thread. Prints the CPU seconds taken.
--   luajit bench/optim_f32_count.lua [reps]     (LUTRA_CPATH="<dir>/?.so;" runs another build's lutra.core)
--   valgrind --tool=callgrind --callgrind-out-file=/dev/null luajit bench/optim_f32_count.lua
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("LUTRA_CPATH") or "./build/bin/release/?.so;") .. package.cpath
local lt = require "lutra"
lt.set_num_threads(1)
local reps = tonumber(arg and arg[1] or "") or 1
lt.manual_seed(0)
local N = 256 * 1024
local g = lt.randn(N)
local kinds = {
  { "RMSprop", {} }, { "RMSprop", { centered = true, momentum = 0.9 } }, { "Adagrad", {} }, { "Adadelta", {} },
  { "Adamax", {} }, { "NAdam", {} }, { "RAdam", {} }, { "ASGD", { t0 = 3 } },
}
local t0 = os.clock()
for _ = 1, reps do
  for _, k in ipairs(kinds) do
    local p = lt.randn(N):requires_grad(true)
    local opt = lt.optim[k[1]]({ p }, k[2])
    p.grad = g:clone()
    for _ = 1, 10 do opt:step() end
  end
end
io.write(("%.4f\n"):format(os.clock() - t0))
