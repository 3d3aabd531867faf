-- fuzz_spec.lua — bad input across the public Lua API: each call must raise a Lua error whose message names
-- the function and what is wrong (never a crash, an abort or a silent wrong answer), and the legal edge cases
-- next to them (empty tensors, negative indices, 0-dim) must give the right result. Table-driven: one row per
-- (call, expected message pattern); rows are grouped by family. Also run under ASan (tests/run --config asan).
local lt = require "lutra"

-- -(0 / 0): the positive NaN, which every Lua prints "nan" (0 / 0 is negative on x86: PUC Lua prints "-nan")
local NAN, INF = -(0 / 0), math.huge
local Tr = lt.Trainer
local function z(...) return lt.zeros(...) end
local function i64(t) return lt.tensor(t, "int64") end

-- Runs fn; returns the error message (without the "file:line: " position) or fails if fn did not raise.
local function err_of(fn)
  local ok, e = pcall(fn)
  assert(not ok, "expected an error, the call succeeded")
  return (tostring(e):gsub("^[^\n]-:%d+: ", ""))
end

-- Rows: { label, function, pattern (Lua pattern, matched against the message) }.
local function run_rows(rows)
  for _, r in ipairs(rows) do
    it(r[1], function()
      local msg = err_of(r[2])
      assert(msg:find(r[3]), string.format("message %q does not match %q", msg, r[3]))
    end)
  end
end

describe("fuzz: tensor creation", function()
  run_rows {
    { "zeros with a fractional size in a table", function() return lt.zeros { 2.5 } end, "^zeros: size 1 must be an integer, got 2.5" },
    { "zeros with a NaN size", function() return lt.zeros { NAN } end, "^zeros: size 1 must be an integer" },
    { "ones with an infinite size", function() return lt.ones(INF) end, "^ones: size 1 is too large, got inf" },
    { "zeros with a negative size", function() return lt.zeros(-1) end, "size %-1 of dim 1 is negative" },
    { "zeros with 9 dims", function() return lt.zeros(1, 1, 1, 1, 1, 1, 1, 1, 1) end, "^zeros: at most 8 dimensions" },
    { "zeros{} with 9 dims", function() return lt.zeros { 1, 1, 1, 1, 1, 1, 1, 1, 1 } end, "^zeros: 9 dimensions requested" },
    { "zeros past 2^62 elements", function() return lt.zeros(1e15, 1e15) end, "^zeros: the result %[1000000000000000 x 1000000000000000%] has more than 2%^62 elements" },
    { "zeros with a string in the shape", function() return lt.zeros { 2, "a" } end, "^zeros: size 2 of the shape must be a number, got string" },
    { "zeros with an unknown dtype", function() return lt.zeros(2, "int8") end, "^zeros: unknown dtype 'int8'" },
    { "zeros with a boolean dtype", function() return lt.zeros(2, true) end, "^zeros: dtype must be a string" },
    { "full without a shape table", function() return lt.full(2, 3) end, "'full' %(shape table expected, got number%)" },
    { "full int64 with a NaN value", function() return lt.full({ 2 }, NAN, "int64") end, "^full: value .* is not an int64 value" },
    { "arange to infinity", function() return lt.arange(0, INF) end, "^arange: start, end and step must be finite" },
    { "arange with a NaN step", function() return lt.arange(0, 10, NAN) end, "^arange: start, end and step must be finite" },
    { "arange of 1e300 elements", function() return lt.arange(1e300) end, "^arange: .*too many to allocate" },
    { "arange with step 0", function() return lt.arange(0, 10, 0) end, "^arange: step must be nonzero" },
    { "arange reversed", function() return lt.arange(0, 10, -1) end, "^arange: the range %[0, 10%) is empty or reversed" },
    { "int64 arange past 2^63", function() return lt.arange(9.3e18, 9.3e18 + 4096, 2048, "int64") end, "^arange: int64 values must lie in %-2%^63..2%^63%-1" },
    { "int64 arange below -2^63", function() return lt.arange(-9.3e18, -9.3e18 + 4096, 2048, "int64") end, "^arange: int64 values must lie in" },
    { "eye(inf)", function() return lt.eye(INF) end, "^eye: n inf is out of range" },
    { "eye with a negative m", function() return lt.eye(3, -2) end, "^eye: m %-2 is out of range" },
    { "tensor from a string", function() return lt.tensor("abc") end, "^tensor: expected a nested table of numbers, a number or a tensor, got string" },
    { "tensor with a string element", function() return lt.tensor { 1, "a" } end, "^tensor: element 2 at depth 1 is a string" },
    { "tensor from a ragged table", function() return lt.tensor { { 1, 2 }, { 3 } } end, "^tensor: ragged nested table" },
    { "tensor nested 9 deep", function() return lt.tensor { { { { { { { { { 1 } } } } } } } } } end, "^tensor: nested tables deeper than 8" },
    { "int64 tensor with NaN", function() return lt.tensor({ NAN }, "int64") end, "^tensor: element 1 at depth 1 is .*not an int64 value" },
    { "int64 tensor with 1e30", function() return lt.tensor({ 1e30 }, "int64") end, "^tensor: element 1 at depth 1 is 1e%+30" },
    { "int64 0-dim tensor of NaN", function() return lt.tensor(NAN, "int64") end, "^tensor: value .*nan is not an int64 value" },
    { "int64 0-dim tensor of 2^63", function() return lt.tensor(2 ^ 63, "int64") end, "^tensor: value 9.2233720368548e%+18 is not an int64 value" },
    { "zeros_like of a number", function() return lt.zeros_like(3) end, "'zeros_like' %(tensor expected, got number%)" },
    { "manual_seed(NaN)", function() return lt.manual_seed(NAN) end, "^manual_seed: the seed must be an integer" },
    { "random_integer(NaN)", function() return lt.random_integer(NAN) end, "^random_integer: n must be an integer" },
    { "random_integer(2^70)", function() return lt.random_integer(2 ^ 70) end, "^random_integer: n .* is out of range" },
    { "randperm(2.5)", function() return lt.randperm(2.5) end, "^randperm: n must be an integer, got 2.5" },
    { "randperm(-1)", function() return lt.randperm(-1) end, "^randperm: n %-1 is out of range" },
    { "set_rng_state with a short string", function() return lt.set_rng_state("zz") end, "^set_rng_state: expected a 64%-character hex string" },
    { "set_num_threads(1e12)", function() return lt.set_num_threads(1e12) end, "^set_num_threads: n 1000000000000 is out of range" },
  }
  it("accepts the legal edge cases with the right result", function()
    assert.same({ 0, 3 }, lt.empty(0, 3):shape())
    assert.same({ 2, 0 }, lt.tensor { {}, {} }:shape())
    assert.same({ 1, 1, 1, 1, 1, 1, 1, 1 }, lt.tensor { { { { { { { { 7 } } } } } } } }:shape())
    assert.same({ 1, 0 }, lt.tensor { true, false }:flatten():tolist())
    assert.same({ 0, 1, 2 }, lt.arange(0, 3, 1, "int64"):flatten():tolist())
    assert.equal(0, lt.randperm(0):numel())
    assert.same({ 1, -2 }, lt.tensor { 1.7, -2.5 }:long():flatten():tolist()) -- truncation toward zero, as C and PyTorch
  end)
end)

