#!/usr/bin/python3
# bench/gpt_torch.py — the PyTorch 1.13 twin of examples/gpt.lua: the same text, split, windows (MINSTD
# offsets, seeds 1 and 2), model (bench/nanogpt_torch.py: nanoGPT's, tied lm_head, its init), AdamW
# (betas 0.9, 0.99, weight decay 0.1 on >= 2-dim tensors), warmup + cosine lr, gradient norm clipped at 1,
# steps and batch; it prints the same "validation loss X" line. The init differs (each framework's own RNG),
# so compare over seeds (--seed N), not one run against one run.
#   OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/gpt_torch.py [FILE] [--steps N] [--seed N] [--fast]
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nanogpt_torch import GPT, encode_text, lcg_offsets, lr_factor  # noqa: E402

opts = {"file": "/usr/share/games/fortunes/songs-poems", "steps": 1500, "batch-size": 16, "block-size": 64,
        "n-layer": 2, "n-head": 4, "n-embd": 128, "dropout": 0.0, "lr": 1e-3, "val-batches": 40, "seed": 0}
args = sys.argv[1:]
fast = False
i = 0
while i < len(args):
    a = args[i]
    if a == "--fast":
        fast = True
        i += 1
    elif a.startswith("--") and a[2:] in opts and i + 1 < len(args):
        opts[a[2:]] = float(args[i + 1])
        i += 2
    else:
        opts["file"] = a
        i += 1
if fast:
    opts.update({"steps": 40, "n-embd": 32, "n-layer": 1, "block-size": 32, "val-batches": 4})
for k in ("steps", "batch-size", "block-size", "n-layer", "n-head", "n-embd", "val-batches", "seed"):
    opts[k] = int(opts[k])

torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
with open(opts["file"], "rb") as f:
    text = f.read().decode("latin-1")
if fast:
    text = text[:20000]
T, B, steps = opts["block-size"], opts["batch-size"], opts["steps"]
chars, data = encode_text(text)
n_train = int(len(text) * 0.9)
train_data, val_data = data[:n_train], data[n_train:]
train_off = lcg_offsets(n_train, T, steps * B, 1)
val_off = lcg_offsets(len(val_data), T, opts["val-batches"] * B, 2)


def batch(d, offs):
    x = torch.stack([d[o:o + T] for o in offs])
    y = torch.stack([d[o + 1:o + T + 1] for o in offs])
    return x, y


torch.manual_seed(opts["seed"])
model = GPT(len(chars), block_size=T, n_layer=opts["n-layer"], n_head=opts["n-head"], n_embd=opts["n-embd"],
            dropout=opts["dropout"])
lr = opts["lr"]
warmup = min(100, steps // 10)
opt = model.configure_optimizers(0.1, lr, (0.9, 0.99))
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, lr, lr / 10, warmup, steps))
print("%s: %d characters, %d distinct; %d training steps of %d x %d, %d validation windows" % (
    opts["file"], len(text), len(chars), steps, B, T, len(val_off)))
t0 = time.time()
model.train()
for s in range(steps):
    x, y = batch(train_data, train_off[s * B:(s + 1) * B])
    _, loss = model(x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    if (s + 1) % 250 == 0:
        print("step %5d  train_loss %.4f  (%d s)" % (s + 1, loss.item(), time.time() - t0))
        sys.stdout.flush()
model.eval()
with torch.no_grad():
    losses = []
    for k in range(opts["val-batches"]):
        x, y = batch(val_data, val_off[k * B:(k + 1) * B])
        losses.append(model(x, y)[1].item())
print("validation loss %.4f (%d s)" % (sum(losses) / len(losses), time.time() - t0))
