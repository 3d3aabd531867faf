-- nn/upsample.lua — Upsample{size= | scale_factor=, mode="nearest"|"linear"|"bilinear", align_corners=}
-- (lt.F.interpolate of lua/lutra/F/utilities.lua as a module), and PyTorch's fixed forms UpsamplingNearest2d{size= |
-- scale_factor=} and UpsamplingBilinear2d{size= | scale_factor=} (bilinear with align_corners=true).
-- Input [N, C, L] (nearest, linear) or [N, C, H, W] (nearest, bilinear). No parameters.
local lt = require "lutra"
local Module = require("lutra.nn.module").Module
local H = require "lutra.nn.helpers"
local F = require "lutra.F"

local function make(name, fixed)
  local cls = Module:extend(name)
  function cls:init(opts)
    local spec = fixed and { size = "number|table", scale_factor = "number|table" }
      or { size = "number|table", scale_factor = "number|table", mode = "string", align_corners = "boolean" }
    opts = H.check_opts(name, opts, spec, 3)
    if (opts.size == nil) == (opts.scale_factor == nil) then
      error(name .. ": give exactly one of size and scale_factor", 3)
    end
    self.size, self.scale_factor = opts.size, opts.scale_factor
    self.mode = fixed and fixed.mode or opts.mode or "nearest"
    if fixed then self.align_corners = fixed.align_corners else self.align_corners = opts.align_corners end
    if self.mode ~= "nearest" and self.mode ~= "linear" and self.mode ~= "bilinear" then
      error(string.format('%s: mode must be "nearest", "linear" or "bilinear", got "%s"', name, self.mode), 3)
    end
    if self.mode == "nearest" and self.align_corners ~= nil then
      error(name .. ": align_corners is only for the linear modes", 3)
    end
  end
  function cls:extra_repr()
    local function v(x) return type(x) == "table" and H.shape_str(x) or tostring(x) end
    local s = self.size and ("size=" .. v(self.size)) or ("scale_factor=" .. v(self.scale_factor))
    s = s .. ", mode=" .. self.mode
    if self.align_corners ~= nil then s = s .. ", align_corners=" .. tostring(self.align_corners) end
    return s
  end
  function cls:forward(x)
    if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
    return F.interpolate(x, { size = self.size, scale_factor = self.scale_factor, mode = self.mode,
      align_corners = self.align_corners })
  end
  return cls
end

return {
  Upsample = make("Upsample"),
  UpsamplingNearest2d = make("UpsamplingNearest2d", { mode = "nearest" }),
  UpsamplingBilinear2d = make("UpsamplingBilinear2d", { mode = "bilinear", align_corners = true }),
}
