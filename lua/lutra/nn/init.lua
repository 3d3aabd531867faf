-- nn/init.lua — lt.nn: layers as callable tables with PyTorch's layouts and default initialisation,
-- the Module base (lt.nn.Module:extend), and functions that work on any model table
-- (lt.nn.parameters(model), named_parameters, state_dict, load_state_dict, train, zero_grad).
--
--   local net = lt.nn.Sequential{ lt.nn.Linear(784, 512), lt.nn.ReLU(), lt.nn.Linear(512, 10) }
--   local loss = lt.F.cross_entropy(net(x), y)
local MM = require "lutra.nn.module"

local nn = {
  Module = MM.Module,
  Linear = require "lutra.nn.linear",
  Conv2d = require "lutra.nn.conv",
  Dropout = require "lutra.nn.dropout",
  Flatten = require "lutra.nn.flatten",
  Sequential = require "lutra.nn.sequential",
}

for k, v in pairs(require "lutra.nn.pool") do nn[k] = v end
for k, v in pairs(require "lutra.nn.activation") do nn[k] = v end
for k, v in pairs(require "lutra.nn.loss") do nn[k] = v end
-- modules area (issue 17): containers and more activations
for k, v in pairs(require "lutra.nn.containers") do nn[k] = v end
for k, v in pairs(require "lutra.nn.activation_more") do nn[k] = v end

-- functions over any model table (a Module or a plain table of modules)
for _, k in ipairs { "parameters", "named_parameters", "buffers", "named_buffers", "state_dict", "state_dict_keys",
  "load_state_dict", "modules", "children", "train", "zero_grad", "assign_paths" } do
  nn[k] = MM[k]
end
function nn.eval(root) return MM.train(root, false) end
nn.is_module = MM.is_module_instance

-- more layers, utils and init load when first used
local lazy = {
  BatchNorm1d = { "lutra.nn.norm", "BatchNorm1d" }, BatchNorm2d = { "lutra.nn.norm", "BatchNorm2d" },
  LayerNorm = { "lutra.nn.norm", "LayerNorm" }, Embedding = { "lutra.nn.embedding" }, LSTM = { "lutra.nn.lstm" },
  utils = { "lutra.nn.utils" }, init = { "lutra.nn.initializers" },
}
return require("lutra.names").strict(nn, "lt.nn", lazy)
