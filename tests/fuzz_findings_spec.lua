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
end)
