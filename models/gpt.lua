-- models/gpt.lua — a character-level GPT as nanoGPT's model.py: token + position embeddings, n_layer
-- pre-norm blocks (x + attn(ln_1(x)), x + mlp(ln_2(x))) of causal self-attention (one fused qkv Linear,
-- lt.F.scaled_dot_product_attention) and an MLP with GELU, a final LayerNorm, and lm_head tied to the token
-- embedding; nanoGPT's init (weights N(0, 0.02), residual projections N(0, 0.02/sqrt(2 n_layer)), biases 0).
--
--   local GPT = require "models.gpt"
--   local model = GPT{vocab_size = 65, block_size = 64, n_layer = 2, n_head = 4, n_embd = 128}
--   local logits, loss = model:forward(idx, targets)        -- idx, targets [B x T] int64, 1-based
--   local out = model:generate(lt.tensor({{1}}, "int64"), 100, {temperature = 0.8, top_k = 10})
--
-- Options: vocab_size (required), block_size=64, n_layer=2, n_head=4, n_embd=128, dropout=0, bias=true
-- (biases in the Linears and LayerNorms, nanoGPT's config.bias), lr=1e-3, weight_decay=0.1, beta1=0.9,
-- beta2=0.99, warmup_steps=0, max_steps (the cosine decay's length; nil: constant lr after warmup),
-- min_lr=lr/10. State-dict names are nanoGPT's (blocks numbered from 0, as its nn.ModuleList): transformer.wte.weight,
-- transformer.wpe.weight, transformer.h.0.ln_1.weight, transformer.h.0.attn.c_attn.weight, ...,
-- transformer.ln_f.weight, lm_head.weight (the same tensor as transformer.wte.weight).
--
-- Hooks for the Trainer: training_step / validation_step (train_loss, val_loss), configure_optimizers
-- (nanoGPT's: AdamW, weight decay on the >= 2-dim tensors only, linear warmup then cosine decay per step).
local lt = require "lutra"
local CharRNN = require "models.char_rnn"

local nn, F = lt.nn, lt.F
local M = {}

local OPTIONS = {
  vocab_size = "number", block_size = "number", n_layer = "number", n_head = "number", n_embd = "number",
  dropout = "number", bias = "boolean", lr = "number", weight_decay = "number", beta1 = "number",
  beta2 = "number", warmup_steps = "number", max_steps = "number", min_lr = "number",
}

-- ---- blocks ---------------------------------------------------------------------------------------------

local Attention = nn.Module:extend("CausalSelfAttention")

function Attention:init(h)
  self.n_head, self.n_embd, self.dropout = h.n_head, h.n_embd, h.dropout
  self.c_attn = nn.Linear(h.n_embd, 3 * h.n_embd, { bias = h.bias })
  self.c_proj = nn.Linear(h.n_embd, h.n_embd, { bias = h.bias })
  self.resid_dropout = nn.Dropout(h.dropout)
end

function Attention:forward(x)
  local B, T, C = x:size(1), x:size(2), x:size(3)
  local H = self.n_head
  local qkv = self.c_attn(x)
  -- [B x T x C] column slices seen as [B x H x T x D] heads: strided views the attention kernel reads in place
  local function heads(i) return qkv:narrow(3, i * C + 1, C):view(B, T, H, C / H):transpose(2, 3) end
  local y = F.scaled_dot_product_attention(heads(0), heads(1), heads(2),
    { is_causal = true, dropout_p = self.training and self.dropout or 0 })
  y = y:transpose(2, 3):contiguous():view(B, T, C)
  return self.resid_dropout(self.c_proj(y))
end

local MLP = nn.Module:extend("MLP")

function MLP:init(h)
  self.c_fc = nn.Linear(h.n_embd, 4 * h.n_embd, { bias = h.bias })
  self.gelu = nn.GELU()
  self.c_proj = nn.Linear(4 * h.n_embd, h.n_embd, { bias = h.bias })
  self.dropout = nn.Dropout(h.dropout)
end

-- c_fc and GELU as one fused op (lt.linear's "gelu" epilogue) unless either was given its own forward
function MLP:forward(x)
  local h
  if rawget(self.c_fc, "forward") == nil and rawget(self.gelu, "forward") == nil then
    h = self.c_fc:forward_gelu(x, self.gelu.approximate)
  else
    h = self.gelu(self.c_fc(x))
  end
  return self.dropout(self.c_proj(h))
end

local Block = nn.Module:extend("Block")

function Block:init(h)
  self.ln_1 = nn.LayerNorm(h.n_embd, { bias = h.bias })
  self.attn = Attention(h)
  self.ln_2 = nn.LayerNorm(h.n_embd, { bias = h.bias })
  self.mlp = MLP(h)
end

function Block:forward(x)
  x = x + self.attn(self.ln_1(x))
  return x + self.mlp(self.ln_2(x))
end

-- ---- the model ------------------------------------------------------------------------------------------

-- transformer.h: the blocks at integer keys 1..n (ipairs works), named 0..n-1 in state_dict as nanoGPT's
-- nn.ModuleList, so PyTorch's state dicts load as they are
local Blocks = nn.Module:extend("ModuleList")
Blocks._zero_based_names = true
function Blocks:extra_repr() return "" end

local GPT = nn.Module:extend("GPT")

local function check_opts(opts)
  if type(opts) ~= "table" then error("models.gpt: options must be a table with at least vocab_size", 4) end
  require("lutra.utils.check").check_options("models.gpt", opts, OPTIONS, 4)
  local function int(name, v, min)
    if v ~= math.floor(v) or v < min then
      error(string.format("models.gpt: option '%s' must be an integer >= %d, got %s", name, min, tostring(v)), 5)
    end
    return v
  end
  if opts.vocab_size == nil then error("models.gpt: option 'vocab_size' is required", 4) end
  local h = {
    vocab_size = int("vocab_size", opts.vocab_size, 1), block_size = int("block_size", opts.block_size or 64, 1),
    n_layer = int("n_layer", opts.n_layer or 2, 1), n_head = int("n_head", opts.n_head or 4, 1),
    n_embd = int("n_embd", opts.n_embd or 128, 1), dropout = opts.dropout or 0, bias = opts.bias ~= false,
    lr = opts.lr or 1e-3, weight_decay = opts.weight_decay or 0.1, beta1 = opts.beta1 or 0.9,
    beta2 = opts.beta2 or 0.99, warmup_steps = int("warmup_steps", opts.warmup_steps or 0, 0),
    max_steps = opts.max_steps and int("max_steps", opts.max_steps, 1),
  }
  h.min_lr = opts.min_lr or h.lr / 10
  if h.n_embd % h.n_head ~= 0 then
    error(string.format("models.gpt: n_embd (%d) must be a multiple of n_head (%d)", h.n_embd, h.n_head), 4)
  end
  if not (h.dropout >= 0 and h.dropout < 1) then
    error("models.gpt: option 'dropout' must be in [0, 1), got " .. tostring(h.dropout), 4)
  end
  return h
end

function GPT:init(opts)
  local h = check_opts(opts)
  self.hparams = h
  local blocks = Blocks()
  for i = 1, h.n_layer do blocks[i] = Block(h) end
  self.transformer = {
    wte = nn.Embedding(h.vocab_size, h.n_embd),
    wpe = nn.Embedding(h.block_size, h.n_embd),
    drop = nn.Dropout(h.dropout),
    h = blocks,
    ln_f = nn.LayerNorm(h.n_embd, { bias = h.bias }),
  }
  self.lm_head = nn.Linear(h.n_embd, h.vocab_size, { bias = false })
  -- weight tying (nanoGPT: self.transformer.wte.weight = self.lm_head.weight): one tensor, two names
  self.lm_head.weight = self.transformer.wte.weight
  -- nanoGPT's _init_weights, then the scaled init of the residual projections (GPT-2's)
  lt.no_grad(function()
    for _, m in ipairs(nn.modules(self)) do
      local cls = getmetatable(m)
      if cls == nn.Linear or cls == nn.Embedding then
        m.weight:normal_(0, 0.02)
        if m.bias then m.bias:zero_() end
      end
    end
    local std = 0.02 / math.sqrt(2 * h.n_layer)
    for _, b in ipairs(blocks) do
      b.attn.c_proj.weight:normal_(0, std)
      b.mlp.c_proj.weight:normal_(0, std)
    end
  end)
end

function GPT:extra_repr()
  local h = self.hparams
  return string.format("vocab_size=%d, block_size=%d, n_layer=%d, n_head=%d, n_embd=%d", h.vocab_size,
    h.block_size, h.n_layer, h.n_head, h.n_embd)
end

--- logits [B x T x V] from idx [B x T] (int64, 1-based tokens); with targets [B x T] also the mean cross
--- entropy over every position.
function GPT:forward(idx, targets)
  if not lt.is_tensor(idx) or idx:dtype() ~= "int64" or idx:dim() ~= 2 then
    self:fail("expected idx as an int64 [batch x time] tensor, got " ..
      (lt.is_tensor(idx) and (idx:dtype() .. " " .. idx:shape_str()) or type(idx)))
  end
  local T, tr = idx:size(2), self.transformer
  if T > self.hparams.block_size then
    self:fail(string.format("cannot forward a sequence of length %d, block size is only %d", T, self.hparams.block_size))
  end
  local x = tr.drop(tr.wte(idx) + tr.wpe.weight:narrow(1, 1, T))
  for _, b in ipairs(tr.h) do x = b(x) end
  local logits = self.lm_head(tr.ln_f(x))
  if targets == nil then return logits end
  local V = self.hparams.vocab_size
  return logits, F.cross_entropy(logits:view(-1, V), targets:reshape(-1))
end

local function log(self, name, value, opts)
  if type(self.log) == "function" then self:log(name, value, opts) end
end

function GPT:training_step(batch)
  local _, loss = self:forward(batch[1], batch[2])
  log(self, "train_loss", loss, { prog_bar = true })
  return loss
end

function GPT:validation_step(batch)
  local _, loss = self:forward(batch[1], batch[2])
  log(self, "val_loss", loss, { prog_bar = true, batch_size = batch[1]:size(1) })
  return loss
end

--- The lr factor of step s (0-based): linear warmup over warmup_steps, then cosine decay to min_lr at
--- max_steps (nanoGPT's get_lr), constant after; constant lr when max_steps is nil.
function M.lr_factor(h, s)
  if s < h.warmup_steps then return (s + 1) / (h.warmup_steps + 1) end
  if not h.max_steps then return 1 end
  if s > h.max_steps then return h.min_lr / h.lr end
  local ratio = (s - h.warmup_steps) / math.max(1, h.max_steps - h.warmup_steps)
  local coeff = 0.5 * (1 + math.cos(math.pi * ratio))
  return (h.min_lr + coeff * (h.lr - h.min_lr)) / h.lr
end

--- nanoGPT's configure_optimizers: AdamW with weight decay on tensors of >= 2 dims (Linear weights,
--- embeddings), none on biases and LayerNorm weights; the warmup + cosine schedule, stepped every batch.
function GPT:configure_optimizers()
  local h = self.hparams
  local decay, no_decay = {}, {}
  for _, p in ipairs(nn.parameters(self)) do
    if p:dim() >= 2 then decay[#decay + 1] = p else no_decay[#no_decay + 1] = p end
  end
  local opt = lt.optim.AdamW({ { params = decay, weight_decay = h.weight_decay }, { params = no_decay, weight_decay = 0 } },
    { lr = h.lr, betas = { h.beta1, h.beta2 } })
  local sched = lt.optim.lr_scheduler.LambdaLR(opt, function(s) return M.lr_factor(h, s) end)
  return { optimizer = opt, lr_scheduler = { scheduler = sched, interval = "step" } }
end

--- Continues idx [B x T] (int64, 1-based) by max_new_tokens tokens drawn from the model (lutra's RNG:
--- lt.manual_seed reproduces it), feeding at most the last block_size tokens back each step. Options:
--- temperature=1 (> 0; lower is more conservative), top_k (keep only the k most likely tokens).
--- Returns [B x (T + max_new_tokens)]; the model's train/eval mode is restored.
function GPT:generate(idx, max_new_tokens, opts)
  if not lt.is_tensor(idx) or idx:dtype() ~= "int64" or idx:dim() ~= 2 then
    self:fail("generate: expected idx as an int64 [batch x time] tensor")
  end
  if type(max_new_tokens) ~= "number" or max_new_tokens < 0 or max_new_tokens ~= math.floor(max_new_tokens) then
    self:fail("generate: max_new_tokens must be an integer >= 0, got " .. tostring(max_new_tokens))
  end
  opts = require("lutra.utils.check").check_options("generate", opts, { temperature = "number", top_k = "number" })
  local temperature, top_k = opts.temperature or 1, opts.top_k
  if not (temperature > 0) then self:fail("generate: temperature must be > 0, got " .. tostring(temperature)) end
  local V = self.hparams.vocab_size
  if top_k and (top_k < 1 or top_k ~= math.floor(top_k)) then
    self:fail("generate: top_k must be an integer >= 1, got " .. tostring(top_k))
  end
  if top_k then top_k = math.min(top_k, V) end
  local was_training = self.training
  self:eval()
  local ok, out = pcall(lt.no_grad, function()
    local bs = self.hparams.block_size
    for _ = 1, max_new_tokens do
      local T = idx:size(2)
      local cond = T <= bs and idx or idx:narrow(2, T - bs + 1, bs)
      local logits = self:forward(cond)
      logits = logits:select(2, logits:size(2)) / temperature -- [B x V]
      if top_k then
        local v = logits:topk(top_k, 2)
        logits = logits:masked_fill(logits:lt(v:narrow(2, top_k, 1)), -math.huge)
      end
      idx = lt.cat({ idx, lt.multinomial(logits:softmax(2), 1) }, 2)
    end
    return idx
  end)
  self:train(was_training)
  if not ok then error(out, 0) end
  return out
end

-- ---- data -----------------------------------------------------------------------------------------------

--- The sorted unique characters of a text, and the text as an int64 tensor of 1-based indices into them
--- (models/char_rnn.lua's vocabulary and encoding).
function M.encode_text(text)
  if type(text) ~= "string" or #text == 0 then error("models.gpt.encode_text: expected a non-empty string", 2) end
  local chars = CharRNN.vocabulary(text)
  return chars, lt.tensor(CharRNN.encode(chars, text), "int64")
end

M.decode = CharRNN.decode

--- A dataset (ds:len(), ds:get(i)) of windows of a token stream: item i is {x, y} = data[o+1 .. o+T], data[o+2 .. o+T+1] for
--- the 0-based offset o = offsets[i] (nanoGPT's get_batch, with the offsets chosen by the caller).
function M.windows(data, offsets, T)
  local n = data:size(1)
  for i, o in ipairs(offsets) do
    if o < 0 or o + T + 1 > n then
      error(string.format("models.gpt.windows: offset %d (item %d) leaves no room for %d + 1 tokens of %d", o, i, T, n), 2)
    end
  end
  local ds = {}
  function ds:len() return #offsets end
  function ds:get(i)
    local o = offsets[i]
    return { data:narrow(1, o + 1, T), data:narrow(1, o + 2, T) }
  end
  return setmetatable(ds, { __len = function() return #offsets end })
end

--- Offsets in [0, n - T - 1] for windows of T + 1 tokens in a stream of n: count draws of the MINSTD
--- generator (s = 48271 s mod 2^31 - 1, exact in doubles) from seed >= 1, the same numbers in Lua and Python,
--- so lutra and PyTorch runs see the same batches (bench/gpt_torch.py).
function M.lcg_offsets(n, T, count, seed)
  local s, out, range = seed % 2147483647, {}, n - T
  if s == 0 then s = 1 end
  for i = 1, count do
    s = (48271 * s) % 2147483647
    out[i] = s % range
  end
  return out
end

M.GPT = GPT
M.Block, M.CausalSelfAttention, M.MLP = Block, Attention, MLP
setmetatable(M, { __call = function(_, opts) return GPT(opts) end })
M.new = function(opts) return GPT(opts) end

return M
