#!/usr/bin/python3
# bench/nn_bench_torch.py — the PyTorch side of bench/nn_bench.lua: same shapes, same protocol.
# Run with Debian's torch: OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/nn_bench_torch.py
import os
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import time
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(2)
torch.manual_seed(0)
B = 64


def bench(name, params, step, reps):
    for _ in range(5):
        step()
        for p in params:
            p.grad = None
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        ts.append((time.perf_counter() - t0) * 1e3)
        for p in params:
            p.grad = None
    ts.sort()
    print("%-44s %8.3f ms" % (name, ts[(len(ts) + 1) // 2 - 1]))


lin = nn.Linear(784, 512)
xl = torch.randn(B, 784)
gl = torch.ones(B, 512)
bench("Linear(784->512) fwd+bwd", list(lin.parameters()), lambda: lin(xl).backward(gl), 200)

c1 = nn.Conv2d(1, 6, 5, padding=2)
x1 = torch.randn(B, 1, 28, 28)
g1 = torch.ones(B, 6, 28, 28)
bench("Conv2d(1->6, k5, pad 2) 28x28 fwd+bwd", list(c1.parameters()), lambda: c1(x1).backward(g1), 100)

c2 = nn.Conv2d(6, 16, 5)
x2 = torch.randn(B, 6, 14, 14, requires_grad=True)
g2 = torch.ones(B, 16, 10, 10)
bench("Conv2d(6->16, k5) 14x14 fwd+bwd (+input grad)", list(c2.parameters()) + [x2], lambda: c2(x2).backward(g2), 100)

lenet = nn.Sequential(
    nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
    nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
y = torch.tensor([(i + 1) % 10 for i in range(B)])
bench("LeNet-5 fwd+cross_entropy+bwd", list(lenet.parameters()),
      lambda: F.cross_entropy(lenet(x1), y).backward(), 100)

print("(torch %s, threads %d, mkldnn %s)" % (torch.__version__, torch.get_num_threads(),
                                              torch.backends.mkldnn.is_available()))
