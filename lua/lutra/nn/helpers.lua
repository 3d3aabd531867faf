-- nn/helpers.lua — small pieces shared by the module files: option checking and parameter creation.
local lt = require "lutra"
local util = require "lutra.utils.check"

local H = {}

--- Checks an options table: a table (or nil), only known names, each of the expected Lua type.
--- spec = { name = "number" | "boolean" | "table" | "number|table" | ... }
--- Checks an options table (lutra.utils.check.check_options); spec = { name = "number" | "boolean" | "number|table" | ... }.
--- A NaN number passes: the module's range checks say what is wrong with it.
function H.check_opts(where, opts, spec, level)
  -- not a tail call: Lua 5.1 counts a tail call as a level of its own, LuaJIT and 5.2+ do not
  local checked = util.check_options(where, opts, spec, (level or 2) + 1, true)
  return checked
end

function H.check_int(where, what, v, min, level)
  -- inf passes v == floor(v): the upper bound keeps it (and sizes C cannot hold) out
  if type(v) ~= "number" or v ~= math.floor(v) or v < (min or 1) or v > 2 ^ 31 - 1 then
    error(string.format("%s: %s must be an integer >= %d, got %s", where, what, min or 1, tostring(v)), (level or 2) + 1)
  end
  return v
end

--- A number or a {h, w} pair as two integers.
function H.pair(where, what, v, min)
  if type(v) == "table" then
    if #v ~= 2 then error(string.format("%s: %s must be a number or a {h, w} pair", where, what), 3) end
    return H.check_int(where, what, v[1], min, 2), H.check_int(where, what, v[2], min, 2)
  end
  H.check_int(where, what, v, min, 2)
  return v, v
end

--- A parameter tensor: created, initialised by init(t) with grad off, then marked requires_grad.
function H.param(shape, init)
  local t = lt.empty(shape)
  lt.no_grad(init, t)
  return t:requires_grad(true)
end

--- The state of a per-channel norm over C channels (BatchNorm*, InstanceNorm*): weight (ones) and bias (zeros)
--- when self.affine, running_mean (zeros), running_var (ones) and num_batches_tracked (0) when
--- self.track_running_stats.
function H.norm_state(self, C)
  if self.affine then
    self.weight = H.param({ C }, function(t) t:fill_(1) end)
    self.bias = H.param({ C }, function(t) t:zero_() end)
  end
  if self.track_running_stats then
    self.running_mean = lt.zeros(C)
    self.running_var = lt.ones(C)
    self.num_batches_tracked = lt.zeros({}, "int64")
  end
end

--- uniform(-bound, bound), bound = 1/sqrt(fan_in): PyTorch's default for biases (and, via
--- kaiming_uniform(a=sqrt(5)), for Linear and Conv weights).
function H.fan_in_uniform(fan_in)
  local bound = fan_in > 0 and 1 / math.sqrt(fan_in) or 0
  return function(t) t:uniform_(-bound, bound) end
end

--- A finite number (NaN and +-inf are errors naming the option): eps, momentum, slopes.
function H.check_finite(where, what, v, min, level)
  if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge or (min and v < min) then
    error(string.format("%s: %s must be a finite number%s, got %s", where, what, min and (" >= " .. min) or "",
      tostring(v)), (level or 2) + 1)
  end
  return v
end

H.shape_str = util.shape_str

return H
