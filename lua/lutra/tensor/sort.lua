-- tensor/sort.lua — sort and topk, composed of the core's argsort and top-k selection (values gathered at the
-- indices, so their gradients come with gather's). Tensor methods and lt.* functions, 1-based dims and indices.
local core = require "lutra.core"
local A = require "lutra.tensor.args"
local util = require "lutra.utils.check"

local M = {}
local int_arg, options, norm_dim = A.int_arg, A.options, A.norm_dim

--- x:sort([dim = -1][, {descending = false, stable = false}]) -> values, 1-based int64 indices (always stable)
function M.sort(x, dim, opts)
  if type(dim) == "table" then dim, opts = nil, dim end
  opts = options("sort", opts, { descending = "boolean", stable = "boolean" })
  local d = norm_dim("sort", dim or -1, x:dim())
  if x:dim() == 0 then return x:clone(), core.tensor(1, "int64") end
  -- (argsort's errors, a float64 input say, are named as sort's: "sort: argsort: float64 is not supported yet")
  local i = util.call_as("sort", x.argsort, x, d, { descending = opts.descending == true })
  return x:gather(d, i), i
end

--- x:topk(k[, dim = -1][, {largest = true, sorted = true}]) -> values, 1-based int64 indices
function M.topk(x, k, dim, opts)
  if type(dim) == "table" then dim, opts = nil, dim end
  opts = options("topk", opts, { largest = "boolean", sorted = "boolean" })
  int_arg("topk", "k", k, 0)
  local d = norm_dim("topk", dim or -1, math.max(x:dim(), 1))
  local n = x:dim() == 0 and 1 or x:size(d)
  if k > n then error(string.format("topk: k (%d) is larger than the size of dim %d (%d)", k, d, n), 2) end
  if x:dim() == 0 then return x:clone(), core.tensor(1, "int64") end
  -- the first k of the stable sort (ties give the lowest indices), found by selection
  local i = core._topk_indices(x, k, d, opts.largest ~= false)
  return x:gather(d, i), i
end

A.register(M)

return M
