-- numpy_names_spec.lua — fliplr/flipud, atleast_1d/2d/3d, argwhere, triu_indices/tril_indices and logspace
-- (lua/lutra/tensor/numpy_names.lua): the expected values are torch 1.13's (indices shifted to lutra's 1-based).
local lt = require "lutra"

local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok)
  return e
end

describe("numpy_names", function()
  it("fliplr and flipud reverse dim 2 and dim 1", function()
    local x = lt.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
    assert.are.same({ { 3, 2, 1 }, { 6, 5, 4 } }, x:fliplr():totable())
    assert.are.same({ { 4, 5, 6 }, { 1, 2, 3 } }, lt.flipud(x):totable())
    assert.matches("fliplr: expects a tensor with at least 2 dims, got [3]", err_of(lt.fliplr, lt.zeros(3)), 1, true)
    assert.matches("flipud: expects a tensor with at least 1 dim", err_of(lt.flipud, lt.tensor(1)), 1, true)
  end)

  it("atleast_nd give views with torch's shapes, for each argument or a list", function()
    assert.are.same({ 2, 3, 1 }, lt.atleast_3d(lt.zeros(2, 3)):shape())
    assert.are.same({ 1, 2, 1 }, lt.atleast_3d(lt.zeros(2)):shape())
    assert.are.same({ 1, 1, 1 }, lt.atleast_3d(lt.tensor(1)):shape())
    assert.are.same({ 1, 1 }, lt.atleast_2d(lt.tensor(1)):shape())
    assert.are.same({ 1 }, lt.atleast_1d(lt.tensor(1)):shape())
    local a, b = lt.atleast_2d(lt.zeros(4), lt.zeros(2, 2, 2))
    assert.are.same({ 1, 4 }, a:shape())
    assert.are.same({ 2, 2, 2 }, b:shape())
    local l = lt.atleast_1d({ lt.tensor(3), lt.zeros(2) })
    assert.are.same({ 1 }, l[1]:shape())
    assert.matches("bad argument #2 to 'atleast_2d'", err_of(lt.atleast_2d, lt.zeros(1), 3), 1, true)
    assert.matches("atleast_3d: element 2 of the list is a number", err_of(lt.atleast_3d, { lt.zeros(1), 3 }), 1, true)
  end)

  it("argwhere is the 1-based nonzero", function()
    assert.are.same({ { 1, 2 }, { 2, 1 } }, lt.tensor({ { 0, 1 }, { 2, 0 } }):argwhere():totable())
  end)

  it("triu_indices and tril_indices list the triangle row by row, 1-based", function()
    -- torch.triu_indices(3, 4, 1) = [[0, 0, 0, 1, 1, 2], [1, 2, 3, 2, 3, 3]]
    assert.are.same({ { 1, 1, 1, 2, 2, 3 }, { 2, 3, 4, 3, 4, 4 } }, lt.triu_indices(3, 4, 1):totable())
    -- torch.tril_indices(4, 3, -1) = [[1, 2, 2, 3, 3, 3], [0, 0, 1, 0, 1, 2]]
    assert.are.same({ { 2, 3, 3, 4, 4, 4 }, { 1, 1, 2, 1, 2, 3 } }, lt.tril_indices(4, 3, -1):totable())
    assert.are.same({ 2, 0 }, lt.triu_indices(2, 2, 5):shape())
    assert.matches("triu_indices: row must be an integer >= 0, got -1", err_of(lt.triu_indices, -1, 2), 1, true)
    -- a huge size is an allocation error at once, not a long loop (the API fuzz found a hang)
    assert.matches("triu_indices: ", err_of(lt.triu_indices, 1e9, 1e9), 1, true)
    assert.matches("logspace: ", err_of(lt.logspace, 0, 1, 1e15), 1, true)
  end)

  it("logspace gives base^v over evenly spaced v (torch.logspace's float32 values)", function()
    local want = { 0.10000000149011612, 0.5623413324356079, 3.1622776985168457, 17.782794952392578, 100.0 }
    local got = lt.logspace(-1, 2, 5):tolist()
    for i = 1, 5 do assert.is_true(math.abs(got[i] - want[i]) <= 1e-6 * want[i], i) end
    assert.are.same({ 1, 2, 4, 8 }, lt.logspace(0, 3, 4, 2):tolist())
    assert.are.same({ 0 }, lt.logspace(0, 1, 0):shape())
    assert.matches("logspace: n must be an integer >= 0, got 1.5", err_of(lt.logspace, 0, 1, 1.5), 1, true)
  end)
end)
