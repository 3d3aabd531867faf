-- kernels_cpu.lua — the slow kernels of issue 31/29 (softmax fwd+bwd on any dim, small softmaxes, the bias row
-- add, a 2-D matmul, the convs and adaptive pools the vision bench found below PyTorch, DCGAN's k4 s2 convs and
-- transposed convs), as the process CPU time per call on one thread: on a shared machine a process waiting for
-- the CPU does not count the wait. lutra's side of bench/kernels_cpu (bench/kernels_cpu_torch.py is PyTorch's);
-- prints "name microseconds" (the median of 5 timed repetitions).
local lt = require "lutra"
local nn = lt.nn
local ffi = require "ffi"
ffi.cdef [[ typedef struct { long tv_sec; long tv_nsec; } ts_; int clock_gettime(int, ts_ *); ]]
local ts = ffi.new("ts_")
local CLK = tonumber(os.getenv("CLK") or "2")
local function now() ffi.C.clock_gettime(CLK, ts); return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9 end
lt.set_num_threads(tonumber(os.getenv("T") or "1"))
local only = os.getenv("ONLY")
local function bench(name, fn, n)
  if only and not name:find(only, 1, true) then return end
  n = n or 20
  -- warm-up to the steady state, the same rule on both sides: at least 3 calls and 0.2 s of CPU time. A loop's
  -- first dead results reach lutra's allocator cache only when the first GC cycle has run (after ~4 MB of
  -- tensors handed out, core/bind/l_util.c's pacing); until then each result is fresh memory, whose page faults
  -- cost ~20-30 us each on this VM: 3 calls of warm-up timed that first cycle, not the kernel
  local w0, w = now(), 0
  repeat fn(); w = w + 1 until w >= 3 and now() - w0 >= 0.2
  local t = {}
  for i = 1, 5 do local t0 = now(); for _ = 1, n do fn() end; t[i] = (now() - t0) / n * 1e6 end
  table.sort(t)
  print(("%s %.2f"):format(name, t[3]))
end
local function fb(m, x)
  local params = m:parameters(); params[#params + 1] = x
  local g
  return function()
    local y = m(x); g = g or lt.ones(y:shape()); y:backward(g)
    for _, p in ipairs(params) do p:zero_grad(true) end
  end
end
lt.manual_seed(0)
do
  local x = lt.randn(16, 4, 64, 64):requires_grad(true); local g = lt.randn(16, 4, 64, 64)
  bench("softmax_fb_4d_last", function() x:softmax(4):backward(g); x:zero_grad(true) end)
  bench("softmax_fb_4d_dim2", function() x:softmax(2):backward(g); x:zero_grad(true) end)
  bench("log_softmax_fb_4d_last", function() x:log_softmax(4):backward(g); x:zero_grad(true) end)
  -- a softmax over a dim followed by a few elements ([batch, classes, 4]: rows 4 apart)
  local xs, gs = lt.randn(4096, 16, 4):requires_grad(true), lt.randn(4096, 16, 4)
  bench("softmax_fb_small_inner", function() xs:softmax(2):backward(gs); xs:zero_grad(true) end)
  local a = lt.randn(64, 16)
  bench("softmax 64x16", function() return a:softmax(2) end, 2000)
  bench("log_softmax 64x16", function() return a:log_softmax(2) end, 2000)
  local b, bias = lt.randn(1024, 1024), lt.randn(1024)
  bench("add_bias_row 1024x1024", function() return b + bias end, 50)
  local m1, m2 = lt.randn(1024, 128), lt.randn(128, 128)
  bench("matmul 1024x128x128", function() return m1:matmul(m2) end, 200)
end
do -- a training batch gathered from a data set larger than the caches (the MLP benchmarks' batches)
  local X, perm, pos = lt.randn(60000, 784), lt.randperm(60000), 0
  bench("index_select 64 rows of 60000x784", function()
    if pos + 64 > 60000 then pos = 0 end
    pos = pos + 64
    return X:index_select(1, perm:narrow(1, pos - 63, 64))
  end, 200)
end
local B = 16
local function x4(c, h, w) return lt.randn(B, c, h, w):requires_grad(true) end
local function x3(c, l) return lt.randn(B, c, l):requires_grad(true) end
bench("dilated_conv2d", fb(nn.Conv2d(64, 64, 3, { padding = 2, dilation = 2 }), x4(64, 28, 28)), 5)
bench("conv1d k5", fb(nn.Conv1d(128, 128, 5, { padding = 2 }), x3(128, 128)), 5)
bench("conv1d k11 s2", fb(nn.Conv1d(40, 64, 11, { stride = 2, padding = 5 }), x3(40, 400)), 5)
bench("adaptive_avg_pool2d 1", fb(nn.AdaptiveAvgPool2d(1), x4(512, 7, 7)), 50)
bench("adaptive_max_pool2d 7", fb(nn.AdaptiveMaxPool2d(7), x4(256, 13, 13)), 20)
bench("conv2d 3->64 k4 s2 64x64", fb(nn.Conv2d(3, 64, 4, { stride = 2, padding = 1 }), x4(3, 64, 64)), 5)
bench("conv2d 64->128 k4 s2 32x32", fb(nn.Conv2d(64, 128, 4, { stride = 2, padding = 1 }), x4(64, 32, 32)), 5)
bench("conv2d 128->256 k4 s2 16x16", fb(nn.Conv2d(128, 256, 4, { stride = 2, padding = 1 }), x4(128, 16, 16)), 5)
bench("conv_transpose2d 32->1 k4 s2 32x32", fb(nn.ConvTranspose2d(32, 1, 4, { stride = 2, padding = 1 }), x4(32, 32, 32)), 5)
bench("conv_transpose2d 64->3 k4 s2 32x32", fb(nn.ConvTranspose2d(64, 3, 4, { stride = 2, padding = 1 }), x4(64, 32, 32)), 5)
-- the word-level LSTM of bench/lstm_bench.lua (one layer, E = H = 256, 35 steps of batch 32): the recurrent
-- products are 35 GEMMs of 32x1024x256 each way
do
  local lstm, x = nn.LSTM(256, 256), lt.randn(35, 32, 256):requires_grad(true)
  local params = lstm:parameters(); params[#params + 1] = x
  bench("lstm fwd+bwd H256 T35 B32", function()
    local y = lstm(x); y:sum():backward()
    for _, p in ipairs(params) do p:zero_grad(true) end
  end, 3)
  lt.no_grad(function() bench("lstm fwd H256 T35 B32", function() return lstm(x) end, 5) end)
end
