-- optim/rmsprop.lua — lt.optim.RMSprop(params, opts): a C optimizer object with PyTorch 1.13's RMSprop update
-- (see core/src/optim.c for the rule and lua/lutra/optim/init.lua for the options).
local util = require "lutra.optim.param_groups"

return function(params, opts)
  local opt = util.build("RMSprop", params, opts)
  return opt
end
