-- tensor/math.lua — round with decimals (torch.round's), over the core's round to integers.
local core = require "lutra.core"
local util = require "lutra.utils.check"
local A = require "lutra.tensor.args"
local methods = core.Tensor.methods

local M = {}
local int_arg, options = A.int_arg, A.options

local round_whole = methods.round -- the C kernel: to integers, halves to even

--- x:round([{decimals = 0}]): as torch.round: x * 10^decimals rounded (halves to even), then scaled back
function M.round(x, opts)
  opts = options("round", opts, { decimals = "number" })
  local d = opts.decimals and int_arg("round", "decimals", opts.decimals) or 0
  if d == 0 then return round_whole(x) end
  if d > 0 then return round_whole(x * 10 ^ d) / 10 ^ d end
  return round_whole(x / 10 ^ -d) * 10 ^ -d
end

A.register(M)
-- it replaces the C form it wraps
core.round = util.tensor_function("round", M.round)

return M
