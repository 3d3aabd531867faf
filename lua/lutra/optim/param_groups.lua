-- optim/util.lua — what every optimizer constructor shares: turning `params` (a list of tensors, a list
-- of param groups, or a module with :parameters()) into groups, and building the C optimizer object.
local core = require "lutra.core"

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

--- Builds an optimizer of `kind` (C object) with the options as defaults and the params as groups.
function M.build(kind, params, opts)
  if opts ~= nil and type(opts) ~= "table" then
    error(kind .. ": options must be a table, got " .. type(opts), 3)
  end
  local groups = M.param_groups(kind, params)
  local ok, opt = pcall(core._optim_new, kind, opts or {})
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
