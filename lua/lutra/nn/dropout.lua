-- nn/dropout.lua — Dropout(p=0.5): in training, zeroes each element with probability p (mask from
-- lt's RNG, so lt.manual_seed reproduces it) and scales the rest by 1/(1-p); in eval, the identity.
local lt = require "lutra"
local Module = require("lutra.nn.module").Module
local F = require "lutra.F"

local Dropout = Module:extend("Dropout")

function Dropout:init(p)
  if type(p) == "table" then p = p.p end
  if p == nil then p = 0.5 end
  if type(p) ~= "number" or not (p >= 0 and p <= 1) then -- (NaN fails both comparisons)
    error(self.__name .. ": p must be a probability between 0 and 1, got " .. tostring(p), 3) -- (or a subclass's name)
  end
  self.p = p
end

function Dropout:extra_repr() return "p=" .. self.p end

function Dropout:forward(x)
  if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
  return F.dropout(x, self.p, self.training)
end

return Dropout
