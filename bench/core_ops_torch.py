# core_ops_torch.py — PyTorch side of bench/core_ops.lua (same ops, sizes, output format).
import os, sys, time
import torch
if os.environ.get("BENCH_THREADS", "2") != "default":  # "default": PyTorch's own thread count
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
torch.manual_seed(0)
ops = [
    ("add", lambda a, b, bias: a + b),
    ("mul_scalar", lambda a, b, bias: a * 2),
    ("relu", lambda a, b, bias: a.relu()),
    ("exp", lambda a, b, bias: a.exp()),
    ("sigmoid", lambda a, b, bias: a.sigmoid()),
    ("sum", lambda a, b, bias: a.sum()),
    ("sum_dim", lambda a, b, bias: a.sum(1)),
    ("softmax", lambda a, b, bias: a.softmax(1)),
    ("log_softmax", lambda a, b, bias: a.log_softmax(1)),
    ("tanh", lambda a, b, bias: a.tanh()),
    ("add_bias_row", lambda a, b, bias: a + bias),
]
for r, c in [(64, 16), (256, 512), (1024, 1024)]:
    a, b, bias = torch.randn(r, c), torch.randn(r, c), torch.randn(c)
    for name, fn in ops:
        n = max(20, int(2e7 / (r * c)))
        times = []
        for _ in range(7):
            t0 = time.perf_counter()
            for _ in range(n):
                fn(a, b, bias)
            times.append((time.perf_counter() - t0) / n * 1e6)
        times.sort()
        print(f"{name} {r}x{c} {times[len(times) // 2]:.3f}")

# ops that ported models lean on (attention masks, GELU, init), on [16, 4, 64, 64]
x = torch.randn(16, 4, 64, 64)
full_mask = torch.rand(16, 4, 64, 64) < 0.5
causal = (torch.ones(64, 64).tril() == 0).reshape(1, 1, 64, 64)
y = torch.randn(16, 4, 64, 64)
big = [
    ("masked_fill", lambda: x.masked_fill(full_mask, -1e9)),
    ("masked_fill_causal", lambda: x.masked_fill(causal, float("-inf"))),
    ("where", lambda: torch.where(full_mask, x, y)),
    ("randn", lambda: torch.randn(524288), "524288"),
    ("gelu", lambda: torch.nn.functional.gelu(x)),
    ("gelu_tanh", lambda: torch.nn.functional.gelu(x, approximate="tanh")),
    ("einsum_scores", lambda: torch.einsum("bhqd,bhkd->bhqk", x, y)),
]
for name, fn, *size in big:
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(20):
            fn()
        times.append((time.perf_counter() - t0) / 20 * 1e6)
    times.sort()
    print(f"{name} {size[0] if size else '16x4x64x64'} {times[len(times) // 2]:.3f}")