describe("fuzz: queries and views", function()
  local x = z(2, 3)
  run_rows {
    { "size(0)", function() return x:size(0) end, "^size: dim 0 out of range for a 2%-dimensional tensor %(expected 1..2, or %-2..%-1%)" },
    { "size(3)", function() return x:size(3) end, "^size: dim 3 out of range" },
    { "size(1.5)", function() return x:size(1.5) end, "^size: dim must be an integer, got 1.5" },
    { "size(NaN)", function() return x:size(NAN) end, "^size: dim must be an integer" },
    { "size(inf)", function() return x:size(INF) end, "^size: dim inf out of range" },
    { "size(2^40)", function() return x:size(2 ^ 40) end, "^size: dim 1099511627776 out of range" },
    { "size(2) of a 0-dim tensor", function() return lt.tensor(3):size(2) end, "^size: dim 2 out of range for a 0%-dimensional tensor %(expected 1 or %-1%)" },
    { "#x of a 0-dim tensor", function() return #lt.tensor(3) end, "^#: a 0%-dim tensor has no length" },
    { "item of 6 elements", function() return x:item() end, "^item: the tensor has 6 elements %(shape %[2 x 3%]%)" },
    { "item of an empty tensor", function() return z(0, 3):item() end, "^item: the tensor has 0 elements" },
    { "view to the wrong numel", function() return x:view(4) end, "^view: shape %[4%] is invalid for a tensor of 6 elements" },
    { "view with two -1", function() return x:view(-1, -1) end, "^view: only one size may be %-1" },
    { "view of a transposed tensor", function() return x:t():view(6) end, "^view: the tensor's layout is not compatible" },
    { "view{inf}", function() return x:view { INF } end, "^view: size 1 is too large" },
    { "reshape with a string", function() return x:reshape("a") end, "^reshape: size 1 must be a number, got string" },
    { "reshape to the wrong numel", function() return x:reshape(7) end, "^reshape: shape %[7%] is invalid for a tensor of 6 elements %(shape %[2 x 3%]%)" },
    { "reshape with -1 that does not divide", function() return x:reshape(-1, 4) end, "^reshape: shape %[%-1 x 4%] is invalid for a tensor of 6 elements" },
    { "reshape of a transposed tensor to the wrong numel", function() return x:t():reshape(7) end, "^reshape: shape %[7%] is invalid" },
    { "view whose sizes multiply past int64", function() return x:view(2 ^ 40, 2 ^ 40, 2 ^ 40) end, "^view: shape %[1099511627776 x 1099511627776 x 1099511627776%] is invalid for a tensor of 6 elements" },
    { "reshape whose sizes multiply past int64, with -1", function() return x:reshape(-1, 2 ^ 40, 2 ^ 40) end, "^reshape: shape %[%-1 x 1099511627776 x 1099511627776%] is invalid" },
    { "expand with a trailing table", function() return x:expand(2, 3, {}) end, "^expand: size 3 must be a number, got table" },
    { "t() of a 3-d tensor", function() return z(2, 3, 4):t() end, "^t: expects a tensor with <= 2 dims, got %[2 x 3 x 4%]" },
    { "transpose(1, 3)", function() return x:transpose(1, 3) end, "^transpose: dim 3 out of range" },
    { "transpose of a 0-dim tensor", function() return lt.tensor(1):transpose(1, 1) end, "^transpose: the tensor is 0%-dimensional" },
    { "permute(1, 1)", function() return x:permute(1, 1) end, "^permute: the dims must be a permutation of 1..2" },
    { "permute(1)", function() return x:permute(1) end, "^permute: 1 dims given for a 2%-dimensional tensor" },
    { "narrow start 0", function() return x:narrow(1, 0, 1) end, "^narrow: start 0 is out of range %(1%-based%)" },
    { "narrow past the end", function() return x:narrow(1, 2, 2) end, "^narrow: start 2 and length 2 do not fit dim 1 of size 2" },
    { "narrow with a negative length", function() return x:narrow(1, 1, -1) end, "^narrow: start 1 and length %-1 do not fit" },
    { "narrow with length 2^62", function() return x:narrow(1, 1, 2 ^ 62) end, "^narrow: length .* is out of range" },
    { "narrow with NaN start", function() return x:narrow(1, NAN, 1) end, "^narrow: start must be an integer" },
    { "select index 0", function() return x:select(1, 0) end, "^select: index 0 out of range 1..2 of dim 1" },
    { "select index -3", function() return x:select(1, -3) end, "^select: index 0 out of range 1..2 of dim 1" },
    { "select of a 0-dim tensor", function() return lt.tensor(5):select(1, 1) end, "^select: the tensor is 0%-dimensional" },
    { "x[0]", function() return x[0] end, "^select: index 0 out of range 1..2 of dim 1" },
    { "x[3]", function() return x[3] end, "^select: index 3 out of range" },
    { "x[1.5]", function() return x[1.5] end, "^index: row index must be an integer, got 1.5" },
    { "x[NaN]", function() return x[NAN] end, "^index: row index must be an integer" },
    { "x[1] of a 0-dim tensor", function() return lt.tensor(5)[1] end, "^index: cannot index a 0%-dim tensor" },
    { "x[3] = 1", function() x[3] = 1 end, "^select: index 3 out of range" },
    { "x[1] = a tensor of the wrong size", function() x[1] = z(4) end, "^copy_: shapes %[3%] and %[4%] cannot be broadcast" },
    { "x[1] = a string", function() x[1] = "a" end, "number expected, got string" },
    { "x.foo = 1", function() x.foo = 1 end, "^tensor: cannot set field 'foo'" },
    { "x.grad of the wrong shape", function() x.grad = z(3) end, "^grad: assigned gradient has shape %[3%], the tensor has %[2 x 3%]" },
    { "x.grad of the wrong dtype", function() x.grad = z(2, 3, "int64") end, "^grad: assigned gradient is int64, the tensor is float32" },
    { "x.grad = a number", function() x.grad = 5 end, "'grad' %(tensor expected, got number%)" },
    { "unsqueeze past ndim + 1", function() return x:unsqueeze(4) end, "^unsqueeze: dim 4 out of range for a 3%-dimensional tensor" },
    { "unsqueeze to 9 dims", function() return z(1, 1, 1, 1, 1, 1, 1, 1):unsqueeze(1) end, "^unsqueeze: at most 8 dimensions" },
    { "squeeze(3)", function() return x:squeeze(3) end, "^squeeze: dim 3 out of range" },
    { "expand a non-1 dim", function() return x:expand(4, 3) end, "^expand: cannot expand %[2 x 3%] to %[4 x 3%]" },
    { "flatten(2, 1)", function() return x:flatten(2, 1) end, "^flatten: start dim 2 is after end dim 1" },
    { "type('int32')", function() return x:type("int32") end, "^type: unknown dtype 'int32'" },
    { "long() of NaN", function() return lt.tensor { 1, NAN }:long() end, "^long: to int64: element 2 %(flat, 1%-based%) is .*nan, which has no int64 value" },
    { "long() of 1e30", function() return lt.tensor { 1e30 }:long() end, "^long: to int64: element 1 .* is 1e%+30" },
    { "requires_grad on int64", function() return z(2, "int64"):requires_grad(true) end, "^requires_grad: only float32 and float64 tensors can require grad, got int64" },
    { "param of int64", function() return lt.param(z(2, "int64")) end, "^param: only float32 and float64 tensors" },
  }
  it("accepts the legal edge cases with the right result", function()
    local y = lt.tensor { { 1, 2, 3 }, { 4, 5, 6 } }
    assert.same({ 4, 5, 6 }, y[-1]:flatten():tolist())
    assert.same({ 1, 2, 3 }, y:select(1, -2):flatten():tolist())
    assert.same({ 0, 3 }, y:narrow(1, 3, 0):shape())
    assert.equal(1, lt.tensor(3):size(1))
    assert.same({ 0 }, z(0, 3):view(-1):shape())
    assert.same({ 2, 3 }, y:expand(2, -1):shape())
    assert.same({ 6 }, y:flatten():shape())
  end)
end)

describe("fuzz: maths", function()
  local x = z(2, 3)
  run_rows {
    { "add with unbroadcastable shapes", function() return x + z(4) end, "^add: shapes %[2 x 3%] and %[4%] cannot be broadcast" },
    { "add a string", function() return x + "a" end, "^add: expected tensors or numbers, got userdata and string" },
    { "add nil", function() return x + nil end, "^add: expected tensors or numbers, got userdata and nil" },
    { "softmax of int64", function() return z(2, "int64"):softmax() end, "^softmax: input must be float32, got int64" },
    { "matmul of int64", function() return z(2, "int64"):matmul(z(2, "int64")) end, "^matmul: a must be float32, got int64" },
    { "matmul shape mismatch", function() return x:matmul(z(4, 5)) end, "^matmul: shape mismatch: a is %[2 x 3%], b is %[4 x 5%] %(a:size%(2%) must equal b:size%(1%)%)" },
    { "matmul of a 0-dim tensor", function() return lt.tensor(1):matmul(z(3)) end, "^matmul: both arguments must have at least 1 dimension" },
    { "matmul unbroadcastable batches", function() return z(2, 2, 3):matmul(z(3, 3, 4)) end, "^matmul: batch dims of a %[2 x 2 x 3%] and b %[3 x 3 x 4%] cannot be broadcast" },
    { "matmul with a number", function() return x:matmul(3) end, "'matmul' %(tensor expected, got number%)" },
    { "linear with wrong features", function() return lt.linear(x, z(4, 5)) end, "^linear: input has 3 features, expected 5" },
    { "linear with a wrong bias", function() return lt.linear(x, z(4, 3), z(5)) end, "^linear: bias must be float32 %[4%], got %[5%]" },
    { "sum(3)", function() return x:sum(3) end, "^sum: dim 3 out of range" },
    { "sum('a')", function() return x:sum("a") end, "^sum: dim must be a number, got string" },
    { "max of an empty tensor", function() return z(0, 3):max() end, "^max: cannot reduce an empty dimension %(shape %[0 x 3%]%)" },
    { "max(1) of an empty dim", function() return z(0, 3):max(1) end, "^max: cannot reduce an empty dimension" },
    { "max with an unbroadcastable tensor", function() return x:max(z(4)) end, "^maximum: shapes %[2 x 3%] and %[4%] cannot be broadcast" },
    { "softmax(3)", function() return x:softmax(3) end, "^softmax: dim 3 out of range" },
    { "cat of an empty list", function() return lt.cat {} end, "^cat: expected a non%-empty list of tensors" },
    { "cat with a number in the list", function() return lt.cat { z(2), 5 } end, "^cat: element 2 of the list is a number, expected a tensor" },
    { "cat of mismatched shapes", function() return lt.cat({ z(2, 3), z(3, 3) }, 2) end, "^cat: tensor 2 has shape %[3 x 3%] %(float32%), tensor 1 has %[2 x 3%]" },
    { "cat of mixed dtypes", function() return lt.cat({ z(2, 3), z(2, 3, "int64") }, 1) end, "^cat: tensor 2 has shape %[2 x 3%] %(int64%)" },
    { "cat of 0-dim tensors", function() return lt.cat { lt.tensor(1), lt.tensor(2) } end, "^cat: tensor 1 is 0%-dimensional and cannot be concatenated" },
    { "cat(dim 3)", function() return lt.cat({ x }, 3) end, "^cat: dim 3 out of range" },
    { "stack of mismatched shapes", function() return lt.stack { z(2), z(3) } end, "^stack: tensor 2 has shape %[3%], tensor 1 has %[2%]" },
    { "stack of mixed dtypes", function() return lt.stack { z(2), z(2, "int64") } end, "^stack: tensor 2 is int64, tensor 1 is float32" },
    { "stack to 9 dims", function() return lt.stack { z(1, 1, 1, 1, 1, 1, 1, 1) } end, "^unsqueeze: at most 8 dimensions" },
    { "gather index past the end", function() return lt.gather(x, 2, i64 { { 1 }, { 4 } }) end, "^gather: index 4 out of range 1..3 of dim 2" },
    { "gather index 0", function() return lt.gather(x, 2, i64 { { 1 }, { 0 } }) end, "^gather: index 0 is out of range %(indices are 1%-based%)" },
    { "gather float32 index", function() return lt.gather(x, 2, lt.tensor { { 1 }, { 2 } }) end, "^gather: index must be int64, got float32" },
    { "gather index of fewer dims", function() return lt.gather(x, 2, i64 { 1, 2 }) end, "^gather: index %[2%] must have as many dims as the input %[2 x 3%]" },
    { "gather of a 0-dim tensor", function() return lt.gather(lt.tensor(1), 1, i64 { 1 }) end, "^gather: the tensor is 0%-dimensional" },
    { "index_select past the end", function() return lt.index_select(x, 1, i64 { 3 }) end, "^index_select: index 3 out of range 1..2 of dim 1" },
    { "index_select 2-d index", function() return lt.index_select(x, 1, i64 { { 1 } }) end, "^index_select: index must be 1%-D, got %[1 x 1%]" },
    -- int64 values from 2^63 - 512 up round to 2^63 through a double: indices are read as int64, not doubles
    { "index_select with an index near 2^63", function() return lt.index_select(x, 1, i64 { 2 ^ 63 - 1024 } + 1000) end, "^index_select: index 9223372036854775784 out of range 1..2 of dim 1" },
    { "int64 + 1e300", function() return i64 { 1 } + 1e300 end, "^add: the scalar 1e%+300 is outside int64's range %(the tensor is int64: convert it with :float%(%) first%)" },
    { "int64 * -inf", function() return i64 { 1 }:mul(-INF) end, "^mul: the scalar %-inf is outside int64's range" },
    { "int64 add_(inf)", function() return i64 { 1 }:add_(INF) end, "^add_: the scalar inf is outside int64's range" },
    -- a number first with alpha: the scalar reaches the core without the operators' path (the API fuzz found
    -- fill_'s message here, not add's)
    { "2^63 + int64 * alpha", function() return lt.add(2 ^ 63, i64 { 1, 2 }, -3) end, "^add: the scalar 9%.2233720368548e%+18 is outside int64's range %(the tensor is int64: convert it with :float%(%) first%)" },
    { "int64 x[1] = 1e300", function() local y = i64 { 1, 2 }; y[1] = 1e300 end, "^index: value 1e%+300 is not an int64 value %(the tensor is int64%)" },
    { "x[1] = string", function() local y = z(2); y[1] = "a" end, "^bad argument #3 to '__newindex' %(number expected, got string%)" },
    { "where unbroadcastable", function() return lt.where(z(2), z(3), z(2)) end, "^where: shapes %[3%] and %[2%] cannot be broadcast" },
    { "where with a string", function() return lt.where(z(2), 1, "a") end, "^where: expected %(cond, a, b%) with a and b tensors or numbers" },
    { "clamp min > max", function() return lt.clamp(z(2), 1, 0) end, "^clamp: min 1 is greater than max 0" },
    { "clamp with a NaN bound", function() return lt.clamp(z(2), NAN, 1) end, "^clamp: min is nan" },
    { "clamp of int64", function() return lt.clamp(z(2, "int64"), 0, 1) end, "^clamp: input must be float32, got int64" },
  }
  it("accepts the legal edge cases with the right result", function()
    assert.equal(0, z(0, 3):sum():item())
    assert.same({ 0 }, z(0, 3):max(2):shape())
    assert.same({ 0, 5 }, z(0, 3):matmul(z(3, 5)):shape())
    assert.same({ 0, 0 }, lt.ones(2, 0):matmul(z(0, 2)):sum(1):flatten():tolist())
    assert.same({ 2, 3 }, lt.cat { z(0, 3), z(2, 3) }:shape())
    assert.same({ 0, 3 }, lt.index_select(x, 1, z(0, "int64")):shape())
    assert.same({ 1, 2 }, lt.stack { lt.tensor(1), lt.tensor(2) }:flatten():tolist())
    assert.same({ 3.5 }, (lt.tensor({ 7 }, "int64") / 2):flatten():tolist())
    assert.equal(2, lt.tensor { 1, NAN, 3 }:argmax():item()) -- NaN is the maximum, as in PyTorch
  end)
end)

