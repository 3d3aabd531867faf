#!/usr/bin/python3
# gpt_bench_torch.py — the PyTorch 1.13 side of bench/gpt_bench.lua: nanoGPT's model (bench/nanogpt_torch.py)
# at the same size, batch and protocol, in PyTorch's best settings (2 threads, OMP_WAIT_POLICY=PASSIVE, set by
# bench/run; set_to_none zero_grad; AdamW foreach). Both attention paths of torch 1.13 run (nanoGPT's explicit
# masked softmax, and F._scaled_dot_product_attention); the "gpt ..." lines are the faster one's.
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nanogpt_torch import GPT  # noqa: E402

if os.environ.get("BENCH_THREADS", "2") != "default":  # "default": PyTorch's own thread count
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
ROUNDS, STEPS = int(os.environ.get("BENCH_ROUNDS", "15")), 10


def run(sdpa):
    torch.manual_seed(0)
    model = GPT(65, block_size=64, n_layer=2, n_head=4, n_embd=128, sdpa=sdpa)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1, foreach=True)
    x, y = torch.randint(0, 65, (16, 64)), torch.randint(0, 65, (16, 64))
    best = {"fwd": 1e9, "bwd": 1e9, "opt": 1e9, "step": 1e9}
    for r in range(ROUNDS + 1):
        if r == 1:
            cpu0 = time.process_time()
        acc = {"fwd": 0.0, "bwd": 0.0, "opt": 0.0, "step": 0.0}
        for _ in range(STEPS):
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            _, loss = model(x, y)
            t1 = time.perf_counter()
            loss.backward()
            t2 = time.perf_counter()
            opt.step()
            t3 = time.perf_counter()
            acc["fwd"] += t1 - t0
            acc["bwd"] += t2 - t1
            acc["opt"] += t3 - t2
            acc["step"] += t3 - t0
        if r > 0:
            for k in best:
                best[k] = min(best[k], acc[k] / STEPS)
    best["cpu"] = (time.process_time() - cpu0) / (ROUNDS * STEPS)
    return best


res = {False: run(False), True: run(True)}
for sdpa, b in res.items():
    print("torch %s step %.1f" % ("sdpa" if sdpa else "explicit-attention", b["step"] * 1e6))
b = min(res.values(), key=lambda r: r["step"])
print("gpt train step %.1f" % (b["step"] * 1e6))
print("gpt train step cpu %.1f" % (b["cpu"] * 1e6))
print("gpt forward+loss %.1f" % (b["fwd"] * 1e6))
print("gpt backward %.1f" % (b["bwd"] * 1e6))
print("gpt adamw step %.1f" % (b["opt"] * 1e6))
