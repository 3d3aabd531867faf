-- bench/loop_overhead.lua — what the Trainer costs per batch (issue 4, "Speed"): a tiny model (batch 1,
-- Linear(1,1), MSE, SGD) trained by lt.Trainer vs the same steps in a plain Lua loop; the cost of a callback
-- with 10 empty hooks; of one defined empty hook; of an absent one.
--   luajit bench/loop_overhead.lua [batches]      (from the repository root, with the module built)
--   ./lutra bench/loop_overhead.lua
--   luajit bench/loop_overhead.lua <batches> <variant>   one run of one variant (fit, ten, null_fit, ...), no
--                                                        timing: what bench/loop_callgrind counts instructions of
-- Target: <= 5 us per batch all in (PyTorch Lightning 1.9 adds ~800 us per step on this machine).
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local build = os.getenv("LUTRA_BUILD_DIR") or "build"
package.cpath = "./" .. build .. "/bin/release/?.so;" .. package.cpath
local lt = require "lutra"

local N = tonumber(arg and arg[1]) or 20000
local REPEAT = 7

lt.set_num_threads(1)
lt.manual_seed(0)
local xs, ys = {}, {}
for i = 1, N do
  xs[i] = lt.randn(1, 1)
  ys[i] = xs[i] * 3 + 1
end
local batches = {}
for i = 1, N do batches[i] = { xs[i], ys[i] } end

-- a plain Lua loader over prebuilt batches (what the loops cost, not the data)
local list_loader = {
  len = function() return N end,
  iter = function()
    local i = 0
    return function() i = i + 1; return batches[i] end
  end,
}
local ds = lt.data.TensorDataset(lt.cat(xs, 1), lt.cat(ys, 1))
local data_loader = lt.data.DataLoader(ds, { batch_size = 1 })

-- a model whose training_step does no tensor work (returns nil: no backward, no step): the loop alone
local function null_model()
  local m = { w = lt.param(lt.zeros(1, 1)) }
  function m:training_step(b) return nil end
  function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 0.01 }) end
  return m
end

local function new_model()
  lt.manual_seed(1)
  local m = { lin = lt.nn.Linear(1, 1) }
  local F = lt.F
  function m:training_step(b) return F.mse_loss(self.lin(b[1]), b[2]) end
  function m:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), { lr = 0.01 }) end
  return m
end

-- CPU time of this process (the machine may be shared: wall time would count other processes' turns)
local function time_once(f)
  collectgarbage()
  local t0 = os.clock()
  f()
  return (os.clock() - t0) / N * 1e6 -- us per batch
end

-- variants run round-robin, REPEAT rounds, best time of each (the machine may be shared)
local function measure(variants)
  local res = {}
  for r = 1, REPEAT do
    for i, v in ipairs(variants) do
      local t = time_once(v[2])
      if r == 1 or t < res[i] then res[i] = t end
    end
  end
  return res
end

local function trainer(cbs, profiler)
  return lt.Trainer { max_epochs = 1, logger = false, enable_checkpointing = false, enable_model_summary = false,
    enable_progress_bar = false, num_sanity_val_steps = 0, callbacks = cbs or {}, profiler = profiler }
end

-- the same step without the Trainer
local function raw(loader)
  return function()
    local m = new_model()
    local opt = m:configure_optimizers()
    for b in loader:iter() do
      opt:zero_grad()
      local loss = m:training_step(b)
      loss:backward()
      opt:step()
    end
  end
end

local function fit(loader, cbs, make, profiler)
  return function() trainer(cbs, profiler):fit((make or new_model)(), loader) end
end

local function raw_null(loader)
  return function()
    local m = null_model()
    for b in loader:iter() do m:training_step(b) end
  end
end

local function empty_hooks(names)
  local cb = {}
  for _, h in ipairs(names) do cb[h] = function() end end
  return cb
end

local TEN = { "on_train_batch_start", "on_train_batch_end", "on_before_zero_grad", "on_before_backward",
  "on_after_backward", "on_before_optimizer_step", "on_train_epoch_start", "on_train_epoch_end", "on_train_start",
  "on_train_end" }

local variants = {
  { "raw", raw(list_loader) },
  { "fit", fit(list_loader) },
  { "ten", fit(list_loader, { empty_hooks(TEN) }) },
  { "raw_dl", raw(data_loader) },
  { "fit_dl", fit(data_loader, { empty_hooks(TEN) }) },
  { "null_raw", raw_null(list_loader) },
  { "null_fit", fit(list_loader, nil, null_model) },
  { "null_empty_cb", fit(list_loader, { {} }, null_model) },
  { "null_one", fit(list_loader, { empty_hooks { "on_train_batch_start" } }, null_model) },
  { "null_ten", fit(list_loader, { empty_hooks(TEN) }, null_model) },
  { "prof", fit(list_loader, nil, nil, "simple") }, -- [tools: profiler] what profiling on costs
}
local only = arg and arg[2]
if only then
  for _, v in ipairs(variants) do
    if v[1] == only then
      v[2]()
      os.exit(0)
    end
  end
  error("loop_overhead: no variant '" .. only .. "'", 0)
end
local r = measure(variants)
local r_raw, r_fit, r_ten, r_raw_dl, r_fit_dl, n_raw, n_fit, n_empty, n_one, n_ten, r_prof = unpack(r)

print(string.format("lutra loop overhead, batch 1, Linear(1,1), %d batches, best of %d rounds (us per batch)", N, REPEAT))
print("full step (forward, MSE, backward, SGD):")
print(string.format("  plain Lua loop, list loader                   %7.2f", r_raw))
print(string.format("  Trainer:fit, list loader                      %7.2f", r_fit))
print(string.format("  Trainer:fit + callback with 10 empty hooks    %7.2f", r_ten))
print(string.format("  Trainer:fit, profiler=\"simple\"               %7.2f", r_prof))
print(string.format("  plain Lua loop, lt.data.DataLoader            %7.2f", r_raw_dl))
print(string.format("  Trainer:fit + 10 hooks, lt.data.DataLoader    %7.2f", r_fit_dl))
print("the loop alone (training_step returns nil: no tensor work):")
print(string.format("  plain Lua loop (iterator + training_step)     %7.3f", n_raw))
print(string.format("  Trainer:fit                                   %7.3f   framework +%.3f", n_fit, n_fit - n_raw))
print(string.format("  Trainer:fit + callback with 10 empty hooks    %7.3f   framework +%.3f", n_ten, n_ten - n_raw))
print(string.format("  one defined empty hook                        %7.3f", n_one - n_fit))
print(string.format("  absent hooks (a callback defining none)       %7.3f", n_empty - n_fit))
-- one line to compare builds by (ratios within one run move less with the machine's load than times)
print(string.format("ratios: fit / plain loop %.3f, fit + 10 hooks / plain loop %.3f, with lt.data.DataLoader %.3f; " ..
  "loop alone: fit + 10 hooks / fit %.3f", r_fit / r_raw, r_ten / r_raw, r_fit_dl / r_raw_dl, n_ten / n_fit))
