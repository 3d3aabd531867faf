-- tensor/dtype.lua — PyTorch's x:to(...) for dtypes: x:to("float64"), x:to{dtype = "float64"}, x:to(other)
-- (other's dtype), x:to("cpu") (lutra runs on the CPU: x itself). The conversions are the core's
-- x:type(dtype); the same dtype returns x, as PyTorch's does.
local methods = require("lutra.core").Tensor.methods

local DEVICES = { cpu = true }
local ALIASES = { double = "float64", float = "float32", long = "int64" }

--- x:to(dtype | {dtype = ..., device = "cpu"} | other tensor | "cpu"): x in that dtype (x itself when it already is)
function methods.to(x, arg)
  local lt = require "lutra"
  local dtype
  if type(arg) == "string" then
    if DEVICES[arg] then return x end
    dtype = arg
  elseif lt.is_tensor(arg) then
    dtype = arg:dtype()
  elseif type(arg) == "table" then
    for k in pairs(arg) do
      if k ~= "dtype" and k ~= "device" then error("to: unknown option '" .. tostring(k) .. "' (known: dtype, device)", 2) end
    end
    if arg.device ~= nil and not DEVICES[arg.device] then
      error("to: device '" .. tostring(arg.device) .. "' is not available (lutra runs on \"cpu\")", 2)
    end
    dtype = arg.dtype
    if dtype == nil then return x end
  else
    error("to: expected a dtype, a device, {dtype = ...} or a tensor, got " .. type(arg), 2)
  end
  if (ALIASES[dtype] or dtype) == x:dtype() then return x end
  local ok, r = pcall(x.type, x, dtype)
  if not ok then error((tostring(r):gsub("^type:", "to:")), 2) end
  return r
end

return methods
