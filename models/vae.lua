-- models/vae.lua — the variational autoencoder of PyTorch's examples (examples/vae/main.py) for 28x28 images in
-- [0, 1], as a model table for lt.Trainer (docs/reference/hooks.md).
--
--   local vae = require("models.vae"){latent = 20, lr = 1e-3}
--   lt.Trainer{max_epochs = 10}:fit(vae, train_loader, val_loader)
--   local images = vae:decode(lt.randn(64, 20)):view(64, 1, 28, 28)      -- samples from the prior
--
-- Encoder 784-400 (ReLU) then two heads 400-20 (mu, logvar); decoder 20-400 (ReLU)-784 (sigmoid). Training draws
-- z = mu + eps * exp(logvar / 2) (the reparameterisation trick, eps ~ N(0, 1)); evaluation draws too, as the
-- PyTorch example does. The loss of a batch is summed over its images (PyTorch's recipe):
--   BCE(recon, x, reduction = "sum") + KLD,  KLD = -1/2 sum(1 + logvar - mu^2 - exp(logvar))
-- and the logged train_loss / val_loss / test_loss are per image (the sum over the data set divided by its size,
-- the number the PyTorch example prints). Optimizer: Adam(lr). Options (all optional): in_features=784,
-- hidden=400, latent=20, lr=1e-3.
local lt = require "lutra"
local nn, F = lt.nn, lt.F

local VAE = nn.Module:extend("VAE")

local OPTIONS = { in_features = "number", hidden = "number", latent = "number", lr = "number" }

function VAE:init(opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("models.vae: options must be a table, got " .. type(opts), 3) end
  for k, v in pairs(opts) do
    if not OPTIONS[k] then error(string.format("models.vae: unknown option '%s' (known options: hidden, " ..
      "in_features, latent, lr)", tostring(k)), 3) end
    if type(v) ~= "number" or v <= 0 or (k ~= "lr" and v ~= math.floor(v)) then
      error(string.format("models.vae: option '%s' must be a positive %s, got %s", k, k == "lr" and "number" or
        "integer", tostring(v)), 3)
    end
  end
  self.in_features, self.hidden = opts.in_features or 784, opts.hidden or 400
  self.latent, self.lr = opts.latent or 20, opts.lr or 1e-3
  -- PyTorch's names: fc1 (encoder), fc21 / fc22 (mu / logvar), fc3, fc4 (decoder)
  self.fc1 = nn.Linear(self.in_features, self.hidden)
  self.fc21 = nn.Linear(self.hidden, self.latent)
  self.fc22 = nn.Linear(self.hidden, self.latent)
  self.fc3 = nn.Linear(self.latent, self.hidden)
  self.fc4 = nn.Linear(self.hidden, self.in_features)
end

--- mu, logvar of x [N x ...] (flattened to [N x in_features])
function VAE:encode(x)
  local h = self.fc1(x:reshape(x:size(1), self.in_features)):relu()
  return self.fc21(h), self.fc22(h)
end

function VAE:reparameterize(mu, logvar)
  local std = (logvar * 0.5):exp()
  return mu + lt.randn_like(std) * std
end

--- the decoded images [N x in_features], in (0, 1)
function VAE:decode(z) return self.fc4(self.fc3(z):relu()):sigmoid() end

--- recon [N x in_features], mu, logvar
function VAE:forward(x)
  local mu, logvar = self:encode(x)
  return self:decode(self:reparameterize(mu, logvar)), mu, logvar
end

--- the loss summed over the batch: reconstruction BCE + KL divergence to N(0, 1)
function VAE.loss_function(recon, x, mu, logvar)
  local bce = F.binary_cross_entropy(recon, x:reshape(recon:size(1), recon:size(2)), { reduction = "sum" })
  local kld = ((logvar + 1) - mu:square() - logvar:exp()):sum() * -0.5
  return bce + kld
end

-- per-image means over the epoch, weighted by the batch sizes
local function log(self, name, value, n)
  local f = self.log
  if type(f) == "function" then f(self, name, value, { batch_size = n, on_step = false, on_epoch = true }) end
end

-- (the summed loss, the batch size)
function VAE:batch_loss(batch)
  local x = batch[1]
  local recon, mu, logvar = self:forward(x)
  return VAE.loss_function(recon, x, mu, logvar), x:size(1)
end

function VAE:training_step(batch)
  local loss, n = self:batch_loss(batch)
  log(self, "train_loss", loss:item() / n, n)
  return loss
end

function VAE:validation_step(batch)
  local loss, n = self:batch_loss(batch)
  log(self, "val_loss", loss:item() / n, n)
end

function VAE:test_step(batch)
  local loss, n = self:batch_loss(batch)
  log(self, "test_loss", loss:item() / n, n)
end

function VAE:configure_optimizers()
  return lt.optim.Adam(self:parameters(), { lr = self.lr })
end

return function(opts) return VAE(opts) end
