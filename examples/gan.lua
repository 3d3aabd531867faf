-- examples/gan.lua — a generative adversarial network with two optimizers (Lightning 1.6's way): the
-- discriminator learns to tell real samples from generated ones, the generator learns to fool it.
--
-- configure_optimizers returns two {optimizer = ..., frequency = k} entries: each batch trains one of them,
-- the discriminator for `--critic` batches, then the generator for one, in turn. training_step receives the
-- optimizer's index; while it runs, only that optimizer's parameters require grad (the trainer's
-- toggle_optimizer), so the generator's loss computes no gradients for the discriminator.
--
-- The real data: points of a 2-D Gaussian centred at (2, -1) with standard deviation 0.5. The generator maps
-- 8-D noise to points; after training, its samples' mean and spread are printed next to the target's.
--
--   ./lutra examples/gan.lua [--epochs N] [--critic K] [--fast]
local lt = require "lutra"
local nn, F = lt.nn, lt.F

local epochs, critic, fast = 60, 2, false
do
  local i = 1
  while arg[i] do
    if arg[i] == "--fast" then fast = true; i = i + 1
    elseif arg[i] == "--epochs" and tonumber(arg[i + 1]) then epochs = tonumber(arg[i + 1]); i = i + 2
    elseif arg[i] == "--critic" and tonumber(arg[i + 1]) then critic = tonumber(arg[i + 1]); i = i + 2
    else io.stderr:write("usage: lutra examples/gan.lua [--epochs N] [--critic K] [--fast]\n"); os.exit(2) end
  end
end
if fast then epochs = 8 end

lt.manual_seed(0)
local MEAN, STD, NOISE = lt.tensor({ { 2, -1 } }), 0.5, 8
local real = lt.randn(4096, 2) * STD + MEAN
local loader = lt.data.DataLoader(lt.data.TensorDataset(real), { batch_size = 64, shuffle = true, drop_last = true })

local gan = {
  generator = nn.Sequential { nn.Linear(NOISE, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2) },
  discriminator = nn.Sequential { nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 32), nn.LeakyReLU(0.2),
    nn.Linear(32, 1) },
}

function gan:sample(n) return self.generator(lt.randn(n, NOISE)) end

-- optimizer 0: the discriminator (real -> 1, generated -> 0); optimizer 1: the generator (generated -> 1)
function gan:training_step(batch, _, optimizer_idx)
  local x = batch[1]
  local n = x:size(1)
  local ones, zeros = lt.ones(n, 1), lt.zeros(n, 1)
  if optimizer_idx == 0 then
    local fake = lt.no_grad(function() return self:sample(n) end)
    local loss = (F.binary_cross_entropy_with_logits(self.discriminator(x), ones)
      + F.binary_cross_entropy_with_logits(self.discriminator(fake), zeros)) * 0.5
    self:log("d_loss", loss, { prog_bar = true, on_step = false, on_epoch = true })
    return loss
  end
  local loss = F.binary_cross_entropy_with_logits(self.discriminator(self:sample(n)), ones)
  self:log("g_loss", loss, { prog_bar = true, on_step = false, on_epoch = true })
  return loss
end

function gan:configure_optimizers()
  local d = lt.optim.Adam(nn.parameters(self.discriminator), { lr = 2e-3, betas = { 0.5, 0.999 } })
  local g = lt.optim.Adam(nn.parameters(self.generator), { lr = 2e-3, betas = { 0.5, 0.999 } })
  return { { optimizer = d, frequency = critic }, { optimizer = g, frequency = 1 } }
end

local function describe_samples(label, x)
  local m, s = x:mean(1):totable(), x:std(1):totable()
  print(string.format("%-10s mean (%5.2f, %5.2f)  std (%4.2f, %4.2f)", label, m[1], m[2], s[1], s[2]))
  return m
end

local function distance(m) return math.sqrt((m[1] - 2) ^ 2 + (m[2] + 1) ^ 2) end

local before = lt.no_grad(function() return gan:sample(2048) end)
print(string.format("GAN on a 2-D Gaussian: %d real points, %d epochs, the discriminator trains %d batch(es) " ..
  "per generator batch", real:size(1), epochs, critic))
describe_samples("target", real)
local d0 = distance(describe_samples("untrained", before))

local trainer = lt.Trainer { max_epochs = epochs, logger = false, enable_checkpointing = false,
  enable_model_summary = false, enable_progress_bar = not fast }
trainer:fit(gan, loader)

local after = lt.no_grad(function() return gan:sample(2048) end)
local d1 = distance(describe_samples("generated", after))
print(string.format("distance of the generated mean to the target's: %.2f -> %.2f (%d optimizer steps)", d0, d1,
  trainer.global_step))
