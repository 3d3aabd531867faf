-- tests/losses_spec.lua — lt.F losses: PyTorch fixtures (value and input gradient for every reduction),
-- options and error messages.
local lt = require "lutra"
local X = require "tests.helpers.nn_fixtures"
local F = lt.F

describe("lt.F losses against PyTorch fixtures (tests/fixtures/losses.json)", function()
  for _, case in ipairs(X.load("losses.json")) do
    it("matches " .. case.name .. ": value and grad of input", function()
      local opts = {}
      for k, v in pairs(case.opts) do opts[k] = type(v) == "table" and X.tensor(v) or v end
      local x = X.tensor(case.input):requires_grad(true)
      local out = F[case.fn](x, X.tensor(case.target), opts)
      X.check("output", out, case.output)
      out:backward(X.tensor(case.grad_output))
      X.check("grad_input", x.grad, case.grad_input)
    end)
  end
end)

local function err_of(fn)
  local ok, e = pcall(fn)
  assert(not ok, "expected an error")
  return tostring(e)
end

describe("lt.F losses: semantics and errors", function()
  it("cross_entropy equals nll_loss(log_softmax(x, 2)) and takes the reduction as a string too", function()
    lt.manual_seed(1)
    local x, t = lt.randn(6, 4), lt.tensor({ 1, 4, 2, 2, 3, 4 }, "int64")
    local a = F.cross_entropy(x, t):item()
    local b = F.nll_loss(x:log_softmax(2), t):item()
    assert.is_true(math.abs(a - b) < 1e-6)
    assert.is_true(math.abs(F.cross_entropy(x, t, "sum"):item() - 6 * a) < 1e-5)
    assert.are.same({ 6 }, F.cross_entropy(x, t, { reduction = "none" }):shape())
  end)

  it("cross_entropy with class weights divides the mean by the targets' total weight", function()
    local x, t = lt.tensor { { 1, 2, 3 }, { 3, 1, 0 } }, lt.tensor({ 3, 1 }, "int64")
    local w = lt.tensor { 2, 1, 0.5 }
    local per = F.cross_entropy(x, t, { reduction = "none" }):flatten():tolist()
    local expect = (0.5 * per[1] + 2 * per[2]) / 2.5
    assert.is_true(math.abs(F.cross_entropy(x, t, { weight = w }):item() - expect) < 1e-6)
  end)

  it("an ignored target gives zero loss and zero gradient", function()
    local x = lt.randn(3, 4):requires_grad(true)
    local t = lt.tensor({ 2, 1, 2 }, "int64")
    local l = F.cross_entropy(x, t, { ignore_index = 1, reduction = "none" })
    assert.are.equal(0, l:flatten():tolist()[2])
    l:sum():backward()
    assert.are.equal(0, x.grad[2]:abs():sum():item())
  end)

  it("label_smoothing with ignore_index averages both terms over the kept targets only (torch 1.13)", function()
    -- torch: F.cross_entropy([[1,2,3],[3,1,0]], [2,0], label_smoothing=0.2, ignore_index=0) = 0.6076059
    -- (the smoothing term was divided by N = 2, counting the ignored row: 0.466845)
    local x = lt.tensor({ { 1, 2, 3 }, { 3, 1, 0 } }):requires_grad(true)
    local l = F.cross_entropy(x, lt.tensor({ 3, 1 }, "int64"), { label_smoothing = 0.2, ignore_index = 1 })
    assert.is_true(math.abs(l:item() - 0.6076059) < 1e-5, tostring(l:item()))
    l:backward()
    local g, want = x.grad:flatten():tolist(), { 0.0233639, 0.1780618, -0.2014257, 0, 0, 0 }
    for i = 1, 6 do assert.is_true(math.abs(g[i] - want[i]) < 1e-5, i .. ": " .. g[i]) end
    -- every target ignored: 0/0, NaN, as torch
    local a = F.cross_entropy(x, lt.tensor({ 2, 2 }, "int64"), { label_smoothing = 0.2, ignore_index = 2 }):item()
    assert.is_true(a ~= a)
  end)

  it("rejects targets out of 1..C (1-based), float targets, bad reductions and unknown options", function()
    local x = lt.randn(2, 5)
    assert.matches("cross_entropy: target 6 is out of range 1..5 (class targets are 1-based)",
      err_of(function() return F.cross_entropy(x, lt.tensor({ 1, 6 }, "int64")) end), 1, true)
    assert.matches("cross_entropy: target 0 is out of range 1..5 (class targets are 1-based)",
      err_of(function() return F.cross_entropy(x, lt.tensor({ 0, 2 }, "int64")) end), 1, true)
    assert.matches("cross_entropy: target must be int64, got float32",
      err_of(function() return F.cross_entropy(x, lt.tensor { 1, 2 }) end), 1, true)
    assert.matches("cross_entropy: target [3] does not match input [2 x 5]",
      err_of(function() return F.cross_entropy(x, lt.tensor({ 1, 2, 3 }, "int64")) end), 1, true)
    assert.matches('cross_entropy: reduction must be "mean", "sum" or "none", got "avg"',
      err_of(function() return F.cross_entropy(x, lt.tensor({ 1, 2 }, "int64"), { reduction = "avg" }) end), 1, true)
    assert.matches("cross_entropy: unknown option 'ignore' (known options: ignore_index, label_smoothing, reduction, weight)",
      err_of(function() return F.cross_entropy(x, lt.tensor({ 1, 2 }, "int64"), { ignore = 1 }) end), 1, true)
    assert.matches("nll_loss: weight must be [5] (one per class), got [4]",
      err_of(function() return F.nll_loss(x, lt.tensor({ 1, 2 }, "int64"), { weight = lt.ones(4) }) end), 1, true)
    assert.matches("mse_loss: input [2 x 5] and target [5] must have the same shape",
      err_of(function() return F.mse_loss(x, lt.randn(5)) end), 1, true)
    assert.matches("binary_cross_entropy_with_logits: pos_weight must be [5] (one per class, the input's last dim) "
      .. "or [1], got [3]",
      err_of(function() return F.binary_cross_entropy_with_logits(x, lt.rand(2, 5), { pos_weight = lt.ones(3) }) end), 1, true)
  end)

  it("binary_cross_entropy_with_logits stays finite for large logits", function()
    local x = lt.tensor { -200, -50, 50, 200 }
    local y = lt.tensor { 0, 1, 0, 1 }
    local l = F.binary_cross_entropy_with_logits(x, y, "none"):flatten():tolist()
    assert.is_true(math.abs(l[1]) < 1e-6 and math.abs(l[2] - 50) < 1e-4 and math.abs(l[3] - 50) < 1e-4 and math.abs(l[4]) < 1e-6)
  end)
end)
