-- F/args.lua — the arguments of the lt.F functions that take PyTorch's optional scalars and `inplace`
-- (the activations of F/activation.lua, F.dropout, F.dropout2d/3d): PyTorch's positional arguments in its order,
-- or one options table with PyTorch's names,
--
--   lt.F.elu(x, 1, true)   ==   lt.F.elu(x, {alpha = 1, inplace = true})
--
-- and what `inplace` does: the modules' rule (lua/lutra/nn/helpers.lua, inplace_result): the result is written
-- into x unless a gradient is being recorded for x, where the new tensor is returned (the values are PyTorch's
-- either way).
local lt = require "lutra"
local H = require "lutra.nn.helpers"
local unpack = require("lutra._compat").unpack
local util = require "lutra.utils.check"

local M = {}

-- "(x[, alpha[, inplace]])"
local function usage(spec)
  local s = "(x"
  for _, p in ipairs(spec) do s = s .. "[, " .. p[1] end
  return s .. string.rep("]", #spec) .. ")"
end

--- args(fname, spec, ...) -> the values of spec's arguments in order: spec = {{name, kind, default}, ...}; ...
--- the arguments after x, positional or one options table. Kinds: "number" (finite), "boolean", "probability"
--- (a number the op checks itself, with its own message). nil gives the default. Errors name fname and the
--- argument, at the caller of fname (level 3: call it from fname, not as a tail call).
function M.args(fname, spec, ...)
  local n = select("#", ...)
  local first = ...
  local v = {}
  if type(first) == "table" and not lt.is_tensor(first) then
    if n > 1 then error(fname .. ": options come as one table, got another argument after it", 3) end
    local kinds = {}
    for _, p in ipairs(spec) do kinds[p[1]] = p[2] == "probability" and "number" or p[2] end
    local o = H.check_opts(fname, first, kinds, 3)
    for i, p in ipairs(spec) do v[i] = o[p[1]] end
  else
    if n > #spec then error(fname .. ": takes " .. usage(spec) .. ", got " .. (n + 1) .. " arguments", 3) end
    for i = 1, n do v[i] = (select(i, ...)) end
  end
  for i, p in ipairs(spec) do
    if v[i] == nil then v[i] = p[3] end
    if p[2] == "number" then
      H.check_finite(fname, p[1], v[i], nil, 3)
    elseif p[2] == "boolean" and type(v[i]) ~= "boolean" then
      error(string.format("%s: %s must be a boolean, got %s", fname, p[1], type(v[i])), 3)
    end
  end
  return unpack(v, 1, #spec)
end

local INPLACE = { inplace = true }

--- result(inplace, x, y, fname): y, or y written into x when inplace (the modules' rule, above); an error of
--- the write (x an expand()ed view whose elements overlap, say) is named as fname's.
function M.result(inplace, x, y, fname)
  if not inplace then return y end
  return util.call_as(fname, H.inplace_result, INPLACE, x, y)
end

return M
