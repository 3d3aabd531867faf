-- f64_spec.lua — float64 tensors: creation in every creation function, conversions, element access, printing,
-- views and copies, safetensors F64 round trips, and the one refusal of ops without a float64 kernel.
local lt = require "lutra"
local cjson = require "cjson"

-- values a float32 cannot hold: each test fails when float64 is stored as float32 anywhere
local EXACT = { 0.1, 1 / 3, 1e300, -2 ^ -1074, 2 ^ 53 + 2 }

local function same_bits(a, b) -- equal doubles, with NaN equal to NaN
  return a == b or (a ~= a and b ~= b)
end

describe("float64 tensors", function()
  it("lt.tensor keeps a Lua number's full precision", function()
    local x = lt.tensor(EXACT, "float64")
    assert.are.equal("float64", x:dtype())
    local l = x:tolist()
    for i, v in ipairs(EXACT) do
      assert.are.equal(v, l[i])
      assert.are.equal(v, x[i]:item())
    end
    assert.are.equal(1 / 3, lt.tensor(1 / 3, "float64"):item())
    assert.are.equal(0.1, lt.tensor({ { 0.1 } }, { dtype = "float64" }):tolist()[1][1])
    assert.are.equal(0.1, lt.tensor(lt.tensor({ 0.1 }, "float64")):tolist()[1]) -- a copy keeps the dtype
  end)

  it("every creation function takes \"float64\" (and \"double\", and {dtype = ...})", function()
    assert.are.equal("float64", lt.zeros({ 2, 3 }, "float64"):dtype())
    assert.are.equal("float64", lt.zeros(2, 3, { dtype = "float64" }):dtype())
    assert.are.equal("float64", lt.ones(2, "double"):dtype())
    assert.are.equal("float64", lt.empty({ 2 }, "float64"):dtype())
    assert.are.same({ 0.1, 0.1 }, lt.full({ 2 }, 0.1, "float64"):tolist())
    assert.are.equal(0.1 * 3, lt.arange(0, 1, 0.1, "float64"):tolist()[4]) -- 0.30000000000000004
    local x = lt.full({ 2 }, 1 / 3, "float64")
    assert.are.equal("float64", lt.zeros_like(x):dtype())
    assert.are.same({ 1, 1 }, lt.ones_like(x):tolist())
  end)

  it("the default dtype stays float32", function()
    assert.are.equal("float32", lt.zeros(2):dtype())
    assert.are.equal("float32", lt.tensor({ 0.1 }):dtype())
    assert.are_not.equal(0.1, lt.tensor({ 0.1 }):tolist()[1])
  end)

  it("converts with double, float, type, to and long", function()
    local x = lt.tensor({ 0.1, -2.5, 1e300 }, "float64")
    local f = x:float()
    assert.are.equal("float32", f:dtype())
    assert.are.equal(math.huge, f:tolist()[3]) -- rounds to nearest: out of range is inf
    assert.are.equal(-2.5, f:tolist()[2])
    assert.are.equal("float64", f:double():dtype())
    assert.are.equal("float64", f:type("float64"):dtype())
    assert.are.equal("float64", x:type())
    assert.are.equal("float64", f:to({ dtype = "float64" }):dtype())
    assert.are.equal("float64", f:to("float64"):dtype())
    assert.are.equal("float64", f:to(x):dtype())
    assert.are.equal(x, x:to("float64")) -- the same dtype is x itself, as PyTorch's
    assert.are.equal(x, x:to("cpu"))
    assert.are.same({ 0, -2 }, x:narrow(1, 1, 2):long():tolist())
    assert.has_error(function() x:long() end, "long: to int64: element 3 (flat, 1-based) is 1e+300, which has no int64 value")
    assert.has_error(function() x:to({ dtype = "float64", foo = 1 }) end, "to: unknown option 'foo' (known: dtype, device)")
    assert.are.same({ 3, -4 }, lt.tensor({ 3, -4 }, "int64"):double():tolist())
    assert.are.equal(2 ^ 53 + 2, lt.tensor({ 2 ^ 53 + 2 }, "int64"):double():item())
  end)

  it("prints its dtype", function()
    local s = tostring(lt.tensor({ 1.5, 2 }, "float64"))
    assert.truthy(s:find("1.5000", 1, true))
    assert.truthy(s:find("[float64 tensor of shape [2]]", 1, true))
  end)

  it("views, copies, cat, stack and indexing keep every bit", function()
    local vals = { { 0.1, 1 / 3, 1e300 }, { -2 ^ -1074, 2 ^ 53 + 2, 0 / 0 } }
    local x = lt.tensor(vals, "float64")
    local t = x:t():contiguous()
    assert.are.equal("float64", t:dtype())
    for i = 1, 2 do
      for j = 1, 3 do assert.is_true(same_bits(vals[i][j], t:tolist()[j][i])) end
    end
    assert.are.equal(1 / 3, x:select(2, 2):tolist()[1])
    assert.are.equal(1e300, x:view(6):narrow(1, 3, 1):item())
    assert.are.equal(2 ^ 53 + 2, x:reshape(3, 2):tolist()[3][1])
    assert.are.equal(1 / 3, x:unsqueeze(1):squeeze():clone():tolist()[1][2])
    assert.are.equal(0.1, x[1]:expand(2, 3):contiguous():tolist()[2][1])
    local c = lt.cat({ x, x }, 1)
    assert.are.same({ 4, 3 }, c:shape())
    assert.are.equal(1 / 3, c:tolist()[3][2])
    local s = lt.stack({ x[1], x[1] })
    assert.are.equal("float64", s:dtype())
    assert.are.equal(1 / 3, s:tolist()[2][2])
    assert.has_error(function() lt.cat({ x, x:float() }) end)
    local y = lt.zeros({ 2, 3 }, "float64")
    y:copy_(x)
    assert.are.equal(2 ^ 53 + 2, y:tolist()[2][2])
    y[1] = lt.tensor({ 1 / 7, 2, 3 }, "float64")
    assert.are.equal(1 / 7, y:tolist()[1][1])
    y[2] = 0.1
    assert.are.equal(0.1, y:tolist()[2][3])
    y:fill_(1 / 9)
    assert.are.equal(1 / 9, y:tolist()[2][1])
    local f = lt.zeros(3)
    f:copy_(lt.tensor({ 0.1, 1, 2 }, "float64")) -- converts
    assert.are.equal("float32", f:dtype())
    assert.are.equal(1, f:tolist()[2])
    y:zero_()
    assert.are.same({ 0, 0, 0 }, y:tolist()[1])
  end)

  it("round-trips through safetensors (F64) bit for bit", function()
    local dir = os.tmpname()
    os.remove(dir)
    local p = dir .. ".safetensors"
    local x = lt.tensor(EXACT, "float64")
    lt.save(p, { w = x, f = lt.tensor({ 0.5 }), i = lt.tensor({ 7 }, "int64") })
    local sd = lt.load(p)
    os.remove(p)
    assert.are.equal("float64", sd.w:dtype())
    assert.are.same(EXACT, sd.w:tolist())
    assert.are.equal("float32", sd.f:dtype())
    assert.are.equal("int64", sd.i:dtype())
    local fh = io.open(p, "rb")
    assert.is_nil(fh)
  end)
end)

