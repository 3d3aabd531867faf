-- bench/rnn_f32_count.lua — the float32 fused recurrent layers' work, for instruction counts (callgrind) or
-- CPU time before/after a change to core/src/nn_rnn.c: LSTM, GRU and RNN (tanh), forward + backward, one
-- thread, a small batch (the small-M GEMM route) and a large one (OpenBLAS). Prints the CPU seconds taken.
--   luajit bench/rnn_f32_count.lua [reps]     (LUTRA_CPATH="<dir>/?.so;" runs another build's lutra.core)
--   valgrind --tool=callgrind --callgrind-out-file=/dev/null luajit bench/rnn_f32_count.lua
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("LUTRA_CPATH") or "./build/bin/release/?.so;") .. package.cpath
local lt = require "lutra"
lt.set_num_threads(1)
local reps = tonumber(arg and arg[1] or "") or 1
lt.manual_seed(0)
local models = {
  { lt.nn.LSTM(64, 128, { num_layers = 2 }), 24, 8 },
  { lt.nn.GRU(64, 128, { bidirectional = true }), 24, 8 },
  { lt.nn.RNN(64, 128), 24, 8 },
  { lt.nn.LSTM(64, 128, { proj_size = 32 }), 24, 200 },
}
local t0 = os.clock()
for _ = 1, reps do
  for _, m in ipairs(models) do
    local x = lt.randn(m[2], m[3], 64):requires_grad(true)
    local out = m[1](x)
    out:sum():backward()
  end
end
io.write(("%.4f\n"):format(os.clock() - t0))
