-- bench/vision_bench.lua — forward+backward of the vision layers at the shapes real models use, lutra's side of
-- section 'vision' of bench/run (bench/vision_bench_torch.py is PyTorch's: same shapes, same protocol — median of
-- timed repetitions after a warm-up, gradients reset to none each iteration, the pool's threads).
-- Prints "name milliseconds" lines; the harness pairs them with PyTorch's in the same run:
--   bench/run --only vision        (or ./lutra bench/vision_bench.lua for lutra's side alone)
local lt = require "lutra"
local nn = lt.nn

local ffi = require "ffi"
ffi.cdef [[ typedef struct { long tv_sec; long tv_nsec; } lt_vbench_ts; int clock_gettime(int, lt_vbench_ts *); ]]
local ts = ffi.new("lt_vbench_ts")
local function now() ffi.C.clock_gettime(1, ts); return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9 end

local threads = tonumber(os.getenv("BENCH_THREADS") or "")
if threads then lt.set_num_threads(threads) end
local REPS = tonumber(os.getenv("BENCH_REPS") or "") or 15

local function bench(name, m, x)
  local params = m:parameters()
  params[#params + 1] = x
  local g
  local function step()
    local y = m(x)
    g = g or lt.ones(y:shape())
    y:backward(g)
    for _, p in ipairs(params) do p:zero_grad(true) end
  end
  for _ = 1, 3 do step() end
  local t = {}
  for i = 1, REPS do
    local t0 = now()
    step()
    t[i] = (now() - t0) * 1e3
  end
  table.sort(t)
  local ms = t[math.floor((#t + 1) / 2)]
  print(string.format("%s %.3f", name, ms))
  io.stdout:flush()
end

lt.manual_seed(0)
local B = 16
local function x4(c, h, w) return lt.randn(B, c, h, w):requires_grad(true) end
local function x3(c, l) return lt.randn(B, c, l):requires_grad(true) end
-- the workloads: the same list, in the same order, as bench/vision_bench_torch.py
-- MobileNet's depthwise 3x3 blocks (V2's expanded 96 channels at 28x28; V1's stride-2 block at 56x56)
bench("dw_conv2d 96 k3 p1 28x28", nn.Conv2d(96, 96, 3, { padding = 1, groups = 96 }), x4(96, 28, 28))
bench("dw_conv2d 64 k3 s2 p1 56x56", nn.Conv2d(64, 64, 3, { stride = 2, padding = 1, groups = 64 }), x4(64, 56, 56))
-- ResNeXt's grouped 3x3 (cardinality 32) and DeepLab's dilated 3x3
bench("grouped_conv2d 128 k3 g32 p1 28x28", nn.Conv2d(128, 128, 3, { padding = 1, groups = 32 }), x4(128, 28, 28))
bench("dilated_conv2d 64 k3 d2 p2 28x28", nn.Conv2d(64, 64, 3, { padding = 2, dilation = 2 }), x4(64, 28, 28))
-- 1-d: a text CNN over 128 tokens of width 128, a wav2letter-style audio conv (stride 2), a dilated TCN layer
bench("conv1d 128->128 k5 p2 L128", nn.Conv1d(128, 128, 5, { padding = 2 }), x3(128, 128))
bench("conv1d 40->64 k11 s2 p5 L400", nn.Conv1d(40, 64, 11, { stride = 2, padding = 5 }), x3(40, 400))
bench("conv1d 64->64 k3 d4 p4 L256", nn.Conv1d(64, 64, 3, { padding = 4, dilation = 4 }), x3(64, 256))
-- DCGAN's generator (ngf 64): its 4x4 stride-2 transposed convolutions
bench("conv_transpose2d 512->256 k4 s2 p1 4x4", nn.ConvTranspose2d(512, 256, 4, { stride = 2, padding = 1 }),
  x4(512, 4, 4))
bench("conv_transpose2d 256->128 k4 s2 p1 8x8", nn.ConvTranspose2d(256, 128, 4, { stride = 2, padding = 1 }),
  x4(256, 8, 8))
bench("conv_transpose2d 128->64 k4 s2 p1 16x16", nn.ConvTranspose2d(128, 64, 4, { stride = 2, padding = 1 }),
  x4(128, 16, 16))
bench("conv_transpose2d 64->3 k4 s2 p1 32x32", nn.ConvTranspose2d(64, 3, 4, { stride = 2, padding = 1 }),
  x4(64, 32, 32))
-- a GAN's last transposed convolution to one channel (few output channels), and DCGAN's discriminator (ndf 64):
-- its 4x4 stride-2 convolutions
bench("conv_transpose2d 32->1 k4 s2 p1 32x32", nn.ConvTranspose2d(32, 1, 4, { stride = 2, padding = 1 }),
  x4(32, 32, 32))
bench("conv2d 3->64 k4 s2 p1 64x64", nn.Conv2d(3, 64, 4, { stride = 2, padding = 1 }), x4(3, 64, 64))
bench("conv2d 64->128 k4 s2 p1 32x32", nn.Conv2d(64, 128, 4, { stride = 2, padding = 1 }), x4(64, 32, 32))
bench("conv2d 128->256 k4 s2 p1 16x16", nn.Conv2d(128, 256, 4, { stride = 2, padding = 1 }), x4(128, 16, 16))
bench("conv2d 256->512 k4 s2 p1 8x8", nn.Conv2d(256, 512, 4, { stride = 2, padding = 1 }), x4(256, 8, 8))
-- GroupNorm as in ResNet-GN (32 groups), the adaptive pools of ResNet's and VGG's heads
bench("group_norm 32x128 28x28", nn.GroupNorm(32, 128), x4(128, 28, 28))
bench("adaptive_avg_pool2d 1 512x7x7", nn.AdaptiveAvgPool2d(1), x4(512, 7, 7))
bench("adaptive_avg_pool2d 7 256x13x13", nn.AdaptiveAvgPool2d(7), x4(256, 13, 13))
bench("adaptive_max_pool2d 7 256x13x13", nn.AdaptiveMaxPool2d(7), x4(256, 13, 13))
