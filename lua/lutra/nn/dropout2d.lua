-- nn/dropout2d.lua — Dropout2d(p=0.5) and Dropout3d(p=0.5): in training, zero whole channels (one draw per item and
-- channel from lt's RNG, so lt.manual_seed reproduces it) and scale the rest by 1/(1-p); in eval, the identity.
-- Inputs as PyTorch 1.13 takes them (lt.F.dropout2d/dropout3d, lua/lutra/F/vision.lua): Dropout2d [N, C, H, W] or
-- [N, C, L], other inputs of 2 dims or more with a warning; Dropout3d [N, C, D, H, W] or [C, D, H, W], others with a
-- warning.
local lt = require "lutra"
local F = require "lutra.F"
local H = require "lutra.nn.helpers"
local Dropout = require "lutra.nn.dropout"

local D = {}

-- p, inplace, their checks and the repr are Dropout's
local function channel_dropout(name, fn)
  local cls = H.class(name, Dropout)
  function cls:forward(x)
    if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
    local ok, y = pcall(fn, x, self.p, self.training)
    if not ok then self:fail((tostring(y):gsub("^[^\n]-:%d+: ", ""):gsub("^" .. name:lower() .. ": ", ""))) end
    return H.inplace_result(self, x, y)
  end
  D[name] = cls
end
channel_dropout("Dropout2d", F.dropout2d)
channel_dropout("Dropout3d", F.dropout3d)

return D
