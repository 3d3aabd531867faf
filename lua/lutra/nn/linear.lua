-- nn/linear.lua — Linear(in, out[, {bias=true}]): y = x W^T + b over the last dim, one fused GEMM.
-- weight [out, in] ~ kaiming_uniform(a=sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)); bias [out] the same.
local lt = require "lutra"
local H = require "lutra.nn.helpers"

local Linear = H.class("Linear")
Linear._params = { "weight", "bias" }

function Linear:init(in_features, out_features, opts)
  H.check_int("Linear", "in_features", in_features, 0, 3)
  H.check_int("Linear", "out_features", out_features, 0, 3)
  opts = H.check_opts("Linear", opts, { bias = "boolean" }, 3)
  self.in_features, self.out_features = in_features, out_features
  local init = H.fan_in_uniform(in_features)
  self.weight = H.param({ out_features, in_features }, init)
  if opts.bias ~= false then self.bias = H.param({ out_features }, init) end
end

function Linear:extra_repr()
  return self.in_features .. " -> " .. self.out_features .. (self.bias and "" or ", bias=false")
end

local function check_input(self, x)
  if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
  local d = x:dim()
  if d == 0 then self:fail("input is a 0-dim tensor, expected [... x " .. self.in_features .. "]") end
  local n = x:size(d)
  if n ~= self.in_features then
    self:fail(string.format("input has %d features, expected %d (input %s)", n, self.in_features, x:shape_str()))
  end
end

function Linear:forward(x)
  check_input(self, x)
  return lt.linear(x, self.weight, self.bias)
end

--- relu(self:forward(x)) as one fused op (nn.Sequential calls it for a Linear followed by a ReLU).
function Linear:forward_relu(x)
  check_input(self, x)
  return lt.linear(x, self.weight, self.bias, "relu")
end

--- gelu(self:forward(x)) as one fused op (GELU's exact form, or its tanh approximation with approximate =
--- "tanh"); nn.Sequential calls it for a Linear followed by a GELU.
function Linear:forward_gelu(x, approximate)
  check_input(self, x)
  return lt.linear(x, self.weight, self.bias, approximate == "tanh" and "gelu_tanh" or "gelu")
end

return Linear
