-- nn/pool_adaptive.lua — AdaptiveAvgPool2d(output_size), AdaptiveMaxPool2d(output_size[, {return_indices=false}])
-- on [N, C, H, W] or [C, H, W], and the 1-d forms on [N, C, L] or [C, L]: output_size is a number or an
-- {h, w} pair (a nil or false entry keeps that dim of the input, PyTorch's None); output cell i pools input
-- rows floor(i*H/h) .. ceil((i+1)*H/h) - 1 (PyTorch's windows).
-- With return_indices the max forms also return the 1-based flat positions of the maxima within each plane.
local lt = require "lutra"
local Module = require("lutra.nn.module").Module
local H = require "lutra.nn.helpers"
local F = require "lutra.F"
local FV = require "lutra.F.vision"

local function make(name, nsp, fn, is_max)
  local cls = Module:extend(name)
  function cls:init(size, opts)
    if type(size) == "table" and size.output_size ~= nil and opts == nil then opts, size = size, size.output_size end
    opts = H.check_opts(name, opts, is_max and { output_size = true, return_indices = "boolean" }
      or { output_size = true }, 3)
    self.output_size = nsp == 2 and FV._adaptive_size2(name, size) or FV._tuple(name, "output_size", size, nsp, 1)
    self.return_indices = is_max and opts.return_indices == true or nil
  end
  function cls:extra_repr()
    local t = {}
    for i, v in ipairs(self.output_size) do t[i] = v == false and "nil" or tostring(v) end -- nil: kept dim
    return "output_size=[" .. table.concat(t, " x ") .. "]"
  end
  local dims_text = nsp == 2 and "[batch x channels x height x width] (or [channels x height x width])"
    or "[batch x channels x length] (or [channels x length])"
  function cls:forward(x)
    if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
    local d = x:dim()
    if d ~= nsp + 2 and d ~= nsp + 1 then self:fail("input must be " .. dims_text .. ", got " .. x:shape_str()) end
    local size = nsp == 1 and self.output_size[1] or self.output_size
    if d == nsp + 1 then
      local y, i = fn(x:unsqueeze(1), size, self.return_indices)
      if i then return y:squeeze(1), i:squeeze(1) end
      return y:squeeze(1)
    end
    return fn(x, size, self.return_indices)
  end
  return cls
end

return {
  AdaptiveAvgPool2d = make("AdaptiveAvgPool2d", 2, F.adaptive_avg_pool2d, false),
  AdaptiveMaxPool2d = make("AdaptiveMaxPool2d", 2, F.adaptive_max_pool2d, true),
  AdaptiveAvgPool1d = make("AdaptiveAvgPool1d", 1, F.adaptive_avg_pool1d, false),
  AdaptiveMaxPool1d = make("AdaptiveMaxPool1d", 1, F.adaptive_max_pool1d, true),
}
