-- tests/nn_gradcheck_spec.lua — finite-difference gradient checks (tests/helpers/gradcheck.lua) for every
-- lt.nn module and lt.F loss: input and parameter gradients on small shapes with fixed seeds.
local lt = require "lutra"
local gradcheck = require "tests.helpers.gradcheck"
local nn, F = lt.nn, lt.F

-- values spaced at least 0.05 apart (no ties for max pooling, no kinks within eps), shuffled
local function distinct(...)
  local shape = { ... }
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return (lt.randperm(n):float() * 0.05 - n * 0.025):reshape(shape)
end

-- normal values pushed at least 0.05 away from 0 (no kink of relu / l1 within eps)
local function away_from_zero(...)
  local x = lt.randn(...)
  return x + x:sign() * 0.05
end

-- checks the input and every parameter of m: fn(x, p1, p2, ...) assigns the params then calls m
local function check_module(m, x, opts)
  local named, order = m:named_parameters()
  local inputs = { x }
  for i, name in ipairs(order) do inputs[i + 1] = named[name] end
  local fn = function(xx, ...)
    local ps = { ... }
    for i, name in ipairs(order) do m[name] = ps[i] end
    return (m(xx))
  end
  local ok = gradcheck(fn, inputs, opts)
  for i, name in ipairs(order) do m[name] = inputs[i + 1] end
  return ok
end

