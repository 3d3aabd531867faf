-- nn/norm.lua — BatchNorm1d(C), BatchNorm2d(C) ({eps=1e-5, momentum=0.1, affine=true,
-- track_running_stats=true}) and LayerNorm(normalized_shape[, {eps=1e-5, elementwise_affine=true, bias=true}])
-- (bias=false: a weight and no bias parameter, as PyTorch 2.x's LayerNorm(bias=False)).
-- BatchNorm: weight 1, bias 0, buffers running_mean 0, running_var 1 and num_batches_tracked 0 (int64, 0-dim, as
-- PyTorch's); training normalises with the batch statistics, counts the batch and updates the running ones in
-- place (unbiased variance) with factor momentum, or 1/num_batches_tracked (a cumulative average) when
-- momentum=false (PyTorch's momentum=None); eval uses the running ones. Files saved before num_batches_tracked
-- existed still load: the count then stays as it is.
local lt = require "lutra"
local core = require "lutra.core"
local H = require "lutra.nn.helpers"

local N = {}

local function batch_norm_class(name, dims_ok, dims_text)
  local cls = H.class(name)
  cls._params = { "weight", "bias" }
  cls._buffers = { "running_mean", "running_var", "num_batches_tracked" }
  cls._optional_buffers = { num_batches_tracked = true }
  function cls:init(C, opts)
    H.check_int(name, "num_features", C, 1, 3)
    opts = H.check_opts(name, opts, { eps = "number", momentum = "number|boolean", affine = "boolean",
      track_running_stats = "boolean" }, 3)
    self.num_features = C
    self.eps = H.check_finite(name, "eps", opts.eps or 1e-5, 0, 3)
    if opts.momentum == true then
      error(name .. ": momentum must be a number, or false for a cumulative average (PyTorch's None), got true", 3)
    elseif opts.momentum == false then
      self.momentum = false
    else
      self.momentum = H.check_finite(name, "momentum", opts.momentum or 0.1, nil, 3)
    end
    self.affine = opts.affine ~= false
    self.track_running_stats = opts.track_running_stats ~= false
    H.norm_state(self, C)
  end
  function cls:extra_repr()
    local s = self.num_features .. ", eps=" .. self.eps .. ", momentum=" .. (self.momentum or "None")
    if not self.affine then s = s .. ", affine=false" end
    if not self.track_running_stats then s = s .. ", track_running_stats=false" end
    return s
  end
  function cls:forward(x)
    if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
    if not dims_ok[x:dim()] then self:fail("input must be " .. dims_text .. ", got " .. x:shape_str()) end
    if x:size(2) ~= self.num_features then
      self:fail(string.format("input has %d channels, expected %d (input %s)", x:size(2), self.num_features,
        x:shape_str()))
    end
    local use_batch = self.training or not self.track_running_stats
    local factor = self.momentum or 0
    local count = self.num_batches_tracked
    if self.training and self.track_running_stats and count then
      count:add_(1)
      if not self.momentum then factor = 1 / count:item() end
    end
    return core._nn.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, use_batch,
      factor, self.eps)
  end
  return cls
end

N.BatchNorm1d = batch_norm_class("BatchNorm1d", { [2] = true, [3] = true }, "[batch x channels] or [batch x channels x length]")
N.BatchNorm2d = batch_norm_class("BatchNorm2d", { [4] = true }, "[batch x channels x height x width]")

local LayerNorm = H.class("LayerNorm")
LayerNorm._params = { "weight", "bias" }

function LayerNorm:init(shape, opts)
  if type(shape) == "number" then shape = { shape } end
  if type(shape) ~= "table" or #shape == 0 then
    error("LayerNorm: normalized_shape must be a number or a list of sizes, got " .. tostring(shape), 3)
  end
  local copy = {}
  for i, s in ipairs(shape) do copy[i] = H.check_int("LayerNorm", "normalized_shape", s, 1, 3) end
  opts = H.check_opts("LayerNorm", opts, { eps = "number", elementwise_affine = "boolean", bias = "boolean" }, 3)
  self.normalized_shape = copy
  self.eps = H.check_finite("LayerNorm", "eps", opts.eps or 1e-5, 0, 3)
  self.elementwise_affine = opts.elementwise_affine ~= false
  self.has_bias = self.elementwise_affine and opts.bias ~= false
  if self.elementwise_affine then self.weight = H.param(copy, function(t) t:fill_(1) end) end
  if self.has_bias then self.bias = H.param(copy, function(t) t:zero_() end) end
end

function LayerNorm:extra_repr()
  local s = H.shape_str(self.normalized_shape) .. ", eps=" .. self.eps
  if not self.elementwise_affine then s = s .. ", elementwise_affine=false"
  elseif not self.has_bias then s = s .. ", bias=false" end
  return s
end

function LayerNorm:forward(x)
  if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
  local k, n, shape = #self.normalized_shape, x:dim(), x:shape()
  local ok = n >= k
  for i = 1, k do ok = ok and shape[n - k + i] == self.normalized_shape[i] end
  if not ok then
    self:fail(string.format("input %s does not end with the normalized shape %s", x:shape_str(),
      H.shape_str(self.normalized_shape)))
  end
  return core._nn.layer_norm(x, k, self.weight, self.bias, self.eps)
end
N.LayerNorm = LayerNorm

return N
