-- nn/pool.lua — MaxPool2d(k[, stride = k | {stride, padding, dilation=1, ceil_mode=false}]), AvgPool2d(k[,
-- stride | {stride, padding, ceil_mode=false, count_include_pad=true}]) on [N, C, H, W] or [C, H, W], and
-- MaxPool1d / AvgPool1d (the same options) on [N, C, L] or [C, L]. Ceil mode keeps a last, partial window
-- when it starts inside the input or its left padding (PyTorch's rule). No parameters.
local lt = require "lutra"
local Module = require("lutra.nn.module").Module
local H = require "lutra.nn.helpers"
local F = require "lutra.F"
local FV = require "lutra.F.vision"

local function make(name, nsp, fn, extra_opts)
  local cls = Module:extend(name)
  function cls:init(k, stride, opts)
    if type(stride) == "table" and stride[1] == nil then opts, stride = stride, nil end
    local spec = { stride = "number|table", padding = "number|table", ceil_mode = "boolean" }
    for k2, v in pairs(extra_opts) do spec[k2] = v end
    opts = H.check_opts(name, opts, spec, 3)
    if stride == nil then stride = opts.stride end
    self.kernel_size = FV._tuple(name, "kernel_size", k, nsp, 1)
    self.stride = stride ~= nil and FV._tuple(name, "stride", stride, nsp, 1) or self.kernel_size
    self.padding = FV._tuple(name, "padding", opts.padding or 0, nsp, 0)
    for i = 1, nsp do
      if 2 * self.padding[i] > self.kernel_size[i] then
        error(string.format("%s: padding %s must be at most half the kernel %s", name, H.shape_str(self.padding),
          H.shape_str(self.kernel_size)), 3)
      end
    end
    self.ceil_mode = opts.ceil_mode == true
    if extra_opts.dilation then self.dilation = FV._tuple(name, "dilation", opts.dilation or 1, nsp, 1) end
    if extra_opts.count_include_pad then self.count_include_pad = opts.count_include_pad ~= false end
  end
  function cls:extra_repr()
    local function p(t)
      return (#t == 1 or t[1] == t[2]) and tostring(t[1]) or ("(" .. t[1] .. ", " .. t[2] .. ")")
    end
    local s = "kernel_size=" .. p(self.kernel_size) .. ", stride=" .. p(self.stride)
    if p(self.padding) ~= "0" then s = s .. ", padding=" .. p(self.padding) end
    if self.dilation and p(self.dilation) ~= "1" then s = s .. ", dilation=" .. p(self.dilation) end
    if self.ceil_mode then s = s .. ", ceil_mode=true" end
    return s
  end
  local dims_text = nsp == 2 and "[batch x channels x height x width] (or [channels x height x width])"
    or "[batch x channels x length] (or [channels x length])"
  function cls:forward(x)
    if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
    local d = x:dim()
    if d ~= nsp + 2 and d ~= nsp + 1 then self:fail("input must be " .. dims_text .. ", got " .. x:shape_str()) end
    local extent = {} -- the window's reach: the kernel, dilated
    for i = 1, nsp do extent[i] = (self.dilation and self.dilation[i] or 1) * (self.kernel_size[i] - 1) + 1 end
    for i = 1, nsp do
      if x:size(d - nsp + i) + 2 * self.padding[i] < extent[i] then
        self:fail(string.format("input %s is smaller than the kernel %s", x:shape_str(), table.concat(extent, "x")))
      end
    end
    local opts = { stride = self.stride, padding = self.padding, ceil_mode = self.ceil_mode, dilation = self.dilation }
    if self.count_include_pad ~= nil then opts.count_include_pad = self.count_include_pad end
    if d == nsp + 1 then return fn(x:unsqueeze(1), self.kernel_size, opts):squeeze(1) end
    return fn(x, self.kernel_size, opts)
  end
  return cls
end

return {
  MaxPool2d = make("MaxPool2d", 2, F.max_pool2d, { dilation = "number|table" }),
  AvgPool2d = make("AvgPool2d", 2, F.avg_pool2d, { count_include_pad = "boolean" }),
  MaxPool1d = make("MaxPool1d", 1, F.max_pool1d, { dilation = "number|table" }),
  AvgPool1d = make("AvgPool1d", 1, F.avg_pool1d, { count_include_pad = "boolean" }),
}