-- ---- float64 ops against torch 1.13 (tests/fixtures/f64.json, gen_f64.py) ----------------------------

local function load_cases()
  local f = assert(io.open("tests/fixtures/f64.json", "rb"))
  local s = f:read("*a")
  f:close()
  return cjson.decode(s)
end

local function tensor_of(obj)
  local t = lt.tensor(obj.data, obj.dtype)
  return #obj.shape == 0 and t:reshape({}) or t:reshape(obj.shape)
end

-- |got - ref| <= 1e-12 * max(1, |ref|) for every element, and the same shape and dtype
local function check(what, got, ref, rtol)
  assert.are.equal(ref.dtype, got:dtype(), what .. ": dtype")
  assert.are.same(ref.shape, got:shape(), what .. ": shape")
  local g = got:flatten():tolist()
  local tol_scale = rtol or (ref.dtype == "float64" and 1e-12 or 1e-6)
  for i, r in ipairs(ref.data) do
    local tol = tol_scale * math.max(1, math.abs(r))
    if not (math.abs(g[i] - r) <= tol) then
      error(string.format("%s: element %d is %.17g, expected %.17g (diff %.3g)", what, i, g[i], r, math.abs(g[i] - r)), 2)
    end
  end
end

-- the op of a case applied to lutra tensors
local function apply(c, xs)
  local op, a = c.op, c.args
  if op:match("loss") or op:match("cross_entropy") then return lt.F[op](xs[1], xs[2], { reduction = a[1] }) end
  if #xs >= 2 then return lt[op](unpack(xs)) end
  if op == "clamp" then return xs[1]:clamp(a[1], a[2]) end
  if a[2] ~= nil and type(a[2]) == "boolean" and (op == "mul" or op == "div" or op == "pow" or op == "sub" or op == "add") then
    if a[2] then return lt[op](a[1], xs[1]) end
    return lt[op](xs[1], a[1])
  end
  if op == "max" or op == "min" then
    if a[1] then return (xs[1][op](xs[1], a[1])) end
    return xs[1][op](xs[1])
  end
  if op == "sum" or op == "mean" then return xs[1][op](xs[1], a[1], a[2]) end
  return xs[1][op](xs[1])
