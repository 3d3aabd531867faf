-- optim/adamw.lua — lt.optim.AdamW(params, opts): a C optimizer object with PyTorch 1.13's AdamW update
-- (see core/src/optim.c for the rule and lua/lutra/optim/init.lua for the options).
local util = require "lutra.optim.param_groups"

return function(params, opts)
  local opt = util.build("AdamW", params, opts)
  return opt
end
