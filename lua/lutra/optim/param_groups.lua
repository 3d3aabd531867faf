-- optim/util.lua — what every optimizer constructor shares: turning `params` (a list of tensors, a list
-- of param groups, or a module with :parameters()) into groups, and building the C optimizer object.
local core = require "lutra.core"
local lutil = require "lutra.utils.check"
local SIGNATURES = require("lutra.utils.signatures").optim

local M = {}

local function describe(v)
  if core.is_tensor(v) then return "a tensor" end
  return "a " .. type(v)
end

--- Returns a list of group tables {params = {...}, <options>...} from what the user passed.
function M.param_groups(kind, params)
  if type(params) == "table" and not core.is_tensor(params) and type(params.parameters) == "function" then
    params = params:parameters()
  end
  if core.is_tensor(params) then
    error(kind .. ": params must be a list of tensors, a list of param groups or a module with :parameters(), "
      .. "got a tensor (wrap it in a list: {x})", 4)
  end
  if type(params) ~= "table" then
    error(kind .. ": params must be a list of tensors, a list of param groups or a module with :parameters(), got "
      .. type(params), 4)
  end
  if #params == 0 then error(kind .. ": optimizer got an empty parameter list", 4) end
  if core.is_tensor(params[1]) then
    for i = 1, #params do
      if not core.is_tensor(params[i]) then
        error(kind .. ": params[" .. i .. "] is " .. describe(params[i]) .. ", expected a tensor", 4)
      end
    end
    return { { params = params } }
  end
  for i = 1, #params do
    local g = params[i]
    if type(g) ~= "table" or core.is_tensor(g) or g.params == nil then
      error(kind .. ": params[" .. i .. "] is " .. describe(g)
        .. ", expected a param group {params = {...}, ...} (every entry must be of the same sort)", 4)
    end
  end
  return params
end

--- The options of `kind(params, ...)` given as PyTorch's: its positional hyper-parameters in PyTorch's order
--- (lua/lutra/utils/signatures.lua), then an options table (`SGD(params, 0.1, 0.9)`, `SGD(params, 0.1, {nesterov =
--- true})`, `SGD(params, {lr = 0.1})`), merged into one table (util.merge_positional). level: as error's, from the
--- constructor (2: its caller).
function M.options(kind, level, ...)
  return lutil.merge_positional(kind, SIGNATURES[kind], level + 1, ...)
end

--- Builds an optimizer of `kind` (C object) from the constructor's arguments after params (M.options): the options
--- are the defaults and the params the groups. Unknown options are named by the C reader.
function M.build(kind, params, ...)
  local opts = M.options(kind, 3, ...)
  local groups = M.param_groups(kind, params)
  local ok, opt = pcall(core._optim_new, kind, opts)
  if ok then
    ok, opt = pcall(function()
      for _, g in ipairs(groups) do opt:add_param_group(g) end
      return opt
    end)
  end
  if not ok then -- raise at the user's call site, not here
    error((tostring(opt):gsub("^[^\n]-optim/util%.lua:%d+: ", "")), 3)
  end
  return opt
end

return M
