# lstm_bench_torch.py — PyTorch side of bench/lstm_bench.lua (same recipe, output "name microseconds", best of 5).
# Run with OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/lstm_bench_torch.py [--small] (BENCH_THREADS, default 2).
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

if os.environ.get("BENCH_THREADS", "2") != "default":  # "default": PyTorch's own thread count
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
small = "--small" in sys.argv
V, E, H, T, B = (500, 64, 64, 20, 8) if small else (2000, 256, 256, 35, 32)
# timed blocks and steps per block (bench/run passes fewer: its rounds already repeat the process)
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
STEPS = int(os.environ.get("BENCH_STEPS", "3" if small else "5"))


def timed(name, fn):
    for _ in range(3):
        fn()
    times = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        for _ in range(STEPS):
            fn()
        times.append((time.perf_counter() - t0) / STEPS * 1e6)
    print("%s %.1f" % (name, min(times)))


torch.manual_seed(0)
tokens = torch.randint(0, V, (T + 1, B))
x, y = tokens[:T], tokens[1:].reshape(T * B)

for optname in ("Adam", "SGD"):
    model = nn.ModuleDict({"embed": nn.Embedding(V, E), "lstm": nn.LSTM(E, H, num_layers=2), "head": nn.Linear(H, V)})
    opt = torch.optim.Adam(model.parameters(), lr=1e-3) if optname == "Adam" else \
        torch.optim.SGD(model.parameters(), lr=0.1)
    state = [None]

    def step():
        opt.zero_grad(set_to_none=True)
        out, (h, c) = model["lstm"](model["embed"](x), state[0])
        state[0] = (h.detach(), c.detach())
        loss = F.cross_entropy(model["head"](out).reshape(T * B, V), y)
        loss.backward()
        opt.step()

    timed("lm_step_%s_V%d_H%d_T%d_B%d" % (optname.lower(), V, H, T, B), step)

lstm = nn.LSTM(E, H, num_layers=2)
xin = torch.randn(T, B, E, requires_grad=True)
g = torch.randn(T, B, H)


def fwd_bwd():
    lstm.zero_grad(set_to_none=True)
    xin.grad = None
    out, _ = lstm(xin)
    out.backward(g)


timed("lstm_fwd_bwd_E%d_H%d_T%d_B%d" % (E, H, T, B), fwd_bwd)


def fwd():
    with torch.no_grad():
        lstm(xin)


timed("lstm_fwd_E%d_H%d_T%d_B%d" % (E, H, T, B), fwd)
