-- optim_spec.lua — lt.optim: PyTorch 1.13 trajectories (tests/fixtures/optim.json), param_groups,
-- zero_grad, closures, state_dict round trips and the error messages.
local lt = require "lutra"
local cjson = require "cjson"

local function read_json(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return cjson.decode(s)
end

local CASES = read_json("tests/fixtures/optim.json")

local function T(o) return lt.tensor(o.data):view(o.shape) end

-- |got - ref| <= max(1e-6, 1e-5*|ref|) for every element; returns the worst ratio (<= 1 passes)
local function worst(got, ref)
  local w = 0
  for i = 1, #ref do
    local r = math.abs(got[i] - ref[i]) / math.max(1e-6, 1e-5 * math.abs(ref[i]))
    if r > w then w = r end
  end
  return w
end

-- gradient of f(p1, p2) = sum(sin(p1)*c1) + sum(p2^2*c2), computed as the fixtures README says
local function assign_grads(p1, p2, c1, c2)
  lt.no_grad(function()
    p1.grad = p1:cos() * c1
    p2.grad = p2 * c2 * 2
  end)
end

local function equal_lists(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

local function errmsg(fn, ...)
  local ok, e = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

describe("lt.optim fixtures (PyTorch 1.13, 10 steps)", function()
  for _, cs in ipairs(CASES) do
    it("matches PyTorch's " .. cs.name .. " trajectory within 1e-5 relative", function()
      local p1, p2 = lt.param(T(cs.params_init.p1)), lt.param(T(cs.params_init.p2))
      local c1, c2 = T(cs.c1), T(cs.c2)
      local opt = lt.optim[cs.optimizer]({ p1, p2 }, cs.opts)
      for s = 1, 10 do
        opt:zero_grad()
        assign_grads(p1, p2, c1, c2)
        opt:step()
        local w1 = worst(p1:flatten():tolist(), cs.params_after[s].p1.data)
        local w2 = worst(p2:flatten():tolist(), cs.params_after[s].p2.data)
        assert.is_true(w1 <= 1 and w2 <= 1,
          string.format("%s step %d: worst error ratio p1 %.3g, p2 %.3g", cs.name, s, w1, w2))
      end
    end)
  end

  it("follows the same trajectory when the gradients come from autograd (Adam_amsgrad_betas0.9_0.9)", function()
    local cs
    for _, c in ipairs(CASES) do if c.name == "Adam_amsgrad_betas0.9_0.9" then cs = c end end
    local p1, p2 = lt.param(T(cs.params_init.p1)), lt.param(T(cs.params_init.p2))
    local c1, c2 = T(cs.c1), T(cs.c2)
    local opt = lt.optim.Adam({ p1, p2 }, cs.opts)
    for s = 1, 10 do
      opt:zero_grad()
      local loss = (p1:sin() * c1):sum() + (p2 * p2 * c2):sum()
      assert.is_true(math.abs(loss:item() - cs.loss[s]) <= 1e-5 * math.max(1, math.abs(cs.loss[s])))
      loss:backward()
      opt:step()
      assert.is_true(worst(p1:flatten():tolist(), cs.params_after[s].p1.data) <= 1)
      assert.is_true(worst(p2:flatten():tolist(), cs.params_after[s].p2.data) <= 1)
    end
    -- the update is not recorded: params stay leaves that require grad
    assert.is_true(p1:is_leaf())
    assert.is_nil(p1:grad_fn())
    assert.is_true(p1:requires_grad())
  end)
end)

describe("lt.optim update details", function()
  it("SGD with maximize ascends: p += lr*g", function()
    local p = lt.param(lt.tensor { 1, 2 })
    local opt = lt.optim.SGD({ p }, { lr = 0.5, maximize = true })
    p.grad = lt.tensor { 1, -2 }
    opt:step()
    assert.same({ 1.5, 1 }, p:flatten():tolist())
  end)

  -- maximize combined with weight decay, amsgrad, centering, nesterov and dampening (the fixtures have
  -- no maximize case): 20 steps with fixed gradients, final values from PyTorch 1.13
  local MAXIMIZE_CASES = {
    { "Adam", { lr = 0.01, amsgrad = true, weight_decay = 0.1, maximize = true },
      { 0.523804605, -0.982176483, 1.88784361, 0.167663112 } },
    { "AdamW", { lr = 0.01, amsgrad = true, weight_decay = 0.1, maximize = true },
      { 0.525618315, -0.988792777, 1.91414738, 0.166429788 } },
    { "RMSprop", { lr = 0.01, centered = true, momentum = 0.9, weight_decay = 0.1, maximize = true },
      { 1.00813031, -0.478287935, -2.19722891, 4.21753502 } },
    { "SGD", { lr = 0.05, momentum = 0.9, nesterov = true, weight_decay = 0.1, maximize = true },
      { 0.461253375, -0.553648412, -1.38209987, 5.49457979 } },
    { "SGD", { lr = 0.05, momentum = 0.9, dampening = 0.3, weight_decay = 0.1, maximize = true },
      { 0.580765128, -0.688419163, -0.153469592, 3.99514389 } },
  }
  for _, cs in ipairs(MAXIMIZE_CASES) do
    it("matches PyTorch after 20 maximize steps: " .. cs[1] .. " " .. cjson.encode(cs[2]), function()
      local p = lt.param(lt.tensor { 0.5, -1.0, 2.0, 0.0 })
      local opt = lt.optim[cs[1]]({ p }, cs[2])
      for s = 1, 20 do
        p.grad = lt.tensor { math.sin(s), math.cos(1.3 * s), 0.5 - 0.1 * s, 2 * math.sin(0.7 * s) ^ 2 }
        opt:step()
      end
      local w = worst(p:flatten():tolist(), cs[3])
      assert.is_true(w <= 1, string.format("worst error ratio %.3g: got %s", w, cjson.encode(p:flatten():tolist())))
    end)
  end

  it("skips parameters whose grad is nil and creates no state for them", function()
    local a, b = lt.param(lt.ones(2)), lt.param(lt.ones(3))
    local opt = lt.optim.Adam({ a, b }, { lr = 0.1 })
    a.grad = lt.ones(2)
    opt:step()
    assert.same({ 1, 1, 1 }, b:flatten():tolist())
    local sd = opt:state_dict()
    assert.equals(1, sd.state[1].step)
    assert.is_nil(sd.state[2])
  end)

  it("updates a non-contiguous (transposed) parameter like a contiguous one", function()
    local base = lt.tensor { { 1, 2, 3 }, { 4, 5, 6 } }
    local pt = base:t()            -- a strided leaf view [3 x 2]
    pt:requires_grad(true)
    local pc = lt.param(base:t():contiguous())
    local g = lt.tensor { { 1, 2 }, { 3, 4 }, { 5, 6 } }
    local o1 = lt.optim.SGD({ pt }, { lr = 0.1, momentum = 0.9 })
    local o2 = lt.optim.SGD({ pc }, { lr = 0.1, momentum = 0.9 })
    for _ = 1, 3 do
      pt.grad = g; pc.grad = g
      o1:step(); o2:step()
    end
    assert.same(pc:flatten():tolist(), pt:flatten():tolist())
    assert.same(pc:t():flatten():tolist(), base:flatten():tolist()) -- written back into the shared storage
  end)

  it("takes the parameters of a module-like table through :parameters()", function()
    local w, b = lt.param(lt.ones(2, 2)), lt.param(lt.zeros(2))
    local model = { parameters = function() return { w, b } end }
    local opt = lt.optim.SGD(model, { lr = 1 })
    assert.equals(w, opt.param_groups[1].params[1])
    assert.equals(b, opt.param_groups[1].params[2])
  end)

  it("is recognised by lt.optim.is_optimizer", function()
    local opt = lt.optim.RMSprop({ lt.param(lt.ones(1)) })
    assert.is_true(lt.optim.is_optimizer(opt))
    assert.is_false(lt.optim.is_optimizer({}))
    assert.equals("RMSprop", opt.kind)
  end)
end)

describe("lt.optim param_groups", function()
  it("reads and writes hyper-parameters; a changed lr takes effect at the next step", function()
    local p = lt.param(lt.tensor { 1, 1 })
    local opt = lt.optim.SGD({ p }, { lr = 0.1 })
    local g = opt.param_groups[1]
    assert.equals(0.1, g.lr)
    assert.equals(0, g.momentum)
    assert.is_false(g.nesterov)
    g.lr = 0.5
    assert.equals(0.5, opt.param_groups[1].lr)
    p.grad = lt.tensor { 1, 2 }
    opt:step()
    assert.same({ 0.5, 0 }, p:flatten():tolist())
  end)

  it("keeps a separate lr per group and fills missing options from the constructor's", function()
    local a, b = lt.param(lt.ones(1)), lt.param(lt.ones(1))
    local opt = lt.optim.SGD({ { params = { a } }, { params = { b }, lr = 0.25 } }, { lr = 0.5, momentum = 0.9 })
    assert.equals(2, #opt.param_groups)
    assert.equals(0.5, opt.param_groups[1].lr)
    assert.equals(0.25, opt.param_groups[2].lr)
    assert.equals(0.9, opt.param_groups[2].momentum)
    a.grad = lt.ones(1); b.grad = lt.ones(1)
    opt:step()
    assert.same({ 0.5 }, a:flatten():tolist())
    assert.same({ 0.75 }, b:flatten():tolist())
  end)

  it("add_param_group appends a group that steps with the defaults and numbers params on in state_dict", function()
    local a, b, c = lt.param(lt.ones(1)), lt.param(lt.ones(2)), lt.param(lt.ones(3))
    local opt = lt.optim.Adam({ a }, { lr = 0.01, betas = { 0.8, 0.9 } })
    opt:add_param_group { params = { b, c }, lr = 0.1 }
    local g2 = opt.param_groups[2]
    assert.equals(0.1, g2.lr)
    assert.same({ 0.8, 0.9 }, g2.betas)
    assert.equals(c, g2.params[2])
    local sd = opt:state_dict()
    assert.same({ 1 }, sd.param_groups[1].params)
    assert.same({ 2, 3 }, sd.param_groups[2].params)
  end)

  it("keeps other keys (initial_lr) in the group table and in state_dict", function()
    local opt = lt.optim.SGD({ lt.param(lt.ones(1)) }, { lr = 0.1 })
    opt.param_groups[1].initial_lr = 0.1
    assert.equals(0.1, opt.param_groups[1].initial_lr)
    assert.equals(0.1, opt:state_dict().param_groups[1].initial_lr)
  end)

  it("sets betas as a table and validates assigned values", function()
    local opt = lt.optim.Adam({ lt.param(lt.ones(1)) })
    opt.param_groups[1].betas = { 0.5, 0.6 }
    assert.same({ 0.5, 0.6 }, opt.param_groups[1].betas)
    assert.matches("Adam: invalid learning rate: %-1", errmsg(function() opt.param_groups[1].lr = -1 end))
    assert.equals(1e-3, opt.param_groups[1].lr)
    assert.matches("Adam: option 'lr' must be a number, got string",
      errmsg(function() opt.param_groups[1].lr = "fast" end))
    assert.matches("params cannot be replaced", errmsg(function() opt.param_groups[1].params = {} end))
  end)

  it("prints its kind and every group's options", function()
    local opt = lt.optim.SGD({ lt.param(lt.ones(1)) }, { lr = 0.1, momentum = 0.9 })
    local s = tostring(opt)
    assert.matches("^SGD %(", s)
    assert.matches("Parameter Group 1", s, 1, true)
    assert.matches("lr: 0.1", s, 1, true)
    assert.matches("momentum: 0.9", s, 1, true)
    assert.matches("params: 1 tensors", s, 1, true)
  end)
end)

describe("lt.optim zero_grad and closures", function()
  it("zero_grad zeroes in place, keeping the same grad buffer", function()
    local x = lt.param(lt.randn(4, 5))
    local opt = lt.optim.SGD({ x }, { lr = 0.1 })
    ;(x * x):sum():backward()
    local ptr = x.grad:data_ptr()
    for _ = 1, 3 do
      opt:zero_grad()
      assert.equals(ptr, x.grad:data_ptr())
      assert.equals(0, x.grad:abs():sum():item())
      ;(x * x):sum():backward()
      assert.equals(ptr, x.grad:data_ptr())
    end
  end)

  it("zero_grad(true) drops the grads", function()
    local x = lt.param(lt.ones(2))
    local opt = lt.optim.SGD({ x }, { lr = 0.1 })
    x.grad = lt.ones(2)
    opt:zero_grad(true)
    assert.is_nil(x.grad)
  end)

  it("step(closure) evaluates the closure with grad enabled, then updates and returns its loss", function()
    local x = lt.param(lt.tensor { 3 })
    local opt = lt.optim.SGD({ x }, { lr = 0.1 })
    local calls = 0
    local loss, after = lt.no_grad(function()
      return opt:step(function()
        calls = calls + 1
        assert.is_true(lt.is_grad_enabled())
        opt:zero_grad()
        local l = (x * x):sum()
        l:backward()
        return l
      end), lt.is_grad_enabled()
    end)
    assert.equals(1, calls)
    assert.equals(9, loss:item())
    assert.is_true(math.abs(x:item() - 2.4) < 1e-6) -- 3 - 0.1 * 6
    assert.is_false(after) -- grad mode restored after the closure
  end)

  it("propagates an error raised in the closure without stepping", function()
    local x = lt.param(lt.tensor { 3 })
    x.grad = lt.tensor { 1 }
    local opt = lt.optim.SGD({ x }, { lr = 0.1 })
    assert.matches("boom", errmsg(function() opt:step(function() error("boom") end) end))
    assert.equals(3, x:item())
  end)
end)

describe("lt.optim state_dict", function()
  local configs = {
    { "SGD", { lr = 0.1 } },
    { "SGD", { lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 0.01 } },
    { "Adam", { lr = 0.01 } },
    { "Adam", { lr = 0.01, amsgrad = true, betas = { 0.9, 0.9 } } },
    { "AdamW", { lr = 0.01, amsgrad = true } },
    { "RMSprop", { lr = 0.01 } },
    { "RMSprop", { lr = 0.01, momentum = 0.9, centered = true, weight_decay = 0.1 } },
  }
  for _, cfg in ipairs(configs) do
    local kind, opts = cfg[1], cfg[2]
    it("round-trips mid-run and continues bitwise identically: " .. kind .. " " .. cjson.encode(opts), function()
      lt.manual_seed(7)
      local c1, c2 = lt.randn(3, 4), lt.randn(4)
      local p1, p2 = lt.param(lt.randn(3, 4)), lt.param(lt.randn(4))
      local a = lt.optim[kind]({ p1, p2 }, opts)
      for _ = 1, 5 do a:zero_grad(); assign_grads(p1, p2, c1, c2); a:step() end
      local sd = a:state_dict()
      local q1, q2 = lt.param(p1:clone():detach()), lt.param(p2:clone():detach())
      for _ = 1, 5 do a:zero_grad(); assign_grads(p1, p2, c1, c2); a:step() end
      -- a fresh optimizer with other options: load_state_dict brings the group's options back too
      local b = lt.optim[kind]({ q1, q2 }, { lr = 0.5 })
      b:load_state_dict(sd)
      assert.equals(opts.lr, b.param_groups[1].lr)
      for _ = 1, 5 do b:zero_grad(); assign_grads(q1, q2, c1, c2); b:step() end
      assert.is_true(equal_lists(p1:flatten():tolist(), q1:flatten():tolist()))
      assert.is_true(equal_lists(p2:flatten():tolist(), q2:flatten():tolist()))
    end)
  end

  it("uses PyTorch's layout: state[i] with step and buffers, param_groups with 1-based params", function()
    local p1, p2 = lt.param(lt.ones(2)), lt.param(lt.ones(3))
    local opt = lt.optim.Adam({ p1, p2 }, { lr = 0.1, amsgrad = true })
    p1.grad = lt.ones(2); p2.grad = lt.ones(3)
    opt:step(); opt:step()
    local sd = opt:state_dict()
    assert.equals(2, sd.state[2].step)
    assert.same({ 3 }, sd.state[2].exp_avg:shape())
    assert.same({ 3 }, sd.state[2].exp_avg_sq:shape())
    assert.same({ 3 }, sd.state[2].max_exp_avg_sq:shape())
    local g = sd.param_groups[1]
    assert.same({ 1, 2 }, g.params)
    assert.equals(0.1, g.lr)
    assert.same({ 0.9, 0.999 }, g.betas)
    assert.equals(1e-8, g.eps)
    assert.is_true(g.amsgrad)
    -- the tensors are copies: stepping on does not change a saved state_dict
    local saved = sd.state[1].exp_avg:flatten():tolist()
    opt:step()
    assert.same(saved, sd.state[1].exp_avg:flatten():tolist())
  end)

  it("loads a state dict whose integer keys became strings (JSON)", function()
    local p = lt.param(lt.ones(2))
    local opt = lt.optim.Adam({ p }, { lr = 0.1 })
    p.grad = lt.tensor { 1, 2 }
    opt:step()
    local sd = opt:state_dict()
    local st = sd.state[1]
    sd.state = { ["1"] = st }
    local opt2 = lt.optim.Adam({ lt.param(lt.ones(2)) }, { lr = 0.1 })
    opt2:load_state_dict(sd)
    assert.equals(1, opt2:state_dict().state[1].step)
    assert.same(st.exp_avg:flatten():tolist(), opt2:state_dict().state[1].exp_avg:flatten():tolist())
  end)

  it("keeps SGD's momentum_buffer and no step", function()
    local p = lt.param(lt.ones(2))
    local opt = lt.optim.SGD({ p }, { lr = 0.1, momentum = 0.9 })
    p.grad = lt.tensor { 1, 2 }
    opt:step()
    local st = opt:state_dict().state[1]
    assert.same({ 1, 2 }, st.momentum_buffer:flatten():tolist())
    assert.is_nil(st.step)
  end)
end)

describe("lt.optim errors", function()
  local w = lt.param(lt.ones(2))

  it("rejects unknown options, naming them", function()
    assert.matches("SGD: unknown option 'lrr' %(known options: lr, momentum, dampening, weight_decay, nesterov, maximize%)",
      errmsg(lt.optim.SGD, { w }, { lr = 0.1, lrr = 1 }))
    assert.matches("Adam: unknown option 'momentum'", errmsg(lt.optim.Adam, { w }, { momentum = 0.9 }))
    assert.matches("SGD: unknown option 'foo'", errmsg(lt.optim.SGD, { { params = { w }, foo = 1 } }, { lr = 1 }))
  end)

  it("rejects options of the wrong type", function()
    assert.matches("SGD: option 'lr' must be a number, got string", errmsg(lt.optim.SGD, { w }, { lr = "0.1" }))
    assert.matches("SGD: option 'nesterov' must be a boolean, got number",
      errmsg(lt.optim.SGD, { w }, { lr = 0.1, nesterov = 1 }))
    assert.matches("Adam: option 'betas' must be a table of two numbers", errmsg(lt.optim.Adam, { w }, { betas = 0.9 }))
    assert.matches("SGD: options must be a table, got number (it takes at most 5 positional arguments: lr, momentum, "
      .. "dampening, weight_decay, nesterov)", errmsg(lt.optim.SGD, { w }, 0.1, 0, 0, 0, false, 1), 1, true)
  end)

  it("rejects invalid values with PyTorch's checks", function()
    assert.matches("SGD: invalid learning rate: %-0.1", errmsg(lt.optim.SGD, { w }, { lr = -0.1 }))
    assert.matches("SGD: option 'lr' is required", errmsg(lt.optim.SGD, { w }, {}))
    assert.matches("SGD: invalid momentum value: %-1", errmsg(lt.optim.SGD, { w }, { lr = 1, momentum = -1 }))
    assert.matches("SGD: invalid weight_decay value: %-1", errmsg(lt.optim.SGD, { w }, { lr = 1, weight_decay = -1 }))
    assert.matches("SGD: nesterov momentum requires a momentum and zero dampening",
      errmsg(lt.optim.SGD, { w }, { lr = 1, nesterov = true }))
    assert.matches("SGD: nesterov momentum requires a momentum and zero dampening",
      errmsg(lt.optim.SGD, { w }, { lr = 1, nesterov = true, momentum = 0.9, dampening = 0.1 }))
    assert.matches("Adam: invalid beta parameter at index 2: 1", errmsg(lt.optim.Adam, { w }, { betas = { 0.9, 1 } }))
    assert.matches("AdamW: invalid epsilon value: %-1", errmsg(lt.optim.AdamW, { w }, { eps = -1 }))
    assert.matches("RMSprop: invalid alpha value: %-0.5", errmsg(lt.optim.RMSprop, { w }, { alpha = -0.5 }))
  end)

  it("rejects parameters of the wrong type, non-leaves, duplicates and empty lists", function()
    assert.matches("SGD: params%[2%] is a number, expected a tensor", errmsg(lt.optim.SGD, { w, 3 }, { lr = 1 }))
    assert.matches("got a tensor %(wrap it in a list: {x}%)", errmsg(lt.optim.SGD, w, { lr = 1 }))
    assert.matches("SGD: params must be a list of tensors, a list of param groups or a module with :parameters%(%), got string",
      errmsg(lt.optim.SGD, "w", { lr = 1 }))
    assert.matches("SGD: optimizer got an empty parameter list", errmsg(lt.optim.SGD, {}, { lr = 1 }))
    assert.matches("can't optimize a non%-leaf tensor", errmsg(lt.optim.SGD, { w * 2 }, { lr = 1 }))
    assert.matches("only optimize float32 and float64 tensors", errmsg(lt.optim.SGD, { lt.tensor({ 1 }, "int64") }, { lr = 1 }))
    assert.matches("parameter 2 appears twice", errmsg(lt.optim.SGD, { w, w }, { lr = 1 }))
    local opt = lt.optim.SGD({ w }, { lr = 1 })
    assert.matches("some parameters appear in more than one parameter group",
      errmsg(function() opt:add_param_group { params = { w } } end))
  end)

  it("load_state_dict rejects a different group count, group size or state shape, changing nothing", function()
    local a, b = lt.param(lt.ones(2)), lt.param(lt.ones(3))
    local opt = lt.optim.Adam({ a, b }, { lr = 0.1 })
    a.grad = lt.ones(2); b.grad = lt.ones(3)
    opt:step()
    local sd = opt:state_dict()
    local other = lt.optim.Adam({ { params = { lt.param(lt.ones(2)) } }, { params = { lt.param(lt.ones(3)) } } })
    assert.matches("Adam: load_state_dict: loaded state dict has a different number of parameter groups "
      .. "%(1, the optimizer has 2%)",
      errmsg(function() other:load_state_dict(sd) end))
    local small = lt.optim.Adam({ lt.param(lt.ones(2)) })
    assert.matches("Adam: load_state_dict: loaded state dict contains a parameter group that doesn't match the size "
      .. "of optimizer's group %(group 1: 2 parameters, the optimizer's has 1%)",
      errmsg(function() small:load_state_dict(sd) end))
    local swapped = lt.optim.Adam({ lt.param(lt.ones(3)), lt.param(lt.ones(2)) })
    assert.matches("Adam: load_state_dict: state%[1%]%.exp_avg.* has shape %[2%], but parameter 1 of group 1 has shape %[3%]",
      errmsg(function() swapped:load_state_dict(sd) end))
    assert.equals(1e-3, swapped.param_groups[1].lr) -- nothing was loaded
    assert.matches("Adam: load_state_dict expects a table, got nil", errmsg(function() swapped:load_state_dict() end))
    sd.state[1].bogus = 1
    assert.matches("state%[1%] has an unknown entry 'bogus'", errmsg(function() opt:load_state_dict(sd) end))
  end)

  it("a grad of the wrong dtype is refused (at the assignment, so step never sees one)", function()
    local p = lt.param(lt.ones(2))
    local opt = lt.optim.SGD({ p }, { lr = 1 })
    assert.matches("grad: assigned gradient is int64, the tensor is float32",
      errmsg(function() p.grad = lt.tensor({ 1, 1 }, "int64") end))
    opt:step() -- no grad: nothing to do
    assert.same({ 1, 1 }, p:flatten():tolist())
  end)
end)
