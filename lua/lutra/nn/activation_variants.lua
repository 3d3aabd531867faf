-- nn/activation_variants.lua — SiLU, ELU, Softplus, Mish, Hardtanh, Hardswish, Hardsigmoid, PReLU as modules
-- (the functional forms are lt.F.*, lua/lutra/F/activation.lua). Arguments as PyTorch's, positionally or by name in
-- one table (lua/lutra/utils/signatures.lua): ELU(0.5) == ELU{alpha = 0.5}; Hardtanh(-2, 2) == Hardtanh{min_val = -2,
-- max_val = 2}; inplace where PyTorch has it (SiLU(true), ELU(1, true)).
-- PReLU{num_parameters = 1, init = 0.25} (or PReLU(3, 0.1)) holds its slopes in `weight` (PyTorch's name and shape).
local lt = require "lutra"
local H = require "lutra.nn.helpers"
local FA = require "lutra.F.activation"

local A = {}

local function check_input(m, x)
  if not lt.is_tensor(x) then m:fail("expected a tensor input, got " .. type(x)) end
end

local function plain(name, fn)
  local cls = H.class(name)
  function cls:init(opts) self.inplace = H.check_opts(name, opts, { inplace = "boolean" }, 3).inplace == true end
  function cls:extra_repr() return self.inplace and "inplace=true" or "" end
  function cls:forward(x)
    check_input(self, x)
    return H.inplace_result(self, x, fn(x))
  end
  A[name] = cls
end
plain("SiLU", FA.silu)
plain("Mish", FA.mish)
plain("Hardswish", FA.hardswish)
plain("Hardsigmoid", FA.hardsigmoid)

-- a module with numeric options: names, defaults, the F function taking them in that order; has_inplace: PyTorch's
-- module takes inplace too
local function with_options(name, names, defaults, fn, check, has_inplace)
  local cls = H.class(name)
  local spec = { inplace = has_inplace and "boolean" or nil }
  for _, n in ipairs(names) do spec[n] = "number" end
  function cls:init(opts)
    local o = H.check_opts(name, opts, spec, 3)
    for i, n in ipairs(names) do
      local v = o[n]
      if v == nil then v = defaults[i] end
      self[n] = H.check_finite(name, n, v, nil, 3)
    end
    if has_inplace then self.inplace = o.inplace == true end
    if check then check(self) end
  end
  function cls:extra_repr()
    local parts = {}
    for i, n in ipairs(names) do parts[i] = n .. "=" .. self[n] end
    if self.inplace then parts[#parts + 1] = "inplace=true" end
    return table.concat(parts, ", ")
  end
  function cls:forward(x)
    check_input(self, x)
    if #names == 1 then return H.inplace_result(self, x, fn(x, self[names[1]])) end
    return H.inplace_result(self, x, fn(x, self[names[1]], self[names[2]]))
  end
  A[name] = cls
end
with_options("ELU", { "alpha" }, { 1 }, FA.elu, nil, true)
with_options("Softplus", { "beta", "threshold" }, { 1, 20 }, FA.softplus, function(m)
  if m.beta == 0 then error("Softplus: beta must not be 0", 4) end
end)
with_options("Hardtanh", { "min_val", "max_val" }, { -1, 1 }, FA.hardtanh, function(m)
  if m.min_val > m.max_val then
    error(string.format("Hardtanh: min_val %g must be less than or equal to max_val %g", m.min_val, m.max_val), 4)
  end
end, true)

local PReLU = H.class("PReLU")
PReLU._params = { "weight" }
function PReLU:init(opts)
  opts = H.check_opts("PReLU", opts, { num_parameters = "number", init = "number" }, 3)
  self.num_parameters = H.check_int("PReLU", "num_parameters", opts.num_parameters or 1, 1, 3)
  local init = H.check_finite("PReLU", "init", opts.init or 0.25, nil, 3)
  self.weight = H.param({ self.num_parameters }, function(t) t:fill_(init) end)
end
function PReLU:extra_repr() return "num_parameters=" .. self.num_parameters end
function PReLU:forward(x)
  check_input(self, x)
  local ok, r = pcall(FA.prelu, x, self.weight)
  if not ok then self:fail((tostring(r):gsub("^[^:]*:%d+: ", ""))) end
  return r
end
A.PReLU = PReLU

return A
