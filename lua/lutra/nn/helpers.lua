-- nn/helpers.lua — small pieces shared by the module files: option checking and parameter creation.
local lt = require "lutra"

local H = {}

--- Checks an options table: a table (or nil), only known names, each of the expected Lua type.
--- spec = { name = "number" | "boolean" | "table" | "number|table" | ... }
function H.check_opts(where, opts, spec, level)
  if opts == nil then return {} end
  if type(opts) ~= "table" then
    error(string.format("%s: options must be a table, got %s", where, type(opts)), (level or 2) + 1)
  end
  for k, v in pairs(opts) do
    local want = spec[k]
    if not want then
      local names = {}
      for n in pairs(spec) do names[#names + 1] = n end
      table.sort(names)
      error(string.format("%s: unknown option '%s' (expected one of: %s)", where, tostring(k), table.concat(names, ", ")),
        (level or 2) + 1)
    end
    local ok = false
    for ty in want:gmatch("[^|]+") do
      if ty == "tensor" then ok = ok or lt.is_tensor(v) else ok = ok or type(v) == ty end
    end
    if not ok then
      error(string.format("%s: option '%s' must be a %s, got %s", where, k, want:gsub("|", " or "), type(v)),
        (level or 2) + 1)
    end
  end
  return opts
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

function H.shape_str(shape)
  local parts = {}
  for i = 1, #shape do parts[i] = tostring(shape[i]) end
  return "[" .. table.concat(parts, " x ") .. "]"
end

return H
