#!/usr/bin/python3
"""bench/vae_torch.py -- PyTorch's twin of examples/vae.lua: the VAE of PyTorch's examples (examples/vae/main.py),
784-400-20 MLP encoder and decoder, reparameterisation, loss BCE(sum) + KLD, Adam lr 1e-3, batch 128, 10 epochs,
shuffled training set, PyTorch's default Linear init, on the same Fashion-MNIST IDX files (read with gzip + numpy, no
torchvision), images float32 / 255. Prints the test loss per image (the sum over the 10000 test images / 10000,
with z drawn as in training, as the example does) after each epoch.

  OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/vae_torch.py [--epochs 10] [--seed 0] [--threads 2]
"""
import argparse
import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # must be set before torch loads OpenMP

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from parity_fashion_mnist import read_idx  # noqa: E402  (this directory: the same IDX .gz reader)

ROOT = "/usr/share/datasets/fashion-mnist"


def images(split):
    return torch.from_numpy(read_idx(f"{ROOT}/{split}-images-idx3-ubyte.gz").astype("float32") / 255.0)


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 400)
        self.fc21 = nn.Linear(400, 20)
        self.fc22 = nn.Linear(400, 20)
        self.fc3 = nn.Linear(20, 400)
        self.fc4 = nn.Linear(400, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        return mu + torch.randn_like(std) * std

    def decode(self, z):
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z))))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        return self.decode(self.reparameterize(mu, logvar)), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    bce = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    train, test = images("train"), images("t10k")
    model = VAE()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    t0 = time.time()
    for epoch in range(1, args.epochs + 1):
        model.train()
        total = 0.0
        for idx in torch.randperm(len(train)).split(128):
            x = train[idx]
            opt.zero_grad()
            recon, mu, logvar = model(x)
            loss = loss_function(recon, x, mu, logvar)
            loss.backward()
            total += loss.item()
            opt.step()
        model.eval()
        test_loss = 0.0
        with torch.no_grad():
            for x in test.split(128):
                recon, mu, logvar = model(x)
                test_loss += loss_function(recon, x, mu, logvar).item()
        print(f"epoch {epoch:2d}  train_loss {total / len(train):.4f}  test_loss {test_loss / len(test):.4f}  "
              f"({time.time() - t0:.0f} s)", flush=True)
    print(f"test loss: {test_loss / len(test):.4f} per image after {args.epochs} epochs, seed {args.seed}")


if __name__ == "__main__":
    main()
