-- f64_conv_spec.lua — convolutions in float64 against torch 1.13 (tests/fixtures/f64_conv.json,
-- gen_f64_conv.py): F.conv1d, F.conv2d and F.conv_transpose2d over the shape classes the kernels take (stride 1
-- and 2, odd and even kernels, the stride-2 adjoint's paired taps and its dilated fallback, groups, depthwise,
-- padding "same"/"valid"), output and gradients to 1e-12; the same cases in float32 to float32's precision
-- (the kernels are one source for both dtypes); modules after m:double() on a DCGAN-shaped chain; float64
-- finite-difference gradchecks; a dtype mix refused naming both dtypes.
local lt = require "lutra"

local f64_ref = require "tests.helpers.f64_ref"
local gradcheck64 = require "tests.helpers.gradcheck64"
local tensor_of, check = f64_ref.tensor_of, f64_ref.check

local FIX = f64_ref.load("f64_conv")

-- lutra's call of a fixture case on (x, w, b)
local function call(c, x, w, b)
  local o = next(c.options) and c.options or nil
  if c.fn == "conv_transpose2d" then return lt.F.conv_transpose2d(x, w, b, o) end
  return lt.F[c.fn](x, w, b, o)
end

-- every element of got (float32) within tol * max(1, |ref|) of the fixture's
local function close32(what, got, ref, tol)
  assert.are.equal("float32", got:dtype(), what .. ": dtype")
  assert.are.same(ref.shape, got:shape(), what .. ": shape")
  local g = got:flatten():tolist()
  for i, r in ipairs(ref.data) do
    if not (math.abs(g[i] - r) <= tol * math.max(1, math.abs(r))) then
      error(string.format("%s: element %d is %.9g, torch %.17g", what, i, g[i], r), 2)
    end
  end
end

