-- nn/initializers.lua — lt.nn.init: in-place initialisers with PyTorch's formulas, drawing from lt's
-- RNG (lt.manual_seed), with gradient recording off. Each returns the tensor.
--   lt.nn.init.kaiming_uniform_(w, {a = math.sqrt(5)})     lt.nn.init.xavier_uniform_(w)
--   lt.nn.init.zeros_(b)   ones_   constant_(t, v)   normal_(t, mean, std)   uniform_(t, a, b)
local lt = require "lutra"

local I = {}

--- fan_in, fan_out of a weight [out, in, k...]
function I.calculate_fan_in_and_fan_out(t)
  local d = t:dim()
  if d < 2 then
    error("init: fan in and fan out need a tensor with at least 2 dims, got " .. t:shape_str(), 3)
  end
  local rf = 1
  for i = 3, d do rf = rf * t:size(i) end
  return t:size(2) * rf, t:size(1) * rf
end

-- the gain of a nonlinearity; an unknown name is an error that blames the given stack level (the user's call)
local function gain(nonlinearity, param, level)
  nonlinearity = nonlinearity or "leaky_relu"
  if nonlinearity == "linear" or nonlinearity == "sigmoid" or nonlinearity:match("^conv") then return 1 end
  if nonlinearity == "tanh" then return 5 / 3 end
  if nonlinearity == "relu" then return math.sqrt(2) end
  if nonlinearity == "selu" then return 3 / 4 end
  if nonlinearity == "leaky_relu" then
    local slope = param or 0.01
    return math.sqrt(2 / (1 + slope * slope))
  end
  error("init: unsupported nonlinearity '" .. tostring(nonlinearity) .. "'", level)
end

function I.calculate_gain(nonlinearity, param)
  local g = gain(nonlinearity, param, 3) -- not a tail call: level 3 is the caller
  return g
end

local function inplace(t, fn)
  lt.no_grad(fn, t)
  return t
end

local function kaiming_args(t, a, mode, nonlinearity)
  if type(a) == "table" then a, mode, nonlinearity = a.a, a.mode, a.nonlinearity end
  a, mode, nonlinearity = a or 0, mode or "fan_in", nonlinearity or "leaky_relu"
  if mode ~= "fan_in" and mode ~= "fan_out" then
    error("init: mode must be \"fan_in\" or \"fan_out\", got " .. tostring(mode), 3)
  end
  local fi, fo = I.calculate_fan_in_and_fan_out(t)
  local fan = mode == "fan_in" and fi or fo
  return gain(nonlinearity, a, 4) / math.sqrt(fan) -- 4: gain, kaiming_args, kaiming_*_, the caller
end

--- kaiming_uniform_(t[, a=0[, mode="fan_in"[, nonlinearity="leaky_relu"]]]) or (t, {a, mode, nonlinearity})
function I.kaiming_uniform_(t, a, mode, nonlinearity)
  local bound = math.sqrt(3) * kaiming_args(t, a, mode, nonlinearity)
  return inplace(t, function(x) x:uniform_(-bound, bound) end)
end

function I.kaiming_normal_(t, a, mode, nonlinearity)
  local std = kaiming_args(t, a, mode, nonlinearity)
  return inplace(t, function(x) x:normal_(0, std) end)
end

function I.xavier_uniform_(t, g)
  local fi, fo = I.calculate_fan_in_and_fan_out(t)
  local bound = (g or 1) * math.sqrt(6 / (fi + fo))
  return inplace(t, function(x) x:uniform_(-bound, bound) end)
end

function I.xavier_normal_(t, g)
  local fi, fo = I.calculate_fan_in_and_fan_out(t)
  local std = (g or 1) * math.sqrt(2 / (fi + fo))
  return inplace(t, function(x) x:normal_(0, std) end)
end

function I.uniform_(t, a, b) return inplace(t, function(x) x:uniform_(a or 0, b or 1) end) end
function I.normal_(t, mean, std) return inplace(t, function(x) x:normal_(mean or 0, std or 1) end) end
function I.constant_(t, v) return inplace(t, function(x) x:fill_(v) end) end
function I.zeros_(t) return inplace(t, function(x) x:zero_() end) end
function I.ones_(t) return inplace(t, function(x) x:fill_(1) end) end

return require("lutra.names").strict(I, "lt.nn.init")
