-- softmax_paths_spec.lua — softmax and log_softmax, forward and backward, on every path of the kernels
-- (core/src/ops_softmax_kernels.h: short contiguous rows in transposed blocks, longer contiguous rows with their
-- vector max and stored exps, rows longer than the float lanes' limit, and a dim that is not the last with inner
-- sizes 1..17 and past a block) in float32 and float64, against the formula computed in Lua's doubles; and the
-- special values (NaN, -inf, +inf) on each path.
local lt = require "lutra"
local unpack = table.unpack or unpack -- luacheck: ignore 143 (LuaJIT without 5.2 compat has only the global)

-- Reference softmax / log_softmax of x (flat table, shape [outer, n, inner], softmax over n) and the gradient of
-- sum(y * r): softmax dx = y (r - sum(r y)), log_softmax dx = r - exp(y) sum(r).
local function reference(x, r, outer, n, inner, log_form)
  local y, dx = {}, {}
  for o = 0, outer - 1 do
    for k = 0, inner - 1 do
      local function at(j) return o * n * inner + j * inner + k + 1 end
      local mx = -math.huge
      for j = 0, n - 1 do mx = math.max(mx, x[at(j)]) end
      local s = 0
      for j = 0, n - 1 do s = s + math.exp(x[at(j)] - mx) end
      local lse = mx + math.log(s)
      local dot = 0
      for j = 0, n - 1 do
        local i = at(j)
        y[i] = log_form and x[i] - lse or math.exp(x[i] - lse)
        dot = dot + (log_form and r[i] or r[i] * y[i])
      end
      for j = 0, n - 1 do
        local i = at(j)
        dx[i] = log_form and r[i] - math.exp(y[i]) * dot or y[i] * (r[i] - dot)
      end
    end
  end
  return y, dx
end

local function close(what, got, want, tol)
  for i = 1, #want do
    local g, w = got[i], want[i]
    if not (math.abs(g - w) <= tol * math.max(1, math.abs(w))) then
      error(("%s: element %d is %.9g, want %.9g"):format(what, i, g, w), 2)
    end
  end
end

-- A shape of ndim dims whose softmax dim d has n elements, the dims before it `outer` in all (outer = 2 when
-- d > 1) and the dims after it `inner` (the first of them inner, the rest 1).
local function shape_of(ndim, d, n, inner)
  local s = {}
  for i = 1, ndim do s[i] = 1 end
  if d > 1 then s[1] = 2 end
  s[d] = n
  if d < ndim then s[d + 1] = inner end
  return s, d > 1 and 2 or 1
end

local seed = 0
local function check_case(dtype, shape, d, outer, n, inner)
  seed = seed + 1
  lt.manual_seed(seed)
  -- every other case spread to +-150, where exp(x - anything but the max) overflows float32
  local x0 = (lt.randn(unpack(shape)) * (seed % 2 == 0 and 50 or 3)):to(dtype)
  local r = lt.randn(unpack(shape)):to(dtype)
  local xs, rs = x0:flatten():tolist(), r:flatten():tolist()
  -- a log-probability's error follows the inputs' magnitude (x - lse rounds at x's ulp); a gradient's, also
  -- the row's sum of r (about sqrt(n))
  local big = 1
  for _, v in ipairs(xs) do big = math.max(big, math.abs(v)) end
  local tol = (dtype == "float64" and 1e-12 or 2e-6) * big
  for _, log_form in ipairs({ false, true }) do
    local x = x0:clone():requires_grad(true)
    local y = log_form and x:log_softmax(d) or x:softmax(d)
    assert.are.equal(dtype, y:dtype())
    local wy, wdx = reference(xs, rs, outer, n, inner, log_form)
    local what = ("%s %s [%s] dim %d"):format(dtype, log_form and "log_softmax" or "softmax", table.concat(shape, "x"), d)
    close(what .. " forward", y:flatten():tolist(), wy, tol)
    ;(y * r):sum():backward()
    close(what .. " backward", x.grad:flatten():tolist(), wdx, tol * 4 * math.sqrt(n))
  end
end

describe("softmax and log_softmax on every kernel path", function()
  for _, dtype in ipairs({ "float32", "float64" }) do
    it(dtype .. ": a dim that is not the last, inner sizes 1..17, ranks 2..4", function()
      for ndim = 2, 4 do
        for d = 1, ndim - 1 do
          for inner = 1, 17 do
            for _, n in ipairs({ 1, 4, 17, 64 }) do
              local shape, outer = shape_of(ndim, d, n, inner)
              check_case(dtype, shape, d, outer, n, inner)
            end
          end
        end
      end
    end)

    it(dtype .. ": the last dim, rows of 1..257, ranks 1..4", function()
      for ndim = 1, 4 do
        for _, n in ipairs({ 1, 3, 15, 16, 17, 31, 32, 33, 47, 48, 64, 100, 257 }) do
          local shape = shape_of(ndim, ndim, n, 1)
          if ndim > 1 then shape[1] = 67 end -- more rows than a short block holds, and rows of 8 at a time
          check_case(dtype, shape, ndim, ndim > 1 and 67 or 1, n, 1)
        end
      end
    end)

    it(dtype .. ": inner past a block of rows and a row past the float lanes' limit", function()
      check_case(dtype, { 3, 5, 300 }, 2, 3, 5, 300)
      check_case(dtype, { 2, 5000 }, 2, 2, 5000, 1)
    end)

    it(dtype .. ": NaN, -inf and +inf on each path", function()
      local nan, inf = 0 / 0, math.huge
      -- rows of n over dim 2 of [3, n, inner]: row 1 holds a NaN, row 2 two -inf among finite values, row 3 is
      -- all -inf (NaN, as PyTorch), and with +inf the row is NaN too
      for _, c in ipairs({ { 5, 1 }, { 40, 1 }, { 70, 1 }, { 5, 3 }, { 40, 7 } }) do
        local n, inner = c[1], c[2]
        for _, special in ipairs({ "nan", "-inf", "all -inf", "+inf" }) do
          local x = lt.randn(3, n, inner):to(dtype)
          local t = x:flatten():tolist()
          for k = 0, inner - 1 do
            for o = 0, 2 do
              local function set(j, v) t[o * n * inner + j * inner + k + 1] = v end
              if special == "nan" then set(n - 1, nan)
              elseif special == "+inf" then set(0, inf)
              elseif special == "-inf" then set(0, -inf); set(n - 2, -inf)
              else for j = 0, n - 1 do set(j, -inf) end end
            end
          end
          x = lt.tensor(t, dtype):reshape({ 3, n, inner })
          for _, log_form in ipairs({ false, true }) do
            local y = (log_form and x:log_softmax(2) or x:softmax(2)):flatten():tolist()
            local what = ("%s %s n %d inner %d with %s"):format(dtype, log_form and "log_softmax" or "softmax", n,
              inner, special)
            for i, v in ipairs(y) do
              local j = math.floor((i - 1) / inner) % n
              if special == "-inf" then
                if j == 0 or j == n - 2 then
                  assert.are.equal(log_form and -inf or 0, v, what)
                else
                  assert.is_true(v == v and v > -inf and v < inf, what)
                end
              else
                assert.is_true(v ~= v, what .. ": element " .. i .. " is " .. tostring(v))
              end
            end
          end
        end
      end
    end)
  end
end)
