-- examples/gpt.lua — a character-level GPT (models/gpt.lua, nanoGPT's model) trained with the Trainer on
-- the poems of Debian's `fortunes` package, then sampled.
--
--   ./lutra examples/gpt.lua                          ~2 minutes: 1500 steps of batch 16 x 64 characters
--   ./lutra examples/gpt.lua book.txt --steps 5000 --n-embd 256 --n-layer 4
--   ./lutra examples/gpt.lua --fast                   a few seconds on a small model and text
--
-- Options: FILE (default /usr/share/games/fortunes/songs-poems, 234 KB of songs and poems), --steps N (1500),
-- --batch-size N (16), --block-size N (64), --n-layer N (2), --n-head N (4), --n-embd N (128), --dropout P (0),
-- --lr LR (1e-3, warmup 100 steps then cosine decay to lr/10), --val-batches N (40), --seed N (0: the init),
-- --temperature T (0.8), --top-k K (10), --length N (300 sampled characters), --prompt TEXT ("\n"),
-- --out DIR (runs/gpt), --fast.
--
-- The recipe is nanoGPT's shakespeare_char (scaled to this budget), and bench/gpt_torch.py is its PyTorch
-- twin: the first 90% of the characters train, the last 10% validate; batches are windows at offsets drawn
-- by the MINSTD generator (seed 1 for training, 2 for validation) so both frameworks see the same data;
-- AdamW (betas 0.9, 0.99, weight decay 0.1 on matrices), gradient norm clipped at 1. The last line it prints,
-- "validation loss X", is what bench/RESULTS.md compares.
local repo = (arg and arg[0] or ""):match("^(.-)examples/[^/]*$")
if repo then package.path = repo .. "?.lua;" .. package.path end
local lt = require "lutra"
local GPT = require "models.gpt"

local USAGE = "usage: lutra examples/gpt.lua [FILE] [--steps N] [--batch-size N] [--block-size N] [--n-layer N] "
  .. "[--n-head N] [--n-embd N] [--dropout P] [--lr LR] [--val-batches N] [--seed N] [--temperature T] "
  .. "[--top-k K] [--length N] [--prompt TEXT] [--out DIR] [--fast]"

local opts = require("examples.cli_args")(arg, USAGE,
  { steps = "number", ["batch-size"] = "number", ["block-size"] = "number", ["n-layer"] = "number",
    ["n-head"] = "number", ["n-embd"] = "number", dropout = "number", lr = "number", ["val-batches"] = "number",
    seed = "number", temperature = "number", ["top-k"] = "number", length = "number", prompt = "string",
    out = "string" }, { fast = true },
  { file = "/usr/share/games/fortunes/songs-poems", steps = 1500, ["batch-size"] = 16, ["block-size"] = 64,
    ["n-layer"] = 2, ["n-head"] = 4, ["n-embd"] = 128, dropout = 0, lr = 1e-3, ["val-batches"] = 40, seed = 0,
    temperature = 0.8, ["top-k"] = 10, length = 300, prompt = "\n", out = "runs/gpt" },
  { "file" })
if opts.fast then
  opts.steps, opts["n-embd"], opts["n-layer"], opts["block-size"] = 40, 32, 1, 32
  opts["val-batches"], opts.length = 4, 60
end

local fh, err = io.open(opts.file, "rb")
if not fh then io.stderr:write("gpt: cannot read the text: ", tostring(err), "\n"); os.exit(1) end
local text = fh:read("*a")
fh:close()
if opts.fast then text = text:sub(1, 20000) end

local T, B = opts["block-size"], opts["batch-size"]
local chars, data = GPT.encode_text(text)
local n_train = math.floor(#text * 0.9)
local train_data, val_data = data:narrow(1, 1, n_train), data:narrow(1, n_train + 1, #text - n_train)
if val_data:size(1) < T + 2 then
  io.stderr:write(string.format("gpt: %s is too short: the validation split needs more than %d characters\n",
    opts.file, T + 1))
  os.exit(1)
end
local train_ds = GPT.windows(train_data, GPT.lcg_offsets(n_train, T, opts.steps * B, 1), T)
local val_ds = GPT.windows(val_data, GPT.lcg_offsets(val_data:size(1), T, opts["val-batches"] * B, 2), T)
print(string.format("%s: %d characters, %d distinct; %d training steps of %d x %d, %d validation windows",
  opts.file, #text, #chars, opts.steps, B, T, val_ds:len()))

lt.manual_seed(opts.seed)
local model = GPT { vocab_size = #chars, block_size = T, n_layer = opts["n-layer"], n_head = opts["n-head"],
  n_embd = opts["n-embd"], dropout = opts.dropout, lr = opts.lr, warmup_steps = math.min(100, math.floor(opts.steps / 10)),
  max_steps = opts.steps }
print(string.format("model: %d parameters (lm_head tied to the token embedding)", model:num_parameters()))

local t0 = os.time()
local report = {
  on_train_batch_end = function(_, trainer)
    local s = trainer.global_step
    if s % 250 == 0 then
      print(string.format("step %5d  train_loss %.4f  (%d s)", s, trainer.callback_metrics.train_loss or 0 / 0,
        os.time() - t0))
      io.stdout:flush()
    end
  end,
}
local callbacks = {}
if not lt.callbacks.ProgressBar.stdout_is_terminal() then callbacks[1] = report end
local trainer = lt.Trainer { max_steps = opts.steps, max_epochs = 1, gradient_clip_val = 1.0, callbacks = callbacks,
  num_sanity_val_steps = 0, default_root_dir = opts.out, enable_model_summary = false, log_every_n_steps = 50 }
trainer:fit(model, lt.data.DataLoader(train_ds, { batch_size = B }), lt.data.DataLoader(val_ds, { batch_size = B }))

lt.manual_seed(opts.seed)
local index, prompt = {}, {}
for i, ch in ipairs(chars) do index[ch] = i end
for k = 1, #opts.prompt do prompt[#prompt + 1] = index[opts.prompt:sub(k, k)] end -- unknown characters dropped
if #prompt == 0 then prompt[1] = 1 end
local out = model:generate(lt.tensor({ prompt }, "int64"), opts.length,
  { temperature = opts.temperature, top_k = opts["top-k"] })
print(string.format("--- sample (temperature %g, top_k %d) ---", opts.temperature, opts["top-k"]))
print(GPT.decode(chars, out[1]:totable()))
print("---")
print(string.format("validation loss %.4f (%d s)", trainer.callback_metrics.val_loss, os.time() - t0))
