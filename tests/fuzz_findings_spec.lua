-- fuzz_findings_spec.lua — each defect the libFuzzer targets of tests/fuzz/ found, pinned by its input (or
-- its essence), so it stays fixed in the ordinary suite.
local lt = require "lutra"
local fs = require "helpers.fs"

local function errmsg(fn, ...)
  local ok, e = pcall(fn, ...)
  assert(not ok, "expected an error")
  return tostring(e)
end

describe("fuzz findings: read_csv", function()
  local dir
  before_each(function() dir = fs.tmpdir() end)
  after_each(function() fs.rmrf(dir) end)

  -- fuzz_csv: inf passed the "is an integer" test (inf == floor(inf)) and lt.tensor raised about an int64
  -- element instead of read_csv naming the file, line and field
  it("an infinite or out-of-range value with dtype int64 is read_csv's error naming line and field", function()
    local p = fs.spit(dir .. "/a.csv", "a,b\n1,2\n-inf,3\n")
    assert.are.equal("read_csv: " .. p .. ":3: field 1 is not an integer: '-inf' (dtype int64)",
      (errmsg(lt.data.read_csv, p, { dtype = "int64" }):gsub("^[^\n]-%.lua:%d+: ", "")))
    fs.spit(p, "a\n1e300\n")
    assert.truthy(errmsg(lt.data.read_csv, p, { dtype = "int64" }):find(":2: field 1 is not an integer: '1e300'", 1, true))
  end)
end)

-- The API fuzzer (tests/fuzz/api_fuzz.lua, tests/fuzz/api_run): each finding, by the call that showed it.
describe("fuzz findings: the API fuzzer", function()
  -- seed 1185247745, call 1: an input with 0 channels and a weight of 0 slopes divided by zero (SIGFPE) in the
  -- kernel's layout; torch returns the empty input's shape
  it("prelu of an input with 0 channels and a weight of 0 slopes is empty, forward and backward", function()
    local x = lt.ones(2, 0, 3):requires_grad(true)
    local w = lt.zeros(0):requires_grad(true)
    local y = lt.F.prelu(x, w)
    assert.are.same({ 2, 0, 3 }, y:shape())
    y:sum():backward()
    assert.are.same({ 2, 0, 3 }, x.grad:shape())
    assert.are.same({ 0 }, w.grad:shape())
  end)

  -- seed 53303747, call 2: a 0-dim tensor expanded with -1 made a tensor of shape [-1] (which later calls took
  -- as input); a negative size in a dim of size 1 passed too (torch refuses both)
  it("expand refuses a negative size, and -1 for a new leading dim", function()
    assert.truthy(errmsg(function() return lt.tensor(3.5):expand(-1) end):find(
      "expand: cannot expand [] to [-1] (size -1 of dim 1 is negative: -1 keeps a size only for the tensor's own dims)",
      1, true))
    assert.truthy(errmsg(function() return lt.ones(1):expand(-2) end):find(
      "expand: cannot expand [1] to [-2] (size -2 of dim 1 is negative)", 1, true))
    assert.are.same({ 2, 3 }, lt.ones(1, 3):expand(2, -1):shape())
  end)

  -- logsumexp along an empty dim raised max's "cannot reduce an empty dimension"; torch gives -inf
  it("logsumexp along an empty dim is -inf, as torch", function()
    local r = lt.logsumexp(lt.ones(2, 0, 3), 2)
    assert.are.same({ 2, 3 }, r:shape())
    assert.are.equal(-math.huge, r:max():item())
    assert.are.same({ 2, 1, 3 }, lt.ones(2, 0, 3):logsumexp(2, true):shape())
  end)

  it("norm over several dims of a tensor with no elements (was a reshape error)", function()
    local x = lt.zeros(0, 3, 2)
    assert.are.same({ 0 }, x:norm(2, { 2, 3 }):shape()) -- torch: Size([0])
    assert.are.same({ 0, 0 }, x:norm(2, { 1, 2 }):totable()) -- torch: tensor([0., 0.])
    assert.are.same({ 0, 1, 1 }, x:norm(2, { 2, 3 }, true):shape())
  end)

  -- errors that named an inner op (or lt_tensor_new's "tensor") instead of the function called
  it("composite ops and creation name the function called", function()
    local function starts(prefix, fn)
      local m = errmsg(fn):gsub("^[^\n]-:%d+: ", "")
      assert(m:sub(1, #prefix) == prefix, string.format("%q does not start with %q", m, prefix))
    end
    starts("zeros: size -3 of dim 1 is negative", function() return lt.zeros(-3) end)
    starts("randperm: out of memory", function() return lt.randperm(2 ^ 53) end) -- 2^56 bytes: below the 2^62 limit
    starts("tile: expand: size 1 is too large", function() return lt.ones(2):tile(1e300) end)
    starts("logical_and: mul: shapes [2] and [3] cannot be broadcast",
      function() return lt.logical_and(lt.ones(2), lt.ones(3)) end)
    starts("type: to int64: element 1", function() return lt.tensor({ 0 / 0 }):type("int64") end)
    starts("int64: to int64: element 1", function() return lt.tensor({ 0 / 0 }):int64() end)
    starts("cosine_similarity: ", function() return lt.F.cosine_similarity(lt.ones(3), lt.ones(3)) end)
    starts("instance_norm: ", function() return lt.F.instance_norm(lt.tensor({ { { 1, 2 } } }, "int64")) end)
    starts("avg_pool1d: avg_pool2d: ", function() return lt.F.avg_pool1d(lt.ones(1, 1, 3), 5) end)
    starts("split: a 0-dim tensor has no dim to split", function() return lt.tensor(1):split(1) end)
    starts("addmm: add: ", function() return lt.addmm(lt.ones(5), lt.ones(2, 3), lt.ones(3, 4)) end)
    starts("eye: the result [9007199254740992 x 9007199254740992] has more than 2^62 elements",
      function() return lt.eye(2 ^ 53) end)
    starts("one_hot: num_classes must be a positive integer, got inf",
      function() return lt.F.one_hot(lt.tensor({ 1, 2 }, "int64"), math.huge) end)
    starts("one_hot: arange: ", function() return lt.F.one_hot(lt.tensor({ 1, 2 }, "int64"), 2 ^ 63) end)
    starts("linspace: out of memory", function() return lt.linspace(0, 1, 2 ^ 53) end) -- 2^55 bytes: no malloc has them
    starts("type_as: type: to int64: ", function() return lt.tensor({ 0 / 0 }):type_as(lt.zeros({ 1 }, "int64")) end)
  end)

  -- roll and flip of a float64 tensor raised index_select's error (the core's index_select is float32 only for
  -- now): they work, or their error is theirs
  it("roll and flip of a float64 tensor work or name themselves", function()
    for name, f in pairs { roll = function(x) return x:roll(1) end, flip = function(x) return x:flip(1) end } do
      local ok, y = pcall(f, lt.tensor({ 1, 2, 3 }, "float64"))
      if ok then
        assert.are.same(name == "roll" and { 3, 1, 2 } or { 3, 2, 1 }, y:tolist())
      else
        local m = tostring(y):gsub("^[^\n]-:%d+: ", "")
        assert(m:sub(1, #name + 2) == name .. ": ", string.format("%q does not start with %q", m, name .. ": "))
      end
    end
  end)
end)
