-- tensor/args.lua — what the Lua tensor ops of this folder share: their argument checks (integers, option tables,
-- 1-based dims, size and dim lists; each error names the op and blames its caller), and how an op becomes both a
-- tensor method and an lt.* function.
local core = require "lutra.core"
local util = require "lutra.utils.check"
local methods = core.Tensor.methods

local A = {}

-- lo nil: any integer
function A.int_arg(fname, what, v, lo)
  if type(v) ~= "number" or v ~= math.floor(v) or math.abs(v) == math.huge or (lo and v < lo) then
    error(string.format("%s: %s must be an integer%s, got %s", fname, what, lo and " >= " .. lo or "", tostring(v)), 3)
  end
  return v
end

-- checks an options table: only the names in `known` (a {name = "type"} map) with values of those types
function A.options(fname, opts, known)
  if opts == nil then return {} end
  if type(opts) ~= "table" then error(fname .. ": options must be a table, got " .. type(opts), 3) end
  local names = {}
  for k in pairs(known) do names[#names + 1] = k end
  table.sort(names)
  for k, v in pairs(opts) do
    if known[k] == nil then
      error(string.format("%s: unknown option '%s' (known: %s)", fname, tostring(k), table.concat(names, ", ")), 3)
    end
    if type(v) ~= known[k] then
      error(string.format("%s: option %s must be a %s, got %s", fname, k, known[k], type(v)), 3)
    end
  end
  return opts
end

-- a 1-based dim (negative counts from the end) of a tensor with n dims, as a positive one
function A.norm_dim(fname, d, n) return util.check_dim(fname, d, n, 3) end

-- sizes given as varargs or as one table
function A.size_list(fname, ...)
  local s = select("#", ...) == 1 and type((...)) == "table" and (...) or { ... }
  for i = 1, #s do A.int_arg(fname, "size " .. i, s[i], 0) end
  return s
end

-- a list of distinct 1-based dims (or one number) of a tensor with n dims, as positive ones
function A.dim_list(fname, dims, n)
  if type(dims) == "number" then dims = { dims } end
  if type(dims) ~= "table" then
    error(fname .. ": dims must be a number or a list of numbers, got " .. type(dims), 3)
  end
  local seen, out = {}, {}
  for i = 1, #dims do
    local d = A.norm_dim(fname, dims[i], n)
    if seen[d] then error(string.format("%s: dim %d appears more than once in dims", fname, d), 3) end
    seen[d], out[i] = true, d
  end
  return out
end

--- Each function of M becomes the tensor method of its name and, unless lt already has that name, the lt.*
--- function (x checked to be a tensor; the names in `plain` check their arguments themselves).
function A.register(M, plain)
  plain = plain or {}
  for name, f in pairs(M) do
    methods[name] = f
    if rawget(core, name) == nil then core[name] = plain[name] and f or util.tensor_function(name, f) end
  end
end

return A