describe("fuzz: in-place ops", function()
  run_rows {
    { "add_ an expanded view", function() return z(1, 3):expand(2, 3):add_(1) end, "^add_: the tensor's elements overlap in memory %(an expand%(%)ed view: dim 1 has stride 0%)" },
    { "mul_ an expanded view", function() return z(3, 1):expand(3, 4):mul_(z(3, 4)) end, "^mul_: the tensor's elements overlap in memory .*dim 2" },
    { "exp_ an expanded view", function() return z(1, 3):expand(2, 3):exp_() end, "^exp_: the tensor's elements overlap" },
    { "clamp_ an expanded view", function() return z(1, 3):expand(2, 3):clamp_(0, 1) end, "^clamp_: the tensor's elements overlap" },
    { "copy_ into an expanded view", function() return z(1, 3):expand(2, 3):copy_(lt.ones(2, 3)) end, "^copy_: the tensor's elements overlap" },
    { "add_ that would grow the tensor", function() return z(2):add_(z(2, 2)) end, "^add_: the result would have shape %[2 x 2%], but the tensor updated in place is %[2%]" },
    { "add_ a string", function() return z(2):add_("a") end, "number expected, got string" },
    { "add_ with a string alpha", function() return z(2):add_(z(2), "x") end, "number expected, got string" },
    { "add_ 1.5 to int64", function() return z(2, "int64"):add_(1.5) end, "^add_: cannot update an int64 tensor in place with a non%-integer result" },
    { "add_ float32 to int64", function() return z(2, "int64"):add_(z(2)) end, "^add_: cannot update an int64 tensor in place with a float32 result" },
    { "exp_ of int64", function() return z(2, "int64"):exp_() end, "^exp: the tensor updated in place must be float32, got int64" },
    { "add_ to a leaf that requires grad", function() return lt.param(z(2)):add_(1) end, "^add: in%-place operation on a tensor that requires grad" },
    { "copy_ of the wrong size", function() return z(2):copy_(z(3)) end, "^copy_: shapes %[2%] and %[3%] cannot be broadcast" },
    { "copy_ NaN into int64", function() return z(2, "int64"):copy_(lt.tensor { 1, INF }) end, "^copy_: element 2 %(flat, 1%-based%) is inf, which has no int64 value" },
    { "fill_ int64 with NaN", function() return z(2, "int64"):fill_(NAN) end, "^fill_: value .* is not an int64 value" },
    { "fill_ int64 with 1e30", function() return z(2, "int64"):fill_(1e30) end, "^fill_: value 1e%+30 is not an int64 value" },
    { "uniform_ a > b", function() return z(2):uniform_(1, 0) end, "^uniform_: expected a <= b, got a=1, b=0" },
    { "normal_ with a NaN std", function() return z(2):normal_(0, NAN) end, "^normal_: std must be >= 0" },
    { "uniform_ of int64", function() return z(2, "int64"):uniform_() end, "^uniform_: the tensor must be float32, got int64" },
  }
  it("accepts the legal in-place cases with the right result", function()
    assert.same({ 3, 3 }, lt.ones(2):add_(lt.ones(2), 2):flatten():tolist())
    assert.same({ 1, 1, 1, 1, 1, 1 }, z(1, 3):expand(2, 3):fill_(1):flatten():tolist()) -- every element gets the same value
    assert.same({ 1, 1, 1, 1, 1, 1 }, z(2, 3):expand(2, 3):add_(1):flatten():tolist()) -- expand to the same shape: no overlap
    assert.same({ 5, 5 }, z(2, "int64"):fill_(5):flatten():tolist())
  end)
end)

describe("fuzz: autograd", function()
  run_rows {
    { "backward without grad", function() return z(2):backward() end, "^backward: the tensor does not require grad and has no grad_fn" },
    { "backward of a vector", function() return lt.param(z(2)):mul(2):backward() end, "^backward: grad can be implicitly created only for a tensor with one element, got shape %[2%]" },
    { "backward with a wrong-shaped gradient", function() return lt.param(z(2)):sum():backward(z(3)) end, "^backward: gradient has shape %[3%], expected the tensor's shape %[%]" },
    { "backward with an int64 gradient", function() return lt.param(z(2)):sum():backward(lt.tensor(1, "int64")) end, "^backward: gradient must be float32, got int64" },
    { "backward with a number", function() return lt.param(z(2)):sum():backward(5) end, "'backward' %(tensor expected, got number%)" },
    { "backward twice", function()
      local l = lt.param(z(2)):sum()
      l:backward()
      l:backward()
    end, "^backward: the graph of this result was already freed by an earlier backward%(%) %(sum%)" },
    { "requires_grad(false) on an op result", function() return lt.param(z(2)):mul(2):requires_grad(false) end, "^requires_grad: cannot turn off grad on a result of an op" },
    { "no_grad of a number", function() return lt.no_grad(5) end, "^bad argument #1 to 'no_grad' %(function expected, got number%)" },
  }
end)