describe("gradcheck of nn modules", function()
  before_each(function() lt.manual_seed(7) end)

  it("Sequential's fused Linear + ReLU: input, weight and bias", function()
    -- outputs kept away from relu's kink: a bias well off zero for half the units
    local m = nn.Sequential { nn.Linear(4, 6), nn.ReLU() }
    m[1].bias = lt.param(lt.tensor { 1, -1, 1, -1, 1, -1 })
    m[1].weight = lt.param(lt.randn(6, 4) * 0.1)
    assert.is_true(check_module(m, lt.randn(5, 4)))
    assert.is_true(gradcheck(function(x, w, b) return lt.linear(x, w, b, "relu") end,
      { lt.randn(3, 2, 4), lt.randn(6, 4) * 0.1, lt.tensor { 1, -1, 1, -1, 1, -1 } }))
  end)

  it("Sequential's fused Conv2d + ReLU: input, weight and bias", function()
    local m = nn.Sequential { nn.Conv2d(2, 3, 3, { padding = 1 }), nn.ReLU() }
    m[1].bias = lt.param(lt.tensor { 1, -1, 1 })
    m[1].weight = lt.param(lt.randn(3, 2, 3, 3) * 0.1)
    assert.is_true(check_module(m, lt.randn(2, 2, 4, 5)))
  end)

  it("Linear: input, weight and bias (2-D and 3-D input)", function()
    assert.is_true(check_module(nn.Linear(4, 3), lt.randn(5, 4)))
    assert.is_true(check_module(nn.Linear(4, 3), lt.randn(2, 3, 4)))
    assert.is_true(check_module(nn.Linear(4, 3, { bias = false }), lt.randn(2, 4)))
  end)

  it("Conv2d: stride 1 and 2, padding, non-square kernel, 1x1 kernel, no bias", function()
    assert.is_true(check_module(nn.Conv2d(2, 3, 3), lt.randn(2, 2, 5, 5)))
    assert.is_true(check_module(nn.Conv2d(2, 2, 3, { stride = 2, padding = 1 }), lt.randn(2, 2, 6, 5)))
    assert.is_true(check_module(nn.Conv2d(1, 2, { 2, 3 }, { stride = { 2, 1 }, padding = { 1, 0 } }), lt.randn(1, 1, 5, 6)))
    assert.is_true(check_module(nn.Conv2d(3, 2, 1), lt.randn(2, 3, 3, 3)))
    assert.is_true(check_module(nn.Conv2d(2, 2, 3, { bias = false, padding = 2 }), lt.randn(1, 2, 4, 4)))
  end)

  it("MaxPool2d: kernel 2 stride 2, kernel 3 stride 2 with padding 1", function()
    assert.is_true(check_module(nn.MaxPool2d(2), distinct(2, 2, 4, 5)))
    assert.is_true(check_module(nn.MaxPool2d(3, { stride = 2, padding = 1 }), distinct(1, 2, 5, 5)))
  end)

  it("AvgPool2d: plain, padded with and without count_include_pad", function()
    assert.is_true(check_module(nn.AvgPool2d(2), lt.randn(2, 2, 5, 4)))
    assert.is_true(check_module(nn.AvgPool2d(3, { stride = 2, padding = 1 }), lt.randn(1, 2, 5, 5)))
    assert.is_true(check_module(nn.AvgPool2d(3, { stride = 2, padding = 1, count_include_pad = false }), lt.randn(1, 2, 5, 5)))
  end)

  it("activations: ReLU, LeakyReLU, GELU, Tanh, Sigmoid, Softmax, LogSoftmax", function()
    assert.is_true(check_module(nn.ReLU(), away_from_zero(3, 4)))
    assert.is_true(check_module(nn.LeakyReLU({ negative_slope = 0.2 }), away_from_zero(3, 4)))
    assert.is_true(check_module(nn.GELU(), lt.randn(3, 4)))
    assert.is_true(check_module(nn.Tanh(), lt.randn(3, 4)))
    assert.is_true(check_module(nn.Sigmoid(), lt.randn(3, 4)))
    assert.is_true(check_module(nn.Softmax(2), lt.randn(3, 4)))
    assert.is_true(check_module(nn.Softmax(1), lt.randn(3, 4)))
    assert.is_true(check_module(nn.LogSoftmax(2), lt.randn(2, 3, 4)))
  end)

  it("Dropout in training (the same mask in every evaluation) and Flatten", function()
    assert.is_true(check_module(nn.Dropout(0.3), lt.randn(4, 5)))
    assert.is_true(check_module(nn.Flatten(), lt.randn(2, 3, 2, 2)))
  end)

  it("BatchNorm1d ([N, C] and [N, C, L]) and BatchNorm2d, training and eval", function()
    assert.is_true(check_module(nn.BatchNorm1d(3), lt.randn(6, 3), { rtol = 2e-2, atol = 2e-3 }))
    assert.is_true(check_module(nn.BatchNorm1d(2), lt.randn(3, 2, 4), { rtol = 2e-2, atol = 2e-3 }))
    assert.is_true(check_module(nn.BatchNorm2d(2), lt.randn(2, 2, 3, 3), { rtol = 2e-2, atol = 2e-3 }))
    local bn = nn.BatchNorm2d(2)
    bn.running_mean:copy_(lt.tensor { 0.3, -0.2 })
    bn.running_var:copy_(lt.tensor { 1.5, 0.7 })
    bn:eval()
    assert.is_true(check_module(bn, lt.randn(2, 2, 3, 3)))
  end)

  it("LayerNorm over the last dim and over the last two dims", function()
    assert.is_true(check_module(nn.LayerNorm(5), lt.randn(3, 5), { rtol = 2e-2, atol = 2e-3 }))
    assert.is_true(check_module(nn.LayerNorm({ 3, 4 }), lt.randn(2, 3, 4), { rtol = 2e-2, atol = 2e-3 }))
  end)

  it("Embedding: weight gradient with repeated indices", function()
    local e = nn.Embedding(6, 3)
    local idx = lt.tensor({ { 1, 4, 4 }, { 6, 2, 4 } }, "int64")
    assert.is_true(gradcheck(function(w) e.weight = w; return e(idx) end, { e.weight }))
  end)

  it("LSTM: input, weights and biases, and the initial state", function()
    local m = nn.LSTM(3, 4)
    assert.is_true(check_module(m, lt.randn(3, 2, 3)))
    local h0, c0 = lt.randn(1, 2, 4), lt.randn(1, 2, 4)
    assert.is_true(gradcheck(function(x, h, c) return (m(x, { h, c })) end, { lt.randn(3, 2, 3), h0, c0 }))
    -- h_n and c_n carry gradient too
    assert.is_true(gradcheck(function(x) local _, s = m(x); return s[1] + s[2] * 2 end, { lt.randn(3, 2, 3) }))
  end)

  it("Sequential: a small conv net end to end", function()
    local net = nn.Sequential { nn.Conv2d(1, 2, 3, { padding = 1 }), nn.Tanh(), nn.AvgPool2d(2), nn.Flatten(),
      nn.Linear(8, 3) }
    assert.is_true(check_module(net, lt.randn(2, 1, 4, 4)))
  end)
end)

