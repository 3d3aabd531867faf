-- tests/vision_spec.lua — the vision modules (Conv1d, Conv2d groups/dilation/padding modes, ConvTranspose2d, 1-d
-- and 2-d pools with ceil_mode, adaptive pools, Upsample, GroupNorm, InstanceNorm, Dropout2d): PyTorch 1.13
-- fixtures (tests/fixtures/vision.json from gen_vision.py), finite-difference gradchecks of every new kernel,
-- state_dict names and the error messages.
local lt = require "lutra"
local X = require "tests.helpers.nn_fixtures"
local gradcheck = require "tests.helpers.gradcheck"
local nn, F = lt.nn, lt.F

local function err_of(fn, ...)
  local ok, e = pcall(fn, ...)
  assert(not ok, "expected an error")
  return tostring(e)
end

describe("vision modules against PyTorch fixtures (tests/fixtures/vision.json)", function()
  for _, case in ipairs(X.load("vision.json")) do
    it("matches " .. case.name .. ": output, gradients" .. (case.buffers_after and ", running stats" or ""), function()
      local m = X.build_module(case)
      if case.mode == "eval" then m:eval() else m:train() end
      for name, p in pairs(case.params) do m[name] = X.tensor(p):requires_grad(true) end
      for name, b in pairs(case.buffers or {}) do m[name] = X.tensor(b) end
      local x = X.tensor(case.input):requires_grad(true)
      local out = m(x)
      X.check("output", out, case.output)
      out:backward(X.tensor(case.grad_output))
      -- gradients: absolute floor 3e-6 (float32 sums of up to a few hundred products, e.g. a weight gradient)
      X.check("grad_input", x.grad, case.grad_input, 1e-5, 3e-6)
      for name, g in pairs(case.grad_params) do X.check("grad of " .. name, m[name].grad, g, 1e-5, 3e-6) end
      for name, b in pairs(case.buffers_after or {}) do X.check("buffer " .. name, m[name], b) end
    end)
  end
end)

