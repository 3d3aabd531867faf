-- tests/helpers/gradcheck.lua — finite-difference gradient check shared by the specs.
--
--   local gradcheck = require "tests.helpers.gradcheck"
--   gradcheck(function(x, w) return lt.linear(x, w) end, { lt.randn(3, 4), lt.randn(5, 4) },
--             { eps = 1e-3, rtol = 1e-2, atol = 1e-3, wrt = { 1, 2 } })
--
-- fn takes the input tensors and returns a tensor (extra return values are ignored). The check
-- compares the autograd gradient of L = sum(fn(...) * r), for a fixed pseudo-random r, with central
-- differences (L(x + eps) - L(x - eps)) / (x+ - x-), where x+ and x- are the perturbed values as
-- float32 actually stores them and L is summed in float64. Every float32 input is checked unless
-- `wrt` lists the input indices to check; int64 inputs (targets, indices) are passed through.
-- The RNG state is restored before every call of fn, so ops that draw (dropout) see the same
-- numbers in every evaluation. Returns true, or raises an error naming the input, the element
-- (1-based flat index) and both values.
local lt = require "lutra"

local function fixed_weights(n)
  -- a small LCG so r does not depend on (or disturb) lutra's RNG; values in [-1, -0.1] u [0.1, 1]
  local s, r = 12345, {}
  for i = 1, n do
    s = (1103515245 * s + 12345) % 2147483648
    local u = s / 2147483648 * 1.8 - 0.9
    r[i] = u < 0 and u - 0.1 or u + 0.1
  end
  return r
end

local function as_f32(v) return lt.tensor({ v }):item() end

local function weighted_sum(out, r)
  local vals, s = out:flatten():tolist(), 0
  for i = 1, #vals do s = s + vals[i] * r[i] end
  return s
end

local function first_tensor(...)
  local out = ...
  if not lt.is_tensor(out) then
    error("gradcheck: fn must return a tensor, got " .. type(out), 3)
  end
  return out
end

return function(fn, inputs, opts)
  opts = opts or {}
  local eps, rtol, atol = opts.eps or 1e-3, opts.rtol or 1e-2, opts.atol or 1e-3
  local wrt = {}
  if opts.wrt then
    for _, i in ipairs(opts.wrt) do wrt[i] = true end
  else
    for i, x in ipairs(inputs) do wrt[i] = lt.is_tensor(x) and x:dtype() == "float32" end
  end
  local rng = lt.get_rng_state()

  -- analytic: leaves that require grad for the checked inputs
  local leaves = {}
  for i, x in ipairs(inputs) do
    if wrt[i] then leaves[i] = x:detach():clone():requires_grad(true) else leaves[i] = x end
  end
  lt.set_rng_state(rng)
  local out = first_tensor(fn(unpack(leaves, 1, #inputs)))
  local r = fixed_weights(out:numel())
  local rt = out:dim() == 0 and lt.tensor(r[1]) or lt.tensor(r):reshape(out:shape())
  local loss = (out * rt):sum()
  loss:backward()

  -- numeric: perturb one element of a detached copy at a time
  local base = {}
  for i, x in ipairs(inputs) do
    base[i] = lt.is_tensor(x) and x:dtype() == "float32" and x:detach():clone() or x
  end
  local function L()
    lt.set_rng_state(rng)
    return lt.no_grad(function() return weighted_sum(first_tensor(fn(unpack(base, 1, #inputs))), r) end)
  end
  for i = 1, #inputs do
    if wrt[i] then
      local g = leaves[i].grad
      local ga = g and g:flatten():tolist() or nil
      local flat = base[i]:view(-1)
      local vals = flat:flatten():tolist()
      for j = 1, #vals do
        local x0 = vals[j]
        local xp, xm = as_f32(x0 + eps), as_f32(x0 - eps)
        local cell = flat:narrow(1, j, 1)
        cell:fill_(xp)
        local fp = L()
        cell:fill_(xm)
        local fm = L()
        cell:fill_(x0)
        local num = (fp - fm) / (xp - xm)
        local ana = ga and ga[j] or 0
        if math.abs(ana - num) > atol + rtol * math.abs(num) then
          error(string.format("gradcheck: input %d, element %d: autograd gives %.6g, finite differences %.6g%s",
            i, j, ana, num, ga and "" or " (autograd produced no gradient for this input)"), 2)
        end
      end
    end
  end
  lt.set_rng_state(rng)
  return true
end
