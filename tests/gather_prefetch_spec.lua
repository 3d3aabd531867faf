-- index_select along dim 1 asks the memory for the rows a few positions ahead of the one it copies
-- (ops_index.c, GATHER_AHEAD rows, at most GATHER_AHEAD_BYTES of each): the rows it copies, the bad indices it
-- reports and the rows it never reads stay what they were, whatever the batch length, row length and index order.
local lt = require "lutra"

-- x's row i holds i * 1000 + column, so a gathered row names its source row
local function source(rows, cols, dtype)
  local col = lt.arange(0, cols):view(1, cols):to(dtype)
  local row = lt.arange(1, rows + 1):view(rows, 1):to(dtype) * 1000
  return row + col
end

local function check_rows(x, idx_list, cols)
  local y = x:index_select(1, lt.tensor(idx_list, "int64"))
  assert.are.same({ #idx_list, cols }, y:shape())
  for j, ix in ipairs(idx_list) do
    local r = y:narrow(1, j, 1):view(-1):tolist()
    assert.are.equal(ix * 1000, r[1], "row " .. j)
    assert.are.equal(ix * 1000 + cols - 1, r[cols], "row " .. j)
  end
end

describe("index_select with rows fetched ahead", function()
  it("copies each row of batches shorter, as long as and longer than the look-ahead", function()
    local x = source(300, 37, "float32")
    for _, k in ipairs({ 1, 7, 8, 9, 16, 64, 200 }) do
      local idx = {}
      for j = 1, k do idx[j] = (j * 131) % 300 + 1 end
      check_rows(x, idx, 37)
    end
  end)

  it("rows longer than the bytes fetched ahead, repeated and reversed indices, float64 and int64", function()
    local x = source(40, 3000, "float32") -- 12000-byte rows: only the first 4096 are asked for ahead
    check_rows(x, { 40, 39, 1, 1, 1, 2, 40, 20, 20, 33, 5, 5 }, 3000)
    local d = source(50, 5, "float64")
    check_rows(d, { 50, 49, 48, 47, 46, 45, 44, 43, 42, 41, 3 }, 5)
    local n = source(30, 4, "float32"):to("int64")
    local y = n:index_select(1, lt.tensor({ 30, 2, 2, 9, 30, 1, 1, 1, 17, 4 }, "int64"))
    assert.are.same({ 30000, 30001, 30002, 30003 }, y:narrow(1, 1, 1):view(-1):tolist())
    assert.are.same({ 4000, 4001, 4002, 4003 }, y:narrow(1, 10, 1):view(-1):tolist())
  end)

  it("reports a bad index inside and past the look-ahead window, naming it", function()
    local x = source(100, 16, "float32")
    for _, pos in ipairs({ 1, 5, 9, 12, 20 }) do
      local idx = {}
      for j = 1, 20 do idx[j] = j end
      for _, bad in ipairs({ 101, 1000000000 }) do
        idx[pos] = bad
        assert.has_error(function() x:index_select(1, lt.tensor(idx, "int64")) end,
          ("index_select: index %d out of range 1..100 of dim 1"):format(bad))
        idx[pos] = pos
      end
      idx[pos] = 0
      assert.has_error(function() x:index_select(1, lt.tensor(idx, "int64")) end,
        "index_select: index 0 is out of range (indices are 1-based)")
      idx[pos] = pos
    end
  end)

  it("a non-contiguous source and a gather along an inner dim (no look-ahead) copy the same rows", function()
    local x = source(64, 20, "float32")
    local t = x:t() -- [20 x 64], non-contiguous
    local idx = lt.tensor({ 64, 1, 33, 2, 2, 60, 7, 8, 9, 10, 11, 12 }, "int64")
    local a = t:index_select(2, idx)
    local b = x:index_select(1, idx):t()
    assert.are.same(b:contiguous():view(-1):tolist(), a:contiguous():view(-1):tolist())
  end)
end)
