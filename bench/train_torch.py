# bench/train_torch.py — PyTorch's side of the training workloads of bench/run: the recipes of
# bench/train_lutra.lua line for line (same arguments, same "RESULT key=value ..." line).
#   /usr/bin/python3 bench/train_torch.py model=mlp|lenet|tiny batch=64 steps=400 [warmup=50] [ftz=0|1]
#       [threads=2|default] [data=fashion|random] [mode=speed|memory|dump|perf] [epochs=10] [out=FILE]
#       [perf=SECONDS] [seed=0]
# The environment (OMP_WAIT_POLICY, OPENBLAS_CORETYPE) is set by bench/run for each PyTorch setting.
# ftz defaults to 0: PyTorch does not flush denormals unless asked (torch.set_flush_denormal(True)).
import gzip
import os
import subprocess
import sys
import time

import numpy as np
import torch

o = dict(model="mlp", batch="64", steps="400", warmup="50", ftz="0", threads="2", data="fashion", mode="speed",
         epochs="10", seed="0", perf="3", out=None, loop="plain")
for a in sys.argv[1:]:
    k, _, v = a.partition("=")
    if k not in o or not _:
        sys.exit(f"train_torch: bad argument '{a}'")
    o[k] = v
B, steps, warmup = int(o["batch"]), int(o["steps"]), int(o["warmup"])


def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])


if o["threads"] != "default":
    torch.set_num_threads(int(o["threads"]))
torch.set_flush_denormal(o["ftz"] == "1")
torch.manual_seed(int(o["seed"]))
nn, F = torch.nn, torch.nn.functional

ROOT = "/usr/share/datasets/fashion-mnist"


def read_idx(name, offset, count):
    """count bytes after the header, read straight into one numpy buffer (no extra copies)"""
    a = np.empty(count, dtype=np.uint8)
    with gzip.open(os.path.join(ROOT, name)) as f:
        f.read(offset)
        f.readinto(memoryview(a))
    return a


if o["model"] == "tiny":
    N = 1024
    X = torch.randn(N, 10)
    Y = X.sum(1, keepdim=True) * 0.1 + torch.randn(N, 1) * 0.1
elif o["data"] == "fashion":
    X = torch.from_numpy(read_idx("train-images-idx3-ubyte.gz", 16, 60000 * 784)).view(-1, 1, 28, 28).float().div_(255)
    Y = torch.from_numpy(read_idx("train-labels-idx1-ubyte.gz", 8, 60000)).long()
    N = X.shape[0]
else:
    N = 60000
    X, Y = torch.rand(N, 1, 28, 28), torch.randint(0, 10, (N,))

if o["model"] == "mlp":
    X = X.view(N, 784)
    net = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))
elif o["model"] == "lenet":
    net = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
elif o["model"] == "tiny":
    net = nn.Sequential(nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 1))
else:
    sys.exit("train_torch: unknown model " + o["model"])
params = list(net.parameters())
opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
loss_fn = F.mse_loss if o["model"] == "tiny" else F.cross_entropy

state = {"perm": None, "pos": N}


def next_batch():
    if o["model"] == "tiny":
        if state["pos"] + B > N:
            state["pos"] = 0
        s = state["pos"]
        state["pos"] = s + B
        return X[s:s + B], Y[s:s + B]
    if state["pos"] + B > N:
        state["perm"], state["pos"] = torch.randperm(N), 0
    s = state["pos"]
    idx = state["perm"][s:s + B]
    state["pos"] = s + B
    return X.index_select(0, idx), Y.index_select(0, idx)


last = [None]


def step():
    xb, yb = next_batch()
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(net(xb), yb)
    loss.backward()
    opt.step()
    last[0] = loss


def result(t):
    t["peak_rss_kb"] = status("VmHWM")
    t["rss_kb"] = status("VmRSS")
    if last[0] is not None:
        t["loss"] = "%.5f" % last[0].item()
    print("RESULT " + " ".join(f"{k}={t[k]}" for k in sorted(t)))
    sys.stdout.flush()


mode = o["mode"]
if mode == "serve":
    # driven by bench/harness.py: "run N" -> "DONE seconds 0"; anything else (or EOF) -> RESULT
    for _ in range(warmup):
        step()
    print("READY", flush=True)
    for line in sys.stdin:
        parts = line.split()
        if len(parts) != 2 or parts[0] != "run":
            break
        t0 = time.perf_counter()
        for _ in range(int(parts[1])):
            step()
        print("DONE %.9f 0" % (time.perf_counter() - t0), flush=True)
    result({})
elif mode in ("speed", "perf"):
    for _ in range(warmup):
        step()
    if mode == "perf":
        secs = float(o["perf"])
        p = subprocess.Popen(["perf", "record", "-q", "-g", "-e", "cpu-clock", "-F", "2000", "-p", str(os.getpid()),
                              "-o", o["out"], "--", "sleep", str(secs)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t_end = time.perf_counter() + secs + 0.5
        n = 0
        t0 = time.perf_counter()
        while time.perf_counter() < t_end:
            step()
            n += 1
        dt = time.perf_counter() - t0
        p.wait()
        result({"step_us": "%.2f" % (dt / n * 1e6), "steps": n, "pid": os.getpid()})
    else:
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        dt = time.perf_counter() - t0
        result({"step_us": "%.2f" % (dt / steps * 1e6), "samples_per_s": "%.1f" % (steps * B / dt)})
elif mode == "memory":
    r = {}
    per_epoch = N // B
    t0 = time.perf_counter()
    for e in range(1, int(o["epochs"]) + 1):
        for _ in range(per_epoch):
            step()
        r[f"rss_epoch{e}_kb"] = status("VmRSS")
    r["samples_per_s"] = "%.1f" % (int(o["epochs"]) * per_epoch * B / (time.perf_counter() - t0))
    result(r)
elif mode == "dump":
    for _ in range(steps):
        step()
    with open(o["out"], "wb") as f:
        for p in params:
            f.write(p.detach().contiguous().numpy().astype(np.float32).tobytes())
    result({"steps": steps})
else:
    sys.exit("train_torch: unknown mode " + mode)
