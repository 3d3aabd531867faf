-- nn/dropout2d.lua — Dropout2d(p=0.5): in training, zeroes whole channels of [N, C, H, W] (one draw per item and
-- channel from lt's RNG, so lt.manual_seed reproduces it) and scales the rest by 1/(1-p); in eval, the identity.
-- A 3-D input is taken as [N, C, L], as PyTorch 1.13 does.
local lt = require "lutra"
local F = require "lutra.F"

-- p, its check and the repr are Dropout's
local Dropout2d = require("lutra.nn.dropout"):extend("Dropout2d")

function Dropout2d:forward(x)
  if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
  if x:dim() ~= 3 and x:dim() ~= 4 then
    self:fail("input must be [batch x channels x height x width] (or 3-D), got " .. x:shape_str())
  end
  return F.dropout2d(x, self.p, self.training)
end

return Dropout2d