describe("fuzz: nn functions (lt.F)", function()
  local F = lt.F
  local img, w = z(1, 1, 5, 5), z(2, 1, 3, 3)
  local tgt = i64 { 1, 2 }
  run_rows {
    { "conv2d of a 2-d input", function() return F.conv2d(z(5, 5), w) end, "^conv2d: input must be 4%-D %[batch x channels x height x width%] or unbatched 3%-D, got %[5 x 5%]" },
    { "conv2d channel mismatch", function() return F.conv2d(z(1, 2, 5, 5), w) end, "^conv2d: input has 2 channels, expected 1" },
    { "conv2d kernel larger than the input", function() return F.conv2d(z(1, 1, 2, 2), w) end, "^conv2d: kernel 3x3 is larger than the padded input 2x2" },
    { "conv2d with an empty kernel", function() return F.conv2d(img, z(2, 1, 0, 3)) end, "^conv2d: the kernel must be at least 1x1, got weight %[2 x 1 x 0 x 3%]" },
    { "conv2d with a wrong bias", function() return F.conv2d(img, w, z(3)) end, "^conv2d: bias must be %[2%], got %[3%]" },
    { "conv2d stride 0", function() return F.conv2d(img, w, nil, 0) end, "conv2d: stride must be an integer >= 1, got 0" },
    { "conv2d stride inf", function() return F.conv2d(img, w, nil, INF) end, "conv2d: stride must be an integer >= 1, got inf" },
    { "conv2d padding inf", function() return F.conv2d(img, w, nil, 1, INF) end, "conv2d: padding must be an integer >= 0, got inf" },
    { "conv2d stride NaN option", function() return F.conv2d(img, w, nil, { stride = NAN }) end, "conv2d: stride must be an integer >= 1, got nan" },
    { "conv2d unknown option", function() return F.conv2d(img, w, nil, { strid = 1 }) end, "^conv2d: unknown option 'strid' %(known options: dilation, groups, padding, stride%)" },
    { "conv2d of int64", function() return F.conv2d(z(1, 1, 5, 5, "int64"), w) end, "^conv2d: input must be float32, got int64" },
    { "conv2d core stride 2^40", function() return lt._nn.conv2d(img, w, nil, 2 ^ 40, 1, 0, 0) end, "^conv2d: stride 1099511627776 is out of range" },
    { "conv2d core NaN padding", function() return lt._nn.conv2d(img, w, nil, 1, 1, NAN, 0) end, "^conv2d: padding must be an integer" },
    { "max_pool2d kernel 0", function() return F.max_pool2d(z(1, 1, 4, 4), 0) end, "max_pool2d: kernel_size must be an integer >= 1, got 0" },
    { "max_pool2d kernel 2^40", function() return F.max_pool2d(z(1, 1, 4, 4), 2 ^ 40) end, "max_pool2d: kernel_size must be an integer >= 1" },
    { "max_pool2d kernel larger than the input", function() return F.max_pool2d(z(1, 1, 4, 4), 5) end, "^max_pool2d: kernel 5x5 is larger than the padded input 4x4" },
    { "max_pool2d padding > half the kernel", function() return F.max_pool2d(z(1, 1, 4, 4), 2, 2, 2) end, "^max_pool2d: padding 2x2 must be at most half the kernel 2x2" },
    { "max_pool2d of a 2-d input", function() return F.max_pool2d(z(4, 4), 2) end, "^max_pool2d: input must be 4%-D" },
    { "avg_pool2d option of the wrong type", function() return F.avg_pool2d(z(1, 1, 4, 4), 2, { count_include_pad = 1 }) end, "avg_pool2d: option 'count_include_pad' must be a boolean, got number" },
    { "dropout p 1.5", function() return F.dropout(z(4), 1.5) end, "^dropout: probability has to be between 0 and 1, got 1.5" },
    { "dropout p NaN", function() return F.dropout(z(4), NAN) end, "^dropout: probability has to be between 0 and 1" },
    { "batch_norm running_mean size", function() return F.batch_norm(z(2, 3), z(4), lt.ones(3)) end, "^batch_norm: running_mean must be %[3%] %(one per channel%), got %[4%]" },
    { "batch_norm eval without stats", function() return F.batch_norm(z(2, 3)) end, "^batch_norm: eval mode needs running_mean and running_var" },
    { "batch_norm one value per channel", function() return F.batch_norm(z(1, 3), nil, nil, nil, nil, true) end, "^batch_norm: expected more than 1 value per channel when training" },
    { "batch_norm negative eps", function() return F.batch_norm(z(2, 3), z(3), lt.ones(3), nil, nil, false, 0.1, -1) end, "^batch_norm: eps must be a finite number >= 0, got %-1" },
    { "batch_norm NaN momentum", function() return F.batch_norm(z(2, 3), z(3), lt.ones(3), nil, nil, true, NAN) end, "^batch_norm: momentum must be finite" },
    { "layer_norm wrong shape", function() return F.layer_norm(z(2, 3), 4) end, "^layer_norm: input %[2 x 3%] does not end with the normalized shape %[4%]" },
    { "layer_norm shape of the wrong type", function() return F.layer_norm(z(2, 3), "a") end, "^layer_norm: normalized_shape must be a number or a list of sizes, got string" },
    { "layer_norm negative eps", function() return F.layer_norm(z(2, 3), 3, nil, nil, -1) end, "^layer_norm: eps must be a finite number >= 0" },
    { "layer_norm wrong weight", function() return F.layer_norm(z(2, 3), 3, z(4)) end, "^layer_norm: weight is %[4%], expected the input's last 1 dims %[3%]" },
    { "embedding index past the end", function() return F.embedding(i64 { 1, 5 }, z(4, 2)) end, "^embedding: index 5 is out of range 1..4 %(indices are 1%-based%)" },
    { "embedding index 0", function() return F.embedding(i64 { 0 }, z(4, 2)) end, "^embedding: index 0 is out of range 1..4" },
    { "embedding float32 indices", function() return F.embedding(lt.tensor { 1 }, z(4, 2)) end, "^embedding: indices must be int64, got float32" },
    { "embedding 1-d weight", function() return F.embedding(i64 { 1 }, z(4)) end, "^embedding: weight must be 2%-D" },
    { "embedding padding_idx past the end", function() return F.embedding(i64 { 1 }, z(4, 2), 7) end, "^embedding: padding_idx 7 is out of range 1..4" },
    { "embedding padding_idx 0", function() return F.embedding(i64 { 1 }, z(4, 2), 0) end, "^embedding: padding_idx 0 is out of range" },
    { "cross_entropy target past the classes", function() return F.cross_entropy(z(2, 3), i64 { 1, 4 }) end, "^cross_entropy: target 4 is out of range 1..3 %(class targets are 1%-based%)" },
    { "cross_entropy target 0", function() return F.cross_entropy(z(2, 3), i64 { 0, 1 }) end, "^cross_entropy: target 0 is out of range 1..3" },
    { "cross_entropy float32 target", function() return F.cross_entropy(z(2, 3), lt.tensor { 1, 2 }) end, "^cross_entropy: target must be int64, got float32" },
    { "cross_entropy target size", function() return F.cross_entropy(z(2, 3), i64 { 1, 2, 3 }) end, "^cross_entropy: target %[3%] does not match input %[2 x 3%]" },
    { "cross_entropy 0-dim input", function() return F.cross_entropy(lt.tensor(1), lt.tensor(1, "int64")) end, "^cross_entropy: input must be %[batch x classes%]" },
    { "cross_entropy unknown reduction", function() return F.cross_entropy(z(2, 3), tgt, "avg") end, "^cross_entropy: reduction must be \"mean\", \"sum\" or \"none\", got \"avg\"" },
    { "cross_entropy unknown option", function() return F.cross_entropy(z(2, 3), tgt, { reduce = "sum" }) end, "^cross_entropy: unknown option 'reduce'" },
    { "cross_entropy label_smoothing NaN", function() return F.cross_entropy(z(2, 3), tgt, { label_smoothing = NAN }) end, "^cross_entropy: label_smoothing must be between 0 and 1" },
    { "cross_entropy weight size", function() return F.cross_entropy(z(2, 3), tgt, { weight = z(4) }) end, "^cross_entropy: weight must be %[3%] %(one per class%), got %[4%]" },
    { "cross_entropy ignore_index 1.5", function() return F.cross_entropy(z(2, 3), tgt, { ignore_index = 1.5 }) end, "^cross_entropy: ignore_index must be an integer, got 1.5" },
    { "cross_entropy options of the wrong type", function() return F.cross_entropy(z(2, 3), tgt, 5) end, "^cross_entropy: options must be a table, got number" },
    { "nll_loss target past the classes", function() return F.nll_loss(z(2, 3), i64 { 1, 4 }) end, "^nll_loss: target 4 is out of range 1..3" },
    { "nll_loss target -2^63", function() return F.nll_loss(z(2, 3), i64 { 1, -2 ^ 63 }) end, "^nll_loss: target %-9223372036854775808 is out of range %(targets are 1%-based%)" },
    { "cross_entropy target near 2^63", function() return F.cross_entropy(z(1, 3), i64 { 2 ^ 63 - 1024 } + 1000) end, "^cross_entropy: target 9223372036854775784 is out of range 1..3" },
    { "nll_loss ignore_index NaN", function() return F.nll_loss(z(2, 3), tgt, { ignore_index = NAN }) end, "^nll_loss: ignore_index must be an integer" },
    { "mse_loss shape mismatch", function() return F.mse_loss(z(2, 3), z(3, 2)) end, "^mse_loss: input %[2 x 3%] and target %[3 x 2%] must have the same shape" },
    { "mse_loss int64 target", function() return F.mse_loss(z(2, 3), z(2, 3, "int64")) end, "^mse_loss: target must be float32, got int64" },
    { "l1_loss shape mismatch", function() return F.l1_loss(z(2, 3), z(3)) end, "^l1_loss: input %[2 x 3%] and target %[3%] must have the same shape" },
    { "bce_with_logits pos_weight size", function() return F.binary_cross_entropy_with_logits(z(2, 3), z(2, 3), { pos_weight = z(4) }) end, "^binary_cross_entropy_with_logits: pos_weight must be %[3%]" },
    { "rnn_layer shapes", function() return lt._nn.rnn_layer("lstm", z(2, 1, 7), z(8, 2), nil, z(1, 2), z(1, 2)) end, "^rnn_layer: xg must be %[seq x batch x 4%*hidden%] with seq >= 1, got %[2 x 1 x 7%]" },
  }
  it("accepts the legal edge cases with the right result", function()
    assert.same({ 0, 2, 3, 3 }, F.conv2d(z(0, 1, 5, 5), w):shape())
    assert.same({ 0, 1, 2, 2 }, F.max_pool2d(z(0, 1, 4, 4), 2):shape())
    assert.same({ 0, 0, 0, 0 }, F.dropout(lt.ones(4), 1):flatten():tolist())
    assert.same({ 2 }, F.embedding(lt.tensor(1, "int64"), lt.ones(4, 2)):shape())
    local wt = lt.param(lt.ones(4, 2)) -- padding_idx -1 is row 4: it gets no gradient
    F.embedding(i64 { 4, 1 }, wt, -1):sum():backward()
    assert.same({ 1, 1, 0, 0, 0, 0, 0, 0 }, wt.grad:flatten():tolist())
    assert.near(math.log(3), F.cross_entropy(z(2, 3), i64 { 1, 2 }, { ignore_index = 1 }):item(), 1e-6)
  end)
end)

