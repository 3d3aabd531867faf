-- f64_kernels_spec.lua — the float64 elementwise kernels, made from the float32 kernels' source
-- (core/src/ops_ew_kernels.h), on each row case of that source: contiguous, a broadcast scalar on either side,
-- and strided rows, with out-of-place, in-place and comparison (float32 mask) outputs. Lua's numbers are
-- doubles, so each element must equal Lua's own arithmetic bit for bit.
local lt = require "lutra"

local ROWS, COLS = 5, 37 -- 37: a vector loop's main part and its tail

local function values(n, seed)
  local t = {}
  for i = 1, n do t[i] = math.sin(i * 12.9898 + seed) * 1e3 / 3 end
  return t
end

local OPS = {
  add = function(a, b) return a + b end,
  sub = function(a, b) return a - b end,
  mul = function(a, b) return a * b end,
  div = function(a, b) return a / b end,
  maximum = function(a, b) return (a >= b or a ~= a) and a or b end,
  minimum = function(a, b) return (a <= b or a ~= a) and a or b end,
}
local CMP = {
  lt = function(a, b) return a < b end,
  ge = function(a, b) return a >= b end,
  eq = function(a, b) return a == b end,
}

-- the operand shapes of each row case, and the element of x and y read at (i, j)
local CASES = {
  { "contiguous", function(x, y) return x, y end, function(i, j) return (i - 1) * COLS + j, (i - 1) * COLS + j end },
  { "broadcast y", function(x, y) return x, y:narrow(2, 1, 1) end,
    function(i, j) return (i - 1) * COLS + j, (i - 1) * COLS + 1 end },
  { "broadcast x", function(x, y) return x:narrow(2, 1, 1), y end,
    function(i, j) return (i - 1) * COLS + 1, (i - 1) * COLS + j end },
}

local function check_all(what, out, ref)
  assert.are.equal(ROWS * COLS, #ref)
  local g = out:contiguous():flatten():tolist()
  for k = 1, #ref do
    if g[k] ~= ref[k] then
      error(string.format("%s: element %d is %.17g, Lua computes %.17g", what, k, g[k], ref[k]), 2)
    end
  end
end

describe("float64 elementwise kernels from the float32 source", function()
  local xv, yv = values(ROWS * COLS, 1), values(ROWS * COLS, 2)
  yv[3], xv[7] = xv[3], yv[7] -- ties for eq, maximum and minimum
  local X = lt.tensor(xv, "float64"):reshape({ ROWS, COLS })
  local Y = lt.tensor(yv, "float64"):reshape({ ROWS, COLS })

  for _, case in ipairs(CASES) do
    local name, operands, at = case[1], case[2], case[3]
    it("binary ops, " .. name, function()
      local x, y = operands(X, Y)
      for op, f in pairs(OPS) do
        local ref = {}
        for i = 1, ROWS do
          for j = 1, COLS do
            local ix, iy = at(i, j)
            ref[#ref + 1] = f(xv[ix], yv[iy])
          end
        end
        local out = lt[op](x, y)
        assert.are.equal("float64", out:dtype())
        check_all(op .. " " .. name, out, ref)
        if x:shape()[2] == COLS and op ~= "maximum" and op ~= "minimum" then -- in place into x's storage
          local z = x:clone()
          z[op .. "_"](z, y)
          check_all(op .. "_ " .. name, z, ref)
        end
      end
      for op, f in pairs(CMP) do
        local ref = {}
        for i = 1, ROWS do
          for j = 1, COLS do
            local ix, iy = at(i, j)
            ref[#ref + 1] = f(xv[ix], yv[iy]) and 1 or 0
          end
        end
        local out = lt[op](x, y)
        assert.are.equal("float32", out:dtype())
        check_all(op .. " " .. name, out, ref)
      end
    end)
  end

  it("binary ops on strided rows (a transposed operand) and with a Lua number", function()
    local xt = lt.tensor(xv, "float64"):reshape({ COLS, ROWS }):t() -- ROWS x COLS, column-major
    local ref, refs = {}, {}
    for i = 1, ROWS do
      for j = 1, COLS do
        ref[#ref + 1] = xv[(j - 1) * ROWS + i] * yv[(i - 1) * COLS + j]
        refs[#refs + 1] = 1 / 3 - xv[(j - 1) * ROWS + i]
      end
    end
    check_all("mul strided", lt.mul(xt, Y), ref)
    check_all("scalar first", lt.sub(1 / 3, xt), refs)
  end)

  it("unary ops use libm's double functions on every row case", function()
    local xt = lt.tensor(xv, "float64"):reshape({ COLS, ROWS }):t()
    for _, x in ipairs({ X, xt }) do
      local flat = x:contiguous():flatten():tolist()
      local ref_exp, ref_neg = {}, {}
      for k, v in ipairs(flat) do
        ref_exp[k] = math.exp(v / 1e3)
        ref_neg[k] = -v
      end
      check_all("exp", (x / 1e3):exp(), ref_exp)
      check_all("neg", -x, ref_neg)
    end
  end)
end)