end

local gradcheck64 = require "tests.helpers.gradcheck64" -- (every float64 input against central differences)

describe("float64 ops against torch 1.13 to 1e-12 (f64.json), with float64 gradchecks", function()
  for _, c in ipairs(load_cases()) do
    it(c.name, function()
      local xs, leaves = {}, {}
      for i, obj in ipairs(c.inputs) do
        leaves[i] = tensor_of(obj):requires_grad(true)
        xs[i] = leaves[i]
      end
      local out = apply(c, xs)
      check("out", out, c.out)
      local gout = tensor_of(c.gout)
      out:backward(out:dtype() == "float64" and gout or gout:float())
      for i, g in ipairs(c.grads) do
        if g ~= cjson.null then check("grad " .. i, leaves[i].grad, g) end
      end
      -- the random inputs sit far from kinks (relu, abs) and ties (max, min) for h = 1e-6
      local ins = {}
      for i, obj in ipairs(c.inputs) do ins[i] = tensor_of(obj) end
      gradcheck64(function(p) return apply(c, p) end, ins, gout)
    end)
  end
end)

describe("LBFGS in float64", function()
  it("follows torch 1.13's losses step by step from the same weights (f64_lbfgs.json)", function()
    local f = assert(io.open("tests/fixtures/f64_lbfgs.json", "rb"))
    local fx = cjson.decode(f:read("*a"))
    f:close()
    local net = lt.nn.Sequential { lt.nn.Linear(3, 4), lt.nn.Tanh(), lt.nn.Linear(4, 1) }:double()
    local sd = {}
    local function lua_name(k) return (k:gsub("^(%d+)", function(i) return tostring(tonumber(i) + 1) end)) end
    for k, v in pairs(fx.weights) do sd[lua_name(k)] = tensor_of(v) end
    net:load_state_dict(sd)
    assert.are.equal("float64", net[1].weight:dtype())
    local x, y = tensor_of(fx.x), tensor_of(fx.y)
    local opt = lt.optim.LBFGS(net:parameters(), { lr = fx.lr })
    for step, want in ipairs(fx.losses) do
      local loss = opt:step(function()
        opt:zero_grad()
        local l = lt.F.mse_loss(net(x), y)
        l:backward()
        return l
      end)
      local got = loss:item()
      assert(math.abs(got - want) <= 1e-9 * math.abs(want) + 1e-15,
        string.format("step %d: loss %.17g, torch %.17g", step, got, want))
    end
    -- the last steps are near convergence, where LBFGS's step amplifies the last bits of summation order
    for k, v in pairs(fx.final) do check("final " .. k, net:state_dict()[lua_name(k)], v, 1e-9) end
  end)
end)

describe("ops without a float64 kernel", function()
  local x = lt.tensor({ 0.5, 2 }, "float64")
  local MSG = "float64 is not supported yet (float32 only)"
  it("refuse float64 with the one message, never reading doubles as floats", function()
    -- an inference plan (float32 kernels compiled ahead of time) given a float64 input
    local plan = lt.infer.compile(lt.nn.Linear(2, 1), lt.zeros(1, 2))
    local ok, err = pcall(plan, x:reshape(1, 2))
    assert(not ok and tostring(err):find("plan: " .. MSG, 1, true), tostring(err))
  end)

  it("mixing float32 and float64 promotes to float64 or errors naming both", function()
    assert.are.equal("float64", (x * lt.tensor({ 1, 2 })):dtype())
    assert.are.equal("float64", (lt.tensor({ 1, 2 }) + x):dtype())
    assert.are.equal("float64", (x * 2.5):dtype()) -- a Lua number does not promote
    assert.are.equal("float32", (lt.tensor({ 1 }) * 0.1):dtype())
    assert.are.equal("float64", (x + lt.tensor({ 1, 2 }, "int64")):dtype())
    -- where's numbers take the float64 operand's dtype, all their digits kept (they were rounded to float32)
    local m = lt.tensor({ 1, 0 })
    local w = lt.where(m, 0.1, lt.tensor({ 1, 2 }, "float64"))
    assert.are.equal("float64", w:dtype())
    assert.are.same({ 0.1, 2 }, w:tolist())
    assert.are.same({ 1, 1.7976931348623157e308 }, lt.where(m, lt.tensor({ 1, 2 }, "float64"), 1.7976931348623157e308):tolist())
    assert.has_error(function() lt.tensor({ 1, 2 }):add_(x) end,
      "add_: cannot update a float32 tensor in place with a float64 operand (convert it with :float())")
  end)
end)
