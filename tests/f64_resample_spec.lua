-- f64_resample_spec.lua — F.pad (constant, cropping, reflect, replicate) and F.interpolate (nearest, bilinear,
-- align_corners, linear) in float64 against torch 1.13 (tests/fixtures/f64_resample.json, gen_f64_resample.py):
-- outputs and input gradients to 1e-12, written with PyTorch's positional arguments; the result keeps x's dtype
-- (the padding and the interpolation matrices were float32 and mixed dtypes failed inside).
local lt = require "lutra"
local F = lt.F

local f64_ref = require "tests.helpers.f64_ref"
local tensor_of, check = f64_ref.tensor_of, f64_ref.check
local gradcheck64 = require "tests.helpers.gradcheck64"

local FX = f64_ref.load("f64_resample")

-- gen_f64_resample.py's CASES, as a PyTorch user writes them in lutra
local CALLS = {
  ["pad constant 2-D"] = function(x) return F.pad(x, { 1, 2 }, "constant", 0.5) end,
  ["pad constant crop"] = function(x) return F.pad(x, { -1, 2, 1, -1 }) end,
  ["pad reflect"] = function(x) return F.pad(x, { 2, 1, 1, 3 }, "reflect") end,
  ["pad replicate"] = function(x) return F.pad(x, { 3, 0, 2, 2 }, "replicate") end,
  ["interpolate nearest x2"] = function(x) return F.interpolate(x, nil, 2, "nearest") end,
  ["interpolate bilinear size"] = function(x) return F.interpolate(x, { 5, 7 }, nil, "bilinear") end,
  ["interpolate bilinear align"] = function(x)
    return F.interpolate(x, { size = { 5, 7 }, mode = "bilinear", align_corners = true })
  end,
  ["interpolate linear 1-D"] = function(x) return F.interpolate(x, { scale_factor = 1.5, mode = "linear" }) end,
}

describe("F.pad and F.interpolate in float64 against torch 1.13", function()
  local names = {}
  for name in pairs(FX) do names[#names + 1] = name end
  table.sort(names)
  assert(#names == 8, "fixture cases")
  for _, name in ipairs(names) do
    it(name .. ": output and input gradient to 1e-12, float64 gradcheck", function()
      local c, call = FX[name], assert(CALLS[name], name)
      local x = tensor_of(c.x):requires_grad(true)
      local y = call(x)
      check(name .. " y", y, c.y)
      ;(y * tensor_of(c.gout)):sum():backward()
      check(name .. " grad x", x.grad, c.gx)
      gradcheck64(function(p) return call(p[1]) end, { tensor_of(c.x) }, tensor_of(c.gout))
    end)
  end

  it("float32 stays float32, and the positional forms equal the options tables", function()
    local x = lt.randn(1, 2, 3, 4)
    assert.are.equal("float32", F.pad(x, { 1, 1 }, "constant", 2):dtype())
    assert.are.same(F.pad(x, { 1, 1, 2, 0 }, "reflect"):tolist(), F.pad(x, { 1, 1, 2, 0 }, { mode = "reflect" }):tolist())
    assert.are.same(F.pad(x, { 1, 1 }, "constant", 2):tolist(), F.pad(x, { 1, 1 }, { value = 2 }):tolist())
    assert.are.same(F.interpolate(x, 6):tolist(), F.interpolate(x, { size = 6 }):tolist())
    assert.has_error(function() F.pad(x, { 1, 1 }, { mode = "constant" }, 3) end,
      "pad: the value comes after the mode (pad(x, pad, mode, value)) or in the options table")
    -- a positional size list holds numbers (found by the API fuzz: a tensor in it reached a comparison)
    assert.has_error(function() F.interpolate(x, { lt.zeros(1), 2 }) end, "interpolate: size[1] must be a number, got userdata")
  end)
end)
