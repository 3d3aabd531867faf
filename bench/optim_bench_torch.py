# optim_bench_torch.py — PyTorch side of bench/optim_bench.lua (same configs, output "name size microseconds").
# Run with OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/optim_bench_torch.py (BENCH_THREADS, default 2).
import os, time
import torch
if os.environ.get("BENCH_THREADS", "2") != "default":  # "default": PyTorch's own thread count
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
torch.manual_seed(0)
configs = [
    ("sgd", torch.optim.SGD, dict(lr=0.01)),
    ("sgd_momentum", torch.optim.SGD, dict(lr=0.01, momentum=0.9)),
    ("adam", torch.optim.Adam, dict(lr=1e-3)),
    ("adamw", torch.optim.AdamW, dict(lr=1e-3)),
    ("rmsprop", torch.optim.RMSprop, dict(lr=1e-2)),
    ("adagrad", torch.optim.Adagrad, dict(lr=1e-2)),
    ("adadelta", torch.optim.Adadelta, dict()),
    ("adamax", torch.optim.Adamax, dict()),
    ("nadam", torch.optim.NAdam, dict()),
    ("radam", torch.optim.RAdam, dict()),
    ("asgd", torch.optim.ASGD, dict()),
    ("zero_grad", torch.optim.SGD, dict(lr=0.01)),
]
for name, cls, opts, (r, c) in [(*cfg, size) for size in [(1000, 1000), (256, 784)] for cfg in configs]:
    p = torch.nn.Parameter(torch.randn(r, c))
    p.grad = torch.randn(r, c) * 0.01
    opt = cls([p], **opts)
    fn = (lambda: opt.zero_grad(set_to_none=False)) if name == "zero_grad" else opt.step
    for _ in range(5):
        fn()
    # steps per block, blocks (bench/run passes fewer: its rounds already repeat the process)
    n, times = int(os.environ.get("BENCH_STEPS", "50")), []
    for _ in range(int(os.environ.get("BENCH_ROUNDS", "9"))):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - t0) / n * 1e6)
    times.sort()  # best of the blocks: the least disturbed one (the machine is shared)
    print(f"{name} {r}x{c} {times[0]:.1f}")