describe("vision kernels: finite-difference gradients", function()
  local V = require("lutra.core")._vision
  -- the output and the gradients of two paths agree: each pair { what, got, want, absolute tolerance }
  local function same(checks)
    for _, c in ipairs(checks) do
      X.check(c[1], c[2], { shape = c[3]:shape(), data = c[3]:flatten():tolist() }, 1e-4, c[4])
    end
  end
  before_each(function() lt.manual_seed(17) end)

  it("grouped, dilated, strided conv2d in input, weight and bias", function()
    assert.is_true(gradcheck(function(x, w, b) return V.conv2d(x, w, b, 2, 1, 1, 2, 2, 1, 2) end,
      { lt.randn(2, 4, 6, 5), lt.randn(6, 2, 3, 2), lt.randn(6) }))
  end)

  it("depthwise conv2d with padding larger than the dilated reach", function()
    assert.is_true(gradcheck(function(x, w, b) return V.conv2d(x, w, b, 1, 1, 3, 2, 2, 2, 3) end,
      { lt.randn(1, 3, 4, 5), lt.randn(3, 1, 2, 3), lt.randn(3) }))
  end)

  it("the direct depthwise kernel (nn_conv_depthwise.c): strides, padding, dilation, channel multiplier", function()
    -- V.conv2d(x, w, b, sh, sw, ph, pw, dh, dw, groups); one input channel per group takes the direct kernel
    assert.is_true(gradcheck(function(x, w, b) return V.conv2d(x, w, b, 2, 1, 1, 2, 2, 1, 3) end,
      { lt.randn(2, 3, 7, 6), lt.randn(6, 1, 3, 3), lt.randn(6) }))
    assert.is_true(gradcheck(function(x, w) return V.conv2d(x, w, nil, 1, 3, 0, 1, 1, 2, 2) end,
      { lt.randn(1, 2, 5, 9), lt.randn(2, 1, 2, 3) }))
    -- a depthwise transposed convolution runs the same kernels as its adjoint's passes
    assert.is_true(gradcheck(function(x, w, b) return V.conv_transpose2d(x, w, b, 2, 1, 1, 0, 1, 0, 1, 2, 3) end,
      { lt.randn(2, 3, 3, 4), lt.randn(3, 1, 3, 2), lt.randn(3) }))
  end)

  it("the depthwise kernel on the pool matches one dense convolution per channel", function()
    local threads = lt.get_num_threads()
    lt.set_num_threads(2)
    local C, M = 12, 2
    local x, w, b = lt.randn(4, C, 23, 21), lt.randn(C * M, 1, 3, 3), lt.randn(C * M)
    local gy = lt.randn(4, C * M, 12, 11)
    local xd, wd = x:clone():requires_grad(true), w:clone():requires_grad(true)
    local y = V.conv2d(xd, wd, b, 2, 2, 1, 1, 1, 1, C)
    y:backward(gy)
    local xr, wr = x:clone():requires_grad(true), w:clone():requires_grad(true)
    local parts = {}
    for o = 1, C * M do
      local c = math.floor((o - 1) / M) + 1
      parts[o] = F.conv2d(xr:narrow(2, c, 1), wr:narrow(1, o, 1), b:narrow(1, o, 1), { stride = 2, padding = 1 })
    end
    local yr = lt.cat(parts, 2)
    yr:backward(gy)
    lt.set_num_threads(threads)
    same { { "output", y, yr, 1e-5 }, { "grad_input", xd.grad, xr.grad, 1e-5 },
      { "grad_weight", wd.grad, wr.grad, 1e-4 } }
  end)

  it("grouped conv2d in chunks of items (the last one short) matches one dense convolution per group", function()
    -- planes of 400 columns, col rows 24*3*3: 3 items per chunk (nn_conv_general.c), so chunks of 3 and 2
    local x, w, b = lt.randn(5, 48, 20, 20), lt.randn(6, 24, 3, 3), lt.randn(6)
    local gy = lt.randn(5, 6, 20, 20)
    local xg, wg = x:clone():requires_grad(true), w:clone():requires_grad(true)
    local y = V.conv2d(xg, wg, b, 1, 1, 1, 1, 1, 1, 2)
    y:backward(gy)
    local xr, wr = x:clone():requires_grad(true), w:clone():requires_grad(true)
    local yr = lt.cat({ F.conv2d(xr:narrow(2, 1, 24), wr:narrow(1, 1, 3), b:narrow(1, 1, 3), { padding = 1 }),
      F.conv2d(xr:narrow(2, 25, 24), wr:narrow(1, 4, 3), b:narrow(1, 4, 3), { padding = 1 }) }, 2)
    yr:backward(gy)
    same { { "output", y, yr, 1e-4 }, { "grad_input", xg.grad, xr.grad, 1e-4 },
      { "grad_weight", wg.grad, wr.grad, 1e-2 } }
  end)

  it("one group of one channel takes im2col + GEMM: conv_transpose2d to 1 channel (k4 s2), a dilated conv of 1", function()
    -- V.conv_transpose2d(x, w, b, sh, sw, ph, pw, oph, opw, dh, dw, groups)
    assert.is_true(gradcheck(function(x, w, b) return V.conv_transpose2d(x, w, b, 2, 2, 1, 1, 0, 0, 1, 1, 1) end,
      { lt.randn(2, 3, 4, 3), lt.randn(3, 1, 4, 4), lt.randn(1) }))
    assert.is_true(gradcheck(function(x, w, b) return V.conv2d(x, w, b, 1, 2, 2, 1, 2, 2, 1) end,
      { lt.randn(2, 1, 7, 6), lt.randn(4, 1, 3, 3), lt.randn(4) }))
  end)

  it("conv_transpose2d with groups, dilation, stride and output_padding", function()
    assert.is_true(gradcheck(function(x, w, b) return V.conv_transpose2d(x, w, b, 2, 3, 1, 0, 1, 2, 1, 1, 2) end,
      { lt.randn(2, 4, 3, 2), lt.randn(4, 3, 3, 2), lt.randn(6) }))
    assert.is_true(gradcheck(function(x, w) return V.conv_transpose2d(x, w, nil, 1, 1, 1, 1, 0, 1, 2, 2, 1) end,
      { lt.randn(1, 2, 3, 4), lt.randn(2, 3, 3, 3) }))
  end)

  it("conv1d through F with padding 'same' and circular padding", function()
    assert.is_true(gradcheck(function(x, w, b) return F.conv1d(x, w, b, { padding = "same", dilation = 2 }) end,
      { lt.randn(2, 2, 7), lt.randn(3, 2, 4), lt.randn(3) }))
    local m = nn.Conv1d(2, 2, 3, { padding = 2, padding_mode = "circular" })
    assert.is_true(gradcheck(function(x, w) m.weight = w; return m(x) end, { lt.randn(1, 2, 5), m.weight:detach() }))
  end)

  it("pools in ceil mode, the last window partly in the padding", function()
    local x = lt.randperm(2 * 2 * 5 * 7):float():reshape(2, 2, 5, 7) / 10
    assert.is_true(gradcheck(function(t) return F.max_pool2d(t, 2, { stride = 2, padding = 1, ceil_mode = true }) end,
      { x }))
    assert.is_true(gradcheck(function(t) return F.avg_pool2d(t, 3, { stride = 2, padding = 1, ceil_mode = true,
      count_include_pad = false }) end, { lt.randn(2, 2, 6, 7) }))
    assert.is_true(gradcheck(function(t) return F.avg_pool1d(t, 3, { stride = 2, padding = 1, ceil_mode = true }) end,
      { lt.randn(2, 2, 8) }))
  end)

  it("adaptive average and max pools over windows that overlap", function()
    assert.is_true(gradcheck(function(t) return V.adaptive_avg_pool2d(t, 3, 4) end, { lt.randn(2, 2, 7, 5) }))
    local x = lt.randperm(2 * 2 * 7 * 9):float():reshape(2, 2, 7, 9) / 10
    assert.is_true(gradcheck(function(t) return (V.adaptive_max_pool2d(t, 3, 4)) end, { x }))
  end)

  it("adaptive average pool over windows that tile the plane (global, 2x3 of 6x9): the means and their gradient", function()
    -- the tiled backward writes each cell once; the forward sums whole rows at once when a window spans them
    assert.is_true(gradcheck(function(t) return V.adaptive_avg_pool2d(t, 1, 1) end, { lt.randn(2, 3, 5, 7) }))
    assert.is_true(gradcheck(function(t) return V.adaptive_avg_pool2d(t, 2, 3) end, { lt.randn(2, 2, 6, 9) }))
    local x = lt.randn(2, 3, 6, 9)
    local y = V.adaptive_avg_pool2d(x, 2, 3)
    local ref = x:reshape(2, 3, 2, 3, 3, 3):mean(6):mean(4) -- [2 x 3 x 2 x 3]: rows then columns of each window
    assert.is_true(y:allclose(ref, 1e-6, 1e-6))
    assert.is_true(V.adaptive_avg_pool2d(x, 1, 1):flatten():allclose(x:reshape(6, 54):mean(2), 1e-6, 1e-6))
  end)

  it("group_norm in input, weight and bias; instance norm tracking its running stats", function()
    assert.is_true(gradcheck(function(x, w, b) return V.group_norm(x, 2, w, b, 1e-5) end,
      { lt.randn(2, 6, 3, 2), lt.randn(6), lt.randn(6) }, { rtol = 2e-2 }))
    assert.is_true(gradcheck(function(x) return V.group_norm(x, 3, nil, nil, 1e-5) end, { lt.randn(2, 3, 5) },
      { rtol = 2e-2 }))
  end)

  it("dropout2d: the gradient is the channel mask", function()
    assert.is_true(gradcheck(function(x) return F.dropout2d(x, 0.5, true) end, { lt.randn(3, 4, 2, 2) }))
  end)
end)

