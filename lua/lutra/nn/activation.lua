-- nn/activation.lua — ReLU([inplace]), LeakyReLU([negative_slope=0.01[, inplace]]), GELU({approximate="none"|"tanh"}),
-- Tanh, Sigmoid, Softmax(dim), LogSoftmax(dim) (dim 1-based; negative counts from the end). No parameters.
-- Arguments as PyTorch's, positionally or in an options table (lua/lutra/utils/signatures.lua).
local lt = require "lutra"
local H = require "lutra.nn.helpers"

local A = {}

local function simple(name, method, has_inplace)
  local cls = H.class(name)
  function cls:init(opts)
    opts = H.check_opts(name, opts, has_inplace and { inplace = "boolean" } or {}, 3)
    if has_inplace then self.inplace = opts.inplace == true end
  end
  if has_inplace then
    function cls:extra_repr() return self.inplace and "inplace=true" or "" end
  end
  function cls:forward(x)
    if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
    return H.inplace_result(self, x, x[method](x))
  end
  A[name] = cls
end
simple("ReLU", "relu", true)
simple("Tanh", "tanh")
simple("Sigmoid", "sigmoid")

-- GELU([{approximate = "none"|"tanh"}]): the exact form (erf) or its tanh approximation, as F.gelu
local GELU = H.class("GELU")
function GELU:init(opts)
  opts = H.check_opts("GELU", opts, { approximate = "string" }, 3)
  local a = opts.approximate or "none"
  if a ~= "none" and a ~= "tanh" then error("GELU: approximate must be \"none\" or \"tanh\", got \"" .. a .. "\"", 3) end
  self.approximate = a
end
function GELU:extra_repr() return self.approximate == "none" and "" or "approximate=" .. self.approximate end
function GELU:forward(x)
  if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
  if self.approximate == "tanh" then return require("lutra.F").gelu(x, { approximate = "tanh" }) end
  return x:gelu()
end
A.GELU = GELU

local LeakyReLU = H.class("LeakyReLU")
function LeakyReLU:init(opts)
  opts = H.check_opts("LeakyReLU", opts, { negative_slope = "number", inplace = "boolean" }, 3)
  self.negative_slope = H.check_finite("LeakyReLU", "negative_slope", opts.negative_slope or 0.01, nil, 3)
  self.inplace = opts.inplace == true
end
function LeakyReLU:extra_repr()
  return "negative_slope=" .. self.negative_slope .. (self.inplace and ", inplace=true" or "")
end
function LeakyReLU:forward(x)
  if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
  return H.inplace_result(self, x, x:leaky_relu(self.negative_slope))
end
A.LeakyReLU = LeakyReLU

local function softmax_like(name, method)
  local cls = H.class(name)
  function cls:init(dim)
    if type(dim) ~= "number" or dim ~= math.floor(dim) or dim == 0 then
      error(string.format("%s: dim must be a non-zero integer (1-based; negative counts from the end), got %s",
        name, tostring(dim)), 3)
    end
    self.dim = dim
  end
  function cls:extra_repr() return "dim=" .. self.dim end
  function cls:forward(x)
    if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
    local n = x:dim()
    if self.dim > n or -self.dim > n then
      self:fail(string.format("dim %d is out of range for an input of shape %s", self.dim, x:shape_str()))
    end
    return x[method](x, self.dim)
  end
  A[name] = cls
end
softmax_like("Softmax", "softmax")
softmax_like("LogSoftmax", "log_softmax")

return A
