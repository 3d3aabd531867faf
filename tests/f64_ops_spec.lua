-- f64_ops_spec.lua — the index, scan, sort and loss ops on float64 against torch 1.13 (tests/fixtures/f64_ops.json,
-- gen_f64_ops.py): values and the gradients of sum(y * gout) to 1e-12, float64 finite-difference gradchecks, the
-- float32/float64 mixes PyTorch refuses, and the probe that every public tensor method takes float64 but the ones
-- docs/reference/dtypes.md names as refusing.
local lt = require "lutra"
local cjson = require "cjson"
local unpack = unpack or table.unpack -- luacheck: ignore 143

local f64_ref = require "tests.helpers.f64_ref"
local gradcheck64 = require "tests.helpers.gradcheck64"
local tensor_of, check = f64_ref.tensor_of, f64_ref.check

local CASES = f64_ref.load("f64_ops")

-- op name -> function(args, options) -> y, calling lutra as a user would (dims and indices 1-based)
local OPS = {
  gather = function(a) return a.x:gather(2, a.i) end,
  index_select = function(a) return a.x:index_select(1, a.i) end,
  scatter = function(a) return a.x:scatter(1, a.i, a.src) end,
  scatter_add = function(a) return a.x:scatter_add(1, a.i, a.src) end,
  index_add = function(a) return a.x:index_add(1, a.i, a.src, { alpha = 0.3 }) end,
  index_fill = function(a) return a.x:index_fill(2, a.i, 0.1) end,
  masked_fill = function(a) return a.x:masked_fill(a.m, 0.1) end,
  masked_select = function(a) return a.x:masked_select(a.m) end,
  cumsum = function(a) return a.x:cumsum(2) end,
  cumprod = function(a) return a.x:cumprod(2) end,
  prod_dim = function(a) return a.x:prod(1) end,
  prod_all = function(a) return a.x:prod() end,
  sort_desc = function(a) return (a.x:sort(2, { descending = true })) end,
  topk = function(a) return (a.x:topk(2, 2)) end,
  kthvalue = function(a) return (a.x:kthvalue(2, 2)) end,
  median = function(a) return (a.x:median(2)) end,
  floor = function(a) return a.x:floor() end,
  ceil = function(a) return a.x:ceil() end,
  round = function(a) return a.x:round() end,
  trunc = function(a) return a.x:trunc() end,
  frac = function(a) return a.x:frac() end,
  erf = function(a) return a.x:erf() end,
  erfinv = function(a) return a.x:erfinv() end,
  reciprocal = function(a) return a.x:reciprocal() end,
  expm1 = function(a) return a.x:expm1() end,
  tril = function(a) return a.x:tril(-1) end,
  triu = function(a) return a.x:triu(1) end,
  norm = function(a, o) return a.x:norm(o.p == "inf" and math.huge or o.p, 2) end,
  cross_entropy = function(a, o)
    return lt.F.cross_entropy(a.x, a.t, { weight = a.w, reduction = o.reduction, ignore_index = o.ignore_index,
      label_smoothing = o.label_smoothing })
  end,
  nll_loss = function(a, o)
    return lt.F.nll_loss(a.x, a.t, { weight = a.w, reduction = o.reduction, ignore_index = o.ignore_index })
  end,
  kl_div = function(a, o) return lt.F.kl_div(a.x, a.t, o) end,
  poisson_nll_loss = function(a, o) return lt.F.poisson_nll_loss(a.x, a.t, o) end,
  cosine_embedding_loss = function(a, o)
    return lt.F.cosine_embedding_loss(a.x1, a.x2, lt.tensor({ 1, -1, 1, -1 }, "float64"), o)
  end,
  margin_ranking_loss = function(a, o)
    return lt.F.margin_ranking_loss(a.x1, a.x2, lt.tensor({ { 1 }, { -1 }, { 1 }, { -1 } }, "float64"):expand(4, 3), o)
  end,
  triplet_margin_loss = function(a, o) return lt.F.triplet_margin_loss(a.a, a.p, a.n, o) end,
  gaussian_nll_loss = function(a) return lt.F.gaussian_nll_loss(a.x, a.t, a.v) end,
}

