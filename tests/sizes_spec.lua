-- sizes_spec.lua — element counts, strides and byte sizes past 2^62 are errors naming the op and the shape
-- (core/src/lt_size.h), never a wrapped int64: before these checks, expanding [1 x 1 x 1 x 1 x 1] to 2^64 + 4
-- elements gave a tensor whose numel was 4. The sizes here need no memory: expanded views of one element.
local lt = require "lutra"

local function err_of(fn)
  local ok, e = pcall(fn)
  assert(not ok, "expected an error, the call succeeded")
  return (tostring(e):gsub("^[^\n]-:%d+: ", ""))
end

-- an n-element tensor that holds one float (stride 0)
local function big(...) return lt.ones(1):expand(...) end

describe("sizes past 2^62", function()
  it("expand to 2^64 + 4 elements is an error naming expand and the shape", function()
    local msg = err_of(function() return lt.ones(1, 1, 1, 1, 1):expand(20, 5581, 8681, 49477, 384773) end)
    assert.are.equal("expand: the result [20 x 5581 x 8681 x 49477 x 384773] has more than 2^62 elements", msg)
  end)

  it("expand up to exactly 2^62 elements is allowed and counts them", function()
    local x = big(2 ^ 31, 2 ^ 31)
    assert.are.equal(2 ^ 62, x:numel())
    assert.are.same({ 2 ^ 31, 2 ^ 31 }, x:shape())
    assert.is.truthy(err_of(function() return big(2 ^ 31, 2 ^ 31, 2) end)
      :find("^expand: the result %[2147483648 x 2147483648 x 2%]"))
  end)

  it("view and reshape of an empty tensor to a shape whose strides would overflow", function()
    -- 0 elements, but the strides of [2^40 x 2^40 x 2^40 x 0] are 2^80 (PyTorch refuses it too)
    assert.is.truthy(err_of(function() return lt.zeros(0):view(2 ^ 40, 2 ^ 40, 2 ^ 40, 0) end)
      :find("^view: the result %[1099511627776 x 1099511627776 x 1099511627776 x 0%] has more than 2%^62 elements"))
    assert.is.truthy(err_of(function() return lt.zeros(0):reshape(2 ^ 40, 2 ^ 40, 2 ^ 40, 0) end)
      :find("^reshape: the result .* has more than 2%^62 elements"))
    -- the same shape within the limit is a legal empty view
    local v = lt.zeros(0):view(2 ^ 31, 2 ^ 31, 0)
    assert.are.equal(0, v:numel())
  end)

  it("view(-1) of a tensor with more than 2^62 elements cannot be made", function()
    -- the tensor that would be viewed is refused first: no tensor counts more than 2^62 elements
    assert.is.truthy(err_of(function() return big(2 ^ 32, 2 ^ 32):view(-1) end):find("^expand: the result"))
  end)

  for _, f in ipairs { "zeros", "ones", "empty", "rand", "randn" } do
    it(f .. " with a shape past 2^62 names " .. f, function()
      assert.is.truthy(err_of(function() return lt[f](2 ^ 31, 2 ^ 31, 2 ^ 31, 0) end)
        :find("^" .. f .. ": the result %[2147483648 x 2147483648 x 2147483648 x 0%] has more than 2%^62 elements"))
    end)
  end

  it("full and randint with a shape past 2^62", function()
    assert.is.truthy(err_of(function() return lt.full({ 2 ^ 40, 2 ^ 40 }, 1) end)
      :find("^full: the result %[1099511627776 x 1099511627776%]"))
    assert.is.truthy(err_of(function() return lt.randint(0, 5, { 2 ^ 40, 2 ^ 40 }) end):find("^randint: the result"))
  end)

  it("broadcasting two shapes whose result has 2^63 elements names the op", function()
    local a, b = big(2 ^ 31, 1), big(1, 2 ^ 32)
    assert.is.truthy(err_of(function() return a + b end):find("^add: the result %[2147483648 x 4294967296%] has more than 2%^62"))
    assert.is.truthy(err_of(function() return a * b end):find("^mul: the result"))
    assert.is.truthy(err_of(function() return lt.where(lt.ones(1):gt(0):expand(2 ^ 31, 1), a, b) end):find("^where: the result"))
  end)

  it("cat whose length along the dim passes 2^62", function()
    local parts = {}
    for i = 1, 513 do parts[i] = big(2 ^ 53) end -- 513 x 2^53 > 2^62
    assert.is.truthy(err_of(function() return lt.cat(parts) end)
      :find("^cat: the result %[4620693217682128896%] has more than 2%^62"))
    assert.is.truthy(err_of(function() return lt.stack(parts, 2) end):find("^cat: the result"))
  end)

  it("conv2d whose output has more than 2^62 elements", function()
    local x = lt.ones(1, 1, 1, 1):expand(1, 1, 2 ^ 31, 2 ^ 31)
    local w = lt.ones(1, 1, 1, 1):expand(1024, 1, 1, 1)
    assert.is.truthy(err_of(function() return lt.F.conv2d(x, w) end)
      :find("^conv2d: the result %[1 x 1024 x 2147483648 x 2147483648%] has more than 2%^62 elements"))
    assert.is.truthy(err_of(function() return lt.F.conv2d(x, w, nil, { dilation = 2, padding = 1 }) end)
      :find("conv2d: the result %[1 x 1024 x 2147483650 x 2147483650%]"))
  end)

  it("conv_transpose2d whose output size passes 2^62 (the product (H - 1) * stride would wrap)", function()
    local x = lt.ones(1, 1, 1, 1):expand(1, 1, 2 ^ 40, 1)
    local w = lt.ones(1, 1, 1, 1)
    assert.is.truthy(err_of(function() return lt.F.conv_transpose2d(x, w, nil, { stride = { 2 ^ 30, 1 } }) end)
      :find("^conv_transpose2d: an output size is past 2%^62 %(input %[1 x 1 x 1099511627776 x 1%]"))
    local wide = lt.ones(1, 1, 1, 1):expand(1, 2 ^ 30, 1, 1)
    assert.is.truthy(err_of(function() return lt.F.conv_transpose2d(x, wide, nil, { stride = { 2 ^ 20, 1 } }) end)
      :find("^conv_transpose2d: the result %[1 x 1073741824 x 1152921504605798401 x 1%]"))
  end)

  it("a safetensors header whose empty tensor's shape passes 2^62 is refused naming the file", function()
    local function le64(n)
      local s = {}
      for i = 1, 8 do s[i] = string.char(n % 256); n = math.floor(n / 256) end
      return table.concat(s)
    end
    local path = os.tmpname()
    -- 2^62 x 2 x 0: 0 bytes of data, as the header says, but its strides pass 2^62
    local hdr = '{"w":{"dtype":"F32","shape":[4611686018427387904,2,0],"data_offsets":[0,0]}}'
    local f = assert(io.open(path, "wb"))
    f:write(le64(#hdr) .. hdr)
    f:close()
    local msg = err_of(function() return lt.load(path) end)
    os.remove(path)
    assert.is.truthy(msg:find(path, 1, true), msg)
    assert.is.truthy(msg:find("the result [4611686018427387904 x 2 x 0] has more than 2^62 elements", 1, true), msg)
  end)
end)
