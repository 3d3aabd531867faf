-- vocab_torch7_spec.lua — Torch7 habits: table indexing (x[{1}], x[{{1, 2}, 3}], assignment), criteria with
-- forward(input, target) / backward(input, target), m:getParameters() (flat views, re-flattening), and optim's
-- functional lt.optim.sgd / adam(feval, x, config, state) against the trajectories of tests/fixtures/vocab3.json
-- (gen_vocab3.py: torch.optim with the settings where the rules agree).
local lt = require "lutra"
local X = require "tests.helpers.nn_fixtures"
local err_of = require "tests.helpers.err_of"

local nn = lt.nn

describe("Torch7 table indexing", function()
  local function grid() return lt.arange(12):float():view(3, 4) end

  it("selects with numbers, narrows with {first, last}, {i} and {}; a number per dim is the element", function()
    local x = grid()
    assert.are.same({ 0, 1, 2, 3 }, x[{ 1 }]:totable())
    assert.are.same({ 2, 6 }, x[{ { 1, 2 }, 3 }]:totable())
    assert.are.same({ { 5, 6, 7 }, { 9, 10, 11 } }, x[{ { 2, -1 }, { 2, 4 } }]:totable())
    assert.are.same({ { 4, 5, 6, 7 } }, x[{ { 2 } }]:totable())
    assert.are.same({ 3, 3 }, x[{ {}, { 2, -1 } }]:shape())
    assert.are.equal(6, x[{ 2, 3 }])
    assert.are.equal(11, x[{ -1, -1 }])
  end)

  it("is a view: writes reach the tensor, gradients flow back", function()
    local x = grid()
    x[{ { 1, 2 }, 1 }] = 100
    x[{ 3 }] = lt.ones(4)
    x[{ 2, 2 }] = -1
    assert.are.same({ { 100, 1, 2, 3 }, { 100, -1, 6, 7 }, { 1, 1, 1, 1 } }, x:totable())
    local w = lt.randn(3, 4):requires_grad(true)
    local s = w[{ { 1, 2 }, { 2, 3 } }]:sum()
    s:backward()
    assert.are.same({ { 0, 1, 1, 0 }, { 0, 1, 1, 0 }, { 0, 0, 0, 0 } }, w.grad:totable())
  end)

  it("raises saying how, instead of returning nil", function()
    local x = grid()
    assert.matches("index: index 5 is out of range for dim 1 of size 3 (tensor [3 x 4])",
      err_of(function() return x[{ 5 }] end), 1, true)
    assert.matches("index: {1, 2, 3} has 3 entries for a 2-dim tensor [3 x 4]",
      err_of(function() return x[{ 1, 2, 3 }] end), 1, true)
    assert.matches("index: entry 1 of {{1, 2, 3}} is a range {first, last} (or {i}, or {}), got 3 numbers",
      err_of(function() return x[{ { 1, 2, 3 } }] end), 1, true)
    assert.matches("index: entry 1 of a Torch7 index must be a number or a {first, last} range, got string",
      err_of(function() return x[{ "a" }] end), 1, true)
    assert.matches("index: a tensor is not a key here (Torch7's x[mask]): use x:masked_select(mask) to read",
      err_of(function() return x[x:gt(1)] end), 1, true)
    assert.matches("index: a tensor is indexed by a row number x[i] or a Torch7 list x[{i, {first, last}}], got a "
      .. "boolean", err_of(function() return x[true] end), 1, true)
    assert.matches("index: x[{1}] = v takes a number or a tensor, got string",
      err_of(function() x[{ 1 }] = "s" end), 1, true)
  end)
end)

describe("criteria as Torch7 modules", function()
  it("forward(input, target) is the loss; backward(input, target) its gradient in input, kept as gradInput", function()
    local crit = nn.CrossEntropyLoss()
    local x, y = lt.randn(4, 3), lt.tensor({ 1, 2, 3, 1 }, "int64")
    local l = crit:forward(x, y)
    local g = crit:backward(x, y)
    local xr = x:clone():requires_grad(true)
    local lr = crit(xr, y)
    lr:backward()
    assert.are.equal(lr:item(), l:item())
    assert.is_true(xr.grad:allclose(g, 1e-6, 1e-7))
    assert.are.equal(g, crit.gradInput)
    assert.is_false(x:requires_grad()) -- the input itself is left alone
    local mse = nn.MSELoss { reduction = "sum" }
    local a, b = lt.tensor { 1, 2 }, lt.tensor { 0, 4 }
    assert.are.same({ 2, -4 }, mse:backward(a, b):totable())
  end)

  it("a loss of three tensors gives the three gradients; a loss that is not one number is an error", function()
    local ga, gp, gn = nn.TripletMarginLoss():backward(lt.randn(2, 3), lt.randn(2, 3), lt.randn(2, 3))
    assert.are.same({ 2, 3 }, ga:shape())
    assert.are.same({ 2, 3 }, gp:shape())
    assert.are.same({ 2, 3 }, gn:shape())
    local none = nn.MSELoss { reduction = "none" }
    assert.matches('MSELoss(reduction=none): backward needs a loss of one number (reduction "mean" or "sum"), '
      .. "got [4 x 3]", err_of(function() none:backward(lt.randn(4, 3), lt.randn(4, 3)) end), 1, true)
  end)
end)

