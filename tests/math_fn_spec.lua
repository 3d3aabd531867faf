-- math_fn_spec.lua — the elementwise maths of core/src/ops_special.c (tan ... digamma) and ops_special_binary.c (atan2, fmod,
-- remainder, floor_divide, fmax/fmin, copysign), their Lua names (fix, sgn, clip, clamp_min/max, float_power) and the
-- statistics of lua/lutra/tensor/stats.lua (nansum, nanmean, quantile, nanquantile, cov, corrcoef)
-- against PyTorch 1.13 (tests/fixtures/mathops.json, gen_mathops.py): values and gradients, float32 to 1e-6 and
-- float64 to 1e-12 (relative, absolute below 1), edge values (poles, domain ends, NaN) included; float64
-- finite-difference gradchecks; the in-place forms; and the errors.
local lt = require "lutra"
local cjson = require "cjson"
local gradcheck64 = require "tests.helpers.gradcheck64"

local function load_cases()
  local f = assert(io.open("tests/fixtures/mathops.json", "rb"))
  local s = f:read("*a")
  f:close()
  return cjson.decode(s)
end

local SPECIAL = { nan = 0 / 0, inf = math.huge, ["-inf"] = -math.huge }
local function value(v) return type(v) == "string" and SPECIAL[v] or v end

local function tensor_of(obj)
  local data = {}
  for i, v in ipairs(obj.data) do data[i] = value(v) end
  local t = lt.tensor(data, obj.dtype)
  return #obj.shape == 0 and t:reshape({}) or t:reshape(obj.shape)
end

-- every element within tol * max(1, |ref|) (float32: 1e-6, float64: 1e-12); NaN where ref is NaN, the same
-- infinity where ref is infinite; the same shape and dtype
local function check(what, got, ref)
  assert.are.equal(ref.dtype, got:dtype(), what .. ": dtype")
  assert.are.same(ref.shape, got:shape(), what .. ": shape")
  local g = got:flatten():tolist()
  local scale = ref.dtype == "float64" and 1e-12 or 1e-6
  for i, rv in ipairs(ref.data) do
    local r, v = value(rv), g[i]
    local ok
    if r ~= r then ok = v ~= v
    elseif math.abs(r) == math.huge then ok = v == r
    else ok = math.abs(v - r) <= scale * math.max(1, math.abs(r)) end
    if not ok then
      error(string.format("%s: element %d is %.17g, expected %.17g", what, i, v, r), 2)
    end
  end
end