describe("vision modules: behaviour", function()
  it("Dropout2d zeroes whole channels, scales the rest by 1/(1-p), and is the identity in eval", function()
    lt.manual_seed(3)
    local x = lt.ones(8, 16, 3, 3)
    local m = nn.Dropout2d(0.25)
    local y = m(x)
    local sums = y:sum(4):sum(3):flatten():tolist()
    local zeros = 0
    for _, s in ipairs(sums) do
      assert.is_true(math.abs(s) < 1e-6 or math.abs(s - 9 / 0.75) < 1e-4, "channel sum " .. s)
      if s == 0 then zeros = zeros + 1 end
    end
    assert.is_true(zeros > 10 and zeros < 60, "dropped " .. zeros .. " of 128 channels")
    m:eval()
    assert.are.equal(x, m(x))
    lt.manual_seed(3)
    assert.is_true(F.dropout2d(x, 0.25):allclose(y, 0, 0))
  end)

  it("state_dict names and shapes are PyTorch's", function()
    local function keys(m)
      local t = {}
      for k, v in pairs(m:state_dict()) do t[#t + 1] = k .. v:shape_str() end
      table.sort(t)
      return table.concat(t, " ")
    end
    assert.are.equal("bias[6] weight[6 x 2 x 3 x 3]", keys(nn.Conv2d(4, 6, 3, { groups = 2 })))
    assert.are.equal("bias[8] weight[8 x 1 x 5]", keys(nn.Conv1d(4, 8, 5, { groups = 4 })))
    assert.are.equal("bias[6] weight[4 x 3 x 3 x 2]", keys(nn.ConvTranspose2d(4, 6, { 3, 2 }, { groups = 2 })))
    assert.are.equal("bias[6] weight[6]", keys(nn.GroupNorm(3, 6)))
    assert.are.equal("", keys(nn.InstanceNorm2d(3)))
    assert.are.equal("bias[3] num_batches_tracked[] running_mean[3] running_var[3] weight[3]",
      keys(nn.InstanceNorm2d(3, { affine = true, track_running_stats = true })))
  end)

  it("InstanceNorm counts its training batches in num_batches_tracked", function()
    local m = nn.InstanceNorm2d(2, { track_running_stats = true })
    m(lt.randn(2, 2, 3, 3))
    m(lt.randn(2, 2, 3, 3))
    m:eval()
    m(lt.randn(2, 2, 3, 3))
    assert.are.equal(2, m.num_batches_tracked:item())
    assert.are.equal("int64", m.num_batches_tracked:dtype())
  end)

  it("initialises conv weights like PyTorch: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in per group", function()
    lt.manual_seed(5)
    local w = nn.Conv2d(8, 4, 3, { groups = 4 }).weight -- fan_in 2*3*3
    assert.is_true(w:abs():max():item() <= 1 / math.sqrt(18) + 1e-7)
    assert.is_true(w:abs():max():item() > 0.8 / math.sqrt(18))
    local t = nn.ConvTranspose2d(2, 6, 3, { groups = 2 }).weight -- fan_in (6/2)*3*3
    assert.is_true(t:abs():max():item() <= 1 / math.sqrt(27) + 1e-7)
  end)

  it("a Conv2d without dilation or groups keeps the fused Conv2d + ReLU op; a grouped one does not fuse wrongly", function()
    local x = lt.randn(2, 4, 5, 5)
    local seq = nn.Sequential { nn.Conv2d(4, 4, 3), nn.ReLU() }
    assert.are.equal("conv2d_relu", seq(x):grad_fn())
    local g = nn.Conv2d(4, 4, 3, { groups = 2 })
    local y = nn.Sequential { g, nn.ReLU() }(x)
    assert.is_true(y:allclose(g(x):relu(), 0, 0))
  end)
end)

describe("ConvTranspose2d with an output_size", function()
  it("picks the output_padding PyTorch picks: the same output as the output_padding option", function()
    lt.manual_seed(11)
    local m = nn.ConvTranspose2d(2, 3, 3, { stride = { 2, 3 }, padding = 1 })
    local x = lt.randn(2, 2, 4, 5)
    local y = m(x, { 8, 15 })
    assert.are.equal("[2 x 3 x 8 x 15]", y:shape_str())
    local ref = lt.F.conv_transpose2d(x, m.weight, m.bias, { stride = { 2, 3 }, padding = 1, output_padding = { 1, 2 } })
    assert.is_true(y:allclose(ref, 0, 0))
    assert.are.equal("[2 x 3 x 7 x 13]", m(x, { 2, 3, 7, 13 }):shape_str())
    assert.matches("requested output size 9 is not in 7..8 for dim 3 (input [2 x 2 x 4 x 5])", err_of(m, x, { 9, 13 }),
      1, true)
  end)
end)

describe("dilated max pooling", function()
  it("has finite-difference gradients (strided, padded, ceil mode, 1-d)", function()
    local x = lt.randperm(2 * 2 * 9 * 8):float():reshape(2, 2, 9, 8) / 10
    assert.is_true(gradcheck(function(t) return F.max_pool2d(t, 3, { stride = 2, padding = 1, dilation = { 2, 3 },
      ceil_mode = true }) end, { x }))
    assert.is_true(gradcheck(function(t) return nn.MaxPool1d(2, { dilation = 3 })(t) end,
      { lt.randperm(2 * 3 * 11):float():reshape(2, 3, 11) / 10 }))
  end)

  it("gives -inf and no gradient for a window that misses the input (as PyTorch)", function()
    local x = lt.randn(1, 1, 3, 3):requires_grad(true)
    local y = F.max_pool2d(x, 2, { stride = 1, padding = 1, dilation = 4 })
    assert.are.same({ 1, 1, 1, 1 }, y:shape())
    assert.are.equal(-math.huge, y:item())
    y:backward(lt.ones(1, 1, 1, 1))
    assert.are.same({ 0, 0, 0, 0, 0, 0, 0, 0, 0 }, x.grad:flatten():tolist())
  end)

  it("names a bad dilation and a dilated kernel larger than the input", function()
    assert.matches("MaxPool2d: dilation must be an integer >= 1, got 0", err_of(nn.MaxPool2d, 2, { dilation = 0 }),
      1, true)
    assert.matches("max_pool2d: kernel 6x6 is larger than the padded input 3x3 (input [1 x 1 x 3 x 3])",
      err_of(F.max_pool2d, lt.randn(1, 1, 3, 3), 2, { dilation = 5 }), 1, true)
    local m = nn.MaxPool2d(2, { dilation = 3 })
    assert.matches("MaxPool2d(kernel_size=2, stride=2, dilation=3): input [1 x 1 x 3 x 3] is smaller than the "
      .. "kernel 4x4", err_of(function() return m(lt.randn(1, 1, 3, 3)) end), 1, true)
  end)
end)

describe("adaptive pools: an output_size entry nil or false keeps that dim (PyTorch's None)", function()
  it("pools {nil, 3} as {H, 3} and {4, false} as {4, W}, in the modules and in F", function()
    lt.manual_seed(3)
    local x = lt.randn(2, 3, 5, 7)
    local a = nn.AdaptiveAvgPool2d({ nil, 3 })
    assert.are.equal("AdaptiveAvgPool2d(output_size=[nil x 3])", tostring(a))
    assert.are.same({ 2, 3, 5, 3 }, a(x):shape())
    assert.are.same(F.adaptive_avg_pool2d(x, { 5, 3 }):flatten():tolist(), a(x):flatten():tolist())
    local m = nn.AdaptiveMaxPool2d({ 4, false })
    assert.are.same({ 3, 4, 7 }, m(x[1]):shape())
    assert.are.same(F.adaptive_max_pool2d(x, { 4, 7 }):flatten():tolist(), m(x):flatten():tolist())
    assert.are.same({ 2, 3, 5, 7 }, F.adaptive_max_pool2d(x, { false, false }):shape())
  end)

  it("names a list of the wrong length or keys", function()
    local want = "AdaptiveAvgPool2d: output_size must be a number or a list of 2 (nil or false keeps the input's size: "
    assert.are.equal(want .. "{nil, 7}, {7, false}), got a list of 1",
      err_of(nn.AdaptiveAvgPool2d, { 7, nil }):match("AdaptiveAvgPool2d: .*"))
    assert.are.equal(want .. "{nil, 7}, {7, false}), got other keys",
      err_of(nn.AdaptiveAvgPool2d, { 7, 2, 3 }):match("AdaptiveAvgPool2d: .*"))
    assert.matches("adaptive_max_pool2d: output_size must be an integer >= 1, got 0",
      err_of(F.adaptive_max_pool2d, lt.randn(1, 1, 4, 4), { false, 0 }), 1, true)
  end)
end)

describe("vision modules: errors", function()
  it("names channels that groups do not divide", function()
    assert.matches("Conv2d: in_channels 5 must be divisible by groups 2", err_of(nn.Conv2d, 5, 4, 3, { groups = 2 }),
      1, true)
    assert.matches("Conv1d: out_channels 3 must be divisible by groups 2", err_of(nn.Conv1d, 4, 3, 3, { groups = 2 }),
      1, true)
    assert.matches("ConvTranspose2d: in_channels 3 must be divisible by groups 2",
      err_of(nn.ConvTranspose2d, 3, 4, 3, { groups = 2 }), 1, true)
    assert.matches("GroupNorm: num_channels 6 must be divisible by num_groups 4", err_of(nn.GroupNorm, 4, 6), 1, true)
    assert.matches("conv2d: input channels 5 are not divisible by groups 2 (input [1 x 5 x 4 x 4])",
      err_of(F.conv2d, lt.randn(1, 5, 4, 4), lt.randn(2, 2, 3, 3), nil, { groups = 2 }), 1, true)
    assert.matches("group_norm: channels 6 are not divisible by num_groups 4 (input [2 x 6 x 3])",
      err_of(F.group_norm, lt.randn(2, 6, 3), 4), 1, true)
  end)

  it("names a norm's weight or bias of the wrong size, with the input's shape", function()
    assert.matches("group_norm: weight must be [6] (one per channel), got [4] (input [2 x 6 x 3])",
      err_of(F.group_norm, lt.randn(2, 6, 3), 3, lt.ones(4)), 1, true)
    assert.matches("group_norm: bias must be [6] (one per channel), got [2 x 3] (input [2 x 6 x 3])",
      err_of(F.group_norm, lt.randn(2, 6, 3), 3, lt.ones(6), lt.zeros(2, 3)), 1, true)
    assert.matches("batch_norm: weight must be [3] (one per channel), got [2] (input [4 x 3])",
      err_of(F.batch_norm, lt.randn(4, 3), nil, nil, lt.ones(2), nil, true), 1, true)
  end)

  it("says when the output would be empty, with the shapes", function()
    assert.matches("Conv2d(2 -> 2, kernel_size=3, dilation=3): output size would be <= 0: input [1 x 2 x 6 x 6] is " ..
      "smaller than the (dilated) kernel 3", err_of(nn.Conv2d(2, 2, 3, { dilation = 3 }), lt.randn(1, 2, 6, 6)), 1, true)
    assert.matches("conv2d: output size would be <= 0: dilated kernel 7x3 is larger than the padded input 6x6 " ..
      "(input [1 x 2 x 6 x 6], weight [2 x 1 x 3 x 3])",
      err_of(F.conv2d, lt.randn(1, 2, 6, 6), lt.randn(2, 1, 3, 3), nil, { dilation = { 3, 1 }, groups = 2 }), 1, true)
    assert.matches("conv_transpose2d: output size -2x3 is <= 0 (input [1 x 2 x 1 x 2], weight [2 x 2 x 2 x 2], " ..
      "stride 1x1, padding 2x0, dilation 1x1)",
      err_of(F.conv_transpose2d, lt.randn(1, 2, 1, 2), lt.randn(2, 2, 2, 2), nil, { padding = { 2, 0 } }), 1, true)
    assert.matches("MaxPool1d(kernel_size=5, stride=5): input [1 x 2 x 3] is smaller than the kernel 5",
      err_of(nn.MaxPool1d(5), lt.randn(1, 2, 3)), 1, true)
    assert.matches("adaptive_avg_pool2d: output_size must be an integer >= 1, got 0",
      err_of(F.adaptive_avg_pool2d, lt.randn(1, 1, 3, 3), 0), 1, true)
  end)

  it("rejects unknown options and bad option values by name", function()
    assert.matches("Conv2d: unknown option 'dilations'", err_of(nn.Conv2d, 2, 2, 3, { dilations = 2 }), 1, true)
    assert.matches("MaxPool2d: unknown option 'ceilmode'", err_of(nn.MaxPool2d, 2, { ceilmode = true }), 1, true)
    assert.matches("Upsample: unknown option 'factor'", err_of(nn.Upsample, { factor = 2 }), 1, true)
    assert.matches("InstanceNorm2d: unknown option 'track'", err_of(nn.InstanceNorm2d, 2, { track = true }), 1, true)
    assert.matches('Conv2d: padding_mode must be "zeros", "reflect", "replicate" or "circular", got "mirror"',
      err_of(nn.Conv2d, 2, 2, 3, { padding_mode = "mirror" }), 1, true)
    assert.matches('Conv2d: padding must be a number, a list, "same" or "valid", got "full"',
      err_of(nn.Conv2d, 2, 2, 3, { padding = "full" }), 1, true)
    assert.matches('Conv1d: padding="same" is not supported for strided convolutions (stride [2])',
      err_of(nn.Conv1d, 2, 2, 3, { padding = "same", stride = 2 }), 1, true)
    assert.matches("ConvTranspose2d: output_padding [2 x 2] must be smaller than either stride [2 x 2] or dilation " ..
      "[1 x 1]", err_of(nn.ConvTranspose2d, 2, 2, 3, { stride = 2, output_padding = 2 }), 1, true)
    assert.matches("Upsample: give exactly one of size and scale_factor", err_of(nn.Upsample, {}), 1, true)
    assert.matches("Dropout2d: p must be a probability between 0 and 1, got 2", err_of(nn.Dropout2d, 2), 1, true)
  end)

  it("names the input whose channels or rank do not fit", function()
    assert.matches("input has 3 channels, expected 4 (input [2 x 3 x 5])", err_of(nn.Conv1d(4, 2, 3), lt.randn(2, 3, 5)),
      1, true)
    assert.matches("input must be [batch x channels x height x width] (or [channels x height x width]), got [5 x 5]",
      err_of(nn.ConvTranspose2d(2, 2, 3), lt.randn(5, 5)), 1, true)
    assert.matches("conv_transpose2d: input has 3 channels, expected 2",
      err_of(F.conv_transpose2d, lt.randn(1, 3, 4, 4), lt.randn(2, 2, 3, 3)), 1, true)
    assert.matches("input must be [batch x channels x length] (or [channels x length]), got [1 x 2 x 3 x 4]",
      err_of(nn.AdaptiveMaxPool1d(2), lt.randn(1, 2, 3, 4)), 1, true)
  end)
end)
