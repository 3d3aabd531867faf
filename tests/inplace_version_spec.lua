-- tests/inplace_version_spec.lua — version counters: a tensor that a backward needs, changed in place between
-- the forward and the backward, is an error naming the op and the tensor (PyTorch's "modified by an inplace
-- operation"), never a silently wrong gradient; what the backward does not need may change freely.
local lt = require "lutra"
local opts = require "helpers.quiet"

local function values(t) return t:totable() end

-- the message of a failed backward, without the "file:line: " that error() puts in front
local function backward_error(loss)
  local ok, err = pcall(function() loss:backward() end)
  assert.is_false(ok, "backward should have failed")
  return (tostring(err):gsub("^.-:%d+: ", ""))
end

local function modified(op, what, from, to)
  return string.format("backward: %s's %s was modified in place (version %d -> %d) after it was saved; "
    .. "clone it before changing it", op, what, from, to)
end

describe("a saved tensor changed in place before backward", function()
  it("x * a, then a:add_(100): mul's input 2 (the true gradient is 10 20 30, the stale one 110 120 130)", function()
    local x = lt.tensor({ 1, 2, 3 }):requires_grad(true)
    local a = lt.tensor({ 10, 20, 30 })
    local z = x * a
    a:add_(100)
    assert.are.equal(modified("mul", "input 2", 0, 1), backward_error(z:sum()))
    assert.is_nil(x.grad) -- nothing was accumulated
  end)

  it("the check runs before any rule: a branch that backward would reach first accumulates nothing", function()
    local x = lt.tensor({ 1, 2, 3 }):requires_grad(true)
    local a = lt.tensor({ 10, 20, 30 })
    local loss = (x * a):sum() + (x * 2):sum() -- the x * 2 branch runs first
    a:mul_(3)
    assert.are.equal(modified("mul", "input 2", 0, 1), backward_error(loss))
    assert.is_nil(x.grad)
  end)

  it("the same graph without the change gives the true gradient", function()
    local x = lt.tensor({ 1, 2, 3 }):requires_grad(true)
    local a = lt.tensor({ 10, 20, 30 })
    local z = x * a
    z:sum():backward()
    assert.are.same({ 10, 20, 30 }, values(x.grad))
  end)

  it("a matmul whose matrix is scaled in place: matmul's input 2", function()
    local x = lt.tensor({ { 1, 2, 3 } }):requires_grad(true)
    local m = lt.ones(3, 1)
    local y = x:matmul(m)
    m:mul_(5)
    assert.are.equal(modified("matmul", "input 2", 0, 1), backward_error(y:sum()))
  end)

  it("an exp output zeroed under no_grad: exp's output", function()
    local x = lt.tensor({ 0, 1, 2 }):requires_grad(true)
    local y = x:exp()
    lt.no_grad(function() y:zero_() end)
    assert.are.equal(modified("exp", "output", 0, 1), backward_error(y:sum()))
  end)

  it("tanh and sigmoid outputs count the same way, and so does a view of the output", function()
    for _, op in ipairs { "tanh", "sigmoid" } do
      local x = lt.tensor({ 0.5, -1 }):requires_grad(true)
      local y = x[op](x)
      lt.no_grad(function() y:narrow(1, 2, 1):fill_(7) end)
      assert.are.equal(modified(op, "output", 0, 1), backward_error(y:sum()))
    end
  end)

  it("an optimizer step between a forward and its backward (SGD, Adam)", function()
    for _, make in ipairs { lt.optim.SGD, lt.optim.Adam } do
      local w = lt.param(lt.tensor({ 1, 1 }))
      local opt = make({ w }, { lr = 0.5 })
      local first = (w * w):sum()
      first:backward() -- a gradient for the step
      local loss = (w * w):sum()
      opt:step()
      assert.are.equal(modified("mul", "input 1", 0, 1), backward_error(loss))
    end
  end)

  it("an optimizer step between the forward and backward of a two-layer model: the second linear's weight", function()
    lt.manual_seed(1)
    local model = lt.nn.Sequential { lt.nn.Linear(2, 3), lt.nn.Tanh(), lt.nn.Linear(3, 1) }
    local opt = lt.optim.SGD(model:parameters(), { lr = 0.1 })
    local x = lt.randn(4, 2)
    model(x):sum():backward()
    local loss = model(x):sum()
    opt:step()
    local err = backward_error(loss)
    assert.truthy(err:find("^backward: linear's input 2 was modified in place %(version %d+ %-> %d+%)"), err)
  end)

  it("a view's change is seen through its base, and the base's through its views", function()
    local x = lt.tensor({ 1, 2, 3 }):requires_grad(true)
    local a = lt.tensor({ 10, 20, 30 })
    local z = x * a:view(3, 1):view(3) -- saves a view
    a[2] = 0 -- writes the base
    assert.are.equal(modified("mul", "input 2", 0, 1), backward_error(z:sum()))

    local b = lt.tensor({ 10, 20, 30 })
    z = x * b -- saves the base
    b:narrow(1, 3, 1):fill_(1) -- writes a view
    assert.are.equal(modified("mul", "input 2", 0, 1), backward_error(z:sum()))

    local d = lt.tensor({ 10, 20, 30 })
    z = x * d
    d:detach():mul_(2) -- detach shares the data, and so the version, as in PyTorch
    assert.are.equal(modified("mul", "input 2", 0, 1), backward_error(z:sum()))
  end)

  it("every in-place write counts: each *_ op, copy_, fills, random fills, indexed assignment, clamp_", function()
    local writes = {
      add_ = function(a) a:add_(1) end,
      add_alpha = function(a) a:add_(lt.ones(3), 2) end,
      sub_ = function(a) a:sub_(lt.ones(3)) end,
      mul_ = function(a) a:mul_(2) end,
      div_ = function(a) a:div_(2) end,
      pow_ = function(a) a:pow_(2) end,
      neg_ = function(a) a:neg_() end,
      exp_ = function(a) a:exp_() end,
      sqrt_ = function(a) a:sqrt_() end,
      relu_ = function(a) a:relu_() end,
      clamp_ = function(a) a:clamp_(0, 1) end,
      zero_ = function(a) a:zero_() end,
      fill_ = function(a) a:fill_(3) end,
      copy_ = function(a) a:copy_(lt.ones(3)) end,
      uniform_ = function(a) a:uniform_() end,
      normal_ = function(a) a:normal_() end,
      index_number = function(a) a[1] = 5 end,
      index_tensor = function(a) a[3] = lt.tensor(5) end,
      strided_normal_ = function(a) a:view(3, 1):t():normal_() end,
    }
    for name, write in pairs(writes) do
      local x = lt.tensor({ 1, 2, 3 }):requires_grad(true)
      local a = lt.tensor({ 10, 20, 30 })
      local z = x * a
      write(a)
      local err = backward_error(z:sum())
      assert.truthy(err:find("^backward: mul's input 2 was modified in place %(version 0 %-> %d+%)"),
        name .. ": " .. err)
    end
  end)

  it("load_state_dict copies into the parameters: a graph that saved them fails", function()
    lt.manual_seed(2)
    local model = lt.nn.Sequential { lt.nn.Linear(2, 2), lt.nn.Tanh(), lt.nn.Linear(2, 1) }
    local other = lt.nn.Sequential { lt.nn.Linear(2, 2), lt.nn.Tanh(), lt.nn.Linear(2, 1) }
    local loss = model(lt.randn(3, 2)):sum()
    model:load_state_dict(other:state_dict())
    assert.truthy(backward_error(loss):find("^backward: linear's input 2 was modified in place"))
  end)

  it("the graph is kept after the error: put the values back is not enough, but a fresh forward works", function()
    local x = lt.tensor({ 1, 2, 3 }):requires_grad(true)
    local a = lt.tensor({ 10, 20, 30 })
    local z = x * a
    a:add_(100)
    a:sub_(100) -- same values, two more versions: still an error, as PyTorch's
    assert.are.equal(modified("mul", "input 2", 0, 2), backward_error(z:sum()))
    local fresh = x * a
    fresh:sum():backward()
    assert.are.same({ 10, 20, 30 }, values(x.grad))
  end)
end)

describe("what the backward does not need may change", function()
  it("in-place on a tensor that is not saved (add's operands, a view's base, a sum's input)", function()
    local x = lt.tensor({ 1, 2, 3 }):requires_grad(true)
    local b = lt.tensor({ 5, 5, 5 })
    local y = (x + b):sum() + (x:view(3, 1) * 2):sum()
    b:add_(100)
    y:backward()
    assert.are.same({ 3, 3, 3 }, values(x.grad))
  end)

  it("an operand of mul whose partner needs no gradient is not saved (PyTorch saves it only when needed)", function()
    local x = lt.tensor({ 1, 2, 3 }):requires_grad(true)
    local a = lt.tensor({ 10, 20, 30 })
    local z = x * a
    lt.no_grad(function() x:add_(1) end) -- x is read only for a's gradient, which is not asked for
    z:sum():backward()
    assert.are.same({ 10, 20, 30 }, values(x.grad))
  end)

  it("clone before the change: the gradient uses the old values", function()
    local x = lt.tensor({ 1, 2, 3 }):requires_grad(true)
    local a = lt.tensor({ 10, 20, 30 })
    local z = x * a:clone()
    a:add_(100)
    z:sum():backward()
    assert.are.same({ 10, 20, 30 }, values(x.grad))
  end)

  it("x.grad accumulates over two backwards (the accumulation writes .grad in place)", function()
    local x = lt.tensor({ 1, 2, 3 }):requires_grad(true)
    local a = lt.tensor({ 10, 20, 30 })
    for _ = 1, 2 do
      local z = x * a
      z:sum():backward()
    end
    assert.are.same({ 20, 40, 60 }, values(x.grad))
  end)

  it("a step after the backward, then the next forward, as every training loop does", function()
    local w = lt.param(lt.tensor({ 1, 1 }))
    local opt = lt.optim.SGD({ w }, { lr = 0.25 })
    for _ = 1, 3 do
      opt:zero_grad()
      local loss = (w * w):sum()
      loss:backward()
      opt:step()
    end
    assert.are.same({ 0.125, 0.125 }, values(w))
  end)

  it("a normal Trainer fit with a fused Linear+ReLU model, gradient accumulation and clipping", function()
    lt.manual_seed(3)
    local model = lt.nn.Sequential { lt.nn.Linear(2, 8), lt.nn.ReLU(), lt.nn.Linear(8, 1) }
    local first, last
    function model:training_step(batch)
      local loss = lt.F.mse_loss(self(batch[1]), batch[2])
      first = first or loss:item()
      last = loss:item()
      return loss
    end
    function model:configure_optimizers() return lt.optim.Adam(self:parameters(), { lr = 0.05 }) end
    local X = lt.randn(64, 2)
    local Y = X:sum(2, true)
    local ds = lt.data.TensorDataset(X, Y)
    local t = lt.Trainer(opts { max_epochs = 4, accumulate_grad_batches = 2, gradient_clip_val = 1 })
    t:fit(model, lt.data.DataLoader(ds, { batch_size = 8 }))
    assert.are.equal(16, t.global_step)
    assert.is_true(last < first)
  end)
end)