describe("fuzz: nn modules", function()
  local nn = lt.nn
  run_rows {
    { "Linear without sizes", function() return nn.Linear() end, "^Linear: in_features must be an integer >= 0, got nil" },
    { "Linear with inf features", function() return nn.Linear(INF, 3) end, "^Linear: in_features must be an integer >= 0, got inf" },
    { "Linear with NaN features", function() return nn.Linear(3, NAN) end, "^Linear: out_features must be an integer >= 0, got nan" },
    { "Linear unknown option", function() return nn.Linear(3, 4, { baias = false }) end, "^Linear: unknown option 'baias' %(known options: bias%)" },
    { "Linear option of the wrong type", function() return nn.Linear(3, 4, { bias = 1 }) end, "^Linear: option 'bias' must be a boolean, got number" },
    { "Linear forward wrong features", function() return nn.Linear(3, 4)(z(2, 5)) end, "^Linear%(3 %-> 4%): input has 5 features, expected 3 %(input %[2 x 5%]%)" },
    { "Linear forward of a string", function() return nn.Linear(3, 4)("x") end, "^Linear%(3 %-> 4%): expected a tensor input, got string" },
    { "Conv2d padding inf", function() return nn.Conv2d(1, 2, 3, { padding = INF }) end, "Conv2d: padding must be an integer >= 0, got inf" },
    { "Conv2d kernel 0", function() return nn.Conv2d(1, 2, 0) end, "Conv2d: kernel_size must be an integer >= 1, got 0" },
    { "Conv2d forward channels", function() return nn.Conv2d(1, 2, 3)(z(1, 2, 5, 5)) end, "input has 2 channels, expected 1" },
    { "AvgPool2d kernel inf", function() return nn.AvgPool2d(INF) end, "AvgPool2d: kernel_size must be an integer >= 1, got inf" },
    { "LeakyReLU NaN slope", function() return nn.LeakyReLU(NAN) end, "^LeakyReLU: negative_slope must be a finite number, got nan" },
    { "Softmax dim 0", function() return nn.Softmax(0) end, "^Softmax: dim must be a non%-zero integer" },
    { "Softmax dim out of range", function() return nn.Softmax(3)(z(2, 3)) end, "^Softmax%(dim=3%): dim 3 is out of range for an input of shape %[2 x 3%]" },
    { "Dropout p NaN", function() return nn.Dropout(NAN) end, "^Dropout: p must be a probability between 0 and 1, got nan" },
    { "Dropout p 2", function() return nn.Dropout(2) end, "^Dropout: p must be a probability between 0 and 1, got 2" },
    { "Flatten out of range", function() return nn.Flatten(3)(z(2, 3)) end, "^Flatten%(start_dim=3, end_dim=%-1%): dims 3..%-1 are out of range" },
    { "BatchNorm1d eps -1", function() return nn.BatchNorm1d(3, { eps = -1 }) end, "^BatchNorm1d: eps must be a finite number >= 0, got %-1" },
    { "BatchNorm1d momentum NaN", function() return nn.BatchNorm1d(3, { momentum = NAN }) end, "^BatchNorm1d: momentum must be a finite number, got nan" },
    { "BatchNorm2d of a 2-d input", function() return nn.BatchNorm2d(3)(z(2, 3)) end, "^BatchNorm2d%(3.*%): input must be %[batch x channels x height x width%], got %[2 x 3%]" },
    { "LayerNorm eps NaN", function() return nn.LayerNorm(3, { eps = NAN }) end, "^LayerNorm: eps must be a finite number >= 0, got nan" },
    { "LayerNorm of an empty list", function() return nn.LayerNorm {} end, "^LayerNorm: normalized_shape must be a number or a list of sizes" },
    { "Embedding padding_idx", function() return nn.Embedding(4, 2, { padding_idx = 9 }) end, "^Embedding: padding_idx must be in 1..4, got 9" },
    { "Embedding float32 indices", function() return nn.Embedding(4, 2)(lt.tensor { 1 }) end, "^Embedding%(4, 2%): indices must be int64" },
    { "LSTM num_layers 0", function() return nn.LSTM(3, 4, { num_layers = 0 }) end, "^LSTM: num_layers must be an integer >= 1, got 0" },
    { "LSTM of an empty sequence", function() return nn.LSTM(3, 4)(z(0, 5, 3)) end, "^LSTM%(3 %-> 4%): the input sequence is empty %(input %[0 x 5 x 3%]%)" },
    { "LSTM wrong initial state", function() return nn.LSTM(3, 4)(z(2, 5, 3), { z(1, 7, 4), z(1, 7, 4) }) end, "^LSTM%(3 %-> 4%): h0 is %[1 x 7 x 4%], expected %[1 x 5 x 4%]" },
    { "Sequential of a number", function() return nn.Sequential { 5 } end, "^Sequential: element 1 is a number, expected a module" },
    { "Sequential forward error names the child", function() return nn.Sequential { nn.Linear(3, 4), nn.Linear(5, 2) }(z(1, 3)) end, "^in 2 Linear%(5 %-> 2%): input has 4 features, expected 5" },
    { "load_state_dict size mismatch", function() return nn.Linear(3, 4):load_state_dict { weight = z(2, 2), bias = z(4) } end, "^load_state_dict: size mismatch for weight" },
    { "load_state_dict missing key", function() return nn.Linear(3, 4):load_state_dict { weight = z(4, 3) } end, "^load_state_dict: missing key%(s%) in state_dict: \"bias\"" },
    { "load_state_dict non-tensor entry", function() return nn.Linear(3, 4):load_state_dict { weight = 5, bias = z(4) } end, "^load_state_dict: entry weight is a number, expected a tensor" },
  }
end)

