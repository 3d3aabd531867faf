-- tests/nn_spec.lua — lt.nn modules: PyTorch fixtures (forward, input and parameter gradients, running
-- stats), naming, state_dict, train/eval, error messages with the module path.
local lt = require "lutra"
local X = require "tests.helpers.nn_fixtures"
local nn = lt.nn

local function build(case)
  local args = {}
  for i, a in ipairs(case.args) do args[i] = a end
  if next(case.opts) ~= nil then args[#args + 1] = case.opts end
  return nn[case.module](unpack(args, 1, #case.args + 1))
end

describe("nn modules against PyTorch fixtures (tests/fixtures/modules.json)", function()
  for _, case in ipairs(X.load("modules.json")) do
    local ok, cls = pcall(function() return nn[case.module] end)
    if not (ok and cls) then pending(case.name .. ": lt.nn." .. case.module .. " is not built yet") else
    it("matches " .. case.name .. ": output, gradients" .. (case.buffers_after and ", running stats" or ""), function()
      local m = build(case)
      if case.mode == "eval" then m:eval() else m:train() end
      -- cases written under lutra's earlier LSTM names (weight_ih ...) take the module's legacy mapping
      local legacy = m._legacy_state_dict_keys and m:_legacy_state_dict_keys(case.params, "") or {}
      local function pname(name) return legacy[name] or name end
      for name, p in pairs(case.params) do m[pname(name)] = X.tensor(p):requires_grad(true) end
      for name, b in pairs(case.buffers or {}) do m[name] = X.tensor(b) end
      local x = X.tensor(case.input)
      if x:dtype() == "float32" then x:requires_grad(true) end
      local out, state = m(x)
      X.check("output", out, case.output)
      if case.h_n then
        X.check("h_n", state[1], case.h_n)
        X.check("c_n", state[2], case.c_n)
      end
      out:backward(X.tensor(case.grad_output))
      if case.grad_input then X.check("grad_input", x.grad, case.grad_input) end
      for name, g in pairs(case.grad_params) do X.check("grad of " .. name, m[pname(name)].grad, g) end
      for name, b in pairs(case.buffers_after or {}) do X.check("buffer " .. name, m[name], b) end
    end)
    end
  end
end)

local function names_of(order) return table.concat(order, " ") end

local function same_values(a, b)
  local la, lb = a:flatten():tolist(), b:flatten():tolist()
  if #la ~= #lb then return false end
  for i = 1, #la do if la[i] ~= lb[i] then return false end end
  return true
end

local function err_of(fn, ...)
  local ok, e = pcall(fn, ...)
  assert(not ok, "expected an error")
  return tostring(e)
end

describe("parameter naming and discovery", function()
  it("numbers Sequential children from 1 and lists weight before bias", function()
    local net = nn.Sequential { nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2) }
    local named, order = net:named_parameters()
    assert.are.equal("1.weight 1.bias 3.weight 3.bias", names_of(order))
    assert.are.equal(net[1].weight, named["1.weight"])
    local list = net:parameters()
    assert.are.equal(4, #list)
    for i, name in ipairs(order) do assert.are.equal(named[name], list[i]) end
  end)

  it("names a plain model table's fields by path, sorted, skipping _fields, trainer and cycles", function()
    local model = { net = nn.Sequential { nn.Linear(4, 3), nn.Linear(3, 3) }, head = nn.Linear(3, 2) }
    model._cache = nn.Linear(2, 2)          -- private: skipped
    model.trainer = { model = model, p = lt.param(lt.zeros(2)) } -- skipped by name
    model.self = model                      -- cycle
    model.net.owner = model                 -- cycle through a child
    local _, order = lt.nn.named_parameters(model)
    assert.are.equal("head.weight head.bias net.1.weight net.1.bias net.2.weight net.2.bias", names_of(order))
  end)

  it("counts a shared module once and enters plain lists of modules", function()
    local shared = nn.Linear(2, 2)
    local model = { a = shared, b = shared, layers = { nn.Linear(2, 2, { bias = false }), nn.Linear(2, 1, { bias = false }) } }
    local _, order = lt.nn.named_parameters(model)
    assert.are.equal("a.weight a.bias layers.1.weight layers.2.weight", names_of(order))
  end)

  it("finds user parameters (leaf tensors that require grad) and skips constants and foreign objects", function()
    local loader = setmetatable({ data = { w = lt.param(lt.zeros(3)) } }, { __index = function() error("strict") end })
    local model = { w = lt.param(lt.ones(2)), const = lt.ones(3), loader = loader,
      forward = function(self, x) return x * self.w end }
    local _, order = lt.nn.named_parameters(model)
    assert.are.equal("w", names_of(order))
  end)

  it("names BatchNorm running statistics as buffers", function()
    local model = { bn = nn.BatchNorm1d(3), fc = nn.Linear(3, 1) }
    local named, order = lt.nn.named_buffers(model)
    assert.are.equal("bn.running_mean bn.running_var bn.num_batches_tracked", names_of(order))
    assert.are.equal(model.bn.running_var, named["bn.running_var"])
    local _, porder = lt.nn.named_parameters(model)
    assert.are.equal("bn.weight bn.bias fc.weight fc.bias", names_of(porder))
  end)

  it("names LSTM parameters as PyTorch: weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, then _l1", function()
    local _, order = nn.LSTM(3, 4, { num_layers = 2 }):named_parameters()
    assert.are.equal("weight_ih_l0 weight_hh_l0 bias_ih_l0 bias_hh_l0 weight_ih_l1 weight_hh_l1 bias_ih_l1 bias_hh_l1",
      names_of(order))
  end)
end)

describe("state_dict and load_state_dict", function()
  local function make()
    return { net = nn.Sequential { nn.Linear(4, 3), nn.BatchNorm1d(3), nn.Linear(3, 2) } }
  end
  local function fwd(m, x) return m.net(x) end

  it("round-trips parameters and buffers into a fresh model: same outputs", function()
    lt.manual_seed(1)
    local a = make()
    a.net:train()
    fwd(a, lt.randn(8, 4)) -- moves the running stats
    local sd, extra = lt.nn.state_dict(a)
    assert.is_nil(extra) -- one value: m:load_state_dict(other:state_dict()) passes no options
    local order = lt.nn.state_dict_keys(a)
    assert.are.equal("net.1.weight net.1.bias net.2.weight net.2.bias net.2.running_mean net.2.running_var "
      .. "net.2.num_batches_tracked net.3.weight net.3.bias",
      names_of(order))
    for _, name in ipairs(order) do assert.is_false(sd[name]:requires_grad()) end
    lt.manual_seed(2)
    local b = make()
    lt.nn.load_state_dict(b, sd)
    a.net:eval(); b.net:eval()
    local x = lt.randn(5, 4)
    assert.is_true(same_values(fwd(a, x), fwd(b, x)))
    assert.is_true(b.net[1].weight:requires_grad()) -- loading keeps the parameters trainable
  end)

  it("names the parameter and both shapes on a size mismatch", function()
    local sd = make().net:state_dict()
    sd["1.weight"] = lt.zeros(3, 5)
    local e = err_of(function() make().net:load_state_dict(sd) end)
    assert.matches("load_state_dict: size mismatch for 1.weight: copying a tensor of shape [3 x 5] from the "
      .. "state_dict, the shape in the current model is [3 x 4]",
      e, 1, true)
  end)

  it("lists missing and unexpected keys when strict, loads the rest when not", function()
    local src = make()
    local sd = lt.nn.state_dict(src)
    sd["net.3.bias"] = nil
    sd["net.9.weight"] = lt.zeros(1)
    local e = err_of(function() lt.nn.load_state_dict(make(), sd) end)
    assert.matches('missing key(s) in state_dict: "net.3.bias"', e, 1, true)
    assert.matches('unexpected key(s) in state_dict: "net.9.weight"', e, 1, true)
    local dst = make()
    local res = lt.nn.load_state_dict(dst, sd, { strict = false })
    assert.are.same({ "net.3.bias" }, res.missing_keys)
    assert.are.same({ "net.9.weight" }, res.unexpected_keys)
    assert.is_true(same_values(dst.net[1].weight, src.net[1].weight))
    assert.matches("unknown option 'strikt'", err_of(function() lt.nn.load_state_dict(dst, sd, { strikt = false }) end), 1, true)
  end)
end)

describe("train and eval", function()
  it("sets training recursively on every module", function()
    local model = { net = nn.Sequential { nn.Linear(2, 2), nn.Dropout(0.5) }, head = nn.Linear(2, 1) }
    lt.nn.eval(model)
    assert.is_false(model.training)
    assert.is_false(model.net.training)
    assert.is_false(model.net[2].training)
    assert.is_false(model.head.training)
    model.net:train()
    assert.is_true(model.net[2].training)
    assert.is_false(model.head.training)
  end)

  it("Dropout zeroes about a fraction p in training, scales the rest by 1/(1-p), and is the identity in eval", function()
    lt.manual_seed(3)
    local d = nn.Dropout(0.3)
    local x = lt.ones(100, 100)
    local y = d(x)
    local zeros = (y:eq(0)):sum():item()
    assert.is_true(zeros > 2800 and zeros < 3200, "zero fraction " .. zeros / 10000)
    assert.is_true(math.abs(y:max():item() - 1 / 0.7) < 1e-6)
    assert.is_true(math.abs((y:sum():item() - zeros * 0) / (10000 - zeros) - 1 / 0.7) < 1e-4)
    d:eval()
    assert.is_true(same_values(d(x), x))
  end)

  it("Dropout with p = 0 in training is the identity: x itself, no mask drawn, the gradient passes unchanged", function()
    local d = nn.Dropout(0)
    local x = lt.randn(4, 5):requires_grad(true)
    lt.manual_seed(9)
    local y = d(x)
    assert.is_true(rawequal(x, y)) -- no copy, no node
    assert.are.equal(lt.rand(1):item(), (function() lt.manual_seed(9); return lt.rand(1):item() end)()) -- no draw
    local g = lt.randn(4, 5)
    local loss = (y * g):sum()
    loss:backward()
    assert.is_true(x.grad:allclose(g, 0, 0))
  end)

  it("Dropout masks are reproducible with lt.manual_seed", function()
    local d = nn.Dropout(0.5)
    lt.manual_seed(42)
    local a = d(lt.ones(50))
    lt.manual_seed(42)
    local b = d(lt.ones(50))
    assert.is_true(same_values(a, b))
    assert.is_false(same_values(a, d(lt.ones(50))))
  end)

  it("BatchNorm updates the running stats only in training and uses them in eval", function()
    local bn = nn.BatchNorm1d(2, { momentum = 0.5 })
    local x = lt.tensor { { 1, 10 }, { 3, 20 } }
    bn(x)
    -- mean {2, 15}, unbiased var {2, 50}
    assert.is_true(bn.running_mean:allclose(lt.tensor { 1, 7.5 }))
    assert.is_true(bn.running_var:allclose(lt.tensor { 1.5, 25.5 }))
    bn:eval()
    local y = bn(x)
    assert.is_true(bn.running_mean:allclose(lt.tensor { 1, 7.5 }))
    local expect = (x - lt.tensor { 1, 7.5 }) / (lt.tensor { 1.5, 25.5 } + 1e-5):sqrt()
    assert.is_true(y:allclose(expect, 1e-5, 1e-6))
  end)
end)

describe("module errors name the module and its path", function()
  it("in a model table: 'in net.2 Linear(512 -> 10): input has 100 features, expected 512'", function()
    local model = { net = nn.Sequential { nn.ReLU(), nn.Linear(512, 10) } }
    lt.nn.parameters(model) -- any walk from the model records the paths
    local e = err_of(function() return model.net(lt.randn(2, 100)) end)
    assert.matches("in net.2 Linear(512 -> 10): input has 100 features, expected 512", e, 1, true)
  end)

  it("a top-level module uses its repr; a top-level Sequential numbers its children", function()
    assert.matches("^Linear%(512 %-> 10%): input has 100 features, expected 512",
      err_of(function() return nn.Linear(512, 10)(lt.randn(2, 100)) end))
    local net = nn.Sequential { nn.Conv2d(1, 4, 3), nn.Flatten(), nn.Linear(10, 2) }
    assert.matches("in 1 Conv2d(1 -> 4, kernel_size=3): input has 3 channels, expected 1",
      err_of(function() return net(lt.randn(2, 3, 5, 5)) end), 1, true)
    assert.matches("in 3 Linear(10 -> 2): input has 36 features, expected 10",
      err_of(function() return net(lt.randn(2, 1, 5, 5)) end), 1, true)
  end)

  it("a user Module subclass gives paths to its fields", function()
    local Net = nn.Module:extend("Net")
    function Net:init() self.body = nn.Sequential { nn.Linear(3, 4) }; self.head = nn.Linear(4, 2) end
    function Net:forward(x) return self.head(self.body(x)) end
    local net = Net()
    assert.matches("in body.1 Linear(3 -> 4): input has 5 features, expected 3",
      err_of(function() return net(lt.randn(1, 5)) end), 1, true)
  end)

  it("wrong input ranks and options are clear errors", function()
    assert.matches("MaxPool2d(kernel_size=2, stride=2): input must be [batch x channels x height x width]",
      err_of(function() return nn.MaxPool2d(2)(lt.randn(4, 4)) end), 1, true)
    assert.matches("BatchNorm2d(3, eps=1e-05, momentum=0.1): input has 2 channels, expected 3",
      err_of(function() return nn.BatchNorm2d(3)(lt.randn(2, 2, 3, 3)) end), 1, true)
    assert.matches("LayerNorm([4], eps=1e-05): input [2 x 5] does not end with the normalized shape [4]",
      err_of(function() return nn.LayerNorm(4)(lt.randn(2, 5)) end), 1, true)
    assert.matches("Embedding(5, 2): index 6 is out of range 1..5 (indices are 1-based)",
      err_of(function() return nn.Embedding(5, 2)(lt.tensor({ 1, 6 }, "int64")) end), 1, true)
    assert.matches("Linear: unknown option 'bais' (known options: bias)",
      err_of(function() return nn.Linear(2, 3, { bais = false }) end), 1, true)
    assert.matches("Conv2d: option 'stride' must be a number or table, got string",
      err_of(function() return nn.Conv2d(1, 2, 3, { stride = "2" }) end), 1, true)
    assert.matches("Sequential: element 2 is a number, expected a module",
      err_of(function() return nn.Sequential { nn.ReLU(), 3 } end), 1, true)
  end)
end)

describe("module base", function()
  it("prints PyTorch-like reprs", function()
    assert.are.equal("Linear(784 -> 512)", tostring(nn.Linear(784, 512)))
    assert.are.equal("Linear(4 -> 2, bias=false)", tostring(nn.Linear(4, 2, { bias = false })))
    assert.are.equal("Conv2d(1 -> 6, kernel_size=5, padding=2)", tostring(nn.Conv2d(1, 6, 5, { padding = 2 })))
    assert.are.equal("Sequential(\n  (1): Linear(2 -> 3)\n  (2): ReLU()\n)",
      tostring(nn.Sequential { nn.Linear(2, 3), nn.ReLU() }))
  end)

  it("is callable, and Module:extend builds user modules with parameters, children and modules()", function()
    local Net = nn.Module:extend("Net")
    function Net:init(n) self.fc = nn.Linear(n, 2); self.scale = lt.param(lt.ones(1)) end
    function Net:forward(x) return self.fc(x) * self.scale end
    local net = Net(3)
    assert.are.same({ 4, 2 }, net(lt.randn(4, 3)):shape())
    local _, order = net:named_parameters()
    assert.are.equal("fc.weight fc.bias scale", names_of(order))
    assert.are.equal(1, #net:children())
    assert.are.equal(2, #net:modules())
    assert.are.equal("Net(\n  (fc): Linear(3 -> 2)\n)", tostring(net))
  end)

  it("Sequential:add appends and chains; zero_grad zeroes every gradient", function()
    local net = nn.Sequential():add(nn.Linear(3, 2)):add(nn.Tanh())
    assert.are.equal(2, #net)
    net(lt.randn(4, 3)):sum():backward()
    assert.is_true(net[1].weight.grad:abs():sum():item() > 0)
    net:zero_grad()
    assert.are.equal(0, net[1].weight.grad:abs():sum():item())
    net:zero_grad(true)
    assert.is_nil(net[1].weight.grad)
  end)

  it("initialises like PyTorch: Linear/Conv U(-1/sqrt(fan_in), ..), Embedding N(0,1), BatchNorm 1/0, seeded", function()
    lt.manual_seed(5)
    local l = nn.Linear(100, 50)
    local b = 1 / math.sqrt(100)
    assert.is_true(l.weight:abs():max():item() <= b and l.weight:abs():max():item() > 0.9 * b)
    assert.is_true(l.bias:abs():max():item() <= b)
    local c = nn.Conv2d(4, 8, 3)
    assert.is_true(c.weight:abs():max():item() <= 1 / 6)
    local e = nn.Embedding(200, 50)
    assert.is_true(math.abs(e.weight:mean():item()) < 0.05)
    assert.is_true(math.abs((e.weight * e.weight):mean():item() - 1) < 0.05)
    local bn = nn.BatchNorm2d(3)
    assert.is_true(same_values(bn.weight, lt.ones(3)) and same_values(bn.bias, lt.zeros(3)))
    assert.is_true(same_values(bn.running_mean, lt.zeros(3)) and same_values(bn.running_var, lt.ones(3)))
    lt.manual_seed(5)
    assert.is_true(same_values(nn.Linear(100, 50).weight, l.weight))
  end)

  it("LSTM accepts {h0, c0}, returns {h_n, c_n}, and h_n is the last output", function()
    local m = nn.LSTM(3, 4)
    local out, st = m(lt.randn(5, 2, 3), { lt.zeros(1, 2, 4), lt.zeros(1, 2, 4) })
    assert.are.same({ 5, 2, 4 }, out:shape())
    assert.are.same({ 1, 2, 4 }, st[1]:shape())
    assert.is_true(same_values(st[1][1], out[5]))
    assert.matches("h0 is [1 x 3 x 4], expected [1 x 2 x 4]",
      err_of(function() return m(lt.randn(5, 2, 3), { lt.zeros(1, 3, 4), lt.zeros(1, 3, 4) }) end), 1, true)
  end)

  -- the fixtures cover a zero initial state over 4 steps; this pins a given {h0, c0}, 12 steps, and the
  -- gradients that reach h0, c0 and the first input through the whole recurrence (PyTorch 1.13 values)
  it("LSTM with a given {h0, c0} over 12 steps matches PyTorch's outputs and gradients", function()
    local function fill(shape, a, b, s)
      local n, v = 1, {}
      for _, d in ipairs(shape) do n = n * d end
      for k = 1, n do v[k] = 0.6 * math.sin(a * k + b) * (s or 1) end
      return lt.tensor(v):view(shape)
    end
    local m = nn.LSTM(2, 3)
    m.weight_ih_l0, m.weight_hh_l0 = lt.param(fill({ 12, 2 }, 0.7, 0.1)), lt.param(fill({ 12, 3 }, 1.1, 0.2))
    m.bias_ih_l0, m.bias_hh_l0 = lt.param(fill({ 12 }, 0.3, 0.3)), lt.param(fill({ 12 }, 0.9, 0.4))
    local x = lt.param(fill({ 12, 1, 2 }, 1.7, 0.5, 2))
    local h0, c0 = lt.param(fill({ 1, 1, 3 }, 2.3, 0.6)), lt.param(fill({ 1, 1, 3 }, 0.5, 0.7, 3))
    local y, st = m(x, { h0, c0 })
    local loss = (y * fill({ 12, 1, 3 }, 1.3, 0.8)):sum() + st[2]:sum()
    loss:backward()
    local function close(got, want, what)
      assert.is_true(got:contiguous():view(-1):allclose(lt.tensor(want), 1e-4, 1e-6),
        what .. ": got " .. table.concat(got:contiguous():view(-1):flatten():tolist(), ", "))
    end
    close(st[1], { 0.39878297, 0.25976673, 0.15070815 }, "h_n")
    close(st[2], { 0.90461373, 0.76927811, 0.55780935 }, "c_n")
    close(h0.grad, { -0.029317269, 0.015213069, 0.043118447 }, "grad h0")
    close(c0.grad, { 0.031059466, -0.0030324203, -0.040990327 }, "grad c0")
    close(x.grad[1], { 0.057987612, 0.10073105 }, "grad x[1]")
    close(m.weight_hh_l0.grad[1], { 0.076874927, 0.032546356, 0.052008711 }, "grad weight_hh[1]")
    close(m.bias_ih_l0.grad:narrow(1, 10, 3), { 0.16499865, -0.0095852539, -0.15295431 }, "grad bias_ih[10..12] (gate o)")
  end)
end)

describe("lt.nn.utils and lt.nn.init", function()
  local function with_grads(vals)
    local ps = {}
    for i, v in ipairs(vals) do
      local p = lt.param(lt.zeros(#v))
      p:backward(lt.tensor(v))
      ps[i] = p
    end
    return ps
  end

  it("clip_grad_norm_ returns the total norm and scales by max_norm/(total+1e-6) only when needed", function()
    local ps = with_grads { { 3, 0 }, { 0, 4 } }
    local total = lt.nn.utils.clip_grad_norm_(ps, 1)
    assert.is_true(math.abs(total - 5) < 1e-6)
    assert.is_true(ps[1].grad:allclose(lt.tensor { 3 / (5 + 1e-6), 0 }, 1e-6, 1e-7))
    local qs = with_grads { { 0.3, 0.4 } }
    assert.is_true(math.abs(lt.nn.utils.clip_grad_norm_(qs, 1) - 0.5) < 1e-6)
    assert.is_true(qs[1].grad:allclose(lt.tensor { 0.3, 0.4 }))
    local rs = with_grads { { -3, 1 }, { 2 } }
    assert.is_true(math.abs(lt.nn.utils.clip_grad_norm_(rs, 10, math.huge) - 3) < 1e-6)
    assert.is_true(math.abs(lt.nn.utils.clip_grad_norm_(rs, 10, 1) - 6) < 1e-5)
  end)

  it("clip_grad_norm_ with a NaN or infinite total follows torch 1.13 (grads * clamp(coef, max=1))", function()
    -- torch: clip_grad_norm_([g = [nan, 1, 2]], 1) returns nan and leaves every grad NaN (coef = NaN);
    -- lutra skipped the scaling (NaN < 1 is false) and left 1 and 2 unclipped
    local ps = with_grads { { 0 / 0, 1, 2 } }
    local total = lt.nn.utils.clip_grad_norm_(ps, 1)
    assert.is_true(total ~= total)
    for _, v in ipairs(ps[1].grad:flatten():tolist()) do assert.is_true(v ~= v) end
    -- an infinite total gives coef 0: the infinite entry becomes NaN (inf * 0), the others 0, as torch
    local qs = with_grads { { math.huge, 1, 2 } }
    assert.are.equal(math.huge, lt.nn.utils.clip_grad_norm_(qs, 1))
    local g = qs[1].grad:flatten():tolist()
    assert.is_true(g[1] ~= g[1] and g[2] == 0 and g[3] == 0)
  end)

  it("clip_grad_value_ clamps every gradient element", function()
    local ps = with_grads { { -3, 0.2, 5 } }
    lt.nn.utils.clip_grad_value_(ps, 1)
    assert.is_true(same_values(ps[1].grad, lt.tensor { -1, 0.2, 1 }))
  end)

  it("init functions fill in place with PyTorch's bounds", function()
    local w = lt.param(lt.empty(20, 30))
    lt.nn.init.xavier_uniform_(w)
    assert.is_true(w:abs():max():item() <= math.sqrt(6 / 50))
    lt.nn.init.kaiming_uniform_(w, { a = math.sqrt(5) })
    assert.is_true(w:abs():max():item() <= 1 / math.sqrt(30) + 1e-7)
    lt.nn.init.zeros_(w)
    assert.are.equal(0, w:abs():sum():item())
    lt.nn.init.constant_(w, 2)
    assert.are.equal(1200, w:sum():item())
  end)
end)

describe("Conv2d batching", function()
  it("gives the same output and gradients when the batch is split into several GEMM chunks", function()
    lt.manual_seed(4)
    -- K = 4*3*3 = 36, P = 30*30 = 900: two items per 64K-float chunk, so 5 items run as 2 + 2 + 1
    local conv = nn.Conv2d(4, 3, 3, { padding = 1 })
    local x = lt.randn(5, 4, 30, 30):requires_grad(true)
    local g = lt.randn(5, 3, 30, 30)
    local y = conv(x)
    y:backward(g)
    local gw, gb, gx = conv.weight.grad:clone(), conv.bias.grad:clone(), x.grad:clone()
    conv:zero_grad(true)
    local gw1, gb1 = lt.zeros(3, 4, 3, 3), lt.zeros(3)
    for i = 1, 5 do
      local xi = x:detach():narrow(1, i, 1):clone():requires_grad(true)
      local yi = conv(xi)
      assert.is_true(yi:allclose(y:narrow(1, i, 1), 1e-5, 1e-5))
      yi:backward(g:narrow(1, i, 1):clone())
      assert.is_true(xi.grad:allclose(gx:narrow(1, i, 1), 1e-5, 1e-5))
      gw1 = gw1 + conv.weight.grad; gb1 = gb1 + conv.bias.grad
      conv:zero_grad(true)
    end
    assert.is_true(gw:allclose(gw1, 1e-4, 1e-4))
    assert.is_true(gb:allclose(gb1, 1e-4, 1e-4))
  end)
end)

describe("fused Linear + ReLU", function()
  it("gives the unfused forward and gradients, and fuses only the library's own pairs", function()
    lt.manual_seed(5)
    local seq = nn.Sequential { nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3) }
    local x = lt.randn(4, 6):requires_grad(true)
    local y = seq(x)
    assert.are.equal("linear_relu", nn.Sequential { seq[1], nn.ReLU() }(x):grad_fn()) -- the fused node
    y:sum():backward()
    local gx, gw, gb = x.grad:clone(), seq[1].weight.grad:clone(), seq[1].bias.grad:clone()
    x.grad = nil
    seq:zero_grad(true)
    local h = seq[1]:forward(x):relu() -- the unfused path, by hand
    local y2 = seq[3]:forward(h)
    y2:sum():backward()
    assert.is_true(y:allclose(y2, 0, 0))
    assert.is_true(x.grad:allclose(gx, 1e-6, 1e-6))
    assert.is_true(seq[1].weight.grad:allclose(gw, 1e-6, 1e-6))
    assert.is_true(seq[1].bias.grad:allclose(gb, 1e-6, 1e-6))
    -- a ReLU whose forward the user replaced is called, not fused away
    local called = false
    seq[2].forward = function(_, t) called = true; return t:relu() end
    seq(x)
    assert.is_true(called)
    assert.are.equal("relu", nn.Sequential { seq[1], seq[2] }(x):grad_fn())
  end)

  it("fuses Linear + GELU (exact and tanh) to the unfused forward and gradients within 1e-6", function()
    lt.manual_seed(7)
    for _, approx in ipairs({ "none", "tanh" }) do
      local lin, gelu = nn.Linear(6, 8), nn.GELU { approximate = approx }
      local seq = nn.Sequential { lin, gelu }
      -- a non-contiguous rank-3 input; a loss whose gradient the engine owns (computed in its buffer) and a
      -- seed gradient the caller keeps (read, not overwritten)
      local x = lt.randn(3, 6, 5):transpose(2, 3):requires_grad(true)
      local w = lt.randn(3, 5, 8)
      for _, seeded in ipairs({ false, true }) do
        local y = seq(x)
        assert.are.equal(approx == "tanh" and "linear_gelu_tanh" or "linear_gelu", y:grad_fn())
        local seed = seeded and w:clone() or nil
        if seeded then y:backward(seed) else (y * w):sum():backward() end
        if seeded then assert.is_true(seed:allclose(w, 0, 0)) end
        local gx, gw, gb = x.grad:clone(), lin.weight.grad:clone(), lin.bias.grad:clone()
        x.grad = nil
        lin:zero_grad(true)
        local y2 = gelu:forward(lin:forward(x)) -- the unfused path
        assert.are.equal(approx == "tanh" and "gelu_tanh" or "gelu", y2:grad_fn())
        if seeded then y2:backward(w) else (y2 * w):sum():backward() end
        assert.is_true(y:allclose(y2, 1e-6, 1e-6))
        assert.is_true(x.grad:allclose(gx, 1e-6, 1e-6))
        assert.is_true(lin.weight.grad:allclose(gw, 1e-6, 1e-6))
        assert.is_true(lin.bias.grad:allclose(gb, 1e-6, 1e-6))
        x.grad = nil
        lin:zero_grad(true)
      end
      -- without a graph (no_grad) the GELU runs in place on the GEMM's output: the same values
      local y3 = lt.no_grad(function() return seq(x) end)
      assert.is_nil(y3:grad_fn())
      assert.is_true(y3:allclose(gelu:forward(lin:forward(x)), 1e-6, 1e-6))
    end
  end)

  it("fuses Conv2d + ReLU too, with the unfused forward and gradients", function()
    lt.manual_seed(6)
    for _, cin in ipairs({ 1, 3 }) do -- one input channel takes the direct convolution, three im2col
      local conv = nn.Conv2d(cin, 4, 3, { padding = 1 })
      local x = lt.randn(2, cin, 7, 6)
      local y = nn.Sequential { conv, nn.ReLU() }(x)
      assert.are.equal("conv2d_relu", y:grad_fn())
      y:sum():backward()
      local gw, gb = conv.weight.grad:clone(), conv.bias.grad:clone()
      conv:zero_grad(true)
      local y2 = conv:forward(x):relu()
      y2:sum():backward()
      assert.is_true(y:allclose(y2, 0, 0))
      assert.is_true(conv.weight.grad:allclose(gw, 1e-6, 1e-6))
      assert.is_true(conv.bias.grad:allclose(gb, 1e-6, 1e-6))
    end
  end)

  it("accumulates a conv's weight gradient into an existing grad", function()
    lt.manual_seed(8)
    local conv = nn.Conv2d(3, 4, 3)
    local x1, x2 = lt.randn(2, 3, 6, 6), lt.randn(2, 3, 6, 6)
    conv(x1):tanh():sum():backward()
    local g1 = conv.weight.grad:clone()
    conv:zero_grad(true)
    conv(x2):tanh():sum():backward()
    local g2 = conv.weight.grad:clone()
    conv:zero_grad(true)
    conv(x1):tanh():sum():backward()
    local kept = conv.weight.grad:data_ptr()
    conv(x2):tanh():sum():backward()
    assert.are.equal(kept, conv.weight.grad:data_ptr())
    assert.is_true(conv.weight.grad:allclose(g1 + g2, 1e-6, 1e-5))
  end)

  it("rejects an unknown activation by name", function()
    local ok, err = pcall(lt.linear, lt.randn(2, 3), lt.randn(4, 3), nil, "swish")
    assert.is_false(ok)
    assert.matches("linear: unknown activation 'swish' (expected \"relu\", \"gelu\", \"gelu_tanh\" or nil)", err, 1,
      true)
  end)
end)

describe("Sequential's intermediate outputs", function()
  -- live bytes grown by one forward and backward with the collector stopped (nothing freed but by reference counts)
  local function grown_by_step(seq, x)
    collectgarbage()
    collectgarbage("stop")
    local ok, r = pcall(function()
      local function step() seq(x):sum():backward() end
      step() -- the parameters' gradients exist from here on, accumulated in place
      local before = lt.memory_stats().live_bytes
      step()
      return lt.memory_stats().live_bytes - before
    end)
    collectgarbage("restart")
    if not ok then error(r, 0) end
    return r
  end

  it("are freed by the graph once backward is done with them, without the collector", function()
    lt.manual_seed(21)
    local x = lt.randn(64, 100)
    local seq = nn.Sequential { nn.Linear(100, 200), nn.ReLU(), nn.Linear(200, 300), nn.Tanh(), nn.Flatten(),
      nn.Dropout(0.1), nn.Linear(300, 10) }
    -- left for the collector: the output [64 x 10] and the sum (and their boxes); the intermediates [64 x 200] and
    -- three [64 x 300] (204 KB) are freed
    assert.is_true(grown_by_step(seq, x) < 16 * 1024)
    -- without a graph each is freed as soon as the next layer has used it: one forward holds the output alone
    collectgarbage()
    collectgarbage("stop")
    local before = lt.memory_stats().live_bytes
    local y = lt.no_grad(function() return seq(x) end)
    local held = lt.memory_stats().live_bytes - before
    collectgarbage("restart")
    assert.are.equal(640, y:numel())
    assert.is_true(held < 8 * 1024, ("forward without a graph holds %d bytes"):format(held))
    -- a child of the user's between two library layers: what it takes and returns stays for the collector (it may
    -- keep them): the [64 x 200] going in and the [64 x 300] coming out
    local kept
    local mine = { forward = function(_, h) kept = h; return seq[3]:forward(h) end }
    local seq2 = nn.Sequential { seq[1], seq[2], mine, nn.Tanh(), seq[7] }
    assert.is_true(grown_by_step(seq2, x) >= (64 * 200 + 64 * 300) * 4)
    assert.are.equal(200, kept:size(2)) -- still a tensor after forward and backward
    assert.is_true(kept:sum():item() > 0)
  end)

  it("give the values and gradients of the layers applied one by one", function()
    lt.manual_seed(22)
    local seq = nn.Sequential { nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 6), nn.Sigmoid(), nn.Linear(6, 2) }
    local x = lt.randn(4, 5):requires_grad(true)
    seq(x):pow(2):sum():backward()
    local gx, gw = x.grad:clone(), seq[3].weight.grad:clone()
    x.grad = nil
    seq:zero_grad(true)
    local h = seq[3]:forward(seq[2]:forward(seq[1]:forward(x)))
    local y = seq[5]:forward(seq[4]:forward(h))
    assert.is_true(y:equal(seq(x)))
    y:pow(2):sum():backward()
    assert.is_true(x.grad:equal(gx))
    assert.is_true(seq[3].weight.grad:equal(gw))
  end)

  it("never include the input or the output, nor a child's output that is its input (an in-place ReLU)", function()
    local seq = nn.Sequential { nn.Linear(3, 4), nn.ReLU(true), nn.Dropout(0), nn.Linear(4, 2) }
    local x = lt.randn(2, 3)
    local y = seq(x)
    assert.are.equal(6, x:numel())
    assert.are.equal(4, y:numel())
    local one = nn.Sequential { nn.Linear(3, 4) }
    assert.are.equal(8, one(x):numel())
    -- a user's module's output passed on unchanged by a library child stays the user's (it may keep it)
    local keep = { forward = function(self, t) self.last = t * 2; return self.last end }
    nn.Sequential { keep, nn.Dropout(0), nn.Linear(3, 4) }(x)
    assert.are.equal(6, keep.last:numel())
    lt.no_grad(function() nn.Sequential { keep, nn.ReLU(true), nn.Linear(3, 4) }(x) end) -- in place: its input back
    assert.are.equal(6, keep.last:numel())
    -- a user's module that keeps a library layer's output and hands it back unchanged
    local peek = { forward = function(self, t) self.seen = t; return t end }
    nn.Sequential { nn.Linear(3, 4), peek, nn.Linear(4, 2) }(x)
    assert.are.equal(8, peek.seen:numel())
    local first = nn.Sequential { nn.Dropout(0), nn.Linear(3, 4), nn.ReLU() } -- x itself reaches the Linear
    first(x)
    assert.are.equal(6, x:numel())
  end)

  it("leave a released box an error that says so, never a crash or a nil", function()
    local core = require "lutra.core"
    local b = lt.randn(3, 3) * 2
    assert.is_true(core._release(b))
    assert.is_false(core._release(b)) -- already empty
    assert.is_false(core._release(3))
    assert.is_false(lt.is_tensor(b))
    for _, f in ipairs({ function() return b + 1 end, function() return b:sum() end, function() return b[1] end,
      function() return b.grad end, function() return #b end, function() return lt.maximum(b, 1) end }) do
      local ok, err = pcall(f)
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find("released tensor", 1, true), tostring(err))
    end
    b = nil -- luacheck: ignore
    collectgarbage() -- its finalizer finds the box empty
  end)
end)

describe("memory", function()
  -- Runs in a fresh process: the live-tensor count is process-wide, and in this busted process earlier specs'
  -- objects (coroutines, closures, finalizers) can be released at any later collection, moving the count.
  it("keeps the live tensor count flat over repeated LeNet training steps", function()
    local out = require("helpers.child").run([[
      local lt = require "lutra"
      local nn = lt.nn
      lt.manual_seed(9)
      local net = nn.Sequential { nn.Conv2d(1, 4, 3, { padding = 1 }), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Dropout(0.2), nn.Flatten(), nn.Linear(64, 10) }
      local x, y = lt.randn(8, 1, 8, 8), lt.tensor({ 1, 2, 3, 4, 5, 6, 7, 8 }, "int64")
      local function step()
        net:zero_grad(true)
        lt.F.cross_entropy(net(x), y, { label_smoothing = 0.1 }):backward()
      end
      local function count() collectgarbage(); collectgarbage(); return lt.memory_stats().live_tensors end
      for _ = 1, 3 do step() end
      local before = count()
      for _ = 1, 20 do step() end
      io.write("COUNT ", before, " ", count(), "\n")
    ]])
    local before, after = out:match("COUNT (%d+) (%d+)")
    assert(before, "child process failed: " .. out)
    assert.is_true(tonumber(before) > 10, "the net's parameters and buffers are live tensors")
    assert.are.equal(tonumber(before), tonumber(after))
  end)
end)
