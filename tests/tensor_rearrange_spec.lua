-- tensor_rearrange_spec: broadcast_to, repeat_interleave, movedim/moveaxis, swapaxes/swapdims, hstack, vstack,
-- dstack, column_stack, tensor_split, hsplit, vsplit, ravel, rot90, take, take_along_dim, meshgrid,
-- cartesian_prod, block_diag (lua/lutra/tensor/rearrange.lua): values and gradients against PyTorch 1.13
-- (tests/fixtures/rearrange.json from gen_rearrange.py), finite-difference gradchecks, and bad input.
local lt = require "lutra"
local X = require "tests.helpers.nn_fixtures"
local gradcheck = require "tests.helpers.gradcheck"
local bounded_err = require "tests.helpers.bounded_err"

local function err_of(f)
  local ok, e = pcall(f)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

-- the pieces of a list result, flattened and joined (as the generator's joined)
local function joined(ts)
  local flat = {}
  for i, t in ipairs(ts) do flat[i] = t:reshape(-1) end
  return lt.cat(flat, 1)
end

local ops = {
  broadcast_to = function(x) return x:broadcast_to({ 2, 2, 3, 4 }) end,
  repeat_interleave_flat = function(x) return lt.repeat_interleave(x, 2) end,
  repeat_interleave_dim = function(x) return x:repeat_interleave(lt.tensor({ 1, 0, 3 }, "int64"), 2) end,
  movedim = function(x) return x:movedim(1, -1) end,
  movedim_lists = function(x) return lt.moveaxis(x, { 1, 2 }, { 3, 1 }) end,
  swapaxes = function(x) return x:swapaxes(1, 3) end,
  hstack = function(a, b) return lt.hstack({ a, b }) end,
  hstack_1d = function(a, b) return lt.hstack({ a, b }) end,
  vstack = function(a, v) return lt.vstack({ a, v }) end,
  dstack = function(v, w) return lt.dstack({ v, w }) end,
  column_stack = function(v, a) return lt.column_stack({ v:narrow(1, 1, 2), a }) end,
  tensor_split_n = function(x) return joined(x:tensor_split(3)) end,
  tensor_split_indices = function(x) return joined(lt.tensor_split(x, { 2, 4 }, 2)) end,
  hsplit = function(x) return joined(x:hsplit(2)) end,
  vsplit_indices = function(x) return joined(x:vsplit({ 3, 6 })) end,
  ravel = function(x) return x:ravel() end,
  rot90 = function(x) return x:rot90() end,
  rot90_k3_dims = function(x) return lt.rot90(x, 3, { 3, 1 }) end,
  rot90_k2 = function(x) return x:rot90(-2) end,
  take = function(x, i) return x:take(i) end,
  take_along_dim = function(x, i) return x:take_along_dim(i, 2) end,
  take_along_dim_broadcast = function(x, i) return lt.take_along_dim(x, i, 3) end,
  take_along_dim_flat = function(x, i) return x:take_along_dim(i) end,
  meshgrid_ij = function(a, b) return joined(lt.meshgrid({ a, b }, { indexing = "ij" })) end,
  meshgrid_xy = function(a, b, c) return joined(lt.meshgrid({ a, b, c }, { indexing = "xy" })) end,
  cartesian_prod = function(a, b) return lt.cartesian_prod({ a, b }) end,
  block_diag = function(a, b, v) return lt.block_diag({ a, b, v }) end,
}

describe("rearranging against PyTorch 1.13 (rearrange.json)", function()
  X.describe_cases(it, "rearrange.json", ops)
end)

describe("rearranging: finite-difference gradients", function()
  local r = lt.randn
  local checks = {
    repeat_interleave = { function(x) return x:repeat_interleave({ 2, 1, 3 }, 2) end, { r(2, 3) } },
    movedim = { function(x) return x:movedim({ 1, 3 }, { 2, 1 }) end, { r(2, 3, 2) } },
    hstack = { function(a, b) return lt.hstack({ a, b }) end, { r(2, 2), r(2, 3) } },
    dstack = { function(a, b) return lt.dstack({ a, b }) end, { r(2, 2), r(2, 2) } },
    tensor_split = { function(x) return x:tensor_split(2, 2)[2] end, { r(2, 5) } },
    rot90 = { function(x) return x:rot90(1, { 2, 3 }) end, { r(2, 3, 2) } },
    take = { function(x) return x:take(lt.tensor({ 6, 1, 6 }, "int64")) end, { r(2, 3) } },
    take_along_dim = { function(x) return x:take_along_dim(lt.tensor({ { 2 }, { 1 } }, "int64"), 2) end, { r(2, 3) } },
    cartesian_prod = { function(a, b) return lt.cartesian_prod({ a, b }) end, { r(3), r(2) } },
    block_diag = { function(a, b) return lt.block_diag({ a, b }) end, { r(2, 1), r(1, 3) } },
  }
  for name, c in pairs(checks) do
    it(name, function()
      lt.manual_seed(3)
      assert.is_true(gradcheck(c[1], c[2], { eps = 1e-2, rtol = 2e-2, atol = 2e-3 }))
    end)
  end
end)

describe("rearranging: bad input", function()
  local r = lt.randn
  it("names the function and what is wrong", function()
    assert.matches("broadcast_to: ", err_of(function() return r(2, 3):broadcast_to({ 4, 3, 2 }) end))
    assert.matches("repeat_interleave: repeats has 2 counts for 3 elements along dim 2 of %[2 x 3%]",
      err_of(function() return r(2, 3):repeat_interleave({ 1, 2 }, 2) end))
    assert.matches("movedim: source and destination have 2 and 1 dims",
      err_of(function() return r(2, 3):movedim({ 1, 2 }, 1) end))
    assert.matches("hsplit: dim 2 of %[2 x 5%] %(size 5%) does not split into 2 equal parts",
      err_of(function() return r(2, 5):hsplit(2) end))
    assert.matches("vsplit: expected at least 2 dims, got %[4%]", err_of(function() return r(4):vsplit(2) end))
    assert.matches("take: index 7 is out of range 1..6", err_of(function() return r(2, 3):take(lt.tensor({ 7 }, "int64")) end))
    assert.matches("take: indices must be int64, got float32", err_of(function() return r(2, 3):take(lt.tensor({ 1 })) end))
    assert.matches("meshgrid: option 'indexing' must be \"ij\" or \"xy\", got yx",
      err_of(function() return lt.meshgrid({ r(2) }, { indexing = "yx" }) end))
    assert.matches("block_diag: element 2 must have at most 2 dims, got %[1 x 1 x 1%]",
      err_of(function() return lt.block_diag({ r(2, 2), r(1, 1, 1) }) end))
    assert.matches("vstack: expected a list of tensors, got a tensor", err_of(function() return lt.vstack(r(2)) end))
    assert.matches("rot90: the two dims are both 1", err_of(function() return r(2, 2):rot90(1, { 1, -2 }) end))
  end)
  it("tensor_split past the end gives empty pieces, as torch", function()
    local p = lt.zeros(3):tensor_split(5)
    assert.are.equal(5, #p)
    assert.are.equal("[0]", p[5]:shape_str())
  end)
end)

-- an error message without its "file:line: " position
local function msg(e) return (e:gsub("^[^\n]-:%d+: ", "")) end

describe("rearranging: every error names the function called", function()
  local r = lt.randn
  it("its own checks and its inner ops' errors", function()
    assert.matches("^cartesian_prod: element 2 must be 1%-D, got %[3 x 4%]",
      msg(err_of(function() return lt.cartesian_prod({ r(2), r(3, 4) }) end)))
    assert.matches("^rot90: k must be an integer, got inf", msg(err_of(function() return r(2, 2):rot90(math.huge) end)))
    assert.matches("^repeat_interleave: a 0%-dim tensor has no dim to repeat along",
      msg(err_of(function() return lt.tensor(3.5):repeat_interleave(2, 1) end)))
  end)
  it("huge counts are refused before any work", function()
    assert.matches("^repeat_interleave: repeats 2%.3058430092137e%+18: expand: ",
      msg(bounded_err(lt.repeat_interleave, r(3), 2 ^ 61)))
    assert.matches("^repeat_interleave: repeats summing to 6%.9175290276411e%+18: zeros: ",
      msg(bounded_err(function() return r(3):repeat_interleave({ 2 ^ 61, 2 ^ 61, 2 ^ 61 }) end)))
    assert.matches("^tensor_split: 9%.007199254741e%+15 sections of dim 1 of %[3%] is too many: at most 1048576",
      msg(bounded_err(lt.tensor_split, r(3), 2 ^ 53)))
    assert.matches("^hsplit: 9%.007199254741e%+15 sections of dim 2 of %[2 x 0%] is too many",
      msg(bounded_err(function() return lt.zeros(2, 0):hsplit(2 ^ 53) end)))
  end)
  it("repeat_interleave with counts: zeros skip an element, the last ones too", function()
    local x = lt.tensor({ 10, 20, 30, 40 })
    assert.are.same({ 10, 10, 30, 30, 30 }, x:repeat_interleave({ 2, 0, 3, 0 }):tolist())
    assert.are.same({}, x:repeat_interleave({ 0, 0, 0, 0 }):tolist())
    assert.are.same({ 20 }, x:repeat_interleave(lt.tensor({ 0, 1, 0, 0 }, "int64")):tolist())
  end)
end)