describe("fuzz: optimizers and schedulers", function()
  local function P() return lt.param(z(2)) end
  local function sgd() return lt.optim.SGD({ P() }, { lr = 1 }) end
  local S = lt.optim.lr_scheduler
  run_rows {
    { "SGD without params", function() return lt.optim.SGD() end, "^SGD: params must be a list of tensors" },
    { "SGD of an empty list", function() return lt.optim.SGD({}) end, "^SGD: optimizer got an empty parameter list" },
    { "SGD without lr", function() return lt.optim.SGD({ P() }) end, "^SGD: option 'lr' is required" },
    { "SGD lr NaN", function() return lt.optim.SGD({ P() }, { lr = NAN }) end, "^SGD: invalid learning rate" },
    { "SGD unknown option", function() return lt.optim.SGD({ P() }, { lr = 0.1, bogus = 1 }) end, "^SGD: unknown option 'bogus'" },
    { "SGD nesterov without momentum", function() return lt.optim.SGD({ P() }, { lr = 0.1, nesterov = true }) end, "^SGD: nesterov momentum requires a momentum" },
    { "SGD of an int64 tensor", function() return lt.optim.SGD({ z(2, "int64") }, { lr = 0.1 }) end, "^SGD: parameter 1 is int64" },
    { "SGD with a parameter twice", function()
      local p = P()
      return lt.optim.SGD({ p, p }, { lr = 0.1 })
    end, "^SGD: parameter 2 appears twice" },
    { "Adam betas out of range", function() return lt.optim.Adam({ P() }, { betas = { 1.5, 0.9 } }) end, "^Adam: invalid beta parameter at index 1: 1.5" },
    { "Adam eps NaN", function() return lt.optim.Adam({ P() }, { eps = NAN }) end, "^Adam: invalid epsilon value" },
    { "RMSprop alpha NaN", function() return lt.optim.RMSprop({ P() }, { alpha = NAN }) end, "^RMSprop: invalid alpha value" },
    { "step with a number", function() return sgd():step(5) end, "^SGD: step expects a closure %(function%) or nothing, got number" },
    { "step after lr = NaN", function()
      local o = sgd()
      o.param_groups[1].lr = NAN
      o:step()
    end, "^SGD: invalid learning rate" },
    { "load_state_dict of a number", function() return sgd():load_state_dict(5) end, "^SGD: load_state_dict expects a table, got number" },
    { "Adam state of the wrong shape", function()
      local p = P()
      local o = lt.optim.Adam({ p })
      p.grad = lt.ones(2)
      o:step()
      local sd = o:state_dict()
      local q = lt.param(z(3))
      lt.optim.Adam({ q }):load_state_dict(sd)
    end, "^Adam: load_state_dict: state%[1%]%.exp_avg[%w_]* has shape %[2%], but parameter 1 of group 1 has shape %[3%]" },
    { "StepLR without an optimizer", function() return S.StepLR(5, { step_size = 1 }) end, "^StepLR: expected an optimizer" },
    { "StepLR step_size 0", function() return S.StepLR(sgd(), { step_size = 0 }) end, "^StepLR: step_size must be a positive integer, got 0" },
    { "StepLR gamma NaN", function() return S.StepLR(sgd(), { step_size = 1, gamma = NAN }) end, "^StepLR: option 'gamma' must be a number, got nan" },
    { "StepLR unknown option", function() return S.StepLR(sgd(), { step_size = 1, bogus = 1 }) end, "^StepLR: unknown option 'bogus'" },
    { "StepLR load_state_dict of a wrong type", function() return S.StepLR(sgd(), { step_size = 1 }):load_state_dict { last_epoch = "x" } end, "^StepLR: load_state_dict: entry 'last_epoch' must be a number, got string" },
    { "CosineAnnealingLR eta_min NaN", function() return S.CosineAnnealingLR(sgd(), { T_max = 5, eta_min = NAN }) end, "^CosineAnnealingLR: option 'eta_min' must be a number, got nan" },
    { "OneCycleLR max_lr NaN", function() return S.OneCycleLR(sgd(), { max_lr = NAN, total_steps = 10 }) end, "^OneCycleLR: option 'max_lr' must be a number or table, got nan" },
    { "OneCycleLR max_lr -1", function() return S.OneCycleLR(sgd(), { max_lr = -1, total_steps = 10 }) end, "^OneCycleLR: max_lr must be a finite number >= 0, got %-1" },
    { "ReduceLROnPlateau factor NaN", function() return S.ReduceLROnPlateau(sgd(), { factor = NAN }) end, "^ReduceLROnPlateau: option 'factor' must be a number, got nan" },
    { "ReduceLROnPlateau patience -1", function() return S.ReduceLROnPlateau(sgd(), { patience = -1 }) end, "^ReduceLROnPlateau: patience must be >= 0, got %-1" },
    { "ReduceLROnPlateau step without a metric", function() return S.ReduceLROnPlateau(sgd()):step() end, "^ReduceLROnPlateau: step expects the monitored metric" },
    { "LambdaLR returning a string", function() return S.LambdaLR(sgd(), function() return "x" end):step() end, "LambdaLR: lr_lambda%(0%) returned string, expected a number" },
  }
  it("steps with an int64 gradient are refused, not misread as floats", function()
    local p = P()
    local o = lt.optim.SGD({ p }, { lr = 1 })
    assert.matches("^grad: assigned gradient is int64", err_of(function() p.grad = lt.ones(2, "int64") end))
    p.grad = lt.tensor { { 1, 2 } }:expand(2, 2):select(1, 1) -- a strided view as a gradient is legal
    o:step()
    assert.same({ -1, -2 }, p:flatten():tolist())
  end)
end)

describe("fuzz: data", function()
  local D = lt.data
  local ds = D.TensorDataset(z(3, 2))
  run_rows {
    { "TensorDataset of nothing", function() return D.TensorDataset() end, "^TensorDataset: expected at least one tensor" },
    { "TensorDataset of a number", function() return D.TensorDataset(5) end, "^TensorDataset: argument #1 must be a tensor, got number" },
    { "TensorDataset row mismatch", function() return D.TensorDataset(z(3, 2), z(4)) end, "^TensorDataset: tensor 2 has 4 rows" },
    { "TensorDataset of a 0-dim tensor", function() return D.TensorDataset(lt.tensor(3)) end, "^TensorDataset: tensor 1 is 0%-dim" },
    { "get(0)", function() return ds:get(0) end, "^TensorDataset:get: index 0 out of range 1..3" },
    { "get(1.5)", function() return ds:get(1.5) end, "^TensorDataset:get: index 1.5 out of range 1..3" },
    { "DataLoader of a number", function() return D.DataLoader(5) end, "^DataLoader: the dataset must be a TensorDataset or a table with get%(i%) and a length" },
    { "DataLoader batch_size 0", function() return D.DataLoader(ds, { batch_size = 0 }) end, "^DataLoader: option 'batch_size' must be a positive integer, got 0" },
    { "DataLoader batch_size NaN", function() return D.DataLoader(ds, { batch_size = NAN }) end, "^DataLoader: option 'batch_size' must be a positive integer, got nan" },
    { "DataLoader batch_size inf", function() return D.DataLoader(ds, { batch_size = INF }) end, "^DataLoader: option 'batch_size' must be a positive integer, got inf" },
    { "DataLoader unknown option", function() return D.DataLoader(ds, { batchsize = 2 }) end, "^DataLoader: unknown option 'batchsize'" },
    { "DataLoader seed NaN", function() return D.DataLoader(ds, { seed = NAN }) end, "^DataLoader: option 'seed' must be an integer, got nan" },
    { "DataLoader dataset of negative length", function()
      return #D.DataLoader({ len = function() return -3 end, get = function() return { z(1) } end })
    end, "^DataLoader: the dataset's length must be an integer >= 0, got %-3" },
    { "DataLoader samples of different shapes", function()
      local dl = D.DataLoader({ len = function() return 3 end, get = function(_, i) return { z(i) } end }, { batch_size = 2 })
      for _ in dl:iter() do end
    end, "^default_collate: cannot stack field 1 of the samples: stack: tensor 2 has shape %[2%], tensor 1 has %[1%]" },
    { "DataLoader get returning nil", function()
      local dl = D.DataLoader({ len = function() return 3 end, get = function() return nil end }, { batch_size = 2 })
      for _ in dl:iter() do end
    end, "^DataLoader: dataset:get%(1%) returned nil" },
    { "DataLoader load_state_dict with a negative position", function()
      D.DataLoader(ds, { batch_size = 2 }):load_state_dict { position = -5, epoch = 0 }
    end, "^DataLoader:load_state_dict: field 'position' must be an integer >= 0, got %-5" },
    { "read_idx of a missing file", function() return D.read_idx("/nonexistent/x.idx") end, "^read_idx: /nonexistent/x.idx: cannot open: No such file or directory" },
    { "read_idx of a text file", function() return D.read_idx("/etc/passwd") end, "^read_idx: /etc/passwd: not an IDX file: bad magic bytes" },
    { "FashionMNIST with a missing root", function() return D.FashionMNIST { root = "/nonexistent" } end, "FashionMNIST: /nonexistent/train%-images%-idx3%-ubyte.gz: cannot open.*apt%-get install dataset%-fashion%-mnist" },
    { "MNIST option of the wrong type", function() return D.MNIST { train = "yes" } end, "^MNIST: option 'train' must be a boolean, got string" },
  }
end)

