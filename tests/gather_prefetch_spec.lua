-- index_select along dim 1 asks the memory for the rows a few positions ahead of the one it copies when the
-- source is larger than a core's L2 and its rows are a cache line or longer (ops_index.c: GATHER_AHEAD rows, at
-- most GATHER_AHEAD_BYTES of each): the rows it copies and the bad indices it reports stay what they were,
-- whatever the batch length, row length, index order and dtype, on both sides of those thresholds. A gather of
-- GATHER_PAR_MIN_BYTES (128 KB) or more is split by rows over the pool's threads, every index checked first.
local lt = require "lutra"

-- element (i, c) of x is (i - 1) * cols + c - 1: a gathered row names its source row (exact in float32 below 2^24)
local function source(rows, cols, dtype)
  return lt.arange(0, rows * cols):to(dtype):view(rows, cols)
end

local function check_rows(x, idx_list)
  local cols = x:size(2)
  local y = x:index_select(1, lt.tensor(idx_list, "int64"))
  assert.are.same({ #idx_list, cols }, y:shape())
  for j, ix in ipairs(idx_list) do
    local r = y:narrow(1, j, 1):view(-1):tolist()
    assert.are.equal((ix - 1) * cols, r[1], "row " .. j)
    assert.are.equal((ix - 1) * cols + cols - 1, r[cols], "row " .. j)
    assert.are.equal((ix - 1) * cols + math.floor(cols / 2), r[math.floor(cols / 2) + 1], "row " .. j)
  end
end

local function spread(k, n)
  local idx = {}
  for j = 1, k do idx[j] = (j * 7919) % n + 1 end
  return idx
end

describe("index_select with rows fetched ahead", function()
  it("copies each row of batches shorter, as long as and longer than the look-ahead (1.3 MB source)", function()
    local x = source(9000, 37, "float32") -- 148-byte rows
    for _, k in ipairs({ 1, 7, 8, 9, 16, 64, 200 }) do check_rows(x, spread(k, 9000)) end
  end)

  it("rows longer than the bytes fetched ahead, repeated and reversed indices, float64", function()
    local x = source(100, 3000, "float32") -- 12000-byte rows: only the first 256 are asked for ahead
    check_rows(x, { 100, 99, 1, 1, 1, 2, 100, 20, 20, 33, 5, 5 })
    local d = source(2000, 80, "float64") -- 640-byte rows, 1.3 MB
    check_rows(d, { 2000, 1999, 1998, 1997, 1996, 1995, 1994, 1993, 1992, 1991, 3, 3, 1 })
  end)

  it("below the thresholds (a small source, rows shorter than a line, int64) the same rows", function()
    check_rows(source(300, 37, "float32"), spread(50, 300))
    check_rows(source(50000, 5, "float64"), spread(40, 50000)) -- 40-byte rows of a 2 MB source
    local n = source(30, 4, "float32"):to("int64")
    local y = n:index_select(1, lt.tensor({ 30, 2, 2, 9, 30, 1, 1, 1, 17, 4 }, "int64"))
    assert.are.same({ 116, 117, 118, 119 }, y:narrow(1, 1, 1):view(-1):tolist())
    assert.are.same({ 12, 13, 14, 15 }, y:narrow(1, 10, 1):view(-1):tolist())
  end)

  it("reports a bad index inside and past the look-ahead window, naming it", function()
    local x = source(20000, 16, "float32") -- 64-byte rows, 1.3 MB
    for _, pos in ipairs({ 1, 5, 9, 12, 20 }) do
      local idx = {}
      for j = 1, 20 do idx[j] = j end
      for _, bad in ipairs({ 20001, 1000000000 }) do
        idx[pos] = bad
        assert.has_error(function() x:index_select(1, lt.tensor(idx, "int64")) end,
          ("index_select: index %d out of range 1..20000 of dim 1"):format(bad))
      end
      idx[pos] = 0
      assert.has_error(function() x:index_select(1, lt.tensor(idx, "int64")) end,
        "index_select: index 0 is out of range (indices are 1-based)")
    end
  end)

  it("a gather of many bytes split over two threads: the same rows as on one, a bad index anywhere still named", function()
    local threads = lt.get_num_threads()
    finally(function() lt.set_num_threads(threads) end)
    local x = source(9000, 784, "float32") -- 3136-byte rows, 28 MB: 300 rows are 940 KB, split in parts
    local idx = spread(300, 9000)
    idx[150], idx[151], idx[300] = 9000, 9000, 1
    lt.set_num_threads(2)
    check_rows(x, idx)
    local two = x:index_select(1, lt.tensor(idx, "int64"))
    lt.set_num_threads(1)
    local one = x:index_select(1, lt.tensor(idx, "int64"))
    assert.is_true(two:equal(one))
    lt.set_num_threads(2)
    for _, pos in ipairs({ 1, 150, 299, 300 }) do
      local bad = {}
      for j, v in ipairs(idx) do bad[j] = v end
      bad[pos] = 9001
      assert.has_error(function() x:index_select(1, lt.tensor(bad, "int64")) end,
        "index_select: index 9001 out of range 1..9000 of dim 1")
    end
  end)

  it("a non-contiguous source and a gather along an inner dim (no look-ahead) copy the same rows", function()
    local x = source(9000, 40, "float32")
    local t = x:t() -- [40 x 9000], non-contiguous
    local idx = lt.tensor({ 9000, 1, 33, 2, 2, 60, 7, 8, 9, 10, 11, 12 }, "int64")
    local a = t:index_select(2, idx)
    local b = x:index_select(1, idx):t()
    assert.are.same(b:contiguous():view(-1):tolist(), a:contiguous():view(-1):tolist())
  end)
end)
