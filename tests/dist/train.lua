-- tests/dist/train.lua — a small Trainer run under mpirun, for tests/dist_spec.lua.
--   train.lua OUTDIR MODE [batch_size]
-- MODE: "equiv"   a few SGD steps of an MLP (batch_size per rank); writes the final weights
--       "f64"     equiv's run with a float64 model and float64 data
--       "mix"     equiv's run with a model mixing float32 (first layer) and float64 (second layer) parameters
--       "dm"      equiv's run with the loaders from a datamodule (and a validation loader): writes the weights
--       "log"     logs a rank-dependent value with and without sync_dist, CSVLogger in OUTDIR
--       "raise"   rank 1 raises in on_train_batch_end at batch_idx 3
--       "kill"    rank 1 kills itself (SIGKILL) at batch_idx 3
--       "ckpt"    saves a checkpoint after 5 steps, then keeps training: writes weights at 5 and at the end
--       "resume"  resumes from the checkpoint (arg 4) and trains to the same end: writes the final weights
--       "val"     validation (sharded, sync_dist) and EarlyStopping on a rank-dependent metric
--       "mc"      ModelCheckpoint (top 2 + last) and CSVLogger under OUTDIR: writes what each rank's callback says
-- Each rank writes OUTDIR/<mode>_<rank>.lua (a Lua table).
local lt = require "lutra"
local D = lt.distributed
local outdir, mode = assert(arg[1]), assert(arg[2])
local bs = tonumber(arg[3] or "32")

local ser = require "helpers.ser"

local function write(rank, t)
  local f = assert(io.open(string.format("%s/%s_%d.lua", outdir, mode, rank), "w"))
  f:write("return ", ser(t), "\n")
  f:close()
end

-- data: 256 samples, 8 features, 4 classes (the same on every rank and every run)
lt.manual_seed(1234)
local N = 256
local X = lt.randn(N, 8)
local Y = (X:narrow(2, 1, 4):argmax(2)):view(N)
local ds = lt.data.TensorDataset(mode == "f64" and X:double() or X, Y)

local Model = {}
Model.__index = Model
local function new_model(seed)
  lt.manual_seed(seed)
  local m = setmetatable({ net = lt.nn.Sequential { lt.nn.Linear(8, 16), lt.nn.Tanh(), lt.nn.Linear(16, 4) } }, Model)
  if mode == "f64" then m.net:double() end
  if mode == "mix" then m.net[3]:double() end
  return m
end
function Model:forward(x)
  if mode == "mix" then return self.net[3](self.net[2](self.net[1](x)):double()) end
  return self.net(x)
end
function Model:training_step(batch, batch_idx)
  local loss = lt.F.cross_entropy(self:forward(batch[1]), batch[2])
  if mode == "log" then
    local r = self.trainer.global_rank
    self:log("plain", r + 1, { on_step = true, on_epoch = true })
    self:log("synced", r + 1, { on_step = true, on_epoch = true, sync_dist = true })
    self:log("synced_max", 10 * (r + 1), { on_step = false, on_epoch = true, sync_dist = true, reduce_fx = "max" })
  end
  self.steps_seen = (self.steps_seen or 0) + 1
  return loss
end
function Model:configure_optimizers() return lt.optim.SGD(self.net:parameters(), { lr = 0.1, momentum = 0.9 }) end
function Model:on_train_batch_end(_, _, batch_idx)
  local r = self.trainer.global_rank
  if mode == "raise" and r == 1 and batch_idx == 3 then error("boom at batch 3 on rank " .. r) end
  if mode == "kill" and r == 1 and batch_idx == 3 then
    os.execute("kill -9 $PPID") -- the shell's parent: this process (no ffi, so under any Lua)
  end
end

local function weights(m)
  local w = {}
  for i, p in ipairs(m.net:parameters()) do w[i] = p:view(-1):totable() end
  return w
end

local function dtypes(m)
  local d = {}
  for i, p in ipairs(m.net:parameters()) do d[i] = p:dtype() end
  return d
end