describe("fuzz: trainer, callbacks and loggers", function()

  run_rows {
    { "Trainer of a number", function() return Tr(5) end, "^Trainer: options must be a table, got number" },
    { "Trainer unknown option", function() return Tr { accelerator = "gpu" } end, "^Trainer: unknown option 'accelerator'" },
    { "Trainer precision 16", function() return Tr { precision = 16 } end, "^Trainer: option 'precision' is float16" },
    { "max_epochs 1.5", function() return Tr { max_epochs = 1.5 } end, "^Trainer: option 'max_epochs' must be an integer >= %-1, got 1.5" },
    { "max_epochs inf", function() return Tr { max_epochs = INF } end, "^Trainer: option 'max_epochs' must be an integer >= %-1, got inf" },
    { "limit_train_batches NaN", function() return Tr { limit_train_batches = NAN } end, "^Trainer: option 'limit_train_batches' must be an integer count of batches or a fraction in %[0, 1%], got nan" },
    { "limit_val_batches 1.5", function() return Tr { limit_val_batches = 1.5 } end, "^Trainer: option 'limit_val_batches' must be an integer count" },
    { "val_check_interval NaN", function() return Tr { val_check_interval = NAN } end, "^Trainer: option 'val_check_interval' must be a fraction in %(0, 1%]" },
    { "overfit_batches NaN", function() return Tr { overfit_batches = NAN } end, "^Trainer: option 'overfit_batches' must be an integer count" },
    { "gradient_clip_val NaN", function() return Tr { gradient_clip_val = NAN } end, "^Trainer: option 'gradient_clip_val' must be a number >= 0, got nan" },
    { "gradient_clip_algorithm", function() return Tr { gradient_clip_algorithm = "foo" } end, "^Trainer: option 'gradient_clip_algorithm' must be \"norm\" or \"value\"" },
    { "accumulate_grad_batches 0", function() return Tr { accumulate_grad_batches = 0 } end, "^Trainer: option 'accumulate_grad_batches' must be an integer >= 1, got 0" },
    { "callbacks of numbers", function() return Tr { callbacks = { 5 } } end, "^Trainer: option 'callbacks' must be a list of callback tables %(element 1 is a number%)" },
    { "logger of a number", function() return Tr { logger = 5 } end, "^Trainer: option 'logger' must be true, false, a logger" },
    { "seed NaN", function() return Tr { seed = NAN } end, "^Trainer: option 'seed' must be an integer, got nan" },
    { "fit without a model", function() return Tr { logger = false }:fit() end, "fit: the model must be a table, got nil" },
    { "fit with a number as loader", function()
      return Tr { logger = false }:fit({ training_step = function() end, configure_optimizers = function() end }, 5)
    end, "^fit: expected a DataLoader %(a table with iter%(%) and a length%), got a number" },
    { "save_checkpoint before fit", function() return Tr { logger = false }:save_checkpoint(os.tmpname()) end, "^save_checkpoint: the trainer has no model yet" },
    { "ModelCheckpoint mode", function() return lt.callbacks.ModelCheckpoint { mode = "avg" } end, "^ModelCheckpoint: option 'mode' must be \"min\" or \"max\", got \"avg\"" },
    { "ModelCheckpoint save_top_k NaN", function() return lt.callbacks.ModelCheckpoint { save_top_k = NAN } end, "^ModelCheckpoint: option 'save_top_k' must be an integer, got nan" },
    { "ModelCheckpoint unknown option", function() return lt.callbacks.ModelCheckpoint { bogus = 1 } end, "^ModelCheckpoint: unknown option 'bogus'" },
    { "EarlyStopping without monitor", function() return lt.callbacks.EarlyStopping {} end, "^EarlyStopping: option 'monitor' is required" },
    { "EarlyStopping min_delta NaN", function() return lt.callbacks.EarlyStopping { monitor = "x", min_delta = NAN } end, "^EarlyStopping: option 'min_delta' must be a number, got nan" },
    { "EarlyStopping stopping_threshold NaN", function() return lt.callbacks.EarlyStopping { monitor = "x", stopping_threshold = NAN } end, "^EarlyStopping: option 'stopping_threshold' must be a number, got nan" },
    { "Timer duration NaN", function() return lt.callbacks.Timer { duration_seconds = NAN } end, "^Timer: option 'duration_seconds' must be a number, got nan" },
    { "LearningRateMonitor interval", function() return lt.callbacks.LearningRateMonitor { logging_interval = "foo" } end, "^LearningRateMonitor: option 'logging_interval' must be \"step\", \"epoch\" or nil" },
    { "ProgressBar refresh_rate -1", function() return lt.callbacks.ProgressBar { refresh_rate = -1 } end, "^ProgressBar: option 'refresh_rate' must be >= 1" },
    { "CSVLogger save_dir of a number", function() return lt.loggers.CSVLogger { save_dir = 5 } end, "^CSVLogger: option 'save_dir' must be a string, got number" },
    { "CSVLogger flush_logs_every_n_steps 0", function() return lt.loggers.CSVLogger { flush_logs_every_n_steps = 0 } end, "^CSVLogger: option 'flush_logs_every_n_steps' must be an integer >= 1, got 0" },
    { "CSVLogger flush_logs_every_n_steps -5", function() return lt.loggers.CSVLogger { flush_logs_every_n_steps = -5 } end, "^CSVLogger: option 'flush_logs_every_n_steps' must be an integer >= 1, got %-5" },
    { "CSVLogger flush_logs_every_n_steps NaN", function() return lt.loggers.CSVLogger { flush_logs_every_n_steps = NAN } end, "^CSVLogger: option 'flush_logs_every_n_steps' must be an integer >= 1, got nan" },
    { "CSVLogger flush_logs_every_n_steps 2.5", function() return lt.loggers.CSVLogger { flush_logs_every_n_steps = 2.5 } end, "^CSVLogger: option 'flush_logs_every_n_steps' must be an integer >= 1, got 2.5" },
    { "CSVLogger flush_logs_every_n_steps inf", function() return lt.loggers.CSVLogger { flush_logs_every_n_steps = INF } end, "^CSVLogger: option 'flush_logs_every_n_steps' must be an integer >= 1, got inf" },
    { "CSVLogger flush_logs_every_n_steps of a string", function() return lt.loggers.CSVLogger { flush_logs_every_n_steps = "10" } end, "^CSVLogger: option 'flush_logs_every_n_steps' must be an integer >= 1, got 10" },
    { "CSVLogger version inf", function() return lt.loggers.CSVLogger { version = INF } end, "^CSVLogger: option 'version' must be an integer >= 0 or a string, got inf" },
    { "CSVLogger version NaN", function() return lt.loggers.CSVLogger { version = NAN } end, "^CSVLogger: option 'version' must be an integer >= 0 or a string, got nan" },
    { "CSVLogger version 2^60", function() return lt.loggers.CSVLogger { version = 2 ^ 60 } end, "^CSVLogger: option 'version' must be an integer >= 0 or a string" },
    { "CSVLogger in an impossible directory", function()
      lt.loggers.CSVLogger({ save_dir = "/proc/nope", name = "x" }):log_metrics({ a = 1 }, 0)
    end, "^CSVLogger: cannot create the log directory: mkdir: /proc/nope" },
  }

  -- self:log misuse inside training_step: the error names log and what is wrong
  local function fit_logging(log_args)
    local m = { net = lt.nn.Linear(2, 1) }
    function m:configure_optimizers() return lt.optim.SGD(self.net:parameters(), { lr = 0.1 }) end
    function m:training_step(b)
      self:log(unpack(log_args))
      return self.net(b[1]):sum()
    end
    local t = Tr { logger = false, enable_checkpointing = false, enable_progress_bar = false,
      enable_model_summary = false, max_epochs = 1 }
    return t:fit(m, lt.data.DataLoader(lt.data.TensorDataset(z(4, 2)), { batch_size = 2 }))
  end
  run_rows {
    { "log a string value", function() fit_logging { "x", "str" } end, "log: the value of 'x' must be a number or a one%-element tensor, got a string" },
    { "log a vector", function() fit_logging { "x", z(3) } end, "log: the value of 'x' must be a number or a one%-element tensor, got a tensor of shape %[3%]" },
    { "log an unknown option", function() fit_logging { "x", 1, { bogus = 1 } } end, "log: unknown option 'bogus'" },
    { "log reduce_fx median", function() fit_logging { "x", 1, { reduce_fx = "median" } } end, "log: reduce_fx must be \"mean\", \"max\", \"min\" or \"sum\", got median" },
    { "log batch_size -1", function() fit_logging { "x", 1, { batch_size = -1 } } end, "log: option 'batch_size' must be an integer >= 1, got %-1" },
    { "log batch_size NaN", function() fit_logging { "x", 1, { batch_size = NAN } } end, "log: option 'batch_size' must be an integer >= 1, got nan" },
  }
end)

