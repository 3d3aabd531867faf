-- bench/bf16_train.lua — does bfloat16 mixed precision train as well as fp32? Two runs each, the same seed and
-- batches, Trainer{precision = "32-true"} against Trainer{precision = "bf16-mixed"}, one thread:
--   char  300 steps of character modelling: the tiny GPT (models/gpt.lua: 2 layers, 4 heads, width 128, batch 16,
--         context 64; nanoGPT's AdamW, warmup + cosine, gradient norm clipped at 1) on Debian's fortunes
--         songs-poems (examples/gpt.lua's text and batches); the final loss is the mean training loss of the last
--         20 steps and the validation loss over 20 batches; the bar: bf16 within 2% of fp32
--   mnist the README's model (784-256-10 MLP, SGD lr 0.01 momentum 0.9, batch 64, shuffled) for the README's
--         2 epochs on Fashion-MNIST, test accuracy on the 10,000 test images; the bar: within 0.5 points
--   ./lutra bench/bf16_train.lua [char|mnist]        (~2 minutes for both)
local repo = (arg and arg[0] or ""):match("^(.-)bench/[^/]*$") or "./"
package.path = repo .. "?.lua;" .. package.path
local lt = require "lutra"
local GPT = require "models.gpt"

lt.set_num_threads(1)
local QUIET = { logger = false, enable_checkpointing = false, enable_progress_bar = false, enable_model_summary = false }
local function opts(extra)
  local o = {}
  for k, v in pairs(QUIET) do o[k] = v end
  for k, v in pairs(extra) do o[k] = v end
  return o
end

local function char(precision)
  local f = assert(io.open("/usr/share/games/fortunes/songs-poems", "rb"))
  local text = f:read("*a")
  f:close()
  local T, B, STEPS = 64, 16, 300
  local chars, data = GPT.encode_text(text)
  local n_train = math.floor(#text * 0.9)
  local train_data, val_data = data:narrow(1, 1, n_train), data:narrow(1, n_train + 1, #text - n_train)
  local train = lt.data.DataLoader(GPT.windows(train_data, GPT.lcg_offsets(n_train, T, STEPS * B, 1), T), { batch_size = B })
  local val = lt.data.DataLoader(GPT.windows(val_data, GPT.lcg_offsets(val_data:size(1), T, 20 * B, 2), T),
    { batch_size = B })
  lt.manual_seed(0)
  local model = GPT { vocab_size = #chars, block_size = T, n_layer = 2, n_head = 4, n_embd = 128, lr = 1e-3,
    warmup_steps = 30, max_steps = STEPS }
  local losses = {}
  local cb = { on_train_batch_end = function(_, trainer) losses[#losses + 1] = trainer.callback_metrics.train_loss end }
  local t = lt.Trainer(opts { precision = precision, max_steps = STEPS, gradient_clip_val = 1, callbacks = { cb },
    num_sanity_val_steps = 0 })
  local t0 = os.clock()
  t:fit(model, train)
  local secs = os.clock() - t0
  local last = 0
  for i = #losses - 19, #losses do last = last + losses[i] / 20 end
  local v = t:validate(model, val)[1].val_loss
  return last, v, secs
end

local function mnist(precision)
  lt.manual_seed(0)
  local model = { net = lt.nn.Sequential { lt.nn.Flatten(), lt.nn.Linear(784, 256), lt.nn.ReLU(), lt.nn.Linear(256, 10) } }
  function model:forward(x) return self.net(x) end
  function model:training_step(batch) return lt.F.cross_entropy(self:forward(batch[1]), batch[2]) end
  function model:test_step(batch)
    self:log("test_acc", self:forward(batch[1]):argmax(2):eq(batch[2]):mean(), { batch_size = batch[1]:size(1) })
  end
  function model:configure_optimizers() return lt.optim.SGD(self.net:parameters(), { lr = 0.01, momentum = 0.9 }) end
  local train = lt.data.DataLoader(lt.data.FashionMNIST { train = true }, { batch_size = 64, shuffle = true })
  local test = lt.data.DataLoader(lt.data.FashionMNIST { train = false }, { batch_size = 1000 })
  local t = lt.Trainer(opts { precision = precision, max_epochs = 2 })
  local t0 = os.clock()
  t:fit(model, train)
  local secs = os.clock() - t0
  return t:test(model, test)[1].test_acc, secs
end

local which = arg and arg[1]
if which == nil or which == "char" then
  local l32, v32, s32 = char("32-true")
  local l16, v16, s16 = char("bf16-mixed")
  print(string.format("char fp32: final train loss %.4f, val loss %.4f (%.1f s CPU)", l32, v32, s32))
  print(string.format("char bf16: final train loss %.4f, val loss %.4f (%.1f s CPU)", l16, v16, s16))
  print(string.format("summary: char 300 steps: bf16 final loss %.2f%% from fp32's (val %.2f%%; bar 2%%); fit x%.2f",
    100 * (l16 - l32) / l32, 100 * (v16 - v32) / v32, s32 / s16))
end
if which == nil or which == "mnist" then
  local a32, s32 = mnist("32-true")
  local a16, s16 = mnist("bf16-mixed")
  print(string.format("summary: README model, 2 epochs: test accuracy fp32 %.2f%%, bf16 %.2f%% (%+.2f points; bar 0.5); "
    .. "fit x%.2f", 100 * a32, 100 * a16, 100 * (a16 - a32), s32 / s16))
end
