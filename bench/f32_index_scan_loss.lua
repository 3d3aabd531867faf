-- f32_index_scan_loss.lua — the float32 rows of the ops whose kernels were made generic over float and double
-- (cross_entropy, nll_loss, gather, index_select, scatter_add, masked_select, cumsum, cumprod, prod, sort, topk,
-- norm, erf, uniform_/normal_/bernoulli) as process CPU time per call on one thread: the median of 5 timed
-- repetitions, "name microseconds" per line. Compare two builds by running it with each one's module
-- (see docs/dev or the commit that added it): the float32 path must not get slower.
--   luajit bench/f32_index_scan_loss.lua            ONLY=gather luajit bench/f32_index_scan_loss.lua
local lt = require "lutra"
local ffi = require "ffi"
ffi.cdef [[ typedef struct { long tv_sec; long tv_nsec; } ts_; int clock_gettime(int, ts_ *); ]]
local ts = ffi.new("ts_")
local function now() ffi.C.clock_gettime(2, ts); return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9 end
lt.set_num_threads(1)
local only = os.getenv("ONLY")
local function bench(name, fn, n)
  if only and not name:find(only, 1, true) then return end
  for _ = 1, 3 do fn() end
  local t = {}
  for i = 1, 5 do local t0 = now(); for _ = 1, n do fn() end; t[i] = (now() - t0) / n * 1e6 end
  table.sort(t)
  print(("%s %.2f"):format(name, t[3]))
end
lt.manual_seed(0)
local logits = lt.randn(1024, 65):requires_grad(true)
local tgt = lt.randint(1, 66, { 1024 })
local w = lt.rand(65) + 0.5
bench("cross_entropy fb 1024x65", function() lt.F.cross_entropy(logits, tgt):backward(); logits:zero_grad(true) end, 200)
bench("cross_entropy fb w ls 1024x65", function()
  lt.F.cross_entropy(logits, tgt, { weight = w, label_smoothing = 0.1 }):backward(); logits:zero_grad(true)
end, 200)
local kd, kt = lt.randn(16, 10, 32, 32):requires_grad(true), lt.randint(1, 11, { 16, 32, 32 })
bench("cross_entropy fb 16x10x32x32", function() lt.F.cross_entropy(kd, kt):backward(); kd:zero_grad(true) end, 20)
bench("nll_loss fb 1024x65", function() lt.F.nll_loss(logits, tgt):backward(); logits:zero_grad(true) end, 500)
local x = lt.randn(512, 256):requires_grad(true)
local gi = lt.randint(1, 257, { 512, 64 })
bench("gather fb 512x256 k64", function() x:gather(2, gi):sum():backward(); x:zero_grad(true) end, 100)
local si = lt.randint(1, 513, { 256 })
bench("index_select fb 512x256 k256", function() x:index_select(1, si):sum():backward(); x:zero_grad(true) end, 100)
local src = lt.randn(512, 64)
bench("scatter_add 512x256 k64", function() return x:detach():scatter_add(2, gi, src) end, 100)
local m = x:detach():gt(0)
bench("masked_select fb 512x256", function() x:masked_select(m):sum():backward(); x:zero_grad(true) end, 100)
local y = lt.randn(512, 256)
bench("cumsum 512x256 dim2", function() return y:cumsum(2) end, 200)
bench("cumprod fb 512x256", function() x:cumprod(2):sum():backward(); x:zero_grad(true) end, 50)
bench("prod fb 512x256 dim2", function() x:prod(2):sum():backward(); x:zero_grad(true) end, 100)
bench("sort 512x256 dim2", function() return y:sort(2) end, 20)
bench("topk 512x256 k8", function() return y:topk(8, 2) end, 50)
bench("norm fb 512x256 dim2", function() x:norm(2, 2):sum():backward(); x:zero_grad(true) end, 200)
bench("erf fb 512x256", function() x:erf():sum():backward(); x:zero_grad(true) end, 100)
local z = lt.zeros(512, 256)
bench("uniform_ 512x256", function() return z:uniform_() end, 100)
bench("normal_ 512x256", function() return z:normal_() end, 200)
local p = lt.rand(512, 256)
bench("bernoulli 512x256", function() return lt.bernoulli(p) end, 100)
