-- gpt_spec: models/gpt.lua against a tiny nanoGPT in PyTorch 1.13 (tests/fixtures/gpt_model.json and
-- gpt_tiny.safetensors from gen_gpt.py): torch's weights load strict with both tied names, the logits, the
-- loss and the gradients (the tied embedding's is the sum of both uses) match; the init, names, generate
-- (shapes, top_k, temperature, cropping to the block), the optimizer groups and schedule, and bad input.
local lt = require "lutra"
local X = require "tests.helpers.nn_fixtures"
local GPT = require "models.gpt"

local function err_of(f)
  local ok, e = pcall(f)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

-- the tensor at a state-dict name (the blocks of transformer.h are named from 0, as PyTorch's)
local function path_get(root, name)
  local t = root
  for part in name:gmatch("[^.]+") do t = t[tonumber(part) and tonumber(part) + 1 or part] end
  return t
end

describe("models/gpt.lua", function()
  local cs = X.load("gpt_model.json")

  it("loads nanoGPT's PyTorch weights (both tied names) strict, and matches its logits, loss and gradients", function()
    local m = GPT(cs.config)
    local keys = lt.nn.state_dict_keys(m)
    table.sort(keys)
    assert.are.same(cs.keys, keys)
    lt.load("tests/fixtures/" .. cs.weights, m)
    assert.is_true(m.lm_head.weight == m.transformer.wte.weight)
    local idx, tgt = X.tensor(cs.idx), X.tensor(cs.targets)
    local logits, loss = m:forward(idx, tgt)
    X.check("logits", logits, cs.logits, 1e-4, 1e-5)
    assert.is_true(math.abs(loss:item() - cs.loss) < 1e-5)
    m:zero_grad()
    local total = loss + (logits * X.tensor(cs.gout)):sum()
    total:backward()
    for name, g in pairs(cs.grads) do X.check("grad of " .. name, path_get(m, name).grad, g, 1e-4, 1e-5) end
  end)

  it("initialises as nanoGPT: N(0, 0.02), residual projections N(0, 0.02/sqrt(2 n_layer)), biases 0, norms 1", function()
    lt.manual_seed(1)
    local m = GPT { vocab_size = 50, n_layer = 4, n_embd = 64, n_head = 4 }
    local function std(t) local mu = t:mean():item(); return math.sqrt(((t - mu) ^ 2):mean():item()) end
    assert.is_true(math.abs(std(m.transformer.wte.weight) - 0.02) < 0.002)
    assert.is_true(math.abs(std(m.transformer.h[1].attn.c_attn.weight) - 0.02) < 0.002)
    assert.is_true(math.abs(std(m.transformer.h[2].mlp.c_proj.weight) - 0.02 / math.sqrt(8)) < 0.001)
    assert.are.equal(0, m.transformer.h[1].mlp.c_fc.bias:abs():sum():item())
    assert.are.equal(64, m.transformer.ln_f.weight:sum():item())
    local nb = GPT { vocab_size = 5, n_embd = 8, n_head = 2, bias = false }
    assert.is_nil(nb.transformer.h[1].ln_1.bias)
    assert.is_nil(nb.transformer.h[1].attn.c_attn.bias)
  end)

  it("puts weight decay on matrices only and schedules warmup then cosine decay", function()
    local m = GPT { vocab_size = 7, n_embd = 8, n_head = 2, lr = 0.01, warmup_steps = 2, max_steps = 10 }
    local cfg = m:configure_optimizers()
    local g = cfg.optimizer.param_groups
    for _, p in ipairs(g[1].params) do assert.is_true(p:dim() >= 2) end
    for _, p in ipairs(g[2].params) do assert.are.equal(1, p:dim()) end
    assert.are.equal(0.1, g[1].weight_decay)
    assert.are.equal(0, g[2].weight_decay)
    local h = m.hparams
    assert.are.equal(1 / 3, GPT.lr_factor(h, 0))
    assert.is_true(math.abs(GPT.lr_factor(h, 2) - 1) < 1e-12)
    assert.is_true(math.abs(GPT.lr_factor(h, 10) - 0.1) < 1e-12)
    assert.is_true(math.abs(GPT.lr_factor(h, 6) - 0.55) < 1e-12)
    assert.is_true(math.abs(GPT.lr_factor(h, 50) - 0.1) < 1e-12)
  end)

  it("generates: appends tokens, crops the context to the block, honours top_k and temperature", function()
    lt.manual_seed(2)
    local m = GPT { vocab_size = 9, block_size = 4, n_embd = 8, n_head = 2 }
    local out = m:generate(lt.tensor({ { 1, 2 }, { 3, 4 } }, "int64"), 7)
    assert.are.same({ 2, 9 }, out:shape())
    assert.are.same({ 1, 2 }, out[1]:narrow(1, 1, 2):totable())
    assert.is_true(m.training)
    -- top_k = 1 is greedy: the argmax of the last position each step
    local idx = lt.tensor({ { 5 } }, "int64")
    local g1 = m:generate(idx, 5, { top_k = 1 })
    local cur = idx
    lt.no_grad(function()
      for _ = 1, 5 do
        local T = cur:size(2)
        local cond = T <= 4 and cur or cur:narrow(2, T - 3, 4)
        local logits = m:forward(cond)
        local nxt = logits:select(2, logits:size(2)):argmax(2):view(1, 1)
        cur = lt.cat({ cur, nxt }, 2)
      end
    end)
    assert.are.same(cur:totable(), g1:totable())
    -- a tiny temperature is greedy too
    assert.are.same(g1:totable(), m:generate(idx, 5, { temperature = 1e-6 }):totable())
    -- top_k = 2: every drawn token is one of the two most likely
    lt.manual_seed(3)
    local g2 = m:generate(lt.tensor({ { 1, 2, 3, 4 } }, "int64"), 1, { top_k = 2 })
    local last = m:forward(lt.tensor({ { 1, 2, 3, 4 } }, "int64")):select(2, 4)
    local _, top = last:topk(2, 2)
    local drawn = g2[1][5]:item()
    assert.is_true(drawn == top[1][1]:item() or drawn == top[1][2]:item())
  end)

  it("trains: a few AdamW steps lower the loss on a repeated text", function()
    lt.manual_seed(4)
    local chars, data = GPT.encode_text(string.rep("abcdefgh", 40))
    local ds = GPT.windows(data, GPT.lcg_offsets(data:size(1), 8, 64, 1), 8)
    local m = GPT { vocab_size = #chars, block_size = 8, n_embd = 16, n_head = 2, n_layer = 1, lr = 3e-3 }
    local opt = m:configure_optimizers().optimizer
    local first, last
    for s = 1, 4 do
      local xs, ys = {}, {}
      for i = 1, 16 do
        local b = ds:get((s - 1) * 16 + i)
        xs[i], ys[i] = b[1], b[2]
      end
      for _ = 1, 10 do
        opt:zero_grad()
        local _, loss = m:forward(lt.stack(xs), lt.stack(ys))
        loss:backward()
        opt:step()
        first = first or loss:item()
        last = loss:item()
      end
    end
    assert.is_true(last < first * 0.5, string.format("loss %.3f -> %.3f", first, last))
  end)

  it("names the bad input", function()
    assert.matches("models.gpt: option 'vocab_size' is required", err_of(function() return GPT {} end), 1, true)
    assert.matches("models.gpt: unknown option 'n_heads'", err_of(function() return GPT { vocab_size = 3, n_heads = 2 } end),
      1, true)
    assert.matches("n_embd (10) must be a multiple of n_head (4)",
      err_of(function() return GPT { vocab_size = 3, n_embd = 10 } end), 1, true)
    local m = GPT { vocab_size = 5, block_size = 4, n_embd = 8, n_head = 2 }
    assert.matches("cannot forward a sequence of length 5, block size is only 4",
      err_of(function() return m:forward(lt.ones(1, 5):long()) end), 1, true)
    assert.matches("expected idx as an int64 [batch x time] tensor, got float32 [1 x 3]",
      err_of(function() return m:forward(lt.ones(1, 3)) end), 1, true)
    assert.matches("generate: top_k must be an integer >= 1, got 0",
      err_of(function() return m:generate(lt.ones(1, 1):long(), 2, { top_k = 0 }) end), 1, true)
    assert.matches("generate: unknown option 'topk'",
      err_of(function() return m:generate(lt.ones(1, 1):long(), 2, { topk = 2 }) end), 1, true)
    assert.matches("models.gpt.windows: offset 30 (item 1) leaves no room for 8 + 1 tokens of 32",
      err_of(function() return GPT.windows(lt.ones(32):long(), { 30 }, 8) end), 1, true)
  end)
end)
