-- nn_activations_spec: the activations (lt.F.silu/elu/softplus/mish/hardtanh/hardswish/hardsigmoid/prelu and their
-- modules, GELU{approximate}), Identity, ModuleList, ModuleDict, Unflatten, Module:to and BatchNorm's
-- num_batches_tracked: values and gradients against PyTorch 1.13 (tests/fixtures/modules_more.json from
-- gen_modules.py), finite-difference gradchecks, PyTorch's state_dict names, and the error texts of bad input.
local lt = require "lutra"
local X = require "tests.helpers.nn_fixtures"
local gradcheck = require "tests.helpers.gradcheck"
local F, nn = lt.F, lt.nn
local unpack = unpack or table.unpack -- luacheck: ignore 143

local err_of = require "tests.helpers.err_of"

local cases = X.load("modules_more.json")
local function of_kind(kind)
  local out = {}
  for _, cs in ipairs(cases) do if cs.kind == kind then out[#out + 1] = cs end end
  return out
end

-- the output and the input's gradient of a fixture case (the backward of sum(out * grad_output))
local function check_case(cs, out, x)
  X.check(cs.name .. " output", out, cs.output)
  out:backward(X.tensor(cs.grad_output))
  X.check(cs.name .. " grad_input", x.grad, cs.grad_input)
end

describe("activations as lt.F functions against PyTorch 1.13", function()
  for _, cs in ipairs(of_kind("F")) do
    it("matches " .. cs.name .. " (output, input and weight gradients, edge values)", function()
      local x = X.tensor(cs.input):requires_grad(true)
      local extra = {}
      for i, p in ipairs(cs.params) do extra[i] = X.tensor(p):requires_grad(true) end
      local args = {}
      for _, v in ipairs(extra) do args[#args + 1] = v end
      for _, v in ipairs(cs.args) do args[#args + 1] = v end
      check_case(cs, F[cs.fn](x, unpack(args)), x)
      for i, g in ipairs(cs.grad_params) do X.check(cs.name .. " grad of weight " .. i, extra[i].grad, g) end
    end)
  end

  it("takes PyTorch's names in an options table as well as positionally", function()
    local x = X.tensor(of_kind("F")[1].input)
    local function same(a, b) assert.are.same(a:tolist(), b:tolist()) end
    same(F.softplus(x, 2, 5), F.softplus(x, { beta = 2, threshold = 5 }))
    same(F.softplus(x, 2), F.softplus(x, { beta = 2 }))
    same(F.hardtanh(x, -2, 0.5), F.hardtanh(x, { min_val = -2, max_val = 0.5 }))
    same(F.elu(x, 0.5), F.elu(x, { alpha = 0.5 }))
    same(F.prelu(x, lt.tensor { 0.3 }), x:prelu(lt.tensor { 0.3 }))
  end)

  it("computes the same on a non-contiguous input as on its contiguous copy", function()
    lt.manual_seed(3)
    local x = lt.randn(4, 5):t()
    for _, n in ipairs { "silu", "elu", "softplus", "mish", "hardtanh", "hardswish", "hardsigmoid" } do
      assert.are.same(F[n](x:contiguous()):tolist(), F[n](x):tolist(), n)
    end
  end)
end)

describe("activations split over lutra's threads", function()
  it("give the one-thread values and gradients on 1, 2 and 3 threads (70001 elements: above the split size)", function()
    local before = lt.get_num_threads()
    local function run(nt, name)
      lt.set_num_threads(nt)
      lt.manual_seed(9)
      local x = (lt.randn(70001) * 4):requires_grad(true)
      local y = F[name](x)
      y:backward(lt.randn(70001))
      return y:detach(), x.grad
    end
    for _, n in ipairs { "silu", "elu", "softplus", "mish", "hardtanh", "hardswish", "hardsigmoid" } do
      local y1, g1 = run(1, n)
      for _, nt in ipairs { 2, 3 } do
        local y, g = run(nt, n)
        assert.are.equal(0, (y - y1):abs():max():item(), n .. " forward, " .. nt .. " threads")
        assert.are.equal(0, (g - g1):abs():max():item(), n .. " backward, " .. nt .. " threads")
      end
    end
    lt.set_num_threads(before)
  end)
end)

describe("activation gradchecks", function()
  it("pass finite differences for every activation and PReLU's weight", function()
    lt.manual_seed(5)
    -- away from the kinks (+-3, +-1, 0, softplus's threshold) by more than the finite-difference step
    local x = lt.tensor { { -4.2, -2.7, -1.3, -0.4 }, { 0.3, 1.1, 2.2, 2.8 }, { 3.6, 5, -0.8, 1.7 } }
    for _, n in ipairs { "silu", "elu", "softplus", "mish", "hardtanh", "hardswish", "hardsigmoid" } do
      gradcheck(function(a) return F[n](a) end, { x:clone() })
    end
    gradcheck(function(a) return F.elu(a, 0.4) end, { x:clone() })
    gradcheck(function(a) return F.softplus(a, 3, 2) end, { x:clone() })
    gradcheck(function(a) return F.hardtanh(a, -0.7, 1.9) end, { x:clone() })
    gradcheck(function(a, w) return F.prelu(a, w) end, { lt.randn(2, 3, 4), lt.randn(3) })
    gradcheck(function(a, w) return F.prelu(a, w) end, { lt.randn(5), lt.tensor { 0.2 } })
  end)
end)

-- PyTorch's inplace on the lt.F functions, with the modules' rule: the result written into the input, unless
-- a gradient is being recorded for it (then a new tensor, the input unchanged); the values are the same.
describe("inplace on lt.F functions", function()
  -- fn(x, ...) with the trailing arguments, each way: positional and in an options table
  local CASES = {
    { "relu", { true }, { inplace = true } },
    { "leaky_relu", { 0.2, true }, { negative_slope = 0.2, inplace = true } },
    { "elu", { 0.5, true }, { alpha = 0.5, inplace = true } },
    { "hardtanh", { -0.5, 0.5, true }, { min_val = -0.5, max_val = 0.5, inplace = true } },
    { "silu", { true }, { inplace = true } },
    { "mish", { true }, { inplace = true } },
    { "hardswish", { true }, { inplace = true } },
    { "hardsigmoid", { true }, { inplace = true } },
  }
  it("writes the result into x (positional and by name), as the function without inplace computes it", function()
    for _, c in ipairs(CASES) do
      local f = F[c[1]]
      local plain = {} -- the options without inplace
      for k, v in pairs(c[3]) do if k ~= "inplace" then plain[k] = v end end
      for _, args in ipairs { c[2], { c[3] } } do
        lt.manual_seed(5)
        local x = lt.randn(3, 4) * 3
        local want = f(x:clone(), plain)
        local before = x:clone()
        local y = f(x, unpack(args))
        assert.is_true(y:allclose(want, 0, 0), c[1])
        assert.is_true(x:allclose(want, 0, 0), c[1] .. ": x holds the result")
        assert.is_false(x:allclose(before, 0, 0), c[1] .. ": x changed")
        y:fill_(7) -- the result is x itself
        assert.are.equal(7, x:view(-1):totable()[1], c[1])
      end
    end
  end)

  it("leaves x as it was without inplace, and when a gradient is recorded for x", function()
    for _, c in ipairs(CASES) do
      local f = F[c[1]]
      lt.manual_seed(6)
      local x = lt.randn(3, 4) * 3
      local before = x:clone()
      f(x)
      assert.is_true(x:allclose(before, 0, 0), c[1])
      local p = lt.param(x:clone())
      local y = f(p, unpack(c[2]))
      assert.is_true(p:detach():allclose(before, 0, 0), c[1] .. ": a parameter is left as it was")
      y:sum():backward()
      assert.truthy(p.grad, c[1])
    end
  end)

  it("names itself when x cannot be written in place (an expand()ed view; found by the API fuzz)", function()
    for _, c in ipairs(CASES) do
      local x = lt.randn(3, 1):expand(3, 4)
      local ok, err = pcall(F[c[1]], x, c[3])
      assert.is_false(ok, c[1])
      -- (LuaJIT puts the caller's position first; PUC Lua's luaL_error from C does not)
      local msg = tostring(err):gsub("^[^\n]-:%d+: ", "")
      assert.matches("^" .. c[1] .. ": copy_: the tensor's elements overlap in memory", msg)
    end
  end)

  it("dropout, dropout2d, dropout3d: the same mask, written into x", function()
    for _, c in ipairs { { "dropout", { 2, 8 } }, { "dropout2d", { 2, 3, 4, 4 } }, { "dropout3d", { 2, 3, 2, 2, 2 } } } do
      local f = F[c[1]]
      local x = lt.randn(unpack(c[2])) + 5
      lt.manual_seed(11)
      local want = f(x:clone(), 0.5, true)
      lt.manual_seed(11)
      local y = f(x, 0.5, true, true)
      assert.is_true(x:allclose(want, 0, 0), c[1])
      assert.is_true(y:allclose(want, 0, 0), c[1])
      lt.manual_seed(11)
      local x2 = lt.randn(unpack(c[2])) + 5
      local before = x2:clone()
      lt.manual_seed(11)
      f(x2, { p = 0.5, inplace = true })
      assert.is_false(x2:allclose(before, 0, 0), c[1] .. ": by name")
      local x3 = x:clone()
      f(x3, 0.5, false, true) -- not training: x as it is
      assert.is_true(x3:allclose(x, 0, 0), c[1])
    end
    assert.matches("dropout2d: training must be a boolean, got number", err_of(F.dropout2d, lt.randn(2, 3, 4), 0.5, 1),
      1, true)
  end)
end)

describe("activation errors", function()
  local x = lt.randn(2, 3)
  it("name the function, the option and the value", function()
    assert.matches("hardtanh: min_val 2 must be less than or equal to max_val 1", err_of(F.hardtanh, x, 2, 1), 1, true)
    assert.matches("softplus: beta must not be 0", err_of(F.softplus, x, 0), 1, true)
    assert.matches("softplus: unknown option 'betta'", err_of(F.softplus, x, { betta = 2 }), 1, true)
    assert.matches("elu: alpha must be a finite number, got %-?nan", err_of(F.elu, x, 0 / 0)) -- PUC Lua: -nan
    assert.matches("silu: expected a tensor input, got number", err_of(F.silu, 3), 1, true)
    assert.matches("mish: input must be float32 or float64, got int64", err_of(F.mish, lt.zeros({ 2 }, "int64")), 1, true)
    assert.matches("prelu: weight must be a tensor, got nil", err_of(F.prelu, x), 1, true)
    assert.matches("prelu: weight [2] must hold 1 slope or one per channel (dim 2 of the input [2 x 3]: 3)",
      err_of(F.prelu, x, lt.ones(2)), 1, true)
    assert.matches("Hardtanh: min_val 1 must be less than or equal to max_val -1", err_of(nn.Hardtanh, 1, -1), 1, true)
    assert.matches("Softplus: beta must not be 0", err_of(nn.Softplus, { beta = 0 }), 1, true)
    assert.matches("SiLU: unknown option 'inplac' (known options: inplace)", err_of(nn.SiLU, { inplac = true }), 1, true)
    assert.matches("ELU: options must be a table, got number (it takes at most 2 positional arguments: alpha, inplace)",
      err_of(nn.ELU, 1, true, 3), 1, true)
    assert.matches("Hardtanh: takes at most 3 positional arguments (min_val, max_val, inplace), got 5",
      err_of(nn.Hardtanh, -1, 1, true, 2, 3), 1, true)
    assert.matches("elu: takes (x[, alpha[, inplace]]), got 4 arguments", err_of(F.elu, x, 1, true, 3), 1, true)
    assert.matches("hardtanh: takes (x[, min_val[, max_val[, inplace]]])", err_of(F.hardtanh, x, -1, 1, true, 2), 1,
      true)
    assert.matches("relu: inplace must be a boolean, got number", err_of(F.relu, x, 1), 1, true)
    assert.matches("silu: unknown option 'inplac'", err_of(F.silu, x, { inplac = true }), 1, true)
    assert.matches("leaky_relu: negative_slope must be a finite number, got inf", err_of(F.leaky_relu, x, 1 / 0), 1,
      true)
    assert.matches("softplus: options come as one table, got another argument after it",
      err_of(F.softplus, x, { beta = 2 }, 3), 1, true)
    assert.matches("PReLU: num_parameters must be an integer >= 1, got 0", err_of(nn.PReLU, { num_parameters = 0 }),
      1, true)
    assert.matches('GELU: approximate must be "none" or "tanh", got "fast"', err_of(nn.GELU, { approximate = "fast" }),
      1, true)
    assert.matches("PReLU(num_parameters=3): prelu: weight [3] must hold 1 slope or one per channel",
      err_of(function() return nn.PReLU { num_parameters = 3 }(lt.randn(2, 4)) end), 1, true)
    assert.matches("ELU(alpha=1): expected a tensor input, got string", err_of(function() return nn.ELU()("x") end),
      1, true)
  end)
end)

describe("modules against PyTorch 1.13", function()
  for _, cs in ipairs(of_kind("module")) do
    it("matches " .. cs.name .. " (output, input and parameter gradients)", function()
      local m
      if #cs.args > 0 then m = nn[cs.module](unpack(cs.args)) else m = nn[cs.module](cs.opts) end
      lt.no_grad(function()
        for k, v in pairs(cs.params) do m[k]:copy_(X.tensor(v)) end
      end)
      local x = X.tensor(cs.input):requires_grad(true)
      check_case(cs, m(x), x)
      for k, g in pairs(cs.grad_params) do X.check(cs.name .. " grad of " .. k, m[k].grad, g) end
    end)
  end

  it("PReLU's weight has PyTorch's name, shape and init", function()
    local m = nn.PReLU { num_parameters = 4, init = 0.1 }
    local sd = m:state_dict()
    assert.are.same(lt.full({ 4 }, 0.1):tolist(), sd.weight:tolist())
    assert.are.same({ "weight" }, lt.nn.state_dict_keys(m))
    assert.are.equal(0.25, nn.PReLU().weight:item())
    assert.are.same(lt.full({ 3 }, 0.5):tolist(), nn.PReLU(3, 0.5).weight:tolist()) -- PyTorch's positional form
    assert.are.equal(3, nn.PReLU(3).weight:numel())
  end)
end)

describe("Identity and Unflatten", function()
  it("Identity returns its input, ignoring constructor arguments as PyTorch's", function()
    local x = lt.randn(2, 2)
    assert.are.equal(x, nn.Identity(54, { unused = 1 })(x))
    assert.are.equal(0, #nn.Identity():parameters())
  end)
  it("Unflatten rejects bad dims and sizes by name", function()
    assert.matches("Unflatten: dim must be a non-zero integer", err_of(nn.Unflatten, 0, { 2 }), 1, true)
    assert.matches("Unflatten: unflattened_size must be a non-empty list of sizes, got nil", err_of(nn.Unflatten, 2),
      1, true)
    assert.matches("Unflatten: size 2 must be an integer >= 0 or -1, got -3", err_of(nn.Unflatten, 2, { 2, -3 }), 1, true)
    assert.matches("Unflatten(dim=3, unflattened_size={2, 3}): dim 3 is out of range for an input of shape [4 x 6]",
      err_of(function() return nn.Unflatten(3, { 2, 3 })(lt.zeros(4, 6)) end), 1, true)
    assert.matches("unflatten: sizes {4, 2} don't multiply up to the size of dim 2 (6)",
      err_of(function() return nn.Unflatten(2, { 4, 2 })(lt.zeros(4, 6)) end), 1, true)
  end)
end)

describe("ModuleList and ModuleDict", function()
  local Net = nn.Module:extend("Net")
  function Net:init()
    self.layers = nn.ModuleList { nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3) }
    self.heads = nn.ModuleDict { out = nn.Linear(3, 2), aux = nn.Linear(3, 1) }
    self.bn = nn.BatchNorm1d(3)
  end
  function Net:forward(x)
    for _, layer in ipairs(self.layers) do x = layer(x) end
    x = self.bn(x)
    return self.heads.out(x) + self.heads.aux(x)
  end

  it("loads PyTorch's state_dict strictly (layers.0.weight, heads.out.bias, bn.num_batches_tracked): same output",
    function()
      local cs = of_kind("containers")[1]
      local net = Net()
      local sd, want = {}, {}
      for k, v in pairs(cs.state_dict) do sd[k] = X.tensor(v) end
      for _, k in ipairs(cs.keys) do want[k] = true end
      local got = {}
      for _, k in ipairs(lt.nn.state_dict_keys(net)) do got[k] = true end
      assert.are.same(want, got)
      local r = net:load_state_dict(sd)
      assert.are.same({}, r.missing_keys)
      assert.are.same({}, r.unexpected_keys)
      assert.are.equal(1, net.bn.num_batches_tracked:item())
      net:eval()
      X.check("containers output", net(X.tensor(cs.input)), cs.output)
    end)

  it("iterates with ipairs, counts with #, and appends, extends and inserts modules", function()
    local a, b, c = nn.Linear(1, 1), nn.ReLU(), nn.Linear(1, 2)
    local ml = nn.ModuleList { a }
    assert.are.equal(ml, ml:append(b))
    ml:insert(1, c)
    ml:extend { nn.Tanh() }
    local seen = {}
    for i, m in ipairs(ml) do seen[i] = m end
    assert.are.equal(4, #ml)
    assert.are.same({ c, a, b }, { seen[1], seen[2], seen[3] })
    assert.are.same({ "0.weight", "0.bias", "1.weight", "1.bias" }, lt.nn.state_dict_keys(ml))
    local _, keys = ml:named_children()
    assert.are.same({ "0", "1", "2", "3" }, keys)
    assert.matches("ModuleList(:(0): Linear(1 -> 2):(1): Linear(1 -> 1):(2): ReLU():(3): Tanh():)",
      (tostring(ml):gsub("\n%s*", ":")), 1, true)
  end)

  it("ModuleDict lists its keys sorted, iterates items and updates entries", function()
    local md = nn.ModuleDict { b = nn.ReLU(), a = nn.Tanh() }
    assert.are.same({ "a", "b" }, md:keys())
    local ks = {}
    for k, m in md:items() do ks[#ks + 1] = k; assert.are.equal(md[k], m) end
    assert.are.same({ "a", "b" }, ks)
    md:update("c", nn.Linear(2, 2))
    assert.are.same({ "c.weight", "c.bias" }, lt.nn.state_dict_keys(md))
    md:update("c", nil)
    assert.are.same({ "a", "b" }, md:keys())
    assert.are.equal(2, #md:values())
  end)

  it("reject what is not a module, bad keys, and calls, by name", function()
    assert.matches("ModuleList: element 2 is a number, expected a module", err_of(nn.ModuleList, { nn.ReLU(), 3 }),
      1, true)
    assert.matches("ModuleList: expected a list of modules, ModuleList{m1, m2, ...}, got a module",
      err_of(nn.ModuleList, nn.ReLU()), 1, true)
    assert.matches("ModuleList:insert: index must be an integer in 1..1, got 3",
      err_of(function() return nn.ModuleList():insert(3, nn.ReLU()) end), 1, true)
    assert.matches("ModuleList:append: element 1 is a string",
      err_of(function() return nn.ModuleList():append("x") end), 1, true)
    assert.matches("a ModuleList has no forward: iterate over it",
      err_of(function() return nn.ModuleList { nn.ReLU() }(lt.zeros(1)) end), 1, true)
    assert.matches("ModuleDict: keys must be non-empty strings without '.' that do not start with '_', got 'a.b'",
      err_of(nn.ModuleDict, { ["a.b"] = nn.ReLU() }), 1, true)
    assert.matches("ModuleDict: key 'keys' is the name of a ModuleDict method or field",
      err_of(nn.ModuleDict, { keys = nn.ReLU() }), 1, true)
    assert.matches("ModuleDict: entry 'a' is a number, expected a module", err_of(nn.ModuleDict, { a = 1 }), 1, true)
    assert.matches("a ModuleDict has no forward: call its modules by key",
      err_of(function() return nn.ModuleDict {}(lt.zeros(1)) end), 1, true)
  end)
end)

describe("Module:to", function()
  it("converts to float32 or float64, returns self for the CPU, and names any other dtype or device", function()
    local m = nn.Linear(2, 2)
    assert.are.equal(m, m:to("float32"))
    assert.are.equal(m, m:to("cpu"))
    assert.are.equal(m, m:to("cpu", "float32"))
    assert.are.equal(m, m:to("float64"))
    assert.are.equal("float64", m.weight:dtype())
    assert.are.equal("float32", m:to({ dtype = "float32" }).bias:dtype())
    assert.matches("Module:to: dtype 'float16' is not supported: parameters are float32 or float64",
      err_of(m.to, m, "float16"), 1, true)
    assert.matches("Module:to: device 'cuda' is not available: lutra runs on the CPU", err_of(m.to, m, "cuda"), 1, true)
    assert.matches("Module:to: expected a dtype or device name (\"float32\", \"float64\", \"cpu\"), got a number",
      err_of(m.to, m, 1), 1, true)
    assert.matches("Module:to: expected a dtype or a device", err_of(m.to, m), 1, true)
  end)
end)

describe("BatchNorm's num_batches_tracked", function()
  for _, cs in ipairs(of_kind("batchnorm_steps")) do
    it("counts training batches and updates the running stats as PyTorch: " .. cs.name, function()
      local m = nn.BatchNorm1d(cs.C, cs.opts)
      lt.no_grad(function()
        m.weight:copy_(X.tensor(cs.params.weight))
        m.bias:copy_(X.tensor(cs.params.bias))
      end)
      m:train()
      for i, x in ipairs(cs.inputs) do
        m(X.tensor(x))
        local want = cs.buffers_after[i]
        X.check(cs.name .. " running_mean " .. i, m.running_mean, want.running_mean)
        X.check(cs.name .. " running_var " .. i, m.running_var, want.running_var)
        assert.are.equal("int64", m.num_batches_tracked:dtype())
        assert.are.equal(want.num_batches_tracked.data[1], m.num_batches_tracked:item())
      end
      m:eval()
      X.check(cs.name .. " eval output", m(X.tensor(cs.eval_input)), cs.eval_output)
      assert.are.equal(#cs.inputs, m.num_batches_tracked:item()) -- eval does not count
    end)
  end

  it("is absent without running stats, and momentum=true is refused", function()
    assert.is_nil(nn.BatchNorm2d(2, { track_running_stats = false }).num_batches_tracked)
    assert.matches("BatchNorm1d: momentum must be a number, or false for a cumulative average",
      err_of(nn.BatchNorm1d, 3, { momentum = true }), 1, true)
    assert.matches("momentum=None", tostring(nn.BatchNorm1d(3, { momentum = false })), 1, true)
  end)

  it("a file saved before the buffer existed still loads strictly, and keeps the count", function()
    local dir = os.tmpname()
    os.remove(dir)
    os.execute("mkdir -p " .. dir)
    local old = nn.Sequential { nn.Linear(3, 3), nn.BatchNorm1d(3) }
    old:train()
    old(lt.randn(4, 3))
    local sd = old:state_dict()
    sd["2.num_batches_tracked"] = nil -- what lutra saved before num_batches_tracked
    lt.save(dir .. "/old.safetensors", sd)
    local m = nn.Sequential { nn.Linear(3, 3), nn.BatchNorm1d(3) }
    local r = m:load_state_dict(lt.load(dir .. "/old.safetensors"))
    assert.are.same({}, r.missing_keys)
    assert.are.same(old[2].running_mean:tolist(), m[2].running_mean:tolist())
    assert.are.equal(0, m[2].num_batches_tracked:item())
    -- the count round-trips through a file saved now
    lt.save(dir .. "/new.safetensors", old)
    local m2 = nn.Sequential { nn.Linear(3, 3), nn.BatchNorm1d(3) }
    lt.load(dir .. "/new.safetensors", m2)
    assert.are.equal(1, m2[2].num_batches_tracked:item())
    os.execute("rm -rf " .. dir)
  end)
end)
