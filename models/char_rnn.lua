-- models/char_rnn.lua — a character-level language model: Embedding -> LSTM -> Linear over the
-- characters, trained with truncated backpropagation through time (TBPTT, Lightning's
-- `truncated_bptt_steps`), plus text sampling.
--
--   local CharRNN = require "models.char_rnn"
--   local chars = CharRNN.vocabulary(text)                   -- sorted unique characters
--   local ds = CharRNN.dataset(text, chars, 128)             -- x, y = [N x 128] int64 (y is x shifted by one)
--   local model = CharRNN{chars = chars, hidden = 128, tbptt = 32}
--   lt.Trainer{max_epochs = 3}:fit(model, lt.data.DataLoader(ds, {batch_size = 32, shuffle = true}))
--   print(CharRNN.sample(model, "The ", 200, 0.8))
--
-- Options: chars (required: the vocabulary, a list of one-character strings), embed=32, hidden=128,
-- num_layers=1, tbptt=nil (split each [batch x time] batch into chunks of this many steps; the trainer
-- passes the hidden state from chunk to chunk, detached), optimizer="adam"|"adamw"|"sgd", lr=0.003,
-- momentum=0, weight_decay=0, grad_clip (not here: use the Trainer's gradient_clip_val).
--
-- Hooks: training_step(batch, batch_idx[, hiddens]) returns {loss=, hiddens=} (Lightning 1.6's TBPTT
-- contract: with truncated_bptt_steps set the trainer calls it once per time chunk with the hiddens the
-- previous chunk returned, nil for the first); validation_step / test_step log val_loss / test_loss and
-- the per-character perplexity (val_ppl); predict_step returns the most likely next characters' indices.
local lt = require "lutra"

local M = {}
local Model = {}
Model.__index = Model

local OPTIONS = {
  chars = "table", embed = "number", hidden = "number", num_layers = "number", tbptt = "number",
  optimizer = "string", lr = "number", momentum = "number", weight_decay = "number",
}

--- The sorted unique characters of a text (a list of one-character strings).
function M.vocabulary(text)
  if type(text) ~= "string" or #text == 0 then error("char_rnn.vocabulary: expected a non-empty string", 2) end
  local seen, chars = {}, {}
  for ch in text:gmatch(".") do
    if not seen[ch] then seen[ch] = true; chars[#chars + 1] = ch end
  end
  table.sort(chars)
  return chars
end

local function index_of(chars)
  local idx = {}
  for i, ch in ipairs(chars) do idx[ch] = i end
  return idx
end

--- The text as a list of 1-based character indices; unknown characters are an error naming them.
function M.encode(chars, text)
  local idx = index_of(chars)
  local out = {}
  for k = 1, #text do
    local ch = text:sub(k, k)
    local i = idx[ch]
    if not i then
      error(string.format("char_rnn.encode: character %q (byte %d, position %d) is not in the vocabulary", ch,
        ch:byte(), k), 2)
    end
    out[k] = i
  end
  return out
end

function M.decode(chars, ids)
  local out = {}
  for k, i in ipairs(ids) do out[k] = chars[i] or "?" end
  return table.concat(out)
end

--- A TensorDataset of non-overlapping windows: x = text[s .. s+T-1], y = text[s+1 .. s+T] (int64 [N x T]).
function M.dataset(text, chars, seq_len)
  if type(seq_len) ~= "number" or seq_len < 1 then error("char_rnn.dataset: seq_len must be a positive integer", 2) end
  local ids = M.encode(chars, text)
  local n = math.floor((#ids - 1) / seq_len)
  if n < 1 then
    error(string.format("char_rnn.dataset: a text of %d characters is too short for windows of %d", #ids, seq_len), 2)
  end
  local all = lt.tensor(ids, "int64")
  local x = all:narrow(1, 1, n * seq_len):view(n, seq_len)
  local y = all:narrow(1, 2, n * seq_len):view(n, seq_len)
  return lt.data.TensorDataset(x, y)
end

local function build(opts)
  if type(opts) ~= "table" then error("models.char_rnn: options must be a table with at least chars", 3) end
  for k, v in pairs(opts) do
    local want = OPTIONS[k]
    if not want then
      local known = {}
      for n in pairs(OPTIONS) do known[#known + 1] = n end
      table.sort(known)
      error(string.format("models.char_rnn: unknown option '%s' (known options: %s)", tostring(k), table.concat(known, ", ")), 3)
    end
    if type(v) ~= want then error(string.format("models.char_rnn: option '%s' must be a %s, got %s", k, want, type(v)), 3) end
  end
  if not opts.chars or #opts.chars == 0 then
    error("models.char_rnn: option 'chars' (the vocabulary, e.g. char_rnn.vocabulary(text)) is required", 3)
  end
  local h = {
    embed = opts.embed or 32, hidden = opts.hidden or 128, num_layers = opts.num_layers or 1,
    optimizer = opts.optimizer or "adam", lr = opts.lr or 0.003, momentum = opts.momentum or 0,
    weight_decay = opts.weight_decay or 0, tbptt = opts.tbptt, vocab_size = #opts.chars,
  }
  if h.optimizer ~= "adam" and h.optimizer ~= "adamw" and h.optimizer ~= "sgd" then
    error(string.format("models.char_rnn: option 'optimizer' must be \"adam\", \"adamw\" or \"sgd\", got %q", h.optimizer), 3)
  end
  local nn = lt.nn
  local V = h.vocab_size
  local model = {
    hparams = h,
    chars = opts.chars,
    embed = nn.Embedding(V, h.embed),
    lstm = nn.LSTM(h.embed, h.hidden, { num_layers = h.num_layers, batch_first = true }),
    head = nn.Linear(h.hidden, V),
  }
  if h.tbptt then model.truncated_bptt_steps = h.tbptt end
  return setmetatable(model, Model)
end

setmetatable(M, { __call = function(_, opts) return build(opts) end })
M.new = build

--- logits [B x T x V] and the LSTM state {h, c} after the last step, from x [B x T] and an optional state.
function Model:forward(x, hiddens)
  local out, state = self.lstm(self.embed(x), hiddens)
  return self.head(out), state
end

local function detach_state(s) return { s[1]:detach(), s[2]:detach() } end

local function loss_of(self, batch, hiddens)
  local logits, state = self:forward(batch[1], hiddens)
  local V = self.hparams.vocab_size
  local loss = lt.F.cross_entropy(logits:reshape(-1, V), batch[2]:reshape(-1))
  return loss, state
end

local function log(self, name, value, opts)
  if type(self.log) == "function" then self:log(name, value, opts) end
end

--- With TBPTT the trainer passes `hiddens` (nil for the first chunk of a batch); returns the loss and the
--- detached state for the next chunk.
function Model:training_step(batch, batch_idx, hiddens)
  local loss, state = loss_of(self, batch, hiddens)
  log(self, "train_loss", loss, { prog_bar = true })
  return { loss = loss, hiddens = detach_state(state) }
end

function Model:validation_step(batch, batch_idx)
  local loss = loss_of(self, batch)
  local n = batch[1]:size(1)
  log(self, "val_loss", loss, { prog_bar = true, batch_size = n })
  log(self, "val_ppl", loss:exp(), { batch_size = n })
end

function Model:test_step(batch, batch_idx)
  local loss = loss_of(self, batch)
  local n = batch[1]:size(1)
  log(self, "test_loss", loss, { batch_size = n })
  log(self, "test_ppl", loss:exp(), { batch_size = n })
end

function Model:predict_step(batch, batch_idx)
  return (self:forward(batch[1])):argmax(3)
end

--- Lightning's default TBPTT split: chunks of `split_size` steps along the time dim (dim 2) of every tensor.
function Model:tbptt_split_batch(batch, split_size)
  local T = batch[1]:size(2)
  local splits = {}
  for t = 1, T, split_size do
    local len = math.min(split_size, T - t + 1)
    local s = {}
    for k, v in ipairs(batch) do s[k] = v:narrow(2, t, len) end
    splits[#splits + 1] = s
  end
  return splits
end

function Model:configure_optimizers()
  local h = self.hparams
  local params = lt.nn.parameters(self)
  if h.optimizer == "sgd" then
    return lt.optim.SGD(params, { lr = h.lr, momentum = h.momentum, weight_decay = h.weight_decay })
  elseif h.optimizer == "adamw" then
    return lt.optim.AdamW(params, { lr = h.lr, weight_decay = h.weight_decay })
  end
  return lt.optim.Adam(params, { lr = h.lr, weight_decay = h.weight_decay })
end

--- Generates n characters after start_text (which primes the state); temperature < 1 is more
--- conservative, > 1 more random. Draws from lutra's RNG (lt.manual_seed makes it reproducible).
--- Returns start_text followed by the generated characters.
function M.sample(model, start_text, n, temperature)
  temperature = temperature or 1
  if type(start_text) ~= "string" or #start_text == 0 then error("char_rnn.sample: start_text must be a non-empty string", 2) end
  if type(n) ~= "number" or n < 0 then error("char_rnn.sample: n must be a number >= 0", 2) end
  if type(temperature) ~= "number" or temperature <= 0 then error("char_rnn.sample: temperature must be > 0", 2) end
  local chars = model.chars
  local ids = M.encode(chars, start_text)
  local was_training = model.embed.training
  lt.nn.eval(model)
  local out = {}
  lt.no_grad(function()
    local logits, state = model:forward(lt.tensor({ ids }, "int64"))
    local last = logits:select(2, logits:size(2)):select(1, 1)
    for k = 1, n do
      local p = (last / temperature):softmax(1):flatten():tolist()
      local u, acc, pick = lt.rand(1):item(), 0, #p
      for i = 1, #p do
        acc = acc + p[i]
        if u < acc then pick = i; break end
      end
      out[k] = pick
      logits, state = model:forward(lt.tensor({ { pick } }, "int64"), state)
      last = logits:select(2, 1):select(1, 1)
    end
  end)
  if was_training ~= false then lt.nn.train(model) end
  return start_text .. M.decode(chars, out)
end

return M
