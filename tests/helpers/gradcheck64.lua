-- tests/helpers/gradcheck64.lua — central differences of L = sum(f(inputs) * r) in float64 against autograd, for
-- every float64 input (others pass through). h = 1e-6, agreement to 1e-7 relative (or absolute below 1).
--
--   local gradcheck64 = require "tests.helpers.gradcheck64"
--   gradcheck64(function(p) return lt.atan2(p[1], p[2]) end, { y, x }, r)   -- r: a tensor of f's output shape
local lt = require "lutra"

return function(f, inputs, r)
  local leaves = {}
  for i, x in ipairs(inputs) do
    leaves[i] = x:dtype() == "float64" and x:clone():requires_grad(true) or x
  end
  local loss = (f(leaves):double() * r):sum()
  loss:backward()
  local h = 1e-6
  for i, x in ipairs(inputs) do
    if x:dtype() == "float64" then
      local flat = x:flatten():tolist()
      local ga = leaves[i].grad and leaves[i].grad:flatten():tolist()
      for k = 1, #flat do
        local function at(v)
          local p = {}
          for j, y in ipairs(inputs) do p[j] = y end
          local m = lt.tensor(flat, "float64")
          m[k] = v
          p[i] = m:reshape(x:shape())
          return (f(p):double() * r):sum():item()
        end
        local num = (at(flat[k] + h) - at(flat[k] - h)) / (2 * h)
        local ana = ga and ga[k] or 0
        local tol = 1e-7 * math.max(1, math.abs(num))
        if not (math.abs(num - ana) <= tol) then
          error(string.format("gradcheck: input %d element %d: autograd %.12g, differences %.12g", i, k, ana, num), 2)
        end
      end
    end
  end
  return true
end
