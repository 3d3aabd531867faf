-- bench/parity_fashion_mnist.lua — lutra's side of the parity check with PyTorch (bench/parity_fashion_mnist.py):
-- the same recipes with a plain hand-written loop (no Trainer), on the full Fashion-MNIST train set (60000),
-- test accuracy on the 10000 test images.
--   MLP 784-512-256-10, SGD lr 0.01 momentum 0.9, batch 64, 5 epochs   (bar: >= 0.85; PyTorch 1.13: 0.861)
--   LeNet-5,            SGD lr 0.05 momentum 0.9, batch 64, 5 epochs   (bar: >= 0.87; PyTorch 1.13: 0.877-0.880)
--
--   ./lutra bench/parity_fashion_mnist.lua [--model mlp|lenet|both] [--epochs 5] [--seed 0] [--threads 2]
--
-- Measured here (test accuracy after 5 epochs; lutra | PyTorch 1.13 via bench/parity_fashion_mnist.py):
--   MLP   seed 0: 0.8730 | 0.8600
--   LeNet seed 0: 0.8843 | 0.8660      seed 1: 0.8817 | 0.8785
local lt = require "lutra"
local ffi = require "ffi"
ffi.cdef [[ typedef struct { long tv_sec; long tv_nsec; } lt_bench_timespec;
            int clock_gettime(int clk, lt_bench_timespec *ts); ]]
local function now()
  local ts = ffi.new("lt_bench_timespec")
  ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local args = { model = "both", epochs = 5, seed = 0, threads = 2 }
local i = 1
while arg and arg[i] do
  local k = arg[i]:match("^%-%-(.+)$")
  if not k or args[k] == nil or arg[i + 1] == nil then
    error("usage: parity_fashion_mnist.lua [--model mlp|lenet|both] [--epochs N] [--seed N] [--threads N]")
  end
  args[k] = tonumber(arg[i + 1]) or arg[i + 1]
  i = i + 2
end
if lt.set_num_threads then lt.set_num_threads(args.threads) end

local RECIPES = {
  mlp = { factory = "models.mlp", opts = { lr = 0.01, momentum = 0.9 }, bar = 0.85, torch = "0.861" },
  lenet = { factory = "models.lenet", opts = { lr = 0.05, momentum = 0.9 }, bar = 0.87, torch = "0.877-0.880" },
}

local train = lt.data.FashionMNIST { train = true }
local test = lt.data.FashionMNIST { train = false }

local function accuracy(model, loader)
  lt.nn.eval(model)
  local correct, n = 0, 0
  lt.no_grad(function()
    for batch in loader:iter() do
      correct = correct + model:forward(batch[1]):argmax(2):eq(batch[2]):sum():item()
      n = n + batch[1]:size(1)
    end
  end)
  return correct / n
end

local function run(name)
  local r = RECIPES[name]
  lt.manual_seed(args.seed)
  local model = require(r.factory)(r.opts)
  local opt = model:configure_optimizers()
  local loader = lt.data.DataLoader(train, { batch_size = 64, shuffle = true })
  local test_loader = lt.data.DataLoader(test, { batch_size = 1000 })
  local t0 = now()
  local wall = function() return now() - t0 end
  local acc
  for epoch = 1, args.epochs do
    lt.nn.train(model)
    local e0 = wall()
    local sum, count = 0, 0
    for batch in loader:iter() do
      opt:zero_grad()
      local loss = model:training_step(batch, count)
      loss:backward()
      opt:step()
      sum, count = sum + loss:item(), count + 1
    end
    acc = accuracy(model, test_loader)
    io.write(string.format("%-5s epoch %d  train_loss %.4f  test_acc %.4f  (%.1f s)\n", name, epoch, sum / count,
      acc, wall() - e0))
    io.flush()
  end
  io.write(string.format("%-5s lutra test accuracy after %d epochs: %.4f (bar %.2f; PyTorch 1.13: %s) %s; %.0f s\n",
    name, args.epochs, acc, r.bar, r.torch, acc >= r.bar and "PASS" or "FAIL", wall()))
  return acc
end

local names = args.model == "both" and { "mlp", "lenet" } or { args.model }
for _, n in ipairs(names) do
  if not RECIPES[n] then error("unknown model " .. tostring(n) .. " (mlp, lenet or both)") end
  run(n)
end
