-- nn/pixel_shuffle.lua — PixelShuffle(upscale_factor) and PixelUnshuffle(downscale_factor): lt.F.pixel_shuffle and
-- pixel_unshuffle (lua/lutra/F/utilities.lua) as modules; [... x C*r^2 x H x W] <-> [... x C x H*r x W*r]. No parameters.
--
--   local up = lt.nn.PixelShuffle(3)     -- super-resolution: [N, 9, 32, 32] -> [N, 1, 96, 96]
local lt = require "lutra"
local H = require "lutra.nn.helpers"
local F = require "lutra.F"

local P = {}

local function make(name, fname, field)
  local cls = H.class(name)
  function cls:init(r)
    self[field] = H.check_int(name, field, r, 1, 3)
  end
  function cls:extra_repr() return field .. "=" .. self[field] end
  function cls:forward(x)
    if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
    local ok, y = pcall(F[fname], x, self[field])
    if not ok then self:fail((tostring(y):gsub("^[^\n]-:%d+: ", ""))) end
    return y
  end
  P[name] = cls
end
make("PixelShuffle", "pixel_shuffle", "upscale_factor")
make("PixelUnshuffle", "pixel_unshuffle", "downscale_factor")

return P
