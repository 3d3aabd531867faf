-- infer_layers_spec.lua — lt.infer on Mish/Hardswish/Hardsigmoid, GroupNorm, InstanceNorm1d/2d, the adaptive
-- pools, ConvTranspose2d, and LSTM/GRU/RNN over a whole sequence (bidirectional, proj_size): each against
-- model(x), no allocation per call, the plain-Lua export under luajit/lua5.1/lua5.4, and the refusals that remain.
local lt = require "lutra"
local H = require "helpers.infer"(assert)
local nn = lt.nn

local function first(m) return function(x) return (m(x)) end end

describe("lt.infer on more layers", function()
  setup(function() lt.manual_seed(11) end)

  it("matches the Mish, Hardswish and Hardsigmoid modules (both sides of their kinks)", function()
    local m = nn.Sequential { nn.Linear(4, 8), nn.Mish(), nn.Linear(8, 8), nn.Hardswish(), nn.Linear(8, 8),
      nn.Hardsigmoid() }
    H.check(m, lt.randn(3, 4) * 6, { x2 = lt.randn(3, 4) * 30 })
  end)

  it("matches GroupNorm and InstanceNorm (input statistics, and eval's running statistics)", function()
    H.check(nn.GroupNorm(2, 4), lt.randn(2, 4, 3, 5) * 3 + 1, { x2 = lt.randn(2, 4, 3, 5) })
    H.check(nn.GroupNorm(3, 6, { affine = false }), lt.randn(2, 6, 7))
    local g = nn.GroupNorm(2, 4)
    lt.no_grad(function() g.weight:normal_() g.bias:normal_() end)
    H.check(g, lt.randn(1, 4, 5))
    H.check(nn.InstanceNorm1d(4, { affine = true }), lt.randn(2, 4, 7), { x2 = lt.randn(2, 4, 7) })
    H.check(nn.InstanceNorm2d(3), lt.randn(3, 5, 4))
    local tracked = nn.InstanceNorm2d(4, { track_running_stats = true, affine = true })
    for _ = 1, 3 do tracked(lt.randn(3, 4, 5, 5) * 2 + 1) end
    local plan = H.check(tracked, lt.randn(2, 4, 5, 5))
    assert.equal("batchnorm", plan._steps[1].op)
  end)

  it("matches AdaptiveAvgPool1d/2d and AdaptiveMaxPool1d/2d, windows that divide the input or not", function()
    H.check(nn.AdaptiveAvgPool2d({ 3, 2 }), lt.randn(2, 3, 7, 5), { x2 = lt.randn(2, 3, 7, 5) })
    H.check(nn.AdaptiveAvgPool2d(1), lt.randn(1, 3, 4, 4))
    H.check(nn.AdaptiveMaxPool2d(3), lt.randn(2, 3, 7, 5))
    H.check(nn.AdaptiveAvgPool1d(4), lt.randn(2, 3, 10))
    H.check(nn.AdaptiveMaxPool1d(3), lt.randn(3, 10))
    H.check(nn.Sequential { nn.Conv2d(2, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2) },
      lt.randn(1, 2, 9, 9))
  end)

  it("matches ConvTranspose2d (stride, padding, output_padding, dilation, groups, no bias, unbatched)", function()
    H.check(nn.ConvTranspose2d(4, 6, 3, { stride = 2, padding = 1, output_padding = 1, groups = 2 }),
      lt.randn(2, 4, 5, 4), { x2 = lt.randn(2, 4, 5, 4) })
    H.check(nn.ConvTranspose2d(3, 2, { 2, 3 }, { stride = { 1, 2 }, padding = { 0, 1 }, dilation = 2, bias = false }),
      lt.randn(3, 5, 4))
  end)

  it("runs bidirectional LSTM, GRU and RNN over the whole sequence, batch first or not, from a zero state", function()
    for _, kind in ipairs { "LSTM", "GRU", "RNN" } do
      for _, bf in ipairs { true, false } do
        local m = nn[kind](5, 7, { num_layers = 2, bidirectional = true, batch_first = bf })
        local plan = H.check(m, lt.randn(3, 4, 5), { ref = first(m), x2 = lt.randn(3, 4, 5) })
        assert.is_nil(plan._stateful) -- each call is a sequence of its own
      end
    end
    local relu = nn.RNN(5, 7, { nonlinearity = "relu", bidirectional = true, bias = false })
    H.check(relu, lt.randn(6, 5), { ref = first(relu) }) -- unbatched
  end)

  it("runs LSTM with proj_size, one or two directions", function()
    local m = nn.LSTM(5, 7, { num_layers = 2, proj_size = 3 })
    H.check(m, lt.randn(4, 2, 5), { ref = first(m), x2 = lt.randn(4, 2, 5) })
    local bi = nn.LSTM(5, 7, { proj_size = 3, bidirectional = true, batch_first = true })
    H.check(bi, lt.randn(2, 4, 5), { ref = first(bi) })
    local one = nn.LSTM(5, 7, { proj_size = 2 }) -- one step, yet projected: a whole (one-step) sequence per call
    H.check(one, lt.randn(1, 3, 5), { ref = first(one), x2 = lt.randn(1, 3, 5) })
  end)

  it("allocates nothing per call", function()
    local x = lt.randn(1, 6, 5)
    local rnn = nn.LSTM(5, 7, { num_layers = 2, bidirectional = true, batch_first = true, proj_size = 3 })
    rnn:eval()
    assert.are.same(H.NONE, H.allocations(lt.infer.compile(rnn, x), x))
    local img = lt.randn(1, 2, 6, 6)
    local net = nn.Sequential { nn.ConvTranspose2d(2, 4, 3, { stride = 2 }), nn.GroupNorm(2, 4), nn.Mish(),
      nn.InstanceNorm2d(4), nn.Hardswish(), nn.AdaptiveMaxPool2d(3), nn.Hardsigmoid(), nn.AdaptiveAvgPool2d(2) }
    net:eval()
    assert.are.same(H.NONE, H.allocations(lt.infer.compile(net, img), img))
  end)

  it("exports them as plain Lua", function()
    H.check_export(nn.Sequential { nn.ConvTranspose2d(2, 4, 3, { stride = 2, padding = 1, groups = 2 }),
      nn.GroupNorm(2, 4), nn.Mish(), nn.InstanceNorm2d(4, { affine = true }), nn.Hardswish(), nn.AdaptiveMaxPool2d(3),
      nn.Hardsigmoid(), nn.AdaptiveAvgPool2d({ 2, 1 }) }, { lt.randn(1, 2, 4, 5), lt.randn(1, 2, 4, 5) }, "layers")
    for _, kind in ipairs { "LSTM", "GRU" } do
      local m = nn[kind](3, 4, { num_layers = 2, bidirectional = true, batch_first = true })
      H.check_export(m, { lt.randn(2, 5, 3), lt.randn(2, 5, 3) }, "bi" .. kind, first(m))
    end
    local p = nn.LSTM(3, 5, { proj_size = 2, bidirectional = true })
    H.check_export(p, { lt.randn(4, 3), lt.randn(4, 3) }, "proj", first(p))
  end)

  it("refuses what stays unsupported, naming the module", function()
    local err = H.error_of(lt.infer.compile, nn.AdaptiveMaxPool2d(2, { return_indices = true }), lt.randn(1, 1, 4, 4))
    assert.matches("model (AdaptiveMaxPool2d): return_indices gives two outputs; a plan returns one", err, 1, true)
    local Up = nn.Module:extend("Up")
    function Up:init() self.up = nn.ConvTranspose2d(2, 2, 3, { stride = 2 }) end
    function Up:forward(x) return self.up(x, { 8, 8 }) end
    err = H.error_of(lt.infer.compile, Up(), lt.randn(1, 2, 3, 3))
    assert.matches("model.up (ConvTranspose2d): is called with several arguments, which lt.infer cannot compile", err,
      1, true)
    local gn = nn.GroupNorm(2, 4)
    gn.weight = lt.randn(4, 2):select(2, 1)
    err = H.error_of(lt.infer.compile, gn, lt.randn(1, 4, 2))
    assert.matches("model (GroupNorm): lt.infer: GroupNorm: weight [4] is not contiguous", err, 1, true)
  end)
end)
