-- nn/init.lua — lt.nn: layers as callable tables with PyTorch's layouts and default initialisation,
-- the Module base (lt.nn.Module:extend), and functions that work on any model table
-- (lt.nn.parameters(model), named_parameters, state_dict, load_state_dict, train, zero_grad).
--
--   local net = lt.nn.Sequential{ lt.nn.Linear(784, 512), lt.nn.ReLU(), lt.nn.Linear(512, 10) }
--   local loss = lt.F.cross_entropy(net(x), y)
local MM = require "lutra.nn.module"
local util = require "lutra.utils.check"

local nn = {
  Module = MM.Module,
  Linear = require "lutra.nn.linear",
  Conv2d = require("lutra.nn.conv").Conv2d,
  Dropout = require "lutra.nn.dropout",
  Flatten = require "lutra.nn.flatten",
  Sequential = require "lutra.nn.sequential",
}

for k, v in pairs(require "lutra.nn.pool") do nn[k] = v end
for k, v in pairs(require "lutra.nn.activation") do nn[k] = v end
for k, v in pairs(require "lutra.nn.loss") do nn[k] = v end
-- modules area: containers and more activations
for k, v in pairs(require "lutra.nn.containers") do nn[k] = v end
for k, v in pairs(require "lutra.nn.activation_variants") do nn[k] = v end

-- functions over any model table (a Module or a plain table of modules); the model is checked to be a table here
-- (as a method, m:parameters(), it always is)
local function model_function(name, f)
  return function(root, ...)
    util.check_arg(name, 1, root, "table")
    return f(root, ...)
  end
end
for _, k in ipairs { "parameters", "named_parameters", "buffers", "named_buffers", "state_dict", "state_dict_keys",
  "load_state_dict", "modules", "children", "train", "zero_grad", "assign_paths" } do
  nn[k] = model_function(k, MM[k])
end
nn.eval = model_function("eval", function(root) return MM.train(root, false) end)
nn.is_module = MM.is_module_instance
nn.isinstance = MM.isinstance
-- lightning: freezing and hyper-parameters on plain model tables (docs/reference/nn.md)
nn.requires_grad_ = model_function("requires_grad_", MM.requires_grad_)
nn.save_hyperparameters = model_function("save_hyperparameters", MM.save_hyperparameters)

-- more layers, utils and init load when first used
local lazy = {
  BatchNorm1d = { "lutra.nn.norm", "BatchNorm1d" }, BatchNorm2d = { "lutra.nn.norm", "BatchNorm2d" },
  LayerNorm = { "lutra.nn.norm", "LayerNorm" }, Embedding = { "lutra.nn.embedding" },
  utils = { "lutra.nn.utils" }, init = { "lutra.nn.initializers" },
  -- vision (lua/lutra/nn/conv.lua, conv_transpose.lua, pool.lua, pool_adaptive.lua, upsample.lua, group_norm.lua,
  -- dropout2d.lua, pixel_shuffle.lua)
  Conv1d = { "lutra.nn.conv", "Conv1d" }, ConvTranspose2d = { "lutra.nn.conv_transpose" },
  AdaptiveAvgPool2d = { "lutra.nn.pool_adaptive", "AdaptiveAvgPool2d" },
  AdaptiveMaxPool2d = { "lutra.nn.pool_adaptive", "AdaptiveMaxPool2d" },
  AdaptiveAvgPool1d = { "lutra.nn.pool_adaptive", "AdaptiveAvgPool1d" },
  AdaptiveMaxPool1d = { "lutra.nn.pool_adaptive", "AdaptiveMaxPool1d" },
  Upsample = { "lutra.nn.upsample", "Upsample" }, UpsamplingNearest2d = { "lutra.nn.upsample", "UpsamplingNearest2d" },
  UpsamplingBilinear2d = { "lutra.nn.upsample", "UpsamplingBilinear2d" },
  GroupNorm = { "lutra.nn.group_norm", "GroupNorm" }, InstanceNorm1d = { "lutra.nn.group_norm", "InstanceNorm1d" },
  InstanceNorm2d = { "lutra.nn.group_norm", "InstanceNorm2d" }, Dropout2d = { "lutra.nn.dropout2d", "Dropout2d" },
  Dropout3d = { "lutra.nn.dropout2d", "Dropout3d" },
  PixelShuffle = { "lutra.nn.pixel_shuffle", "PixelShuffle" },
  PixelUnshuffle = { "lutra.nn.pixel_shuffle", "PixelUnshuffle" },
  -- attention and transformer (nn/attention.lua, nn/transformer.lua)
  MultiheadAttention = { "lutra.nn.attention" },
  TransformerEncoderLayer = { "lutra.nn.transformer", "TransformerEncoderLayer" },
  TransformerEncoder = { "lutra.nn.transformer", "TransformerEncoder" },
  TransformerDecoderLayer = { "lutra.nn.transformer", "TransformerDecoderLayer" },
  TransformerDecoder = { "lutra.nn.transformer", "TransformerDecoder" },
  Transformer = { "lutra.nn.transformer", "Transformer" },
}
-- recurrent layers and cells (lutra/nn/rnn.lua)
for _, k in ipairs { "RNN", "GRU", "LSTM", "RNNCell", "GRUCell", "LSTMCell" } do lazy[k] = { "lutra.nn.rnn", k } end
return require("lutra.names").strict(nn, "lt.nn", lazy)