describe("float64 convolutions against torch 1.13 (f64_conv.json)", function()
  for _, c in ipairs(FIX.cases) do
    it(c.name, function()
      local x = tensor_of(c.x):requires_grad(true)
      local w = tensor_of(c.w):requires_grad(true)
      local b = c.b and tensor_of(c.b):requires_grad(true)
      local y = call(c, x, w, b)
      check("y", y, c.y)
      local loss = (y * tensor_of(c.gout)):sum()
      loss:backward()
      check("x.grad", x.grad, c.gx)
      check("w.grad", w.grad, c.gw)
      if b then check("b.grad", b.grad, c.gb) end
    end)
  end

  -- the float32 instantiation of the same kernels, on the same cases
  for _, c in ipairs(FIX.cases) do
    it(c.name .. " in float32", function()
      local x = tensor_of(c.x):float():requires_grad(true)
      local w = tensor_of(c.w):float():requires_grad(true)
      local b = c.b and tensor_of(c.b):float():requires_grad(true)
      local y = call(c, x, w, b)
      close32("y", y, c.y, 1e-5)
      local loss = (y * tensor_of(c.gout):float()):sum()
      loss:backward()
      close32("x.grad", x.grad, c.gx, 1e-5)
      close32("w.grad", w.grad, c.gw, 1e-5)
      if b then close32("b.grad", b.grad, c.gb, 1e-5) end
    end)
  end

  it("a DCGAN-shaped chain of modules after m:double(): Conv2d k4 s2, ReLU, ConvTranspose2d k4 s2, tanh", function()
    local d = FIX.dcgan
    local conv = lt.nn.Conv2d(3, 8, 4, 2, 1, { bias = false }):double()
    local convt = lt.nn.ConvTranspose2d(8, 3, 4, 2, 1):double()
    assert.are.equal("float64", conv.weight:dtype())
    assert.are.equal("float64", convt.bias:dtype())
    lt.no_grad(function()
      conv.weight:copy_(tensor_of(d.conv_w))
      convt.weight:copy_(tensor_of(d.convt_w))
      convt.bias:copy_(tensor_of(d.convt_b))
    end)
    local net = lt.nn.Sequential(conv, lt.nn.ReLU(), convt, lt.nn.Tanh())
    local x = tensor_of(d.x):requires_grad(true)
    local y = net(x)
    check("y", y, d.y)
    local loss = (y * tensor_of(d.gout)):sum()
    loss:backward()
    check("x.grad", x.grad, d.gx)
    check("conv.weight.grad", conv.weight.grad, d.conv_gw)
    check("convt.weight.grad", convt.weight.grad, d.convt_gw)
    check("convt.bias.grad", convt.bias.grad, d.convt_gb)
  end)

  it("Conv1d and a fused Conv2d + ReLU module in float64 match their functional forms", function()
    lt.manual_seed(3)
    local c1 = lt.nn.Conv1d(2, 3, 3, { padding = 1 }):double()
    local x1 = lt.randn(2, 2, 9):double()
    check("conv1d", c1(x1), { shape = { 2, 3, 9 }, data = lt.F.conv1d(x1, c1.weight, c1.bias, { padding = 1 })
      :flatten():tolist() })
    local c2 = lt.nn.Conv2d(2, 3, 3):double()
    local x2 = lt.randn(1, 2, 5, 5):double()
    local fused = lt.nn.Sequential(c2, lt.nn.ReLU())(x2)
    check("conv2d+relu", fused, { shape = { 1, 3, 3, 3 }, data = lt.F.conv2d(x2, c2.weight, c2.bias):relu()
      :flatten():tolist() })
  end)

  it("gradchecks in float64: conv2d stride 2 grouped, conv_transpose2d stride 2 with output_padding", function()
    lt.manual_seed(7)
    local x, w, b = lt.randn(1, 2, 5, 5):double(), lt.randn(4, 1, 3, 3):double(), lt.randn(4):double()
    gradcheck64(function(p) return lt.F.conv2d(p[1], p[2], p[3], { stride = 2, padding = 1, groups = 2 }) end,
      { x, w, b }, lt.randn(1, 4, 3, 3):double())
    local xt, wt, bt = lt.randn(1, 2, 3, 3):double(), lt.randn(2, 1, 3, 3):double(), lt.randn(1):double()
    gradcheck64(function(p)
      return lt.F.conv_transpose2d(p[1], p[2], p[3], { stride = 2, padding = 1, output_padding = 1 })
    end, { xt, wt, bt }, lt.randn(1, 1, 6, 6):double())
  end)

  -- float32 against the float64 path (nn_conv_general.c's im2col + dgemm, separate code) on the tuned kernel's
  -- stride-2 rows: AVX-512 ones up to 64 outputs wide, the plain loop past that (and on CPUs without AVX-512)
  it("float32 stride-2 convolutions (rows of 5, 33 and 70 outputs) agree with the float64 path", function()
    lt.manual_seed(11)
    for _, wid in ipairs({ 10, 66, 140 }) do
      local x, w, b = lt.randn(2, 3, 7, wid), lt.randn(4, 3, 4, 4), lt.randn(4)
      local g = lt.randn(2, 4, 3, wid / 2)
      local xs, ws = x:clone():requires_grad(true), w:clone():requires_grad(true)
      local y = lt.F.conv2d(xs, ws, b, { stride = 2, padding = 1 })
      local loss = (y * g):sum()
      loss:backward()
      local xd, wd = x:double():requires_grad(true), w:double():requires_grad(true)
      local yd = lt.F.conv2d(xd, wd, b:double(), { stride = 2, padding = 1, dilation = 1, groups = 1 })
      local loss64 = (yd * g:double()):sum()
      loss64:backward()
      for name, pair in pairs({ y = { y, yd }, gx = { xs.grad, xd.grad }, gw = { ws.grad, wd.grad } }) do
        local a, r = pair[1]:flatten():tolist(), pair[2]:flatten():tolist()
        for i = 1, #r do
          assert(math.abs(a[i] - r[i]) <= 1e-4 * math.max(1, math.abs(r[i])),
            string.format("width %d %s element %d: %.9g, float64 %.17g", wid, name, i, a[i], r[i]))
        end
      end
    end
  end)

  it("conv_transpose2d's input gradient is the same with and without the weight's (one shared unfold)", function()
    lt.manual_seed(12)
    local x, w, g = lt.randn(2, 3, 5, 5), lt.randn(3, 2, 4, 4), lt.randn(2, 2, 10, 10)
    local function grads(wgrad)
      local xs, ws = x:clone():requires_grad(true), w:clone():requires_grad(wgrad)
      local loss = (lt.F.conv_transpose2d(xs, ws, nil, { stride = 2, padding = 1 }) * g):sum()
      loss:backward()
      return xs.grad:tolist(), ws.grad
    end
    local both, gw = grads(true)
    local alone = grads(false)
    assert.are.same(alone, both)
    assert.is_not_nil(gw)
  end)

  it("refuses a float32/float64 mix naming both dtypes", function()
    local x64, w32 = lt.randn(1, 2, 5, 5):double(), lt.randn(3, 2, 3, 3)
    local ok, err = pcall(lt.F.conv2d, x64, w32)
    assert.is_false(ok)
    assert.matches("conv2d: input is float64 and weight is float32: both must have the same float dtype", err,
      1, true)
    ok, err = pcall(lt.F.conv2d, x64, w32:double(), lt.randn(3), { dilation = 2 })
    assert.is_false(ok)
    assert.matches("conv2d: input is float64, weight float64, bias float32: all must have the same float dtype",
      err, 1, true)
    ok, err = pcall(lt.F.conv_transpose2d, lt.randn(1, 3, 4, 4), lt.randn(3, 2, 3, 3):double())
    assert.is_false(ok)
    assert.matches("conv_transpose2d: input is float32 and weight is float64", err, 1, true)
  end)
end)
