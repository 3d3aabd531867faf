-- examples/data_workers.lua — batches made in worker states while the Trainer trains (docs/reference/data.md,
-- "Worker states"): DataLoader{num_workers = 2}.
--
-- The dataset is a plain Lua table whose get(i) does real work, as decoding and augmenting images do: it draws
-- a 12 x 12 pattern of class (i - 1) % 4 + 1 (stripes across, stripes down, a checkerboard, a diagonal) at a
-- random shift, with noise, from lutra's generator. Two worker states run get and the collation; the training
-- state only trains. Each worker seeds its generator from the loader's (worker_init_fn says which seed), so
-- the same --seed gives the same run.
--
--   ./lutra examples/data_workers.lua [--epochs N] [--workers N] [--seed N] [--fast]
local repo = (arg and arg[0] or ""):match("^(.-)examples/[^/]*$")
if repo then package.path = repo .. "?.lua;" .. package.path end
local lt = require "lutra"

local USAGE = "usage: lutra examples/data_workers.lua [--epochs N] [--workers N] [--seed N] [--fast]"
local opts = require("examples.cli_args")(arg, USAGE, { epochs = "number", workers = "number", seed = "number" },
  { fast = true }, { epochs = 3, workers = 2, seed = 0 })
local epochs = opts.fast and 2 or opts.epochs
lt.manual_seed(opts.seed)

local Patterns = {}
Patterns.__index = Patterns

local function pattern(c, x, y)
  if c == 1 then return y % 3 == 0 and 1 or 0 end
  if c == 2 then return x % 3 == 0 and 1 or 0 end
  if c == 3 then return (x + y) % 2 end
  return x == y and 1 or 0
end

function Patterns:len() return self.n end

-- runs in a worker state: lt (an upvalue) and pattern cross with it
function Patterns:get(i)
  local c = (i - 1) % 4 + 1
  local dx, dy = lt.random_integer(3) - 2, lt.random_integer(3) - 2
  local px = {}
  for y = 1, 12 do
    for x = 1, 12 do px[(y - 1) * 12 + x] = pattern(c, x + dx, y + dy) end
  end
  return { lt.tensor(px) + 0.3 * lt.randn(144), c }
end

local function dataset(n) return setmetatable({ n = n }, Patterns) end

local function loader(ds, shuffle)
  return lt.data.DataLoader(ds, {
    batch_size = 32, shuffle = shuffle, num_workers = opts.workers, persistent_workers = opts.workers > 0 or nil,
    worker_init_fn = opts.workers > 0 and function(id)
      local info = require("lutra").data.get_worker_info()
      -- one write per line: the workers run at once, and print's separate writes of the text and its newline
      -- could interleave with another worker's line
      io.stdout:write(string.format("worker %d of %d: seed %d\n", id, info.num_workers, info.seed))
      io.stdout:flush()
    end or nil,
  })
end

local model = { net = lt.nn.Sequential(lt.nn.Linear(144, 32), lt.nn.ReLU(), lt.nn.Linear(32, 4)) }
function model:training_step(b)
  local loss = lt.F.cross_entropy(self.net(b[1]), b[2])
  self:log("train_loss", loss)
  return loss
end
function model:validation_step(b)
  local out = self.net(b[1])
  self:log("val_loss", lt.F.cross_entropy(out, b[2]))
  self:log("val_acc", out:argmax(2):eq(b[2]):float():mean())
end
function model:configure_optimizers() return lt.optim.SGD(self.net:parameters(), { lr = 0.1, momentum = 0.9 }) end

local train_loader = loader(dataset(opts.fast and 512 or 4096), true)
local val_loader = loader(dataset(opts.fast and 128 or 512), false)
local trainer = lt.Trainer { max_epochs = epochs, enable_progress_bar = false, enable_model_summary = false,
  logger = false, enable_checkpointing = false, num_sanity_val_steps = 0 }
local t0 = require("lutra.core")._io.now()
trainer:fit(model, train_loader, val_loader)
train_loader:close()
val_loader:close()
local m = trainer.callback_metrics
print(string.format("done: %d epochs with %d workers in %.1f s, val_loss %.4f, val_acc %.4f", trainer.current_epoch,
  opts.workers, require("lutra.core")._io.now() - t0, m.val_loss or 0 / 0, m.val_acc or 0 / 0))
