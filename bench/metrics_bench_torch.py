# metrics_bench_torch.py — PyTorch side of bench/metrics_bench.lua: the per-update cost of the counting that
# torchmetrics does (torchmetrics itself is not packaged in Debian; these are its update steps in torch ops:
# argmax/top-k, then bincount of target * C + pred). Output "name microseconds" (best of 9 rounds of 10000).
# Run with OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/metrics_bench_torch.py
import time
import torch
torch.set_num_threads(1)
torch.manual_seed(0)
N, C = 32, 10
scores, target = torch.randn(N, C), torch.randint(0, C, (N,))
bp, bt = torch.rand(N), torch.randint(0, 2, (N,))
state_cm = torch.zeros(C * C, dtype=torch.long)
state_tp = torch.zeros(C, dtype=torch.long)
state_fp = torch.zeros(C, dtype=torch.long)
state_bin = torch.zeros(4, dtype=torch.long)


def confmat():
    global state_cm
    state_cm += torch.bincount(target * C + scores.argmax(1), minlength=C * C)


def stat_scores():  # multiclass tp/fp per class, top_k = 1 (torchmetrics' _multiclass_stat_scores_update)
    global state_tp, state_fp
    p = scores.argmax(1)
    cm = torch.bincount(target * C + p, minlength=C * C).reshape(C, C)
    tp = cm.diag()
    state_tp += tp
    state_fp += cm.sum(0) - tp


def binary():
    global state_bin
    p = (bp > 0.5).long()
    state_bin += torch.bincount(bt * 2 + p, minlength=4)


for name, fn in (("confmat_C10_N32", confmat), ("stat_scores_C10_N32", stat_scores), ("binary_N32", binary)):
    for _ in range(100):
        fn()
    times = []
    for _ in range(9):
        t0 = time.perf_counter()
        for _ in range(10000):
            fn()
        times.append((time.perf_counter() - t0) / 10000 * 1e6)
    print("%s %.3f" % (name, min(times)))