-- the op of a case on lutra tensors xs
local function apply(c, xs)
  local a = c.args[1]
  if type(a) == "table" and a.scalar ~= nil then -- a number operand
    if a.first then return lt[c.op](a.scalar, xs[1]) end
    return lt[c.op](xs[1], a.scalar)
  end
  if #xs == 2 then return lt[c.op](xs[1], xs[2]) end
  local args = {}
  for i = 1, #c.args do args[i] = c.args[i] ~= cjson.null and c.args[i] or nil end
  return (xs[1][c.op](xs[1], unpack(args, 1, #c.args))) -- cummax/cummin: the values
end

-- the cases whose first operand can take the result in place (fix and float_power have no float32 in-place
-- form, the statistics none; clamp_min_ takes a number bound only)
local NO_INPLACE = { fix = true, float_power = true, nansum = true, nanmean = true, quantile = true,
  nanquantile = true, cov = true, corrcoef = true, cummax = true, cummin = true, logcumsumexp = true }
local function has_inplace(c, xs)
  return not NO_INPLACE[c.op] and xs[1]:dtype() ~= "int64" and c.out.dtype == xs[1]:dtype()
    and (#xs == 1 or (c.op ~= "clamp_min" and xs[2]:numel() <= xs[1]:numel() and xs[2]:dtype() == xs[1]:dtype()))
end

local function present(v) if v ~= cjson.null then return v end end

describe("elementwise maths against torch 1.13 (mathops.json)", function()
  for _, c in ipairs(load_cases()) do
    it(c.name, function()
      local xs = {}
      for i, obj in ipairs(c.inputs) do
        xs[i] = tensor_of(obj)
        if present(c.grads) and obj.dtype ~= "int64" then xs[i]:requires_grad(true) end
      end
      local out = apply(c, xs)
      check("out", out, c.out)
      if present(c.grads) then
        out:backward(tensor_of(c.gout))
        for i, g in ipairs(c.grads) do
          if g ~= cjson.null then check("grad " .. i, xs[i].grad, g) end
        end
      end
      -- the in-place form writes the same values into the first operand
      local plain = {}
      for i, obj in ipairs(c.inputs) do plain[i] = tensor_of(obj) end
      if has_inplace(c, plain) then
        local y = plain[1]:clone()
        local ret
        local a = c.args[1]
        if type(a) == "table" and a.scalar ~= nil then
          if not a.first then ret = y[c.op .. "_"](y, a.scalar) end
        elseif #plain == 2 then ret = y[c.op .. "_"](y, plain[2])
        else ret = y[c.op .. "_"](y, unpack(c.args)) end
        if ret then
          assert.are.equal(y, ret)
          check("in place", y, c.out)
        end
      end
      if c.fd and c.inputs[1].dtype == "float64" then
        gradcheck64(function(p) return apply(c, p) end, plain, tensor_of(c.gout))
      end
    end)
  end
end)

describe("elementwise maths: names and forms", function()
  it("has PyTorch's aliases on lt and as methods, computing the same", function()
    local x = lt.tensor({ -0.5, 0.25, 0.75 })
    for alias, name in pairs({ arcsin = "asin", arccos = "acos", arctan = "atan", arcsinh = "asinh",
      arctanh = "atanh" }) do
      assert.are.same(x[name](x):tolist(), lt[alias](x):tolist(), alias)
      assert.are.same(x[name](x):tolist(), x:clone()[alias .. "_"](x:clone()):tolist(), alias .. "_")
    end
    local y = x + 2
    assert.are.same(lt.acosh(y):tolist(), y:arccosh():tolist())
    assert.are.same(lt.atan2(x, y):tolist(), lt.arctan2(x, y):tolist())
    assert.are.same(lt.atan2(x, y):tolist(), x:arctan2(y):tolist())
  end)

  it("records one node per op, named after it", function()
    local x = lt.tensor({ 0.5 }):requires_grad(true)
    assert.are.equal("tan", x:tan():grad_fn())
    assert.are.equal("atan2", lt.atan2(x, x):grad_fn())
    assert.is_nil(lt.floor_divide(x, 2):grad_fn()) -- no gradient, as PyTorch's
    assert.is_false(lt.floor_divide(x, 2):requires_grad())
  end)

  it("works on non-contiguous views, in place too", function()
    local base = lt.tensor({ { 0.1, 0.2, 0.3 }, { 0.4, 0.5, 0.6 } })
    local t = base:t()
    local ref = t:contiguous():asin()
    assert.is_true(lt.allclose(t:asin(), ref))
    local b2 = base:clone()
    b2:t():asin_()
    assert.is_true(lt.allclose(b2, base:asin()))
    local q = lt.tensor({ { 5, 6 }, { 7, 8 } }):t()
    assert.are.same({ { 2, 1 }, { 0, 2 } }, lt.remainder(q, 3):tolist())
  end)

  it("gives the same bits on one thread and on two (large tensors are split over the pool)", function()
    local threads = lt.get_num_threads()
    local x = (lt.rand(300000) * 1.8 - 0.9):double()
    local y = lt.rand(300000) + 0.5
    local function run()
      return { x:atanh(), x:float():lgamma(), lt.remainder(x * 100, 7), lt.atan2(x:float(), y) }
    end
    lt.set_num_threads(1)
    local one = run()
    lt.set_num_threads(2)
    local two = run()
    lt.set_num_threads(threads)
    for i = 1, #one do assert.are.same(one[i]:tolist(), two[i]:tolist(), "result " .. i) end
    -- and the values are the functions' (spot checks against Lua's maths)
    local xv = x:tolist()
    for _, i in ipairs({ 1, 1000, 150001, 300000 }) do
      local v = xv[i]
      local at = 0.5 * math.log((1 + v) / (1 - v))
      assert.is_true(math.abs(one[1][i]:item() - at) < 1e-12 * math.max(1, math.abs(at)))
      local m = (v * 100) % 7 -- Lua's % takes the divisor's sign, as remainder does
      assert.is_true(math.abs(one[3][i]:item() - m) < 1e-9)
    end
  end)
end)

describe("elementwise maths: errors", function()
  it("names the op and the shapes when operands do not broadcast", function()
    local ok, err = pcall(lt.atan2, lt.zeros(2, 3), lt.zeros(4))
    assert.is_false(ok)
    assert.matches("atan2", err)
    assert.matches("2 x 3", err, 1, true)
  end)

  it("says which operand is wrong", function()
    local ok, err = pcall(lt.fmod, "a", lt.zeros(2))
    assert.is_false(ok)
    assert.matches("fmod: expected tensors or numbers", err, 1, true)
    ok, err = pcall(lt.remainder, 1, 2)
    assert.is_false(ok)
    assert.matches("remainder: expected tensors or numbers (at least one tensor), got number and number", err, 1, true)
    ok, err = pcall(lt.tan, "x")
    assert.is_false(ok)
    assert.matches("bad argument #1 to 'tan'", err, 1, true)
  end)

  it("refuses an int64 division by zero as PyTorch's ZeroDivisionError", function()
    local ok, err = pcall(lt.remainder, lt.tensor({ 1, 2 }, "int64"), lt.tensor({ 1, 0 }, "int64"))
    assert.is_false(ok)
    assert.matches("remainder: division by zero in int64", err, 1, true)
    ok, err = pcall(lt.floor_divide, lt.tensor({ 1 }, "int64"), 0)
    assert.is_false(ok)
    assert.matches("floor_divide: division by zero in int64", err, 1, true)
  end)

  it("refuses an in-place result that does not fit the tensor", function()
    local ok, err = pcall(function() return lt.zeros(3):fmod_(lt.ones(2, 3)) end)
    assert.is_false(ok)
    assert.matches("fmod_: the broadcast of [3] and [2 x 3] is larger than the tensor updated in place", err, 1, true)
    ok, err = pcall(function() return lt.tensor({ 1, 2 }, "int64"):atan2_(lt.ones(2)) end)
    assert.is_false(ok)
    assert.matches("atan2_", err, 1, true)
    ok, err = pcall(function() return lt.tensor({ 1, 2 }, "int64"):tan_() end)
    assert.is_false(ok)
    assert.matches("tan_", err, 1, true)
  end)

  it("refuses to write into an expand()ed view, naming the op called (the API fuzz found 'tan__: ...')", function()
    local x = lt.tensor({ 0.5 }):expand(3)
    local ok, err = pcall(function() return x:tan_() end)
    assert.is_false(ok)
    assert.matches("^tan_: the tensor's elements overlap", err)
    ok, err = pcall(lt.arcsin_, x)
    assert.is_false(ok)
    assert.matches("^arcsin_: the tensor's elements overlap", err)
    ok, err = pcall(function() return x:fmod_(2) end)
    assert.is_false(ok)
    assert.matches("^fmod_: the tensor's elements overlap", err)
  end)

  it("refuses in-place maths on a tensor that requires grad, naming the op", function()
    local x = lt.tensor({ 0.5 }):requires_grad(true)
    local ok, err = pcall(function() return x:tan_() end)
    assert.is_false(ok)
    assert.matches("tan_", err, 1, true)
  end)

  it("checks logit's eps", function()
    local ok, err = pcall(function() return lt.tensor({ 0.5 }):logit(2) end)
    assert.is_false(ok)
    assert.matches("logit: eps must be in [0, 1]", err, 1, true)
    ok, err = pcall(function() return lt.tensor({ 0.5 }):logit(0 / 0) end)
    assert.is_false(ok)
    assert.matches("logit: eps must be in [0, 1]", err, 1, true)
  end)

  it("names an alias of a core op as called (the API fuzz found 'arctan2 -> atan2: ...')", function()
    -- the message without the caller's position (PUC Lua puts the Lua caller's first here, LuaJIT does not)
    local function msg(e) return (tostring(e):gsub("^[^\n]-:%d+: ", "")) end
    local ok, err = pcall(lt.arctan2, lt.zeros(2, 3), lt.zeros(4))
    assert.is_false(ok)
    assert.matches("^arctan2: ", msg(err))
    ok, err = pcall(function() return lt.zeros(3):arctan2_(lt.zeros(2, 3)) end)
    assert.is_false(ok)
    assert.matches("^arctan2_: ", msg(err))
    ok, err = pcall(lt.arcsinh_, lt.tensor({ 1 }, "int64"))
    assert.is_false(ok)
    assert.matches("^arcsinh_: ", msg(err))
    ok, err = pcall(lt.arctan2, lt.zeros(1), {})
    assert.is_false(ok)
    assert.matches("arctan2: expected tensors or numbers (at least one tensor), got tensor and table", err, 1, true)
  end)

  it("gives an empty result for an empty q, as torch.quantile", function()
    assert.are.same({ 0, 2 }, lt.tensor({ { 1, 2 }, { 3, 4 } }):quantile(lt.zeros(0), 2):shape())
  end)

  it("names the alias called when its inner op refuses", function()
    local ok, err = pcall(function() return lt.tensor({ 1 }):clip(2, 1) end)
    assert.is_false(ok)
    assert.matches("clip: ", err, 1, true)
    ok, err = pcall(lt.clamp_max, lt.tensor({ 1 }), "x")
    assert.is_false(ok)
    assert.matches("clamp_max: the bound must be a number or a tensor, got string", err, 1, true)
    ok, err = pcall(function() return lt.tensor({ 1 }):float_power_(2) end)
    assert.is_false(ok)
    assert.matches("float_power_: the tensor updated in place must be float64", err, 1, true)
  end)
end)

describe("statistics: forms and errors", function()
  it("takes a 1-D q and stacks the quantiles first", function()
    local x = lt.tensor({ { 1, 7, 3, 4 }, { 2, 5, 1, 0 } })
    local both = x:quantile(lt.tensor({ 0.25, 0.5 }), 2)
    assert.are.same({ 2, 2 }, both:shape())
    assert.are.same(x:quantile(0.25, 2):tolist(), both[1]:tolist())
    assert.are.same(x:quantile(0.5, 2):tolist(), both[2]:tolist())
  end)

  it("names the function and the argument", function()
    local x = lt.tensor({ 1, 2, 3 })
    local function err(f, ...)
      local ok, e = pcall(f, ...)
      assert.is_false(ok)
      return e
    end
    assert.matches("quantile: q must be in [0, 1], got 1.5", err(lt.quantile, x, 1.5), 1, true)
    assert.matches("nanquantile: unknown interpolation 'cubic'",
      err(lt.nanquantile, x, 0.5, 1, false, { interpolation = "cubic" }), 1, true)
    assert.matches("quantile: unknown option 'mode'", err(lt.quantile, x, 0.5, nil, false, { mode = 1 }), 1, true)
    assert.matches("quantile: expects a float32 or float64 tensor, got int64",
      err(lt.quantile, lt.tensor({ 1 }, "int64"), 0.5), 1, true)
    assert.matches("quantile: the input tensor must be non-empty", err(lt.quantile, lt.zeros(0), 0.5), 1, true)
    assert.matches("cov: expects a 1-D or 2-D tensor", err(lt.cov, lt.zeros(2, 2, 2)), 1, true)
    assert.matches("nanmean: expects a float32 or float64 tensor", err(lt.nanmean, lt.tensor({ 1 }, "int64")), 1, true)
    assert.matches("nansum", err(lt.nansum, x, 3), 1, true)
    -- an inner op's refusal is named by the function called (the API fuzz found 'corrcoef -> clamp: ...')
    local ok, e = pcall(lt.corrcoef, lt.tensor({ { 1, 2 }, { 2, 5 } }, "float64"))
    assert.is_true(ok or e:find("corrcoef: ", 1, true) ~= nil, e)
  end)
end)

describe("cummax and cummin", function()
  it("give the 1-based index each value came from: the last of equal values, a NaN's until the next", function()
    local x = lt.tensor({ { 1, 3, 2, 3, 0 / 0, 5 }, { 4, 1, 1, 6, 2, 2 } })
    local _, i = x:cummax(2)
    assert.are.same({ { 1, 2, 2, 4, 5, 5 }, { 1, 1, 1, 4, 4, 4 } }, i:totable())
    local _, j = lt.cummin(x, 2)
    assert.are.same({ { 1, 1, 1, 1, 5, 5 }, { 1, 2, 3, 3, 3, 3 } }, j:totable())
    local v, k = lt.tensor({ 3, 1, 2 }, "int64"):cummin(1)
    assert.are.same({ 3, 1, 1 }, v:tolist())
    assert.are.same({ 1, 2, 2 }, k:tolist())
    assert.are.equal("int64", v:dtype())
  end)

  it("require dim and name themselves", function()
    local ok, err = pcall(lt.cummax, lt.zeros(2))
    assert.is_false(ok)
    assert.matches("cummax: dim is required", err, 1, true)
    ok, err = pcall(lt.logcumsumexp, lt.zeros(2), 3)
    assert.is_false(ok)
    assert.matches("logcumsumexp", err, 1, true)
  end)
end)
