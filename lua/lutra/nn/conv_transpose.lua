-- nn/conv_transpose.lua — ConvTranspose2d(cin, cout, k[, {stride=1, padding=0, output_padding=0, groups=1, bias=true,
-- dilation=1, padding_mode="zeros"}]): the adjoint of Conv2d (core/src/nn_conv_general.c). weight
-- [cin, cout/groups, kh, kw] and bias [cout] ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with PyTorch's fan_in =
-- cout/groups * kh * kw (the weight's second dim times the kernel). Input [N, Cin, H, W] or [Cin, H, W]; output
-- height (H - 1)*stride - 2*padding + dilation*(kh - 1) + output_padding + 1, the width likewise.
local lt = require "lutra"
local Module = require("lutra.nn.module").Module
local H = require "lutra.nn.helpers"
local F = require "lutra.F"
local FV = require "lutra.F.vision"

local ConvTranspose2d = Module:extend("ConvTranspose2d")
ConvTranspose2d._params = { "weight", "bias" }

function ConvTranspose2d:init(cin, cout, k, opts)
  local name = "ConvTranspose2d"
  H.check_int(name, "in_channels", cin, 1, 3)
  H.check_int(name, "out_channels", cout, 1, 3)
  opts = H.check_opts(name, opts, { stride = "number|table", padding = "number|table", output_padding = "number|table",
    groups = "number", bias = "boolean", dilation = "number|table", padding_mode = "string" }, 3)
  local groups = H.check_int(name, "groups", opts.groups or 1, 1, 3)
  if cin % groups ~= 0 then error(string.format("%s: in_channels %d must be divisible by groups %d", name, cin, groups), 3) end
  if cout % groups ~= 0 then
    error(string.format("%s: out_channels %d must be divisible by groups %d", name, cout, groups), 3)
  end
  if (opts.padding_mode or "zeros") ~= "zeros" then
    error(string.format('%s: only padding_mode "zeros" is supported (as in PyTorch), got "%s"', name, opts.padding_mode), 3)
  end
  self.in_channels, self.out_channels, self.groups = cin, cout, groups
  self.kernel_size = FV._tuple(name, "kernel_size", k, 2, 1)
  self.stride = FV._tuple(name, "stride", opts.stride or 1, 2, 1)
  self.padding = FV._tuple(name, "padding", opts.padding or 0, 2, 0)
  self.output_padding = FV._tuple(name, "output_padding", opts.output_padding or 0, 2, 0)
  self.dilation = FV._tuple(name, "dilation", opts.dilation or 1, 2, 1)
  for i = 1, 2 do
    if self.output_padding[i] >= self.stride[i] and self.output_padding[i] >= self.dilation[i] then
      error(string.format("%s: output_padding %s must be smaller than either stride %s or dilation %s", name,
        H.shape_str(self.output_padding), H.shape_str(self.stride), H.shape_str(self.dilation)), 3)
    end
  end
  local init = H.fan_in_uniform(cout / groups * self.kernel_size[1] * self.kernel_size[2])
  self.weight = H.param({ cin, cout / groups, self.kernel_size[1], self.kernel_size[2] }, init)
  if opts.bias ~= false then self.bias = H.param({ cout }, init) end
end

function ConvTranspose2d:extra_repr()
  local function t(v) return v[1] == v[2] and tostring(v[1]) or ("(" .. v[1] .. ", " .. v[2] .. ")") end
  local s = string.format("%d -> %d, kernel_size=%s, stride=%s", self.in_channels, self.out_channels,
    t(self.kernel_size), t(self.stride))
  if t(self.padding) ~= "0" then s = s .. ", padding=" .. t(self.padding) end
  if t(self.output_padding) ~= "0" then s = s .. ", output_padding=" .. t(self.output_padding) end
  if t(self.dilation) ~= "1" then s = s .. ", dilation=" .. t(self.dilation) end
  if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
  if not self.bias then s = s .. ", bias=false" end
  return s
end

--- output_padding for an output_size {h, w} (or {N, C, h, w}): the sizes a stride > 1 leaves open
function ConvTranspose2d:_output_padding(x, size)
  if type(size) ~= "table" or (#size ~= 2 and #size ~= 4) then
    self:fail("output_size must be a list {h, w} (or {N, C, h, w}), got " .. tostring(size))
  end
  local op, d = {}, x:dim()
  for i = 1, 2 do
    local want = size[#size - 2 + i]
    local lo = (x:size(d - 2 + i) - 1) * self.stride[i] - 2 * self.padding[i]
      + self.dilation[i] * (self.kernel_size[i] - 1) + 1
    local hi = lo + self.stride[i] - 1 -- (PyTorch's range, also when the dilation is larger)
    if type(want) ~= "number" or want < lo or want > hi or want ~= math.floor(want) then
      self:fail(string.format("requested output size %s is not in %d..%d for dim %d (input %s)", tostring(want), lo, hi,
        d - 2 + i, x:shape_str()))
    end
    op[i] = want - lo
  end
  return op
end

--- forward(x[, output_size]): output_size {h, w} picks the output_padding (PyTorch's forward(input, output_size))
function ConvTranspose2d:forward(x, output_size)
  if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
  local d = x:dim()
  if d ~= 4 and d ~= 3 then
    self:fail("input must be [batch x channels x height x width] (or [channels x height x width]), got " .. x:shape_str())
  end
  if x:size(d - 2) ~= self.in_channels then
    self:fail(string.format("input has %d channels, expected %d (input %s)", x:size(d - 2), self.in_channels,
      x:shape_str()))
  end
  local opts = { stride = self.stride, padding = self.padding, dilation = self.dilation, groups = self.groups,
    output_padding = output_size ~= nil and self:_output_padding(x, output_size) or self.output_padding }
  if d == 3 then return F.conv_transpose2d(x:unsqueeze(1), self.weight, self.bias, opts):squeeze(1) end
  return F.conv_transpose2d(x, self.weight, self.bias, opts)
end

return ConvTranspose2d
