#!/usr/bin/python3
"""bench/parity_fashion_mnist.py -- PyTorch's side of the parity check with bench/parity_fashion_mnist.lua.

The same recipes with a plain loop on the full Fashion-MNIST train set (60000 images), test accuracy on the
10000 test images, reading the same IDX .gz files with gzip + numpy (no torchvision):
  MLP 784-512-256-10, SGD lr 0.01 momentum 0.9, batch 64, 5 epochs
  LeNet-5 (conv 1->6 k5 pad2, relu, maxpool2, conv 6->16 k5, relu, maxpool2, 400-120-84-10), SGD lr 0.05
  momentum 0.9, batch 64, 5 epochs
Images float32 /255 (no normalisation), labels 0..9 here (lutra's are 1..10).

  OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/parity_fashion_mnist.py [--model mlp|lenet|both] [--epochs 5] [--seed 0]
"""
import argparse
import gzip
import os
import struct
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # must be set before torch loads OpenMP

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

ROOT = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    assert zero == 0 and dtype == 0x08, path
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(split):
    x = read_idx(f"{ROOT}/{split}-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    y = read_idx(f"{ROOT}/{split}-labels-idx1-ubyte.gz").astype(np.int64)
    return torch.from_numpy(x).unsqueeze(1), torch.from_numpy(y)


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def lenet():
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


RECIPES = {"mlp": (mlp, 0.01, 0.85), "lenet": (lenet, 0.05, 0.87)}


def accuracy(model, x, y):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), 1000):
            correct += (model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum().item()
    return correct / len(x)


def run(name, args, train, test):
    factory, lr, bar = RECIPES[name]
    torch.manual_seed(args.seed)
    model = factory()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    xtr, ytr = train
    t0 = time.time()
    acc = 0.0
    for epoch in range(1, args.epochs + 1):
        model.train()
        e0 = time.time()
        perm = torch.randperm(len(xtr))
        total, count = 0.0, 0
        for i in range(0, len(xtr), 64):
            idx = perm[i:i + 64]
            opt.zero_grad()
            loss = F.cross_entropy(model(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            total += loss.item()
            count += 1
        acc = accuracy(model, *test)
        print(f"{name:<5} epoch {epoch}  train_loss {total / count:.4f}  test_acc {acc:.4f}  ({time.time() - e0:.1f} s)",
              flush=True)
    print(f"{name:<5} PyTorch {torch.__version__} test accuracy after {args.epochs} epochs: {acc:.4f} "
          f"(bar {bar:.2f}); {time.time() - t0:.0f} s", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="both", choices=["mlp", "lenet", "both"])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    train, test = load("train"), load("t10k")
    for name in (["mlp", "lenet"] if args.model == "both" else [args.model]):
        run(name, args, train, test)


if __name__ == "__main__":
    main()
