-- nn/pool.lua — MaxPool2d(k[, stride = k | {stride, padding}]) and AvgPool2d(k[, stride | {stride, padding,
-- count_include_pad=true}]): floor mode, input [N, C, H, W] or [C, H, W]. No parameters.
local lt = require "lutra"
local Module = require("lutra.nn.module").Module
local H = require "lutra.nn.helpers"
local F = require "lutra.F"

local function make(name, fn, extra_opts)
  local cls = Module:extend(name)
  function cls:init(k, stride, opts)
    if type(stride) == "table" and stride[1] == nil then opts, stride = stride, nil end
    local spec = { stride = "number|table", padding = "number|table" }
    for k2, v in pairs(extra_opts) do spec[k2] = v end
    opts = H.check_opts(name, opts, spec, 3)
    if stride == nil then stride = opts.stride end
    self.kh, self.kw = H.pair(name, "kernel_size", k, 1)
    if stride ~= nil then self.sh, self.sw = H.pair(name, "stride", stride, 1) else self.sh, self.sw = self.kh, self.kw end
    self.ph, self.pw = H.pair(name, "padding", opts.padding or 0, 0)
    if 2 * self.ph > self.kh or 2 * self.pw > self.kw then
      error(string.format("%s: padding %dx%d must be at most half the kernel %dx%d", name, self.ph, self.pw,
        self.kh, self.kw), 3)
    end
    self.count_include_pad = opts.count_include_pad ~= false
  end
  function cls:extra_repr()
    local function p(a, b) return a == b and tostring(a) or ("(" .. a .. ", " .. b .. ")") end
    local s = "kernel_size=" .. p(self.kh, self.kw) .. ", stride=" .. p(self.sh, self.sw)
    if self.ph ~= 0 or self.pw ~= 0 then s = s .. ", padding=" .. p(self.ph, self.pw) end
    return s
  end
  function cls:forward(x)
    if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
    local d = x:dim()
    if d ~= 4 and d ~= 3 then
      self:fail("input must be [batch x channels x height x width] (or [channels x height x width]), got " .. x:shape_str())
    end
    if x:size(d - 1) + 2 * self.ph < self.kh or x:size(d) + 2 * self.pw < self.kw then
      self:fail(string.format("input %s is smaller than the kernel %dx%d", x:shape_str(), self.kh, self.kw))
    end
    local opts = { stride = { self.sh, self.sw }, padding = { self.ph, self.pw } }
    if name == "AvgPool2d" then opts.count_include_pad = self.count_include_pad end
    if d == 3 then return fn(x:unsqueeze(1), { self.kh, self.kw }, opts):squeeze(1) end
    return fn(x, { self.kh, self.kw }, opts)
  end
  return cls
end

return {
  MaxPool2d = make("MaxPool2d", F.max_pool2d, {}),
  AvgPool2d = make("AvgPool2d", F.avg_pool2d, { count_include_pad = "boolean" }),
}
