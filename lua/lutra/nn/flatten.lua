-- nn/flatten.lua — Flatten([start_dim=2[, end_dim=-1]]) (1-based, PyTorch's start_dim=1):
-- [N, C, H, W] -> [N, C*H*W]. A view when the layout allows, a copy otherwise.
local lt = require "lutra"
local H = require "lutra.nn.helpers"

local Flatten = H.class("Flatten")

function Flatten:init(start_dim, end_dim)
  self.start_dim, self.end_dim = start_dim or 2, end_dim or -1
end

function Flatten:extra_repr()
  if self.start_dim == 2 and self.end_dim == -1 then return "" end
  return "start_dim=" .. self.start_dim .. ", end_dim=" .. self.end_dim
end

function Flatten:forward(x)
  if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
  local n = x:dim()
  local s = self.start_dim < 0 and n + 1 + self.start_dim or self.start_dim
  local e = self.end_dim < 0 and n + 1 + self.end_dim or self.end_dim
  if n == 0 then return x:reshape(1) end
  if s < 1 or s > n or e < 1 or e > n or s > e then
    self:fail(string.format("dims %d..%d are out of range for an input of shape %s", self.start_dim, self.end_dim,
      x:shape_str()))
  end
  local shape, sz = x:shape(), {}
  for i = 1, s - 1 do sz[#sz + 1] = shape[i] end
  local m = 1
  for i = s, e do m = m * shape[i] end
  sz[#sz + 1] = m
  for i = e + 1, n do sz[#sz + 1] = shape[i] end
  return x:reshape(sz)
end

return Flatten
