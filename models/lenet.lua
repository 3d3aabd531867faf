-- models/lenet.lua — LeNet-5 for 28x28 images (Fashion-MNIST, MNIST), as in the classic recipe:
--
--   conv 1->6 k5 pad 2, ReLU, max-pool 2      [N,1,28,28] -> [N,6,14,14]
--   conv 6->16 k5, ReLU, max-pool 2           -> [N,16,5,5]
--   flatten, 400->120, ReLU, 120->84, ReLU, 84->10
--
--   local model = require("models.lenet"){lr = 0.05, momentum = 0.9}
--
-- Options as models/mlp.lua's optimizer options (optimizer="sgd", lr=0.05, momentum=0.9, weight_decay=0,
-- nesterov, scheduler, max_epochs, step_size, gamma), num_classes=10 and dropout=0 (before the 120->84
-- and 84->10 layers when > 0). Logs train_loss, val_loss, val_acc, test_loss, test_acc.
local lt = require "lutra"
local C = require "models.classifier"

local DEFAULTS = { num_classes = 10, dropout = 0, optimizer = "sgd", lr = 0.05, momentum = 0.9, weight_decay = 0 }

return function(opts)
  local h = C.check_options("models.lenet", opts, {}, DEFAULTS)
  local nn = lt.nn
  local layers = {
    nn.Conv2d(1, 6, 5, { padding = 2 }), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(),
    nn.Linear(16 * 5 * 5, 120), nn.ReLU(),
  }
  if h.dropout > 0 then layers[#layers + 1] = nn.Dropout(h.dropout) end
  layers[#layers + 1] = nn.Linear(120, 84)
  layers[#layers + 1] = nn.ReLU()
  if h.dropout > 0 then layers[#layers + 1] = nn.Dropout(h.dropout) end
  layers[#layers + 1] = nn.Linear(84, h.num_classes)
  return C.new { net = nn.Sequential(layers), hparams = h }
end
