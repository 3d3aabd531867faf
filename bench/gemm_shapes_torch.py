# gemm_shapes_torch.py — PyTorch side of bench/gemm_shapes.lua (same shapes, rounds and output format).
import os
import time
import torch
if os.environ.get("BENCH_THREADS", "2") != "default":  # "default": PyTorch's own thread count
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
torch.manual_seed(0)
for m, n, k, label in [(32, 1024, 256, "lstm_step"), (64, 512, 784, "mlp_fc1"), (64, 256, 512, "mlp_fc2"),
                       (1024, 128, 128, "square_2d")]:
    a, w = torch.randn(m, k), torch.randn(n, k)
    wt = w.t()
    reps = max(20, int(4e8 / (m * n * k)))
    for _ in range(reps):
        torch.matmul(a, wt)
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(reps):
            torch.matmul(a, wt)
        times.append((time.perf_counter() - t0) / reps * 1e6)
    times.sort()
    print(f"matmul {label} {m}x{n}x{k} {times[len(times) // 2]:.3f}")
