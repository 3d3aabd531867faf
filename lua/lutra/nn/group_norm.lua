-- nn/group_norm.lua — GroupNorm(num_groups, num_channels[, {eps=1e-5, affine=true}]) and InstanceNorm1d/2d
-- (num_features[, {eps=1e-5, momentum=0.1, affine=false, track_running_stats=false}]), on core/src/nn_group_norm.c.
-- GroupNorm normalises each item over groups of num_channels/num_groups channels (and all positions); weight 1,
-- bias 0, one per channel. InstanceNorm normalises each (item, channel) over its positions; with
-- track_running_stats it keeps running_mean 0 / running_var 1 / num_batches_tracked buffers (PyTorch's names),
-- updated in training with the batch average of the instance statistics (unbiased variance), and eval
-- normalises with them.
local lt = require "lutra"
local H = require "lutra.nn.helpers"
local F = require "lutra.F"

local N = {}

local GroupNorm = H.class("GroupNorm")
GroupNorm._params = { "weight", "bias" }

function GroupNorm:init(groups, channels, opts)
  H.check_int("GroupNorm", "num_groups", groups, 1, 3)
  H.check_int("GroupNorm", "num_channels", channels, 1, 3)
  if channels % groups ~= 0 then
    error(string.format("GroupNorm: num_channels %d must be divisible by num_groups %d", channels, groups), 3)
  end
  opts = H.check_opts("GroupNorm", opts, { eps = "number", affine = "boolean" }, 3)
  self.num_groups, self.num_channels = groups, channels
  self.eps = H.check_finite("GroupNorm", "eps", opts.eps or 1e-5, 0, 3)
  self.affine = opts.affine ~= false
  if self.affine then
    self.weight = H.param({ channels }, function(t) t:fill_(1) end)
    self.bias = H.param({ channels }, function(t) t:zero_() end)
  end
end

function GroupNorm:extra_repr()
  -- (tostring: PUC 5.1's %s takes no boolean)
  return string.format("%d, %d, eps=%s, affine=%s", self.num_groups, self.num_channels, tostring(self.eps),
    tostring(self.affine))
end

function GroupNorm:forward(x)
  if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
  if x:dim() < 2 then self:fail("input must be [batch x channels x ...], got " .. x:shape_str()) end
  if x:size(2) ~= self.num_channels then
    self:fail(string.format("input has %d channels, expected %d (input %s)", x:size(2), self.num_channels,
      x:shape_str()))
  end
  return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)
end
N.GroupNorm = GroupNorm

local function instance_norm_class(name, nsp)
  local cls = H.class(name)
  cls._params = { "weight", "bias" }
  cls._buffers = { "running_mean", "running_var", "num_batches_tracked" }
  function cls:init(C, opts)
    H.check_int(name, "num_features", C, 1, 3)
    opts = H.check_opts(name, opts, { eps = "number", momentum = "number", affine = "boolean",
      track_running_stats = "boolean" }, 3)
    self.num_features = C
    self.eps = H.check_finite(name, "eps", opts.eps or 1e-5, 0, 3)
    self.momentum = H.check_finite(name, "momentum", opts.momentum or 0.1, nil, 3)
    self.affine = opts.affine == true
    self.track_running_stats = opts.track_running_stats == true
    H.norm_state(self, C)
  end
  function cls:extra_repr()
    local s = self.num_features .. ", eps=" .. self.eps .. ", momentum=" .. self.momentum
    if self.affine then s = s .. ", affine=true" end
    if self.track_running_stats then s = s .. ", track_running_stats=true" end
    return s
  end
  local batched_dims = nsp + 2
  local dims_text = nsp == 2 and "[batch x channels x height x width] (or [channels x height x width])"
    or "[batch x channels x length] (or [channels x length])"
  function cls:forward(x)
    if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
    local d = x:dim()
    if d ~= batched_dims and d ~= batched_dims - 1 then self:fail("input must be " .. dims_text .. ", got " .. x:shape_str()) end
    local c = x:size(d - nsp)
    if c ~= self.num_features then
      self:fail(string.format("input has %d channels, expected %d (input %s)", c, self.num_features, x:shape_str()))
    end
    local batched = d == batched_dims
    if not batched then x = x:unsqueeze(1) end
    local use_input = self.training or not self.track_running_stats
    local track = self.training and self.track_running_stats
    local y = F.instance_norm(x, { running_mean = (track or not use_input) and self.running_mean or nil,
      running_var = (track or not use_input) and self.running_var or nil, weight = self.weight, bias = self.bias,
      use_input_stats = use_input, momentum = self.momentum, eps = self.eps })
    if track then self.num_batches_tracked = self.num_batches_tracked + 1 end
    if not batched then return y:squeeze(1) end
    return y
  end
  return cls
end

N.InstanceNorm1d = instance_norm_class("InstanceNorm1d", 1)
N.InstanceNorm2d = instance_norm_class("InstanceNorm2d", 2)

return N
