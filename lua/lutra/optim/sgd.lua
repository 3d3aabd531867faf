-- optim/sgd.lua — lt.optim.SGD(params[, lr[, ...]][, opts]): a C optimizer object with PyTorch 1.13's SGD update
-- (see core/src/optim.c for the rule and lua/lutra/optim/init.lua for the options).
local util = require "lutra.optim.param_groups"

return function(params, ...)
  local opt = util.build("SGD", params, ...)
  return opt
end
