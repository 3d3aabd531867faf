-- examples/vae.lua — a variational autoencoder on Fashion-MNIST (models/vae.lua, the recipe of PyTorch's
-- examples/vae) trained with lt.Trainer; after every epoch it writes PNG grids of reconstructions (test images
-- above, their reconstructions below) and of samples decoded from the prior, then reports the test loss.
--
--   ./lutra examples/vae.lua             10 epochs, batch 128, Adam lr 1e-3 (a couple of minutes on 2 cores)
--   ./lutra examples/vae.lua --fast      a 2000-image subset, 2 epochs: a few seconds
--
-- Options: --epochs N (10), --batch-size N (128), --seed N (0), --root DIR (the IDX files; default
-- /usr/share/datasets/fashion-mnist from `apt-get install dataset-fashion-mnist`), --out DIR (the images and
-- logs; default runs/vae), --fast. The test loss is per image: BCE summed over the 784 pixels + KL divergence,
-- averaged over the 10000 test images (what PyTorch's example prints; bench/vae_torch.py is its twin).
local repo = (arg and arg[0] or ""):match("^(.-)examples/[^/]*$")
if repo then package.path = repo .. "?.lua;" .. package.path end
local lt = require "lutra"

local USAGE = "usage: lutra examples/vae.lua [--epochs N] [--batch-size N] [--seed N] [--root DIR] [--out DIR] [--fast]"

local opts = require("examples.cli_args")(arg, USAGE,
  { epochs = "number", ["batch-size"] = "number", seed = "number", root = "string", out = "string" }, { fast = true },
  { ["batch-size"] = 128, seed = 0, out = "runs/vae" })
local epochs = opts.epochs or (opts.fast and 2 or 10)

lt.manual_seed(opts.seed)
local t0 = os.time()
local train = lt.data.FashionMNIST { train = true, root = opts.root, limit = opts.fast and 2000 or nil }
local test = lt.data.FashionMNIST { train = false, root = opts.root, limit = opts.fast and 500 or nil }
local bs = opts["batch-size"]
local train_loader = lt.data.DataLoader(train, { batch_size = bs, shuffle = true })
local test_loader = lt.data.DataLoader(test, { batch_size = bs })
print(string.format("Fashion-MNIST: %d train, %d test images; VAE 784-400-20, %d epochs, batch %d", #train, #test,
  epochs, bs))

local model = require("models.vae") { latent = 20, lr = 1e-3 }
os.execute("mkdir -p '" .. opts.out .. "'")

-- the same prior draws every epoch, so the sample grids show the decoder change
local z = lt.randn(64, 20)
local originals = test.data:narrow(1, 1, 8)

local function write_images(epoch)
  lt.no_grad(function()
    local recon = model:forward(originals):view(8, 1, 28, 28)
    lt.utils.save_image(lt.cat({ originals, recon }, 1), string.format("%s/reconstruction_%d.png", opts.out, epoch),
      { nrow = 8 })
    lt.utils.save_image(model:decode(z):view(64, 1, 28, 28), string.format("%s/sample_%d.png", opts.out, epoch))
  end)
end

local images = {
  on_train_epoch_end = function(_, trainer)
    local m = trainer.callback_metrics
    local e = trainer.current_epoch + 1 -- file names count epochs from 1, as PyTorch's example
    write_images(e)
    print(string.format("epoch %2d  train_loss %.2f  (%d s)  wrote %s/reconstruction_%d.png, sample_%d.png", e,
      m.train_loss or 0 / 0, os.time() - t0, opts.out, e, e))
    io.stdout:flush()
  end,
}

local trainer = lt.Trainer { max_epochs = epochs, callbacks = { images }, default_root_dir = opts.out,
  enable_checkpointing = false, enable_progress_bar = false }
trainer:fit(model, train_loader)
local results = trainer:test(model, test_loader)
print(string.format("test loss: %.4f per image after %d epochs, %d s", results[1].test_loss, trainer.current_epoch,
  os.time() - t0))