describe("gradcheck of lt.F losses", function()
  before_each(function() lt.manual_seed(11) end)
  local t4 = function() return lt.tensor({ 2, 5, 1, 3 }, "int64") end

  it("cross_entropy: every reduction, ignore_index, label_smoothing, class weights, [N, C, d] input", function()
    local x = lt.randn(4, 5)
    for _, red in ipairs { "mean", "sum", "none" } do
      assert.is_true(gradcheck(function(a) return F.cross_entropy(a, t4(), { reduction = red }) end, { x }))
      assert.is_true(gradcheck(function(a) return F.cross_entropy(a, t4(), { reduction = red, ignore_index = 5 }) end, { x }))
      assert.is_true(gradcheck(function(a)
        return F.cross_entropy(a, t4(), { reduction = red, label_smoothing = 0.2 })
      end, { x }))
      local w = lt.tensor { 0.5, 1, 2, 1.5, 0.7 }
      assert.is_true(gradcheck(function(a)
        return F.cross_entropy(a, t4(), { reduction = red, weight = w, label_smoothing = 0.1, ignore_index = 1 })
      end, { x }))
    end
    local t3 = lt.tensor({ { 1, 3, 2 }, { 3, 3, 1 } }, "int64")
    assert.is_true(gradcheck(function(a) return F.cross_entropy(a, t3) end, { lt.randn(2, 3, 3) }))
  end)

  it("nll_loss: mean with weights and ignore_index, none", function()
    local x = lt.randn(4, 5):log_softmax(2)
    local w = lt.tensor { 0.5, 1, 2, 1.5, 0.7 }
    assert.is_true(gradcheck(function(a) return F.nll_loss(a, t4(), { weight = w, ignore_index = 3 }) end, { x }))
    assert.is_true(gradcheck(function(a) return F.nll_loss(a, t4(), "none") end, { x }))
  end)

  it("mse_loss and l1_loss: gradients of input and target", function()
    local x, y = lt.randn(3, 4), lt.randn(3, 4)
    for _, red in ipairs { "mean", "sum", "none" } do
      assert.is_true(gradcheck(function(a, b) return F.mse_loss(a, b, red) end, { x, y }))
    end
    local d = away_from_zero(3, 4)
    for _, red in ipairs { "mean", "sum", "none" } do
      assert.is_true(gradcheck(function(a, b) return F.l1_loss(a, b, { reduction = red }) end, { y + d, y }))
    end
  end)

  it("binary_cross_entropy_with_logits: soft targets, pos_weight, gradients of input and target", function()
    local x, y = lt.randn(3, 4) * 3, lt.rand(3, 4)
    local pw = lt.tensor { 0.5, 1, 2, 3 }
    for _, red in ipairs { "mean", "sum", "none" } do
      assert.is_true(gradcheck(function(a, b) return F.binary_cross_entropy_with_logits(a, b, red) end, { x, y }))
      assert.is_true(gradcheck(function(a, b)
        return F.binary_cross_entropy_with_logits(a, b, { reduction = red, pos_weight = pw })
      end, { x, y }))
    end
  end)

  it("functional conv2d, pools, batch_norm, layer_norm, dropout", function()
    assert.is_true(gradcheck(function(x, w, b) return F.conv2d(x, w, b, { stride = 2, padding = 1 }) end,
      { lt.randn(1, 2, 5, 5), lt.randn(3, 2, 3, 3), lt.randn(3) }))
    assert.is_true(gradcheck(function(x) return F.max_pool2d(x, 2) end, { distinct(1, 1, 4, 4) }))
    assert.is_true(gradcheck(function(x) return F.avg_pool2d(x, 2, 1) end, { lt.randn(1, 1, 3, 3) }))
    assert.is_true(gradcheck(function(x, w, b) return F.batch_norm(x, nil, nil, w, b, true) end,
      { lt.randn(5, 3), lt.randn(3), lt.randn(3) }, { rtol = 2e-2, atol = 2e-3 }))
    assert.is_true(gradcheck(function(x, w, b) return F.layer_norm(x, 4, w, b) end,
      { lt.randn(3, 4), lt.randn(4), lt.randn(4) }, { rtol = 2e-2, atol = 2e-3 }))
    assert.is_true(gradcheck(function(x) return F.dropout(x, 0.5, true) end, { lt.randn(3, 4) }))
  end)
end)
