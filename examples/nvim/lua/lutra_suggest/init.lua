-- lutra_suggest — a Neovim plugin that learns a character model of the open buffer in the background and
-- suggests how the text before the cursor goes on (examples/nvim/README.md).
--
-- Training runs on a libuv timer (vim.loop): every `interval` ms one run:advance{seconds = budget} on the
-- main loop, so the editor keeps handling keys, redraws and other callbacks between two slices; nothing
-- blocks for longer than one budget (plus one batch). The model reads the last `context` characters
-- (an embedding per position, concatenated) and predicts the next one; suggestions decode greedily.
--
--   local s = require "lutra_suggest"
--   s.start(0, { budget = 0.005, interval = 20 })   -- buffer 0 = the current one
--   s.suggest("the quick brown ", 12)              -- -> "fox jumps ov" once it has learned
--   s.stats()                                      -- { ticks =, steps =, loss = }
--   s.stop()
local lt = require "lutra"

local M = {}

local VOCAB = 128 -- ASCII; other bytes are mapped to "?"

local state -- the running session: model, trainer, run, timer, counters

local function code(ch)
  local b = ch:byte()
  if not b or b >= VOCAB then b = 63 end -- "?"
  return b + 1 -- 1-based class index
end

-- every window of `k` characters of text and the character after it
local function windows(text, k)
  local xs, ys = {}, {}
  for i = k + 1, #text do
    local row = {}
    for j = i - k, i - 1 do row[#row + 1] = code(text:sub(j, j)) end
    xs[#xs + 1] = row
    ys[#ys + 1] = code(text:sub(i, i))
  end
  return xs, ys
end

local function new_model(k)
  local m = {
    emb = lt.nn.Embedding(VOCAB, 16),
    mlp = lt.nn.Sequential { lt.nn.Linear(k * 16, 128), lt.nn.Tanh(), lt.nn.Linear(128, VOCAB) },
    k = k,
  }
  function m:forward(x) -- x: [B x k] int64 -> logits [B x VOCAB]
    return self.mlp(self.emb(x):reshape(x:size(1), self.k * 16))
  end
  function m:training_step(batch)
    local loss = lt.F.cross_entropy(self:forward(batch[1]), batch[2])
    self.loss = loss:item()
    return loss
  end
  function m:configure_optimizers() return lt.optim.Adam(lt.nn.parameters(self), { lr = 3e-3 }) end
  return m
end

local function buffer_text(buf)
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n") .. "\n"
end

--- Starts training on the text of buffer `buf` (0: the current one). Options: budget (seconds of training
--- per tick, 0.005), interval (ms between ticks, 20), context (characters the model reads, 8), batch_size (64).
function M.start(buf, opts)
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= "budget" and k ~= "interval" and k ~= "context" and k ~= "batch_size" then
      error("lutra_suggest.start: unknown option '" .. tostring(k) ..
        "' (known: budget, interval, context, batch_size)", 2)
    end
  end
  M.stop()
  local k = opts.context or 8
  local text = buffer_text(buf == 0 and vim.api.nvim_get_current_buf() or buf)
  if #text <= k then
    error("lutra_suggest.start: the buffer has " .. #text .. " characters, need more than " .. k, 2)
  end
  local xs, ys = windows(text, k)
  local ds = lt.data.TensorDataset(lt.tensor(xs, "int64"), lt.tensor(ys, "int64"))
  local model = new_model(k)
  local trainer = lt.Trainer { max_epochs = -1, logger = false, enable_checkpointing = false }
  local s = {
    model = model, trainer = trainer, ticks = 0, budget = opts.budget or 0.005,
    run = trainer:fit_run(model, lt.data.DataLoader(ds, { batch_size = opts.batch_size or 64, shuffle = true })),
    timer = vim.loop.new_timer(),
  }
  state = s
  s.timer:start(0, opts.interval or 20, vim.schedule_wrap(function()
    if state ~= s then return end
    s.ticks = s.ticks + 1
    local ok, err = pcall(s.run.advance, s.run, { seconds = s.budget })
    if not ok then
      M.stop()
      vim.notify("lutra_suggest: training stopped: " .. tostring(err), vim.log.levels.ERROR)
    end
  end))
end

--- Stops the background training (the model stays for suggest).
function M.stop()
  if state and state.timer then
    state.timer:stop()
    state.timer:close()
    state.timer = nil
  end
end

--- { ticks =, steps =, loss = } of the session (nil before start).
function M.stats()
  if not state then return nil end
  return { ticks = state.ticks, steps = state.trainer.global_step, loss = state.model.loss }
end

--- The `n` characters the model expects after `prefix` (greedy).
function M.suggest(prefix, n)
  if not state then error("lutra_suggest.suggest: no model yet (call start first)", 2) end
  local m = state.model
  local ctx = {}
  prefix = string.rep(" ", m.k) .. prefix
  for j = #prefix - m.k + 1, #prefix do ctx[#ctx + 1] = code(prefix:sub(j, j)) end
  local out = {}
  lt.no_grad(function()
    for _ = 1, n do
      local c = m:forward(lt.tensor({ ctx }, "int64")):argmax(2):item() -- 1-based class
      out[#out + 1] = string.char(c - 1)
      table.remove(ctx, 1)
      ctx[#ctx + 1] = c
    end
  end)
  return table.concat(out)
end

--- :LutraSuggest — shows the continuation of the text before the cursor.
function M.show(n)
  local line = vim.api.nvim_get_current_line()
  local col = vim.api.nvim_win_get_cursor(0)[2]
  vim.api.nvim_echo({ { M.suggest(line:sub(1, col + 1), n or 20), "Comment" } }, false, {})
end

return M