local rank = D.launched() and select(2, D.launched()) or 0
if mode == "equiv" or mode == "f64" or mode == "mix" then
  local m = new_model(10 + rank) -- different initial weights per rank: rank 0's are broadcast
  local loader = lt.data.DataLoader(ds, { batch_size = bs, shuffle = true, seed = 5 })
  local trainer = lt.Trainer { max_epochs = 2, logger = false, enable_checkpointing = false, enable_progress_bar = false,
    enable_model_summary = false }
  trainer:fit(m, loader)
  write(trainer.global_rank, { weights = weights(m), world_size = trainer.world_size, global_rank = trainer.global_rank,
    is_global_zero = trainer.is_global_zero, strategy = trainer.strategy, global_step = trainer.global_step,
    batches = #loader, steps_seen = m.steps_seen, dtypes = dtypes(m) })
elseif mode == "dm" then -- equiv's run, its loaders from a datamodule (asked for after on_fit_start, then sharded)
  local m = new_model(10 + rank)
  local Data = lt.DataModule:extend("Data")
  function Data:train_dataloader() return lt.data.DataLoader(ds, { batch_size = bs, shuffle = true, seed = 5 }) end
  function Data:val_dataloader()
    return lt.data.DataLoader(lt.data.TensorDataset(X:narrow(1, 1, 64), Y:narrow(1, 1, 64)), { batch_size = 16 })
  end
  function m:validation_step() self.val_batches = (self.val_batches or 0) + 1 end
  local trainer = lt.Trainer { max_epochs = 2, logger = false, enable_checkpointing = false, enable_progress_bar = false,
    enable_model_summary = false }
  trainer:fit(m, Data())
  write(trainer.global_rank, { weights = weights(m), global_step = trainer.global_step, val_batches = m.val_batches,
    num_training_batches = trainer.num_training_batches })
elseif mode == "accum" then -- accumulate_grad_batches = 2: gradients reduced once per optimizer step
  local m = new_model(10)
  local loader = lt.data.DataLoader(ds, { batch_size = bs, shuffle = true, seed = 5 })
  local reductions
  local count = { on_train_end = function(_, t) reductions = t._ddp and t._ddp.reducer:stats().steps or 0 end }
  local trainer = lt.Trainer { max_epochs = 2, logger = false, enable_checkpointing = false, enable_progress_bar = false,
    enable_model_summary = false, accumulate_grad_batches = 2, callbacks = { count } }
  trainer:fit(m, loader)
  write(trainer.global_rank, { weights = weights(m), global_step = trainer.global_step, steps_seen = m.steps_seen,
    reductions = reductions })
elseif mode == "log" then
  local m = new_model(10)
  local loader = lt.data.DataLoader(ds, { batch_size = bs, shuffle = true, seed = 5 })
  local trainer = lt.Trainer { max_epochs = 1, default_root_dir = outdir, log_every_n_steps = 1,
    enable_checkpointing = false, enable_progress_bar = false }
  trainer:fit(m, loader)
  write(trainer.global_rank, { has_logger = trainer.logger ~= nil, nloggers = #trainer.loggers,
    callback_metrics = trainer.callback_metrics })
elseif mode == "raise" or mode == "kill" then
  local m = new_model(10)
  local loader = lt.data.DataLoader(ds, { batch_size = bs, shuffle = true, seed = 5 })
  local trainer = lt.Trainer { max_epochs = 50, logger = false, enable_checkpointing = false, enable_progress_bar = false,
    enable_model_summary = false }
  trainer:fit(m, loader)
  write(trainer.global_rank, { finished = true })
elseif mode == "ckpt" or mode == "resume" then
  local m = new_model(10)
  local loader = lt.data.DataLoader(ds, { batch_size = bs, shuffle = true, seed = 5 })
  local ckpt = arg[4]
  local opts = { max_epochs = 3, logger = false, enable_checkpointing = false, enable_progress_bar = false,
    enable_model_summary = false }
  local res = {}
  if mode == "ckpt" then
    local saver = { on_train_batch_end = function(_, trainer)
      if trainer.global_step == 5 then trainer:save_checkpoint(ckpt) end
    end }
    opts.callbacks = { saver }
    local trainer = lt.Trainer(opts)
    trainer:fit(m, loader)
    res.rank = trainer.global_rank
  else
    local trainer = lt.Trainer(opts)
    trainer:fit(m, loader, { ckpt_path = ckpt })
    res.rank = trainer.global_rank
    res.global_step = trainer.global_step
  end
  res.weights = weights(m)
  write(res.rank, res)
elseif mode == "val" then -- validation on sharded val loaders, sync_dist, EarlyStopping on every rank alike
  local m = new_model(10)
  local loader = lt.data.DataLoader(ds, { batch_size = bs, shuffle = true, seed = 5 })
  local val = lt.data.DataLoader(lt.data.TensorDataset(X:narrow(1, 1, 100), Y:narrow(1, 1, 100)), { batch_size = 16 })
  local rank_now
  function m:validation_step(batch)
    rank_now = self.trainer.global_rank
    local loss = lt.F.cross_entropy(self:forward(batch[1]), batch[2])
    self:log("val_loss", loss, { sync_dist = true })
    -- a rank-dependent metric for EarlyStopping: rank 1 "worsens" from epoch 2, rank 0 never does
    local bad = (rank_now == 1 and self.current_epoch >= 2) and self.current_epoch or -self.current_epoch
    self:log("watch", bad)
    self.val_batches = (self.val_batches or 0) + 1
  end
  local es = lt.callbacks.EarlyStopping { monitor = "watch", patience = 1, mode = "min" }
  local trainer = lt.Trainer { max_epochs = 20, logger = false, enable_checkpointing = false, enable_progress_bar = false,
    enable_model_summary = false, callbacks = { es }, num_sanity_val_steps = 0 }
  trainer:fit(m, loader, val)
  write(trainer.global_rank, { epoch = trainer.current_epoch, val_loss = trainer.callback_metrics.val_loss,
    val_batches = m.val_batches, val_len = #val })
elseif mode == "mc" then -- the default ModelCheckpoint and CSVLogger, everything under OUTDIR
  local m = new_model(10)
  local loader = lt.data.DataLoader(ds, { batch_size = bs, shuffle = true, seed = 5 })
  local cb = lt.callbacks.ModelCheckpoint { monitor = "train_loss", save_top_k = 2, save_last = true }
  local train_step = Model.training_step
  function m:training_step(batch, i)
    local loss = train_step(self, batch, i)
    self:log("train_loss", loss:item() + self.trainer.global_rank, { on_step = false, on_epoch = true })
    return loss
  end
  local trainer = lt.Trainer { max_epochs = 3, default_root_dir = outdir, enable_progress_bar = false,
    enable_model_summary = false, callbacks = { cb } }
  trainer:fit(m, loader)
  local f = io.open(cb.best_model_path, "rb")
  if f then f:close() end
  write(trainer.global_rank, { best = cb.best_model_path, last = cb.last_model_path, exists = f ~= nil,
    dirpath = cb.dirpath })
else
  error("train.lua: unknown mode " .. mode)
end
