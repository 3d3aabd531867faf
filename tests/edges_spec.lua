-- edges_spec: edge cases that a mutation run (tests/mutate, docs/contributing-mutation.md) found unpinned in
-- core/src/nn_*.c, ops_shape.c, ops_index.c, data_batch.c, lua/lutra/nn/, the LR schedulers, distributed.lua and
-- loggers.lua: smallest accepted sizes, one-sided options, exact error texts and the line they blame.
local lt = require "lutra"
local nn, F = lt.nn, lt.F

-- the error of f(), which must fail
local function err_of(f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error")
  return tostring(err)
end

describe("nn sizes and options", function()
  it("pools refuse padding above half the kernel on either side alone", function()
    local x = lt.zeros(1, 1, 4, 4)
    for _, fn in ipairs { "max_pool2d", "avg_pool2d" } do
      assert.are.equal(fn .. ": padding 2x0 must be at most half the kernel 2x2", err_of(F[fn], x, 2, 2, { 2, 0 }))
      assert.are.equal(fn .. ": padding 0x2 must be at most half the kernel 2x2", err_of(F[fn], x, 2, 2, { 0, 2 }))
      assert.are.same({ 1, 1, 3, 3 }, F[fn](x, 2, 2, { 1, 1 }):shape()) -- exactly half is fine
    end
  end)

  it("max_pool2d 2x2 over a row of 16 and more outputs (the vector path's every lane): values and indices", function()
    lt.manual_seed(3)
    local x = lt.randn(1, 2, 2, 36):requires_grad(true)
    local y = F.max_pool2d(x, 2)
    local xv, yv = x:totable(), y:totable()
    y:backward(lt.ones(1, 2, 1, 18))
    local g = x.grad:totable()
    for c = 1, 2 do
      for j = 1, 18 do
        local best, bi, bj = -math.huge, 0, 0
        for r = 1, 2 do
          for q = 2 * j - 1, 2 * j do
            if xv[1][c][r][q] > best then best, bi, bj = xv[1][c][r][q], r, q end
          end
        end
        assert.are.equal(best, yv[1][c][1][j])
        assert.are.equal(1, g[1][c][bi][bj])
      end
    end
  end)

  it("accepts the smallest sizes: one channel, one feature, one hidden unit", function()
    lt.manual_seed(0)
    assert.are.same({ 2, 1, 3, 3 }, nn.Conv2d(1, 1, 3)(lt.randn(2, 1, 5, 5)):shape())
    assert.are.same({ 2, 1 }, nn.Linear(1, 1)(lt.randn(2, 1)):shape())
    local out = nn.LSTM(1, 1)(lt.randn(3, 2, 1))
    assert.are.same({ 3, 2, 1 }, out:shape())
  end)

  it("checks a single number for a size pair like each of a pair", function()
    assert.matches("Conv2d: kernel_size must be an integer >= 1, got 0$", err_of(nn.Conv2d, 1, 1, 0))
    assert.matches("Conv2d: kernel_size must be an integer >= 1, got 0$", err_of(nn.Conv2d, 1, 1, { 3, 0 }))
    assert.matches("MaxPool2d: kernel_size must be an integer >= 1, got 0.5$", err_of(nn.MaxPool2d, 0.5))
    assert.matches("AvgPool2d: padding must be an integer >= 0, got %-1$", err_of(nn.AvgPool2d, 2, { padding = -1 }))
  end)

  it("Flatten: a 0-dim input becomes [1]; end_dim may be the last dim, not past it", function()
    local f = nn.Flatten()(lt.tensor(3))
    assert.are.equal("[1]", f:shape_str())
    assert.are.equal(3, f:item())
    assert.are.equal("[24]", nn.Flatten(1, 3)(lt.zeros(2, 3, 4)):shape_str())
    assert.are.equal("[2 x 12]", nn.Flatten(2, 3)(lt.zeros(2, 3, 4)):shape_str())
    assert.matches("Flatten(start_dim=1, end_dim=4): dims 1..4 are out of range for an input of shape [2 x 3 x 4]",
      err_of(nn.Flatten(1, 4), lt.zeros(2, 3, 4)), 1, true)
  end)

  it("BatchNorm's repr says affine=false only when it is", function()
    assert.are.equal("BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=false)",
      tostring(nn.BatchNorm2d(3, { affine = false })))
    assert.are.equal("BatchNorm2d(3, eps=1e-05, momentum=0.1)", tostring(nn.BatchNorm2d(3)))
  end)

  it("a pool module names itself when the input is smaller than its kernel", function()
    assert.matches("MaxPool2d(kernel_size=5, stride=5): input [1 x 1 x 4 x 4] is smaller than the kernel 5x5",
      err_of(nn.MaxPool2d(5), lt.zeros(1, 1, 4, 4)), 1, true)
  end)

  it("batch_norm updates running stats that are strided views in place, like contiguous ones", function()
    lt.manual_seed(0)
    local x = lt.randn(4, 3, 2)
    local rm2, rv2 = lt.zeros(3, 2), lt.ones(3, 2)
    F.batch_norm(x, rm2:select(2, 1), rv2:select(2, 1), nil, nil, true, 0.5, 1e-5)
    local rm, rv = lt.zeros(3), lt.ones(3)
    F.batch_norm(x, rm, rv, nil, nil, true, 0.5, 1e-5)
    assert.are.same(rm:tolist(), rm2:select(2, 1):tolist())
    assert.are.same(rv:tolist(), rv2:select(2, 1):tolist())
    assert.are.same({ 0, 0, 0 }, rm2:select(2, 2):tolist())
    assert.are.same({ 1, 1, 1 }, rv2:select(2, 2):tolist())
    -- and eval reads them through the stride
    local a = F.batch_norm(x, rm2:select(2, 1), rv2:select(2, 1), nil, nil, false)
    assert.are.equal(0, (a - F.batch_norm(x, rm, rv, nil, nil, false)):abs():max():item())
  end)

  it("clip_grad_norm_ takes a list of one tensor as that tensor, parameter or not", function()
    local p = lt.tensor { 3, 4 }
    p.grad = lt.tensor { 3, 4 }
    assert.are.equal(5, nn.utils.clip_grad_norm_({ p }, 1))
    local g = p.grad:tolist()
    assert.is_true(math.abs(g[1] - 0.6) < 1e-6 and math.abs(g[2] - 0.8) < 1e-6)
  end)

  it("layer_norm refuses a weight or bias that differs from the normalised dims in the first of them", function()
    local x = lt.zeros(2, 3, 4)
    assert.are.equal("layer_norm: weight is [5 x 4], expected the input's last 2 dims [3 x 4]",
      err_of(F.layer_norm, x, { 3, 4 }, lt.ones(5, 4)))
    assert.are.equal("layer_norm: bias is [5 x 4], expected the input's last 2 dims [3 x 4]",
      err_of(F.layer_norm, x, { 3, 4 }, nil, lt.ones(5, 4)))
  end)
end)

describe("tensor shapes", function()
  it("index_select's gradient along an inner dim lands in each outer slice, repeated indices summed", function()
    local a = lt.zeros(2, 3, 2):requires_grad(true)
    local y = a:index_select(2, lt.tensor({ 3, 1, 3 }, "int64"))
    y:backward(lt.arange(1, 13):view(2, 3, 2))
    -- slice o: rows 3 <- g rows 1 and 3, row 1 <- g row 2
    assert.are.same({ 3, 4, 0, 0, 6, 8, 9, 10, 0, 0, 18, 20 }, a.grad:view(-1):tolist())
  end)

  it("expands to exactly the most dims supported (8), refuses 9", function()
    local e = lt.tensor({ 1, 2 }):expand(3, 1, 1, 1, 1, 1, 1, 2)
    assert.are.equal("[3 x 1 x 1 x 1 x 1 x 1 x 1 x 2]", e:shape_str())
    assert.are.equal(9, e:sum():item())
    assert.matches("expand: at most 8 dimensions are supported",
      err_of(function() return lt.tensor({ 1, 2 }):expand(3, 1, 1, 1, 1, 1, 1, 1, 2) end), 1, true)
  end)
end)

-- "<this file>:<line>: <message>": the error blames the line of the call in the test, not lutra's own code
local function blames(line, msg, err)
  assert.are.equal("tests/edges_spec.lua:" .. line .. ": " .. msg, err)
end

describe("errors blame the caller's line", function()
  local function here() return debug.getinfo(2, "l").currentline end

  it("nn options, init, clip_grad_norm_, schedulers and DDPStrategy", function()
    local line, err
    line, err = here(), select(2, pcall(function() nn.Linear(2, 2, 5) end))
    blames(line, "Linear: option 'bias' must be a boolean, got number", err) -- (PyTorch's positional bias)
    line, err = here(), select(2, pcall(function() nn.Linear(2, 2, true, 5) end))
    blames(line, "Linear: options must be a table, got number (it takes at most 3 positional arguments: in_features, "
      .. "out_features, bias)", err)
    line, err = here(), select(2, pcall(function() nn.init.calculate_gain("foo") end))
    blames(line, "init: unsupported nonlinearity 'foo'", err)
    line, err = here(), select(2, pcall(function() nn.init.kaiming_uniform_(lt.zeros(2, 2), 0, "fan_in", "foo") end))
    blames(line, "init: unsupported nonlinearity 'foo'", err)
    line, err = here(), select(2, pcall(function() nn.utils.clip_grad_norm_({ lt.zeros(1), 3 }, 1) end))
    blames(line, "clip_grad_norm_: element 2 is a number, expected a tensor", err)
    local opt = lt.optim.SGD({ lt.param(lt.zeros(1)) }, { lr = 1 })
    line, err = here(), select(2, pcall(function() lt.optim.lr_scheduler.StepLR(opt, 5, 0.1, nil, nil, 3) end))
    blames(line, "StepLR: options must be a table, got number (it takes at most 4 positional arguments: step_size, "
      .. "gamma, last_epoch, verbose)", err)
    line, err = here(), select(2, pcall(function() lt.optim.lr_scheduler.StepLR(opt, 0) end))
    blames(line, "StepLR: step_size must be a positive integer, got 0", err)
    line, err = here(), select(2, pcall(function() lt.distributed.DDPStrategy { bucket_cap_mb = 0 } end))
    blames(line, "DDPStrategy: bucket_cap_mb must be a number > 0, got 0", err)
  end)
end)
