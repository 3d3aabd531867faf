-- examples/char_rnn.lua — a character-level LSTM language model trained with truncated backpropagation
-- through time (TBPTT) on any text file, then sampled.
--
--   ./lutra examples/char_rnn.lua                        trains on /usr/share/common-licenses/GPL-3
--   ./lutra examples/char_rnn.lua book.txt --epochs 30 --hidden 256
--   ./lutra examples/char_rnn.lua --fast                 a few seconds on the first 8000 characters
--
-- Options: FILE (default /usr/share/common-licenses/GPL-3, present on every Debian system), --epochs N (20),
-- --seq-len N (128: characters per training window), --tbptt N (32: steps per backward), --hidden N (128),
-- --batch-size N (32), --temperature T (0.8), --prompt TEXT ("The "), --length N (400 sampled characters),
-- --seed N (0), --out DIR (runs/char_rnn), --fast.
--
-- The text is cut into windows of seq-len characters (targets: the same window shifted by one); 90% of
-- the windows train, the last 10% validate (val_loss, val_ppl = perplexity per character). The model
-- (models/char_rnn.lua) sets truncated_bptt_steps, so the trainer splits each [batch x seq-len] batch
-- into chunks of tbptt steps and carries the LSTM state from chunk to chunk.
-- models/ sits next to examples/: find it wherever the script is run from
local repo = (arg and arg[0] or ""):match("^(.-)examples/[^/]*$")
if repo then package.path = repo .. "?.lua;" .. package.path end
local lt = require "lutra"
local CharRNN = require "models.char_rnn"

local USAGE = "usage: lutra examples/char_rnn.lua [FILE] [--epochs N] [--seq-len N] [--tbptt N] [--hidden N] "
  .. "[--batch-size N] [--temperature T] [--prompt TEXT] [--length N] [--seed N] [--out DIR] [--fast]"

local opts = require("examples.cli_args")(arg, USAGE,
  { epochs = "number", ["seq-len"] = "number", tbptt = "number", hidden = "number", ["batch-size"] = "number",
    temperature = "number", length = "number", seed = "number", prompt = "string", out = "string" }, { fast = true },
  { file = "/usr/share/common-licenses/GPL-3", ["seq-len"] = 128, tbptt = 32, hidden = 128, ["batch-size"] = 32,
    temperature = 0.8, prompt = "The ", length = 400, seed = 0, out = "runs/char_rnn" },
  { "file" })
if opts.fast then
  opts.epochs = opts.epochs or 2
  opts["seq-len"], opts.tbptt, opts.hidden, opts.length = 64, 16, 64, 100
end
local epochs = opts.epochs or 20

local fh, err = io.open(opts.file, "rb")
if not fh then io.stderr:write("char_rnn: cannot read the text: ", tostring(err), "\n"); os.exit(1) end
local text = fh:read("*a")
fh:close()
if opts.fast then text = text:sub(1, 8000) end

lt.manual_seed(opts.seed)
local chars = CharRNN.vocabulary(text)
local ds = CharRNN.dataset(text, chars, opts["seq-len"])
local n_val = math.max(1, math.floor(#ds / 10))
local train, val = require("examples.holdout")(ds, n_val)
local train_loader = lt.data.DataLoader(train, { batch_size = opts["batch-size"], shuffle = true })
local val_loader = lt.data.DataLoader(val, { batch_size = opts["batch-size"] })
print(string.format("%s: %d characters, %d distinct; %d training and %d validation windows of %d", opts.file,
  #text, #chars, #train, #val, opts["seq-len"]))

local model = CharRNN { chars = chars, hidden = opts.hidden, embed = 32, tbptt = opts.tbptt, lr = 0.003 }

local t0 = os.time()
local report = {
  on_train_epoch_end = function(_, trainer)
    local m = trainer.callback_metrics
    print(string.format("epoch %2d  train_loss %.3f  val_loss %.3f  val_ppl %.2f  (%d s)", trainer.current_epoch,
      m.train_loss or 0 / 0, m.val_loss or 0 / 0, m.val_ppl or 0 / 0, os.time() - t0))
    io.stdout:flush()
  end,
}
local callbacks = {}
if not lt.callbacks.ProgressBar.stdout_is_terminal() then callbacks[1] = report end
local trainer = lt.Trainer { max_epochs = epochs, gradient_clip_val = 1.0, callbacks = callbacks,
  default_root_dir = opts.out, enable_model_summary = false }
trainer:fit(model, train_loader, val_loader)

local m = trainer.callback_metrics
print(string.format("validation: loss %.3f, perplexity %.2f per character (uniform guessing: %d)", m.val_loss or 0 / 0,
  m.val_ppl or 0 / 0, #chars))
print(string.format("--- sample (temperature %g) ---", opts.temperature))
print(CharRNN.sample(model, opts.prompt, opts.length, opts.temperature))
