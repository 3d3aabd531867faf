#!/usr/bin/python3
# bench/vision_bench_torch.py — the PyTorch side of bench/vision_bench.lua: same shapes, same protocol.
# Run with Debian's torch: OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/vision_bench_torch.py
import os
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import time
import torch
import torch.nn as nn

torch.set_num_threads(2)
torch.manual_seed(0)
B = 16


def bench(name, m, x, reps):
    params = list(m.parameters()) + [x]
    g = torch.ones(m(x).shape)

    def step():
        m(x).backward(g)
        for p in params:
            p.grad = None
    for _ in range(5):
        step()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    print("%-44s %8.3f ms" % (name, ts[(len(ts) + 1) // 2 - 1]))


def x4(c, h, w):
    return torch.randn(B, c, h, w, requires_grad=True)


bench("Conv2d depthwise 32, k3 pad 1, 28x28", nn.Conv2d(32, 32, 3, padding=1, groups=32), x4(32, 28, 28), 50)
bench("Conv2d 32->64 k3 groups 4 dilation 2, 14x14", nn.Conv2d(32, 64, 3, groups=4, dilation=2, padding=2),
      x4(32, 14, 14), 50)
bench("Conv1d 64->64 k5 pad 2, L 100", nn.Conv1d(64, 64, 5, padding=2), torch.randn(B, 64, 100, requires_grad=True), 50)
bench("ConvTranspose2d 32->16 k4 s2 p1, 14x14", nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1), x4(32, 14, 14), 50)
bench("GroupNorm(8, 32) 28x28", nn.GroupNorm(8, 32), x4(32, 28, 28), 50)
bench("MaxPool2d(3, 2, ceil_mode) 28x28 x32", nn.MaxPool2d(3, 2, ceil_mode=True), x4(32, 28, 28), 50)
bench("AdaptiveAvgPool2d(5) 28x28 x32", nn.AdaptiveAvgPool2d(5), x4(32, 28, 28), 50)
print("(torch %s, threads %d)" % (torch.__version__, torch.get_num_threads()))
