-- examples/image_folder.lua — a folder of images, end to end: writes Fashion-MNIST out as PNG files, one folder per
-- class (the layout of a user's own image project), then trains a small CNN on that folder through
-- lt.vision.datasets.ImageFolder with augmentation, and reports the validation accuracy.
--
--   ./lutra examples/image_folder.lua                  600 training / 100 validation images a class, 4 epochs
--   ./lutra examples/image_folder.lua --fast           40 / 20 a class, 3 epochs: about 15 seconds
--
-- Options: --per-class N (training images a class), --val-per-class N, --epochs N, --batch-size N (64), --seed N (0),
-- --out DIR (default runs/image_folder: the images go to DIR/images/{train,val}/<class>/, logs to DIR), --fast.
--
-- The images are written as gray PNG files (lt.utils.save_image); the folder names start with the class number
-- ("03_Dress"), so ImageFolder's sorted classes give targets in Fashion-MNIST's order. Training draws a random
-- crop of the image padded by 2 pixels and a horizontal flip for each sample (lutra's generator: --seed repeats
-- the run).
local repo = (arg and arg[0] or ""):match("^(.-)examples/[^/]*$")
if repo then package.path = repo .. "?.lua;" .. package.path end
local lt = require "lutra"
local T = lt.vision.transforms

local USAGE = "usage: lutra examples/image_folder.lua [--per-class N] [--val-per-class N] [--epochs N] "
  .. "[--batch-size N] [--seed N] [--out DIR] [--fast]"
local opts = require("examples.cli_args")(arg, USAGE,
  { ["per-class"] = "number", ["val-per-class"] = "number", epochs = "number", ["batch-size"] = "number",
    seed = "number", out = "string" }, { fast = true },
  { ["batch-size"] = 64, seed = 0, out = "runs/image_folder" })
local per_class = opts["per-class"] or (opts.fast and 40 or 600)
local val_per_class = opts["val-per-class"] or (opts.fast and 20 or 100)
local epochs = opts.epochs or (opts.fast and 3 or 4)
lt.manual_seed(opts.seed)
local t0 = os.time()

-- 1. the image folder: the first per-class (+ val_per_class) images of each class of Fashion-MNIST's training set
local images = opts.out .. "/images"
local source = lt.data.FashionMNIST { train = true }
local names = {}
for i, c in ipairs(source.classes) do names[i] = string.format("%02d_%s", i - 1, (c:gsub("[^%w]+", "_"))) end
local count = {}
local written = 0
lt._io.mkdirs(images)
for i = 1, #source do
  local y = source.targets[i]:item()
  count[y] = (count[y] or 0) + 1
  local k = count[y]
  if k <= per_class + val_per_class then
    local split = k <= per_class and "train" or "val"
    local dir = images .. "/" .. split .. "/" .. names[y]
    if k == 1 or k == per_class + 1 then lt._io.mkdirs(dir) end
    lt.utils.save_image(source.data[i], string.format("%s/%05d.png", dir, i))
    written = written + 1
  end
  if written == (per_class + val_per_class) * #names then break end
end
print(string.format("wrote %d PNG files under %s/{train,val}/<class>/ (%d s)", written, images, os.time() - t0))

-- 2. the datasets: read back as 1-channel images; augmentation for training only
local normalize = T.Normalize({ 0.286 }, { 0.353 })
local train = lt.vision.datasets.ImageFolder(images .. "/train", { transform = T.Compose {
  T.Grayscale(), T.RandomCrop(28, { padding = 2 }), T.RandomHorizontalFlip(), T.ToTensor(), normalize } })
local val = lt.vision.datasets.ImageFolder(images .. "/val", { transform = T.Compose {
  T.Grayscale(), T.ToTensor(), normalize } })
print(string.format("ImageFolder: %d training, %d validation images, %d classes (%s ... %s)", #train, #val,
  #train.classes, train.classes[1], train.classes[#train.classes]))

-- 3. a small CNN (LeNet-5) trained on them
local model = require("models.lenet") { optimizer = "sgd", lr = 0.05, momentum = 0.9 }
local trainer = lt.Trainer { max_epochs = epochs, default_root_dir = opts.out, enable_progress_bar = false }
trainer:fit(model, lt.data.DataLoader(train, { batch_size = opts["batch-size"], shuffle = true }),
  lt.data.DataLoader(val, { batch_size = 200 }))
local m = trainer.callback_metrics
print(string.format("validation accuracy: %.4f (val_loss %.4f) after %d epochs, %d s", m.val_acc, m.val_loss,
  trainer.current_epoch, os.time() - t0))