describe("fuzz: files", function()
  local dir
  setup(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir) == 0)
  end)
  teardown(function() os.execute("rm -rf " .. dir) end)

  local function write(path, bytes)
    local f = assert(io.open(path, "wb"))
    f:write(bytes)
    f:close()
  end
  local function le64(n)
    local t = {}
    for i = 1, 8 do t[i] = string.char(n % 256); n = math.floor(n / 256) end
    return table.concat(t)
  end
  -- A safetensors file from "another program": header JSON as given, then data bytes.
  local function foreign(header, data) return le64(#header) .. header .. (data or "") end
  local function model() return lt.nn.Sequential { lt.nn.Linear(3, 4), lt.nn.ReLU(), lt.nn.Linear(4, 2) } end

  run_rows {
    { "lt.save to a number path", function() return lt.save(5, model()) end, "^lt.save: expected a file path %(string%) as argument 1, got number" },
    { "lt.save of a number", function() return lt.save(dir .. "/x", 5) end, "^lt.save: expected a model or a state dict" },
    { "lt.save into a missing directory", function() return lt.save("/nonexistent/dir/w.safetensors", model()) end, "^lt.save: /nonexistent/dir/w.safetensors: " },
    { "lt.load of a missing file", function() return lt.load(dir .. "/missing") end, "^lt.load: .*/missing: cannot open: No such file or directory" },
    { "lt.load of a number", function() return lt.load(5) end, "^lt.load: expected a file path %(string%) as argument 1, got number" },
    { "lt.load into a model that does not match", function()
      lt.save(dir .. "/m.safetensors", model())
      return lt.load(dir .. "/m.safetensors", lt.nn.Linear(3, 4))
    end, "^lt.load: .*/m.safetensors: the weights do not match the model: " },
  }

  -- Crafted files: each malformed header names the problem.
  local F32_4 = string.rep("\0", 16)
  local crafted = {
    { "an empty file", "", "file too short %(0 bytes%)" },
    { "an absurd header length", le64(2 ^ 40) .. "{}", "header length %d+ is absurd" },
    { "a header past the end", le64(100) .. "{}", "truncated: header length 100 runs past the end of the file" },
    { "a header that is not JSON", foreign("{x"), "header is not valid JSON" },
    { "a header that is an array", foreign("[]"), "header is not a JSON object" },
    { "an unknown dtype", foreign('{"w":{"dtype":"X9","shape":[4],"data_offsets":[0,16]}}', F32_4), "tensor 'w': unknown dtype 'X9'" },
    { "a negative size", foreign('{"w":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}}', F32_4), "tensor 'w': shape%[1%] is not a non%-negative integer" },
    { "a shape that needs more bytes", foreign('{"w":{"dtype":"F32","shape":[5],"data_offsets":[0,16]}}', F32_4), "tensor 'w': shape and dtype F32 need 20 bytes, data_offsets %[0, 16%] hold 16" },
    { "an overflowing shape", foreign('{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}}', F32_4), "tensor 'w': shape and dtype F32 need more than" },
    { "offsets past the data", foreign('{"w":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}}', F32_4), "run past the end of the data buffer" },
    { "offsets that end before they begin", foreign('{"w":{"dtype":"F32","shape":[0],"data_offsets":[16,0]}}', F32_4), "end before they begin" },
    { "overlapping tensors", foreign('{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}', F32_4), "overlap" },
    { "bytes that belong to no tensor", foreign('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', F32_4), "belong to no tensor" },
    { "an unknown field", foreign('{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16],"x":1}}', F32_4), "tensor 'w': unknown field 'x'" },
    { "a missing field", foreign('{"w":{"dtype":"F32","shape":[4]}}', F32_4), "tensor 'w': missing field 'data_offsets'" },
    { "9 dimensions", foreign('{"w":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,4],"data_offsets":[0,16]}}', F32_4), "9 dimensions; lutra tensors have at most 8" },
    { "a dtype lutra does not read", foreign('{"w":{"dtype":"F16","shape":[8],"data_offsets":[0,16]}}', F32_4), "tensor 'w' has dtype F16; lutra reads F32, F64 and I64" },
    { "a lutra file without its checksum", foreign('{"__metadata__":{"format":"lutra"}}'), "without lutra_checksum: the header is damaged" },
    { "bad lutra metadata JSON", foreign('{"__metadata__":{"lutra":"{x"}}'), "the 'lutra' metadata is not valid JSON" },
    { "lutra metadata naming a missing tensor", foreign('{"__metadata__":{"lutra":"{\\"state_dict\\":{\\"w\\":{\\"$tensor\\":\\"nope\\"}}}"}}'), "refers to tensor 'nope', which the file does not hold" },
  }
  for _, c in ipairs(crafted) do
    it("lt.load of " .. c[1], function()
      local p = dir .. "/crafted.safetensors"
      write(p, c[2])
      local msg = err_of(function() return lt.load(p) end)
      assert(msg:find("^lt.load: " .. p:gsub("%p", "%%%0") .. ": "), msg)
      assert(msg:find(c[3]), string.format("message %q does not match %q", msg, c[3]))
    end)
  end

  it("a foreign file that is well-formed loads its tensors", function()
    local p = dir .. "/ok.safetensors"
    write(p, foreign('{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}', F32_4))
    assert.same({ 2, 2 }, lt.load(p).w:shape())
  end)

  -- Every truncation and many single-byte corruptions of a valid file: each is an error naming lt.load and the
  -- file; none loads (the checksum covers the whole file).
  it("rejects every truncation and every flipped byte of a saved model", function()
    local p = dir .. "/w.safetensors"
    local m = model()
    lt.save(p, m)
    local good = assert(io.open(p, "rb")):read("*a")
    local prefix = "^lt.load: " .. p:gsub("%p", "%%%0") .. ": "
    local function expect_error(bytes, what)
      write(p, bytes)
      local ok, e = pcall(lt.load, p, m)
      assert(not ok, what .. " loaded without an error")
      assert(tostring(e):find(prefix), what .. ": " .. tostring(e))
    end
    for n = 0, #good - 1 do expect_error(good:sub(1, n), "truncation to " .. n .. " bytes") end
    for i = 1, #good do
      local b = good:byte(i)
      for _, x in ipairs { 0x01, 0x80 } do
        local flipped = math.floor(b / x) % 2 == 1 and b - x or b + x -- b xor x (x one bit), under any Lua
        expect_error(good:sub(1, i - 1) .. string.char(flipped) .. good:sub(i + 1), "byte " .. i .. " xor " .. x)
      end
    end
    expect_error(good .. "x", "one byte appended")
    write(p, good)
    assert.equal(m, (lt.load(p, m)))
  end)

  it("fit refuses a corrupt checkpoint with a message naming the file", function()
    local p = dir .. "/bad.ckpt"
    write(p, "not a checkpoint at all")
    local m = { net = lt.nn.Linear(2, 1) }
    function m:configure_optimizers() return lt.optim.SGD(self.net:parameters(), { lr = 0.1 }) end
    function m:training_step(b) return self.net(b[1]):sum() end
    local t = Tr { logger = false, enable_checkpointing = false, enable_progress_bar = false,
      enable_model_summary = false, max_epochs = 1 }
    local msg = err_of(function()
      t:fit(m, lt.data.DataLoader(lt.data.TensorDataset(z(4, 2)), { batch_size = 2 }), { ckpt_path = p })
    end)
    assert.matches("fit: cannot resume from .*bad.ckpt: ", msg)
  end)
end)

-- luaL_check* name the function from the call site, which a tail call loses ("bad argument #2 to '?'"): the
-- binding's checkers name the function it registered, in tail calls too (method arguments counted after self)
describe("fuzz: argument errors in tail calls", function()
  run_rows {
    { "full(shape, string) as a tail call", function() return lt.full({ 2 }, "x") end, "^bad argument #2 to 'full' %(number expected, got string%)" },
    { "full(shape, string) in a local first", function() local r = lt.full({ 2 }, "x"); return r end, "^bad argument #2 to 'full' %(number expected, got string%)" },
    { "full through a local of another name", function() local f = lt.full; local r = f({ 2 }, {}); return r end, "^bad argument #2 to 'full' %(number expected, got table%)" },
    { "arange(string) as a tail call", function() return lt.arange("a") end, "^bad argument #1 to 'arange' %(number expected, got string%)" },
    { "x:fill_(string) as a tail call", function() return z(2):fill_("a") end, "^bad argument #1 to 'fill_' %(number expected, got string%)" },
    { "x:fill_(string) in a local first", function() local r = z(2):fill_("a"); return r end, "^bad argument #1 to 'fill_' %(number expected, got string%)" },
    { "x:uniform_(string) as a tail call", function() return z(2):uniform_("a") end, "^bad argument #1 to 'uniform_' %(number expected, got string%)" },
    { "x:add_(y, string alpha) as a tail call", function() return z(2):add_(z(2), "a") end, "^bad argument #2 to 'add_' %(number expected, got string%)" },
    { "x:leaky_relu(table) as a tail call", function() return z(2):leaky_relu({}) end, "^bad argument #1 to 'leaky_relu' %(number expected, got table%)" },
    { "lt.fill_(x, string) as a function", function() local r = lt.fill_(z(2), "a"); return r end, "^bad argument #2 to 'fill_' %(number expected, got string%)" },
  }
end)

describe("fuzz: stepwise runs and loop state", function()
  local function setup()
    local m = { net = lt.nn.Linear(2, 1) }
    function m:configure_optimizers() return lt.optim.SGD(self.net:parameters(), { lr = 0.1 }) end
    function m:training_step(b) return self.net(b[1]):sum() end
    local t = Tr { logger = false, enable_checkpointing = false, enable_progress_bar = false,
      enable_model_summary = false, max_epochs = 1 }
    return t, m, lt.data.DataLoader(lt.data.TensorDataset(z(4, 2)), { batch_size = 2 })
  end
  run_rows {
    { "fit_run with a number as loader", function() local t, m = setup(); t:fit_run(m, 5) end, "^fit: expected a DataLoader %(a table with iter%(%) and a length%), got a number" },
    { "fit_run with a model as loader", function() local t, m = setup(); t:fit_run(m, m) end, "^fit: expected a DataLoader %(a table with iter%(%) and a length%), got a table" },
    { "fit_run with a number as val loader", function() local t, m, l = setup(); t:fit_run(m, l, 5) end, "^fit %(val loader 1%): expected a DataLoader" },
    { "fit_run with a bad second val loader", function() local t, m, l = setup(); t:fit_run(m, l, { l, "x" }) end, "^fit %(val loader 2%): expected a DataLoader .*got a string" },
    { "advance{batches = 1e300}", function() local t, m, l = setup(); t:fit_run(m, l):advance { batches = 1e300 } end, "advance: 'batches' must be an integer > 0, got 1e%+300" },
    { "advance{batches = NaN}", function() local t, m, l = setup(); t:fit_run(m, l):advance { batches = NAN } end, "advance: 'batches' must be an integer > 0, got nan" },
    { "advance{batches = 1.5}", function() local t, m, l = setup(); t:fit_run(m, l):advance { batches = 1.5 } end, "advance: 'batches' must be an integer > 0, got 1.5" },
    { "advance{seconds = NaN}", function() local t, m, l = setup(); t:fit_run(m, l):advance { seconds = NAN } end, "advance: 'seconds' must be a number > 0, got nan" },
    { "fit_loop state with a NaN counter", function()
      local t = setup(); t.fit_loop:load_state_dict { epoch_progress = { total = { ready = NAN } } }
    end, "^load_state_dict: 'epoch_progress.total.ready' must be an integer >= 0, got nan" },
    { "fit_loop state with batches_that_stepped 1e300", function()
      local t = setup(); t.fit_loop:load_state_dict { ["epoch_loop.state_dict"] = { _batches_that_stepped = 1e300 } }
    end, "^load_state_dict: 'epoch_loop.state_dict._batches_that_stepped' must be an integer >= 0, got 1e%+300" },
    { "fit_loop state with a negative optimizer_position", function()
      local t = setup(); t.fit_loop:load_state_dict { ["epoch_loop.batch_loop.optimizer_loop.optim_progress"] = { optimizer_position = -1 } }
    end, "'epoch_loop.batch_loop.optimizer_loop.optim_progress.optimizer_position' must be an integer >= 0, got %-1" },
    { "DDPStrategy bucket_cap_mb inf", function() return lt.distributed.DDPStrategy { bucket_cap_mb = INF } end, "^DDPStrategy: bucket_cap_mb must be finite, got inf" },
  }
  it("a bad counter sets none of the loops' counters", function()
    local t = setup()
    local before = t.fit_loop.progress.total.ready
    assert.has_error(function()
      t.fit_loop:load_state_dict { epoch_progress = { total = { ready = 7 } }, ["epoch_loop.batch_progress"] = { total = { ready = -1 } } }
    end)
    assert.equal(before, t.fit_loop.progress.total.ready)
  end)
  it("fit_run accepts loaders fit accepts, and the run trains", function()
    local t, m, l = setup()
    local run = t:fit_run(m, l, { l })
    assert.is_false(run:advance { batches = 1 })
    assert.equal(1, t.global_step)
  end)
end)
