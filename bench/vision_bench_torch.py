#!/usr/bin/python3
# bench/vision_bench_torch.py — the PyTorch side of bench/vision_bench.lua: same shapes, same protocol, same names.
# Run with Debian's torch: OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/vision_bench_torch.py
import os
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import time
import torch
import torch.nn as nn

if os.environ.get("BENCH_THREADS", "2") != "default":  # "default": PyTorch's own thread count
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
torch.manual_seed(0)
B = 16
REPS = int(os.environ.get("BENCH_REPS", "15"))


def bench(name, m, x):
    params = list(m.parameters()) + [x]
    g = torch.ones(m(x).shape)

    def step():
        m(x).backward(g)
        for p in params:
            p.grad = None
    for _ in range(3):
        step()
    ts = []
    for _ in range(REPS):
        t0 = time.perf_counter()
        step()
        ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    print("%s %.3f" % (name, ts[(len(ts) + 1) // 2 - 1]), flush=True)


def x4(c, h, w):
    return torch.randn(B, c, h, w, requires_grad=True)


def x3(c, n):
    return torch.randn(B, c, n, requires_grad=True)


bench("dw_conv2d 96 k3 p1 28x28", nn.Conv2d(96, 96, 3, padding=1, groups=96), x4(96, 28, 28))
bench("dw_conv2d 64 k3 s2 p1 56x56", nn.Conv2d(64, 64, 3, stride=2, padding=1, groups=64), x4(64, 56, 56))
bench("grouped_conv2d 128 k3 g32 p1 28x28", nn.Conv2d(128, 128, 3, padding=1, groups=32), x4(128, 28, 28))
bench("dilated_conv2d 64 k3 d2 p2 28x28", nn.Conv2d(64, 64, 3, padding=2, dilation=2), x4(64, 28, 28))
bench("conv1d 128->128 k5 p2 L128", nn.Conv1d(128, 128, 5, padding=2), x3(128, 128))
bench("conv1d 40->64 k11 s2 p5 L400", nn.Conv1d(40, 64, 11, stride=2, padding=5), x3(40, 400))
bench("conv1d 64->64 k3 d4 p4 L256", nn.Conv1d(64, 64, 3, padding=4, dilation=4), x3(64, 256))
bench("conv_transpose2d 512->256 k4 s2 p1 4x4", nn.ConvTranspose2d(512, 256, 4, stride=2, padding=1), x4(512, 4, 4))
bench("conv_transpose2d 256->128 k4 s2 p1 8x8", nn.ConvTranspose2d(256, 128, 4, stride=2, padding=1), x4(256, 8, 8))
bench("conv_transpose2d 128->64 k4 s2 p1 16x16", nn.ConvTranspose2d(128, 64, 4, stride=2, padding=1),
      x4(128, 16, 16))
bench("conv_transpose2d 64->3 k4 s2 p1 32x32", nn.ConvTranspose2d(64, 3, 4, stride=2, padding=1), x4(64, 32, 32))
bench("conv_transpose2d 32->1 k4 s2 p1 32x32", nn.ConvTranspose2d(32, 1, 4, stride=2, padding=1), x4(32, 32, 32))
bench("conv2d 3->64 k4 s2 p1 64x64", nn.Conv2d(3, 64, 4, stride=2, padding=1), x4(3, 64, 64))
bench("conv2d 64->128 k4 s2 p1 32x32", nn.Conv2d(64, 128, 4, stride=2, padding=1), x4(64, 32, 32))
bench("conv2d 128->256 k4 s2 p1 16x16", nn.Conv2d(128, 256, 4, stride=2, padding=1), x4(128, 16, 16))
bench("conv2d 256->512 k4 s2 p1 8x8", nn.Conv2d(256, 512, 4, stride=2, padding=1), x4(256, 8, 8))
bench("group_norm 32x128 28x28", nn.GroupNorm(32, 128), x4(128, 28, 28))
bench("adaptive_avg_pool2d 1 512x7x7", nn.AdaptiveAvgPool2d(1), x4(512, 7, 7))
bench("adaptive_avg_pool2d 7 256x13x13", nn.AdaptiveAvgPool2d(7), x4(256, 13, 13))
bench("adaptive_max_pool2d 7 256x13x13", nn.AdaptiveMaxPool2d(7), x4(256, 13, 13))
