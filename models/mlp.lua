-- models/mlp.lua — a multilayer perceptron classifier for 28x28 images (Fashion-MNIST, MNIST).
--
--   local model = require("models.mlp"){hidden = {512, 256}, lr = 0.01, momentum = 0.9}
--   lt.Trainer{max_epochs = 5}:fit(model, train_loader, val_loader)
--
-- Network: Flatten, then Linear + ReLU (+ Dropout when dropout > 0) per hidden size, then Linear to the
-- classes: 784-512-256-10 by default. Options (all optional): in_features=784, hidden={512, 256},
-- num_classes=10, dropout=0, and the optimizer options of models/classifier.lua: optimizer="sgd"|"adam"|
-- "adamw", lr=0.01, momentum=0.9, weight_decay=0, nesterov=false, scheduler=nil|"cosine"|"step"
-- (+ max_epochs, step_size, gamma). The model logs train_loss, val_loss, val_acc, test_loss, test_acc.
local lt = require "lutra"
local C = require "models.classifier"

local DEFAULTS = {
  in_features = 784, hidden = { 512, 256 }, num_classes = 10, dropout = 0,
  optimizer = "sgd", lr = 0.01, momentum = 0.9, weight_decay = 0,
}

return function(opts)
  local h = C.check_options("models.mlp", opts, { in_features = "number", hidden = "table" }, DEFAULTS)
  local nn = lt.nn
  local layers = { nn.Flatten() }
  local width = h.in_features
  for i, n in ipairs(h.hidden) do
    if type(n) ~= "number" or n < 1 or n ~= math.floor(n) then
      error(string.format("models.mlp: hidden[%d] must be a positive integer, got %s", i, tostring(n)), 2)
    end
    layers[#layers + 1] = nn.Linear(width, n)
    layers[#layers + 1] = nn.ReLU()
    if h.dropout > 0 then layers[#layers + 1] = nn.Dropout(h.dropout) end
    width = n
  end
  layers[#layers + 1] = nn.Linear(width, h.num_classes)
  return C.new { net = nn.Sequential(layers), hparams = h }
end
