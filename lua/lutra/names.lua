-- names.lua — namespaces that say so when a name does not exist. `lt.optim.Adadlta` raises
-- "lt.optim has no 'Adadlta' (did you mean 'Adadelta'?)" instead of returning nil for a later bare
-- "attempt to call a nil value". The nearest-name search is the C core's (core/bind/l_names.c), shared with
-- the tensor methods' error.
--
--   local names = require "lutra.names"
--   names.strict(M, "lt.optim", { lr_scheduler = "lutra.optim.lr_scheduler" })  -- lazy submodules
--   if names.has(lt, "embedded") then ... end                                 -- a feature check
--
-- Names starting with '_' stay nil when missing (private fields, feature checks). Code inside lutra that asks
-- whether an optional name exists uses names.has or rawget, never plain indexing.
local core = require "lutra.core"

local M = {}

--- require(name), except that a module that failed to load fails the same way the next time: Lua 5.1
--- leaves a sentinel in package.loaded, and every later require would say only "loop or previous error
--- loading module", hiding the real cause.
function M.require_module(name)
  local ok, m = pcall(require, name)
  if ok then return m end
  package.loaded[name] = nil
  error(m, 0)
end

-- lazy: name -> "module" (the module is the value) or {"module", "field"} (a field of it).
local function load_lazy(where)
  if type(where) == "string" then return M.require_module(where) end
  local m = M.require_module(where[1])
  if where[2] then m = m[where[2]] end
  return m
end

-- The error text (kept out of strict's closure, whose table upvalues tests/docs_spec.lua reads as lazy names).
local function missing(ns, k, tbl, lazy) return core._missing_name(ns, k, tbl, lazy) end

--- Makes t raise on a missing public name; lazy names load on first use and are then stored in t.
function M.strict(t, ns, lazy)
  lazy = lazy or {}
  return setmetatable(t, {
    __index = function(tbl, k)
      local where = lazy[k]
      if where ~= nil then
        local v = load_lazy(where)
        rawset(tbl, k, v)
        return v
      end
      if type(k) ~= "string" or k:sub(1, 1) == "_" then return nil end
      error(missing(ns, k, tbl, lazy), 2)
    end,
    __lutra_lazy = lazy,
  })
end

--- Whether t (a strict namespace or any table) has the name k, loaded or lazy; never raises.
function M.has(t, k)
  if rawget(t, k) ~= nil then return true end
  local mt = getmetatable(t)
  return type(mt) == "table" and type(rawget(mt, "__lutra_lazy")) == "table" and mt.__lutra_lazy[k] ~= nil
end

return M
