-- nn/conv.lua — Conv2d(cin, cout, k[, opts]) and Conv1d(cin, cout, k[, opts]), opts {stride=1, padding=0 (a number,
-- a list, "same" or "valid"), dilation=1, groups=1, bias=true, padding_mode="zeros"|"reflect"|"replicate"|"circular"}.
-- weight [cout, cin/groups, kh, kw] (Conv1d: [cout, cin/groups, k]) and bias [cout] ~ U(-1/sqrt(fan_in),
-- 1/sqrt(fan_in)), fan_in = cin/groups * kernel elements (PyTorch's kaiming_uniform(a=sqrt(5)) default).
-- Input [N, C, H, W] or unbatched [C, H, W] (Conv1d: [N, C, L] or [C, L]). Dilation 1 with one group runs
-- nn_conv.c's tuned im2col + GEMM (fused with a following ReLU in nn.Sequential); the rest nn_conv_general.c.
local lt = require "lutra"
local Module = require("lutra.nn.module").Module
local H = require "lutra.nn.helpers"
local FV = require "lutra.F.vision"

local PADDING_MODES = { zeros = true, reflect = true, replicate = true, circular = true }

local function tuple_str(t)
  for i = 2, #t do if t[i] ~= t[1] then return "(" .. table.concat(t, ", ") .. ")" end end
  return tostring(t[1])
end

-- the constructor both classes share; nsp spatial dims
local function conv_init(self, name, nsp, cin, cout, k, opts)
  H.check_int(name, "in_channels", cin, 1, 4)
  H.check_int(name, "out_channels", cout, 1, 4)
  opts = H.check_opts(name, opts, { stride = "number|table", padding = "number|table|string", dilation = "number|table",
    groups = "number", bias = "boolean", padding_mode = "string" }, 4)
  local groups = H.check_int(name, "groups", opts.groups or 1, 1, 4)
  if cin % groups ~= 0 then error(string.format("%s: in_channels %d must be divisible by groups %d", name, cin, groups), 4) end
  if cout % groups ~= 0 then
    error(string.format("%s: out_channels %d must be divisible by groups %d", name, cout, groups), 4)
  end
  local mode = opts.padding_mode or "zeros"
  if not PADDING_MODES[mode] then
    error(string.format('%s: padding_mode must be "zeros", "reflect", "replicate" or "circular", got "%s"', name, mode), 4)
  end
  self.in_channels, self.out_channels, self.groups, self.padding_mode = cin, cout, groups, mode
  self.kernel_size = FV._tuple(name, "kernel_size", k, nsp, 1)
  self.stride = FV._tuple(name, "stride", opts.stride or 1, nsp, 1)
  self.dilation = FV._tuple(name, "dilation", opts.dilation or 1, nsp, 1)
  self.padding = type(opts.padding) == "string" and opts.padding or FV._tuple(name, "padding", opts.padding or 0, nsp, 0)
  -- resolved once: the checks of "same" (stride 1) and the per-side amounts
  self._conv = FV._conv_options(name, nsp, self.kernel_size, { stride = self.stride, padding = self.padding,
    dilation = self.dilation, groups = groups })
  local shape, fan_in = { cout, cin / groups }, cin / groups
  for i = 1, nsp do shape[#shape + 1] = self.kernel_size[i]; fan_in = fan_in * self.kernel_size[i] end
  local init = H.fan_in_uniform(fan_in)
  self.weight = H.param(shape, init)
  if opts.bias ~= false then self.bias = H.param({ cout }, init) end
end

local function conv_repr(self)
  local s = string.format("%d -> %d, kernel_size=%s", self.in_channels, self.out_channels, tuple_str(self.kernel_size))
  if tuple_str(self.stride) ~= "1" then s = s .. ", stride=" .. tuple_str(self.stride) end
  if type(self.padding) == "string" then s = s .. ", padding=" .. self.padding
  elseif tuple_str(self.padding) ~= "0" then s = s .. ", padding=" .. tuple_str(self.padding) end
  if tuple_str(self.dilation) ~= "1" then s = s .. ", dilation=" .. tuple_str(self.dilation) end
  if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
  if not self.bias then s = s .. ", bias=false" end
  if self.padding_mode ~= "zeros" then s = s .. ", padding_mode=" .. self.padding_mode end
  return s
end

-- x checked: a tensor of nsp + 2 (batched) or nsp + 1 dims with in_channels channels; returns whether batched
local function check_input(self, x, nsp, dims_text)
  if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
  local d = x:dim()
  if d ~= nsp + 2 and d ~= nsp + 1 then self:fail("input must be " .. dims_text .. ", got " .. x:shape_str()) end
  local c = x:size(d - nsp)
  if c ~= self.in_channels then
    self:fail(string.format("input has %d channels, expected %d (input %s)", c, self.in_channels, x:shape_str()))
  end
  for i = 1, nsp do
    local p = self._conv.pads[i]
    local n, ext = x:size(d - nsp + i), self.dilation[i] * (self.kernel_size[i] - 1) + 1
    if n + p[1] + p[2] < ext then
      self:fail(string.format("output size would be <= 0: input %s is smaller than the (dilated) kernel %s with "
        .. "padding %s", x:shape_str(), tuple_str(self.kernel_size), H.shape_str(self._conv.pads[i])))
    end
  end
  return d == nsp + 2
end

local Conv2d = Module:extend("Conv2d")
Conv2d._params = { "weight", "bias" }

function Conv2d:init(cin, cout, k, opts) conv_init(self, "Conv2d", 2, cin, cout, k, opts) end
Conv2d.extra_repr = conv_repr

local function conv2d(self, x, act)
  local batched = check_input(self, x, 2, "[batch x channels x height x width] (or [channels x height x width])")
  if not batched then x = x:unsqueeze(1) end
  local y = FV._conv2d_run("Conv2d", x, self.weight, self.bias, self._conv, self.padding_mode, act)
  if not batched then return y:squeeze(1) end
  return y
end

function Conv2d:forward(x) return conv2d(self, x, nil) end

--- relu(self:forward(x)) as one fused op (nn.Sequential calls it for a Conv2d followed by a ReLU).
function Conv2d:forward_relu(x) return conv2d(self, x, "relu") end

local Conv1d = Module:extend("Conv1d")
Conv1d._params = { "weight", "bias" }

function Conv1d:init(cin, cout, k, opts) conv_init(self, "Conv1d", 1, cin, cout, k, opts) end
Conv1d.extra_repr = conv_repr

function Conv1d:forward(x)
  local batched = check_input(self, x, 1, "[batch x channels x length] (or [channels x length])")
  if not batched then x = x:unsqueeze(1) end
  local o = self._conv
  local o2 = { stride = { 1, o.stride[1] }, dilation = { 1, o.dilation[1] }, groups = o.groups,
    pads = { { 0, 0 }, o.pads[1] } }
  local y = FV._conv2d_run("Conv1d", x:unsqueeze(3), self.weight:unsqueeze(3), self.bias, o2, self.padding_mode)
  y = y:squeeze(3)
  if not batched then return y:squeeze(1) end
  return y
end

return { Conv2d = Conv2d, Conv1d = Conv1d }
