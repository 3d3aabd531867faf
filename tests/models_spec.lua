-- models_spec: the ready-made models in models/ — their shapes and parameter counts, their hooks
-- (what they log, what predict_step returns, what configure_optimizers builds), option checking, and
-- that each one learns: a few optimizer steps on a fixed batch make its loss fall.
local lt = require "lutra"

local function errmsg(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

local function has(msg, text)
  assert(msg:find(text, 1, true), ("message %q does not contain %q"):format(msg, text))
end

local function count_params(model)
  local n = 0
  for _, p in ipairs(lt.nn.parameters(model)) do n = n + p:numel() end
  return n
end

-- a model table gets self:log from the trainer; here a recorder stands in for it
local function with_logger(model)
  local logged = {}
  model.log = function(_, name, value, opts) logged[name] = { value = value, opts = opts } end
  return logged
end

-- Steps of a plain loop on one batch; returns the first and last loss.
local function train_steps(model, batch, steps, step_fn)
  local opt = model:configure_optimizers()
  if type(opt) == "table" and opt.optimizer then opt = opt.optimizer end
  local first, last
  for i = 1, steps do
    opt:zero_grad()
    local out = (step_fn or model.training_step)(model, batch, i - 1)
    local loss = lt.is_tensor(out) and out or out.loss
    loss:backward()
    opt:step()
    if i == 1 then first = loss:item() end
    last = loss:item()
  end
  return first, last
end

-- images of faint noise with a bright horizontal bar whose row depends on the class (1..10)
local function image_batch(n)
  lt.manual_seed(42)
  local x = lt.rand(n, 1, 28, 28) * 0.2
  local labels = {}
  for i = 1, n do
    labels[i] = (i % 10) + 1
    x[i][1][2 * labels[i] + 3]:fill_(1)
  end
  return { x, lt.tensor(labels, "int64") }
end

describe("models.mlp", function()
  local mlp = require "models.mlp"

  it("is 784-512-256-10 by default (535818 parameters) with PyTorch-style names", function()
    lt.manual_seed(0)
    local m = mlp()
    assert.are.equal(535818, count_params(m))
    local named = lt.nn.named_parameters(m)
    assert.are.same({ 512, 784 }, named["net.2.weight"]:shape())
    assert.are.same({ 10 }, named["net.6.bias"]:shape())
    assert.are.same({ 3, 10 }, m:forward(lt.rand(3, 1, 28, 28)):shape())
  end)

  it("learns: 15 SGD steps on a fixed batch cut its loss by more than half", function()
    lt.manual_seed(1)
    local m = mlp { hidden = { 64 }, lr = 0.05 }
    local first, last = train_steps(m, image_batch(32), 15)
    assert(first > 2.0, "initial loss " .. first)
    assert(last < first / 2, ("loss %g -> %g"):format(first, last))
  end)

  it("logs train_loss, val_loss/val_acc and test_loss/test_acc with the batch size", function()
    lt.manual_seed(2)
    local m = mlp { hidden = { 16 } }
    local logged = with_logger(m)
    local batch = image_batch(8)
    local loss = m:training_step(batch, 0)
    assert.are.equal(loss, logged.train_loss.value)
    m:validation_step(batch, 0)
    m:test_step(batch, 0)
    assert.are.equal(8, logged.val_acc.opts.batch_size)
    -- accuracy is argmax (1-based) == label
    local want = m:forward(batch[1]):argmax(2):eq(batch[2]):mean():item()
    assert.are.equal(want, logged.val_acc.value:item())
    assert.are.equal(want, logged.test_acc.value:item())
    assert(math.abs(logged.val_loss.value:item() - loss:item()) < 1e-6)
    assert.is_not_nil(logged.test_loss)
  end)

  it("predicts 1-based int64 classes", function()
    local m = mlp { hidden = { 16 } }
    local pred = m:predict_step(image_batch(5), 0)
    assert.are.equal("int64", pred:dtype())
    assert.are.same({ 5 }, pred:shape())
    for _, v in ipairs(pred:flatten():tolist()) do assert(v >= 1 and v <= 10) end
  end)

  it("builds SGD with its hyper-parameters, Adam on request, and a cosine schedule", function()
    local sgd = mlp { lr = 0.02, momentum = 0.5 }:configure_optimizers()
    assert.are.equal(0.02, sgd.param_groups[1].lr)
    assert.are.equal(0.5, sgd.param_groups[1].momentum)
    local adam = mlp { optimizer = "adam", lr = 1e-3 }:configure_optimizers()
    assert.are.equal(1e-3, adam.param_groups[1].lr)
    assert.is_not_nil(adam.param_groups[1].betas)
    local cfg = mlp { scheduler = "cosine", max_epochs = 4 }:configure_optimizers()
    assert.are.equal("epoch", cfg.lr_scheduler.interval)
    assert.is_not_nil(cfg.lr_scheduler.scheduler.step)
  end)

  it("rejects unknown options and bad values by name", function()
    has(errmsg(mlp, { hiden = { 10 } }), "models.mlp: unknown option 'hiden'")
    has(errmsg(mlp, { lr = "fast" }), "models.mlp: option 'lr' must be a number, got string")
    has(errmsg(mlp, { optimizer = "lbfgs" }),
      "models.mlp: option 'optimizer' must be \"sgd\", \"adam\" or \"adamw\", got \"lbfgs\"")
    has(errmsg(mlp, { hidden = { 10, 0 } }), "models.mlp: hidden[2] must be a positive integer, got 0")
    has(errmsg(mlp, { scheduler = "cosine" }), "models.mlp: scheduler \"cosine\" needs max_epochs")
  end)
end)

describe("models.lenet", function()
  local lenet = require "models.lenet"

  it("is LeNet-5: 61706 parameters, [N x 10] logits from [N x 1 x 28 x 28]", function()
    lt.manual_seed(0)
    local m = lenet()
    assert.are.equal(61706, count_params(m))
    local named = lt.nn.named_parameters(m)
    assert.are.same({ 6, 1, 5, 5 }, named["net.1.weight"]:shape())
    assert.are.same({ 16, 6, 5, 5 }, named["net.4.weight"]:shape())
    assert.are.same({ 120, 400 }, named["net.8.weight"]:shape())
    assert.are.same({ 2, 10 }, m:forward(lt.rand(2, 1, 28, 28)):shape())
  end)

  it("learns: 40 SGD steps on a fixed batch cut its loss by more than half", function()
    lt.manual_seed(3)
    local m = lenet { lr = 0.05 }
    local first, last = train_steps(m, image_batch(32), 40)
    assert(last < first / 2, ("loss %g -> %g"):format(first, last))
  end)

  it("uses SGD lr 0.05 momentum 0.9 by default", function()
    local opt = lenet():configure_optimizers()
    assert.are.equal(0.05, opt.param_groups[1].lr)
    assert.are.equal(0.9, opt.param_groups[1].momentum)
  end)
end)

describe("models.char_rnn", function()
  local CharRNN = require "models.char_rnn"
  local text = string.rep("abcabd abcabd ", 20)

  it("builds a vocabulary, encodes and decodes text, and shifts targets by one", function()
    local chars = CharRNN.vocabulary("hello")
    assert.are.same({ "e", "h", "l", "o" }, chars)
    assert.are.same({ 2, 1, 3, 3, 4 }, CharRNN.encode(chars, "hello"))
    assert.are.equal("hole", CharRNN.decode(chars, { 2, 4, 3, 1 }))
    has(errmsg(CharRNN.encode, chars, "help"), "character \"p\" (byte 112, position 4) is not in the vocabulary")
    local ds = CharRNN.dataset("abcdefg", CharRNN.vocabulary("abcdefg"), 3)
    assert.are.equal(2, #ds)
    local s = ds:get(2)
    assert.are.same({ 4, 5, 6 }, s[1]:flatten():tolist())
    assert.are.same({ 5, 6, 7 }, s[2]:flatten():tolist())
    has(errmsg(CharRNN.dataset, "ab", CharRNN.vocabulary("ab"), 5), "too short for windows of 5")
  end)

  it("gives [B x T x V] logits and a state, and sets truncated_bptt_steps", function()
    lt.manual_seed(4)
    local chars = CharRNN.vocabulary(text)
    local m = CharRNN { chars = chars, hidden = 16, embed = 8, tbptt = 5 }
    assert.are.equal(5, m.truncated_bptt_steps)
    local logits, state = m:forward(lt.tensor({ { 1, 2, 3 }, { 3, 2, 1 } }, "int64"))
    assert.are.same({ 2, 3, #chars }, logits:shape())
    assert.are.same({ 1, 2, 16 }, state[1]:shape())
    assert.is_nil(CharRNN { chars = chars }.truncated_bptt_steps)
  end)

  it("splits a batch along time and learns with TBPTT, passing detached hiddens between chunks", function()
    lt.manual_seed(5)
    local chars = CharRNN.vocabulary(text)
    local ds = CharRNN.dataset(text, chars, 12)
    local batch = lt.data.DataLoader(ds, { batch_size = 8 }):iter()()
    local m = CharRNN { chars = chars, hidden = 32, embed = 8, tbptt = 4, lr = 0.01 }
    local splits = m:tbptt_split_batch(batch, 4)
    assert.are.equal(3, #splits)
    assert.are.same({ 8, 4 }, splits[2][1]:shape())
    assert.are.same(batch[2]:narrow(2, 5, 4):flatten():tolist(), splits[2][2]:flatten():tolist())
    local opt = m:configure_optimizers()
    local losses = {}
    for step = 1, 30 do
      local h, total = nil, 0
      for _, split in ipairs(splits) do
        opt:zero_grad()
        local out = m:training_step(split, step - 1, h)
        out.loss:backward()
        opt:step()
        h = out.hiddens
        assert.is_nil(h[1]:grad_fn())
        total = total + out.loss:item()
      end
      losses[step] = total / #splits
    end
    assert(losses[30] < losses[1] * 0.6, ("loss %g -> %g"):format(losses[1], losses[30]))
  end)

  it("samples reproducibly from lutra's RNG, starting with the given text", function()
    local chars = CharRNN.vocabulary(text)
    lt.manual_seed(6)
    local m = CharRNN { chars = chars, hidden = 8, embed = 4 }
    lt.manual_seed(7)
    local a = CharRNN.sample(m, "ab", 20, 0.8)
    lt.manual_seed(7)
    local b = CharRNN.sample(m, "ab", 20, 0.8)
    assert.are.equal(22, #a)
    assert.are.equal("ab", a:sub(1, 2))
    assert.are.equal(a, b)
    for ch in a:gmatch(".") do assert(CharRNN.encode(chars, ch)) end
    has(errmsg(CharRNN.sample, m, "", 5), "char_rnn.sample: start_text must be a non-empty string")
    has(errmsg(CharRNN.sample, m, "ab", 5, 0), "temperature must be > 0")
  end)

  it("requires the vocabulary and rejects unknown options", function()
    has(errmsg(CharRNN, {}), "models.char_rnn: option 'chars'")
    has(errmsg(CharRNN, { chars = { "a" }, hiden = 3 }), "models.char_rnn: unknown option 'hiden'")
  end)
end)
