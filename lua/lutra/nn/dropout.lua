-- nn/dropout.lua — Dropout(p=0.5): in training, zeroes each element with probability p (mask from
-- lt's RNG, so lt.manual_seed reproduces it) and scales the rest by 1/(1-p); in eval, the identity.
local lt = require "lutra"
local F = require "lutra.F"
local H = require "lutra.nn.helpers"

local Dropout = H.class("Dropout")

-- Dropout([p = 0.5[, inplace = false]]) or Dropout{p =, inplace =}; Dropout2d and Dropout3d share it
function Dropout:init(opts)
  opts = H.check_opts(self.__name, opts, { p = true, inplace = "boolean" }, 3) -- (or a subclass's name)
  local p = opts.p
  if p == nil then p = 0.5 end
  if type(p) ~= "number" or not (p >= 0 and p <= 1) then -- (NaN fails both comparisons)
    error(self.__name .. ": p must be a probability between 0 and 1, got " .. tostring(p), 3)
  end
  self.p = p
  self.inplace = opts.inplace == true
end

function Dropout:extra_repr() return "p=" .. self.p .. (self.inplace and ", inplace=true" or "") end

function Dropout:forward(x)
  if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
  -- p = 0 or eval: the identity, x itself (as PyTorch's CPU dropout returns its input): no mask, no copy, no node
  if self.p == 0 or not self.training then return x end
  return H.inplace_result(self, x, F.dropout(x, self.p, self.training))
end

return Dropout