local function args_of(c, grad)
  local a = {}
  for k, v in pairs(c.args) do
    if v.dtype then a[k] = lt.tensor(v.data, v.dtype):reshape(v.shape)
    else a[k] = tensor_of(v) end
    if grad and not v.dtype and k ~= "w" then a[k]:requires_grad(true) end
  end
  return a
end

describe("float64 ops against torch 1.13 (f64_ops.json)", function()
  for n, c in ipairs(CASES) do
    it(n .. " " .. c.op .. " " .. cjson.encode(c.options), function()
      local a = args_of(c, true)
      local y = OPS[c.op](a, c.options)
      check("y", y, c.y)
      local gout = tensor_of(c.gout)
      ;(y * gout):sum():backward()
      for k, ref in pairs(c.grads) do check("grad " .. k, a[k].grad, ref) end
    end)
  end
end)

describe("float64 gradchecks (central differences)", function()
  for n, c in ipairs(CASES) do
    -- sort, topk, median and kthvalue are piecewise: their gradient is the gather's, checked above
    if not c.op:find("^sort") and c.op ~= "topk" and c.op ~= "median" and c.op ~= "kthvalue" then
      it(n .. " " .. c.op, function()
        local a, names, inputs = args_of(c, false), {}, {}
        for k, v in pairs(a) do
          if v:dtype() == "float64" and k ~= "w" then
            names[#names + 1] = k
            inputs[#inputs + 1] = v
          end
        end
        gradcheck64(function(p)
          local b = {}
          for k, v in pairs(a) do b[k] = v end
          for i, k in ipairs(names) do b[k] = p[i] end
          return OPS[c.op](b, c.options)
        end, inputs, tensor_of(c.gout))
      end)
    end
  end
end)

describe("float64 mixed with float32", function()
  local x = lt.tensor({ { 1, 2 }, { 3, 4 } }, "float64")
  local i = lt.tensor({ { 1 }, { 2 } }, "int64")
  it("indexed writes need the input's float dtype, as PyTorch's", function()
    assert.has_error(function() x:scatter(2, i, lt.tensor({ { 1 }, { 2 } })) end,
      "scatter: input is float64 and src is float32: both must have the same float dtype")
    assert.has_error(function() x:scatter_add(2, i, lt.tensor({ { 1 }, { 2 } })) end,
      "scatter_add: input is float64 and src is float32: both must have the same float dtype")
    assert.has_error(function() x:index_add(1, lt.tensor({ 1 }, "int64"), lt.tensor({ { 1, 2 } })) end,
      "index_add: input is float64 and source is float32: both must have the same float dtype")
  end)
  it("the class losses need the weight in the input's dtype, as PyTorch's", function()
    local t = lt.tensor({ 1, 2 }, "int64")
    assert.has_error(function() lt.F.cross_entropy(x, t, { weight = lt.tensor({ 1, 1 }) }) end,
      "cross_entropy: input is float64 and weight is float32: both must have the same float dtype")
    assert.has_error(function() lt.F.nll_loss(x, t, { weight = lt.tensor({ 1, 1 }) }) end,
      "nll_loss: input is float64 and weight is float32: both must have the same float dtype")
  end)
  it("float32 inputs keep float32 results", function()
    local y = lt.tensor({ { 1, 2 }, { 3, 4 } })
    assert.are.equal("float32", y:cumsum(1):dtype())
    assert.are.equal("float32", lt.F.cross_entropy(y, lt.tensor({ 1, 2 }, "int64")):dtype())
    assert.are.equal("float32", y:gather(2, i):dtype())
  end)
end)

describe("float64 random fills", function()
  -- a double that a float32 cannot hold: the draw was made in double, not rounded from float32
  local function has_double_digits(t)
    local n = 0
    for _, v in ipairs(t:flatten():tolist()) do
      if v ~= lt.tensor({ v }, "float32"):item() then n = n + 1 end
    end
    return n
  end
  it("uniform_, normal_, rand_like, randn_like draw float64 values with the right moments", function()
    lt.manual_seed(7)
    local x = lt.zeros({ 200, 100 }, "float64")
    local r = lt.randn_like(x)
    assert.are.equal("float64", r:dtype())
    assert(math.abs(r:mean():item()) < 0.03 and math.abs(r:std():item() - 1) < 0.03)
    assert.are.equal(20000, has_double_digits(r))
    r:normal_(2, 3)
    assert(math.abs(r:mean():item() - 2) < 0.1 and math.abs(r:std():item() - 3) < 0.1)
    -- a strided view fills in place too
    local v = lt.zeros({ 4, 6 }, "float64"):t()
    v:normal_()
    assert.are.equal(24, has_double_digits(v))
    local u = lt.rand_like(x)
    assert.are.equal("float64", u:dtype())
    assert(u:min():item() >= 0 and u:max():item() < 1 and math.abs(u:mean():item() - 0.5) < 0.02)
    u:uniform_(-2, -1)
    assert(u:min():item() >= -2 and u:max():item() < -1)
    assert.are.equal(20000, has_double_digits(u))
    assert.are.same({ 0.1, 0.1 }, lt.full_like(lt.zeros({ 2 }, "float64"), 0.1):tolist())
    assert.are.equal("float32", lt.randn_like(lt.zeros({ 2 })):dtype())
  end)
  it("bernoulli and multinomial take float64 probabilities", function()
    lt.manual_seed(7)
    local b = lt.bernoulli(lt.full({ 20000 }, 0.3, "float64"))
    assert.are.equal("float64", b:dtype())
    assert(math.abs(b:mean():item() - 0.3) < 0.02)
    assert.are.same({ 0, 1 }, lt.unique(b):tolist())
    assert.has_error(function() lt.bernoulli(lt.tensor({ 0.5, 1.5 }, "float64")) end,
      "bernoulli: probability 1.5 at element 2 is not in [0, 1]")
    local m = lt.multinomial(lt.tensor({ 0.2, 0.8 }, "float64"), 20000, { replacement = true })
    assert(math.abs(m:double():mean():item() - 1.8) < 0.02)
    assert.has_error(function() lt.multinomial(lt.tensor({ 0.2, -1 }, "float64"), 1) end,
      "multinomial: probabilities must be finite and >= 0, got -1 in row 1")
  end)
end)

-- The refusal list is the one docs/reference/dtypes.md gives: every public tensor method is called on a float64
-- tensor (with no argument and with a dim), and the ones answering "float64 is not supported yet" must be the
-- page's "tensor methods:" bullet; the lt.F functions that refuse so must be named on the page.
describe("the float64 refusals are those docs/reference/dtypes.md lists", function()
  local MSG = "float64 is not supported yet"
  local page = assert(io.open("docs/reference/dtypes.md", "rb")):read("*a")
  local section = page:match("takes float64 where PyTorch.s does.-\n\n(.-)\n\n")
  local function names_in(text)
    local set = {}
    for n in text:gmatch("`([%w_]+)`") do set[n] = true end
    return set
  end
  local function refuses(fn, ...)
    local ok, err = pcall(fn, ...)
    return not ok and tostring(err):find(MSG, 1, true) ~= nil
  end
  local x = lt.tensor({ { 0.5, 2, -1 }, { 3, 0.25, 1.5 } }, "float64")

  it("tensor methods", function()
    local documented = names_in(assert(section:match("%* tensor methods: ([^\n]*)"), "no 'tensor methods:' bullet"))
    local mt = getmetatable(x)
    local names = {}
    for _, t in ipairs { type(mt.__index) == "table" and mt.__index or {}, mt.methods or {} } do
      for k, v in pairs(t) do
        if type(k) == "string" and type(v) == "function" then names[k] = v end
      end
    end
    assert(next(names), "no tensor methods found")
    local found = {}
    for name in pairs(names) do
      if refuses(function() return x[name](x) end) or refuses(function() return x[name](x, 1) end) then
        found[name] = true
      end
    end
    assert.are.same(documented, found)
  end)

  it("lt.F functions", function()
    local documented = names_in(section)
    local i = lt.tensor({ 1, 2 }, "int64")
    for name, fn in pairs(lt.F) do
      if type(fn) == "function" then
        for _, args in ipairs { { x }, { x, 1 }, { x, x }, { x, i }, { x, x, x } } do
          if refuses(fn, unpack(args)) then
            assert(documented[name], "lt.F." .. name .. " refuses float64 but docs/reference/dtypes.md does not say so")
            break
          end
        end
      end
    end
  end)

  -- every name of a namespace, the lazily loaded ones too (names.lua keeps them in the metatable)
  local function public_names(t)
    local set, list = {}, {}
    for k in pairs(t) do set[k] = true end
    local mt = getmetatable(t)
    if type(mt) == "table" and type(rawget(mt, "__lutra_lazy")) == "table" then
      for k in pairs(mt.__lutra_lazy) do set[k] = true end
    end
    for k in pairs(set) do
      if type(k) == "string" and not k:match("^_") then list[#list + 1] = k end
    end
    table.sort(list)
    return list
  end
  local function f64(...) return lt.randn(...):double() end

  it("lt.* and lt.linalg.* functions", function()
    local documented = names_in(section)
    local skip = { help = true, set_default_dtype = true } -- (help prints; the default dtype is global state)
    local i = lt.tensor({ 1, 2 }, "int64")
    local probed = 0
    for _, ns in ipairs { { "lt.", lt }, { "lt.linalg.", lt.linalg } } do
      for _, name in ipairs(public_names(ns[2])) do
        local fn = ns[2][name]
        if type(fn) == "function" and not skip[name] then
          probed = probed + 1
          for _, args in ipairs { { x }, { x, 1 }, { x, x }, { x, i }, { x, x, x }, { f64(1, 2, 4, 4) },
            { f64(1, 2, 4, 4), 2 }, { f64(2, 3, 8), 2 }, { f64(2, 3, 8), f64(2, 3, 8) } } do
            if refuses(fn, unpack(args)) then
              assert(documented[name], ns[1] .. name .. " refuses float64 but docs/reference/dtypes.md does not say so")
              break
            end
          end
        end
      end
    end
    assert(probed > 300, "probed " .. probed .. " functions")
  end)

  it("lt.nn modules after m:double() (constructed with a few argument patterns) and lt.optim optimizers", function()
    local documented = names_in(section)
    local ctors = { {}, { 2 }, { 4 }, { 8 }, { 2, 2 }, { 8, 4 }, { 4, 4, 3 }, { 2, 4, 3 }, { 2, 8 }, { 8, 2 }, { 4, 4 },
      { 8, 8 }, { 8, 2, { batch_first = true } } }
    local shapes = { { 2, 3 }, { 2, 3, 8 }, { 1, 2, 4, 4 }, { 1, 2, 4, 4, 4 }, { 4 }, { 2, 4, 8 }, { 3, 2, 4 } }
    local constructed = 0
    for _, name in ipairs(public_names(lt.nn)) do
      local class = name:match("^%u") and lt.nn[name]
      if class then
        for _, a in ipairs(ctors) do
          local ok, m = pcall(class, unpack(a))
          if ok and type(m) == "table" and m.double then
            constructed = constructed + 1
            m:double()
            for _, s in ipairs(shapes) do
              local refused = refuses(function() return m(f64(unpack(s))) end)
                or refuses(function() return m(f64(unpack(s)), f64(unpack(s))) end)
                or refuses(function() return m(f64(unpack(s)), f64(unpack(s)), f64(unpack(s))) end)
              assert(not refused or documented[name],
                "lt.nn." .. name .. " refuses float64 but docs/reference/dtypes.md does not say so")
            end
          end
        end
      end
    end
    assert(constructed > 100, "constructed " .. constructed .. " modules")
    for _, name in ipairs(public_names(lt.optim)) do
      if name:match("^%u") then
        local w = lt.param(f64(3))
        local ok, opt = pcall(lt.optim[name], { w }, { lr = 0.01 })
        if ok and type(opt) == "table" and opt.step then
          local refused = refuses(function()
            return opt:step(function()
              opt:zero_grad()
              local l = (w * w):sum()
              l:backward()
              return l
            end)
          end)
          assert(not refused or documented[name],
            "lt.optim." .. name .. " refuses float64 but docs/reference/dtypes.md does not say so")
        end
      end
    end
  end)
end)