describe("m:getParameters()", function()
  local function mlp() return nn.Sequential { nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2) } end

  it("returns flat params and grads that the module's parameters are views of", function()
    local m = mlp()
    local w1, b2 = m[1].weight:clone(), m[3].bias:clone()
    local params, grads = m:getParameters()
    assert.are.same({ 3 * 4 + 4 + 4 * 2 + 2 }, params:shape())
    assert.are.same(params:shape(), grads:shape())
    assert.is_true(m[1].weight:allclose(w1, 0, 0))
    assert.is_true(params:narrow(1, 25, 2):allclose(b2, 0, 0))
    local loss = m(lt.randn(5, 3)):sum()
    loss:backward()
    assert.is_true(grads:narrow(1, 1, 12):view(4, 3):allclose(m[1].weight.grad, 0, 0))
    assert.is_true(grads:abs():sum():item() > 0)
    lt.no_grad(function() params:sub_(grads * 0.1) end)
    assert.is_true(m[1].weight:allclose(w1 - m[1].weight.grad * 0.1, 1e-6, 1e-7))
    m:zero_grad()
    assert.are.equal(0, grads:abs():sum():item())
    assert.are.equal(4, #m:parameters())
  end)

  it("a second call returns the same tensors; after a parameter is replaced it flattens anew", function()
    local m = mlp()
    local p1, g1 = m:getParameters()
    m:zero_grad(true) -- drops the .grad views: the next call links them again
    local p2, g2 = m:getParameters()
    assert.are.equal(p1, p2)
    assert.are.equal(g1, g2)
    m(lt.randn(2, 3)):sum():backward()
    assert.is_true(g1:abs():sum():item() > 0)
    m[3] = nn.Linear(4, 5)
    local p3 = m:getParameters()
    assert.are_not.equal(p1, p3)
    assert.are.same({ 3 * 4 + 4 + 4 * 5 + 5 }, p3:shape())
  end)

  it("keeps tied weights one parameter", function()
    local a = nn.Linear(3, 3)
    local m = nn.Sequential { a, nn.Linear(3, 3) }
    m[2].weight = a.weight
    local params = m:getParameters()
    assert.are.same({ 9 + 3 + 3 }, params:shape())
    assert.are.equal(m[1].weight, m[2].weight)
  end)
end)

describe("lt.optim.sgd / adam (Torch7 optim's functional form)", function()
  for _, c in ipairs(X.load("vocab3.json")) do
    if c.rule then
      it(c.name .. ": 10 steps follow torch.optim's trajectory", function()
        local x, coef = X.tensor(c.x), X.tensor(c.c)
        local function feval(p)
          return (p:sin() * coef):sum():item(), p:cos() * coef
        end
        local state = {}
        for step = 1, 10 do
          local _, fs = lt.optim[c.rule](feval, x, c.config, state)
          assert.is_true(math.abs(fs[1] - c.losses[step]) <= 1e-5 * math.max(1, math.abs(c.losses[step])))
          X.check(c.name .. " step " .. step, x, c.trajectory[step], 1e-5, 1e-6)
        end
      end)
    end
  end

  it("Torch7's defaults: dampening = momentum, learningRateDecay, config as state when no state is given", function()
    local function feval(p) return 0, lt.ones(p:shape()) end
    local x = lt.zeros(2)
    local config = { learningRate = 1, momentum = 0.5 }
    lt.optim.sgd(feval, x, config) -- buffer = g
    lt.optim.sgd(feval, x, config) -- buffer = 0.5 g + (1 - 0.5) g = g
    assert.are.same({ -2, -2 }, x:totable())
    assert.are.equal(2, config.evalCounter)
    local y = lt.zeros(1)
    local st = {}
    for _ = 1, 2 do lt.optim.sgd(feval, y, { learningRate = 1, learningRateDecay = 1 }, st) end
    assert.are.same({ -1.5 }, y:totable()) -- 1 / (1 + 0) + 1 / (1 + 1)
  end)

  it("names the function, the option and what feval returned", function()
    local x = lt.zeros(2)
    assert.matches("sgd: unknown option 'lr' (known options: ", err_of(lt.optim.sgd, function() end, x, { lr = 1 }),
      1, true)
    assert.matches("adam: feval(x) must return f(x) (a number) and df/dx, got nil",
      err_of(lt.optim.adam, function() end, x, {}), 1, true)
    assert.matches("sgd: df/dx [3] does not match x [2]",
      err_of(lt.optim.sgd, function() return 0, lt.zeros(3) end, x, {}), 1, true)
    assert.matches("sgd: Nesterov momentum requires a momentum and zero dampening",
      err_of(lt.optim.sgd, function() return 0, lt.zeros(2) end, x, { nesterov = true, momentum = 0.9 }), 1, true)
  end)
end)
