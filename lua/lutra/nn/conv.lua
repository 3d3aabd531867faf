-- nn/conv.lua — Conv2d(cin, cout, k[, {stride=1, padding=0, bias=true}]), im2col + GEMM in C.
-- weight [cout, cin, kh, kw] and bias [cout] ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = cin*kh*kw
-- (PyTorch's kaiming_uniform(a=sqrt(5)) default). Input [N, C, H, W] or unbatched [C, H, W].
local lt = require "lutra"
local core = require "lutra.core"
local Module = require("lutra.nn.module").Module
local H = require "lutra.nn.helpers"

local Conv2d = Module:extend("Conv2d")
Conv2d._params = { "weight", "bias" }

function Conv2d:init(cin, cout, k, opts)
  H.check_int("Conv2d", "in_channels", cin, 1, 3)
  H.check_int("Conv2d", "out_channels", cout, 1, 3)
  opts = H.check_opts("Conv2d", opts, { stride = "number|table", padding = "number|table", bias = "boolean" }, 3)
  self.in_channels, self.out_channels = cin, cout
  self.kh, self.kw = H.pair("Conv2d", "kernel_size", k, 1)
  self.sh, self.sw = H.pair("Conv2d", "stride", opts.stride or 1, 1)
  self.ph, self.pw = H.pair("Conv2d", "padding", opts.padding or 0, 0)
  local init = H.fan_in_uniform(cin * self.kh * self.kw)
  self.weight = H.param({ cout, cin, self.kh, self.kw }, init)
  if opts.bias ~= false then self.bias = H.param({ cout }, init) end
end

local function pair_str(a, b) return a == b and tostring(a) or ("(" .. a .. ", " .. b .. ")") end

function Conv2d:extra_repr()
  local s = string.format("%d -> %d, kernel_size=%s", self.in_channels, self.out_channels, pair_str(self.kh, self.kw))
  if self.sh ~= 1 or self.sw ~= 1 then s = s .. ", stride=" .. pair_str(self.sh, self.sw) end
  if self.ph ~= 0 or self.pw ~= 0 then s = s .. ", padding=" .. pair_str(self.ph, self.pw) end
  if not self.bias then s = s .. ", bias=false" end
  return s
end

local function conv(self, x, act)
  if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
  local d = x:dim()
  if d ~= 4 and d ~= 3 then
    self:fail("input must be [batch x channels x height x width] (or [channels x height x width]), got " .. x:shape_str())
  end
  local c = x:size(d - 2)
  if c ~= self.in_channels then
    self:fail(string.format("input has %d channels, expected %d (input %s)", c, self.in_channels, x:shape_str()))
  end
  local h, w = x:size(d - 1), x:size(d)
  if h + 2 * self.ph < self.kh or w + 2 * self.pw < self.kw then
    self:fail(string.format("input %s is smaller than the kernel %dx%d (with padding %dx%d)", x:shape_str(),
      self.kh, self.kw, self.ph, self.pw))
  end
  if d == 3 then
    return core._nn.conv2d(x:unsqueeze(1), self.weight, self.bias, self.sh, self.sw, self.ph, self.pw, act):squeeze(1)
  end
  return core._nn.conv2d(x, self.weight, self.bias, self.sh, self.sw, self.ph, self.pw, act)
end

function Conv2d:forward(x) return conv(self, x, nil) end

--- relu(self:forward(x)) as one fused op (nn.Sequential calls it for a Conv2d followed by a ReLU).
function Conv2d:forward_relu(x) return conv(self, x, "relu") end

return Conv2d
