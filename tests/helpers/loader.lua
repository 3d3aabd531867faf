-- tests/helpers/loader.lua — a plain Lua loader over a list of batches (a table with len() and iter(), the
-- loader protocol of docs/reference/data.md): what the loop specs train on, without lt.data.
local M = {}

--- The loader of `batches` (a list), in order, the same on every pass.
function M.of(batches)
  return {
    len = function() return #batches end,
    iter = function()
      local i = 0
      return function() i = i + 1; return batches[i] end
    end,
  }
end

--- n batches made by make(i).
function M.make(n, make)
  local batches = {}
  for i = 1, n do batches[i] = make(i) end
  return M.of(batches)
end

return M
