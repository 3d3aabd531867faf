#!/usr/bin/python3
# bf16_torch.py — the PyTorch 1.13 side of bench/bf16.lua: the MLP (784-512-256-10, batch 64, SGD momentum),
# LeNet-5 (batch 64, SGD momentum) and tiny GPT (bench/nanogpt_torch.py: 2 layers, 4 heads, width 128, batch 16,
# context 64, AdamW) training steps on one thread, fp32 and under torch.autocast("cpu", dtype=torch.bfloat16).
# Prints "torch <model> <fp32|bf16> <microseconds>": the median over ROUNDS rounds of the mean of STEPS steps, in
# CPU time (one thread: the step's time without a loaded machine's waits), as bench/bf16.lua.
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nanogpt_torch import GPT  # noqa: E402

torch.set_num_threads(1)
ROUNDS, STEPS = int(os.environ.get("BENCH_ROUNDS", "5")), 10


def workload(name):
    torch.manual_seed(0)
    if name == "mlp":
        net = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                            nn.Linear(256, 10))
        x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))
    elif name == "lenet":
        net = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                            nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84),
                            nn.ReLU(), nn.Linear(84, 10))
        x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))
    else:
        net = GPT(65, block_size=64, n_layer=2, n_head=4, n_embd=128, sdpa=True)
        x, y = torch.randint(0, 65, (16, 64)), torch.randint(0, 65, (16, 64))
    if name == "gpt":
        opt = torch.optim.AdamW(net.parameters(), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1, foreach=True)
        loss_of = lambda: net(x, y)[1]  # noqa: E731
    else:
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
        loss_of = lambda: F.cross_entropy(net(x), y)  # noqa: E731
    return opt, loss_of


def run(name, bf16):
    opt, loss_of = workload(name)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = loss_of()
        loss.backward()
        opt.step()

    times = []
    for r in range(ROUNDS + 1):
        t0 = time.process_time()
        for _ in range(STEPS):
            step()
        if r > 0:  # round 0 warms up
            times.append((time.process_time() - t0) / STEPS)
    return statistics.median(times)


for name in sys.argv[1:] or ["mlp", "lenet", "gpt"]:
    for bf16 in (False, True):
        print("torch %s %s %.1f" % (name, "bf16" if bf16 else "fp32", run(name, bf16) * 1e6), flush=True)
