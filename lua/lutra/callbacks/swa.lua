-- callbacks/swa.lua — lt.callbacks.StochasticWeightAveraging: Lightning 1.6's SWA callback
-- (docs/reference/callbacks.md).
--
--   lt.callbacks.StochasticWeightAveraging{swa_lrs = 0.05, swa_epoch_start = 0.8, annealing_epochs = 10,
--     annealing_strategy = "cos"}
--
-- As Lightning 1.6: from epoch swa_start (an integer epoch, or a fraction of max_epochs) to the last epoch
-- swa_end = max_epochs - 1, each training epoch's start adds the model's weights to a running mean
-- (avg += (w - avg) / (n + 1)); the learning rate of the first optimizer anneals from its value to swa_lrs
-- over annealing_epochs epochs (PyTorch's SWALR, stepped at each SWA epoch's end in place of the model's own
-- scheduler of that optimizer); when training ends after the last SWA epoch the model gets the mean, and,
-- when the model has BatchNorm layers, their running statistics are recomputed for the mean weights as
-- Lightning's extra epoch does (torch.optim.swa_utils.update_bn): statistics reset, momentum false (a
-- cumulative average), one pass of training_step over the training batches in train mode without backward
-- or optimizer step, then the momenta back.
local cbs = require "lutra.callbacks"
local weights = require "lutra.callbacks.weights"
local lt = require "lutra"

local fmt = string.format

local SWA = cbs.Callback:extend("StochasticWeightAveraging")

local OPTIONS = { swa_lrs = "number|table", swa_epoch_start = "number", annealing_epochs = "integer",
  annealing_strategy = "string", avg_fn = "function" }

function SWA:init(opts)
  opts = cbs.check_options("StochasticWeightAveraging", opts, OPTIONS, 3)
  local start = opts.swa_epoch_start or 0.8
  local is_int = start == math.floor(start)
  if (is_int and start < 0) or (not is_int and not (start > 0 and start < 1)) then
    error(fmt("StochasticWeightAveraging: option 'swa_epoch_start' must be an integer epoch >= 0 or a fraction in " ..
      "(0, 1), got %s", tostring(start)), 3)
  end
  local lrs = opts.swa_lrs
  if lrs == nil then error("StochasticWeightAveraging: option 'swa_lrs' is required (a learning rate > 0 or a list)", 3) end
  local list = type(lrs) == "table" and lrs or { lrs }
  for i, lr in ipairs(list) do
    if type(lr) ~= "number" or not (lr > 0) then
      error(fmt("StochasticWeightAveraging: option 'swa_lrs' must hold learning rates > 0 (element %d is %s)", i,
        tostring(lr)), 3)
    end
  end
  local strategy = opts.annealing_strategy or "cos"
  if strategy ~= "cos" and strategy ~= "linear" then
    error(fmt('StochasticWeightAveraging: option \'annealing_strategy\' must be "cos" or "linear", got %q', strategy), 3)
  end
  local ae = opts.annealing_epochs or 10
  if ae < 0 then error("StochasticWeightAveraging: option 'annealing_epochs' must be >= 0", 3) end
  self._swa_epoch_start, self._swa_lrs, self._annealing_epochs = start, lrs, ae
  self._annealing_strategy, self._avg_fn = strategy, opts.avg_fn
  self.n_averaged = 0
end

--- SWA:swa_start() / swa_end(): the first and last SWA epochs (0-based) once fit has started.
function SWA:swa_start() return self._start end
function SWA:swa_end() return self._end end

function SWA:on_fit_start(trainer)
  local max_epochs = trainer.max_epochs
  if max_epochs == nil or max_epochs < 1 then
    error("StochasticWeightAveraging: needs max_epochs (the SWA epochs end at the last one)", 0)
  end
  if #trainer.optimizers ~= 1 then
    error(fmt("StochasticWeightAveraging: works with one optimizer, configure_optimizers returned %d", #trainer.optimizers), 0)
  end
  local s = self._swa_epoch_start
  if s ~= math.floor(s) then s = math.floor(max_epochs * s) end
  self._start, self._end = s, max_epochs - 1
  if self._start > self._end then
    error(fmt("StochasticWeightAveraging: swa_epoch_start (%d) is after the last epoch (%d)", self._start, self._end), 0)
  end
  if not self._restored then self._average, self._swalr, self.n_averaged = nil, nil, 0 end
  self._restored = nil
end

-- PyTorch 1.13's SWALR for the optimizer's groups: the learning rates of its step k (k = 1 at construction)
local function anneal(strategy, t)
  if strategy == "cos" then return (1 - math.cos(math.pi * t)) / 2 end
  return t
end

local function swalr_step(self, opt)
  local s = self._swalr
  s.count = s.count + 1
  local step = s.count - 1
  local ae = self._annealing_epochs
  if ae == 0 then step = math.max(1, step) end
  local prev_alpha = anneal(self._annealing_strategy, math.max(0, math.min(1, (step - 1) / math.max(1, ae))))
  local alpha = anneal(self._annealing_strategy, math.max(0, math.min(1, step / math.max(1, ae))))
  for i, g in ipairs(opt.param_groups) do
    local swa_lr = s.swa_lrs[i]
    local prev = prev_alpha == 1 and swa_lr or (g.lr - prev_alpha * swa_lr) / (1 - prev_alpha)
    g.lr = swa_lr * alpha + prev * (1 - alpha)
  end
end

-- the model's own scheduler of optimizer 0 is replaced (Lightning swaps its config for SWALR's)
local idle_scheduler = { step = function() end, state_dict = function() return {} end, load_state_dict = function() end,
  get_last_lr = function() return {} end }

function SWA:on_train_epoch_start(trainer, model)
  local epoch = trainer.current_epoch
  if epoch == self._start and self._swalr == nil then
    local opt = trainer.optimizers[1]
    local lrs = self._swa_lrs
    local groups = opt.param_groups
    if type(lrs) == "number" then
      local l = {}
      for i = 1, #groups do l[i] = lrs end
      lrs = l
    end
    if #lrs ~= #groups then
      error(fmt("StochasticWeightAveraging: swa_lrs has %d learning rates, the optimizer has %d param groups", #lrs,
        #groups), 0)
    end
    self._swalr = { count = 0, swa_lrs = lrs }
    swalr_step(self, opt) -- the scheduler's initial step (leaves the rates as they are)
  end
  if self._swalr and self._swapped_for ~= trainer.lr_scheduler_configs then -- (again after a resume)
    self._swapped_for = trainer.lr_scheduler_configs
    for _, c in ipairs(trainer.lr_scheduler_configs) do
      if (c.opt_idx == nil or c.opt_idx == 0) and c.scheduler ~= idle_scheduler then
        lt._note("lutra: StochasticWeightAveraging: swapping the LR scheduler of optimizer 0 for SWALR")
        c.scheduler = idle_scheduler
      end
    end
  end
  if epoch >= self._start and epoch <= self._end then
    local n = self.n_averaged
    if self._average == nil then
      self._average = weights.copies(model)
    else
      local avg_fn = self._avg_fn
      lt.no_grad(function()
        for _, np in ipairs(weights.params(model)) do
          local a, p = self._average[np[1]], np[2]:detach()
          if avg_fn then a:copy_(avg_fn(a, p, n)) else a:copy_(a + (p - a) / (n + 1)) end
        end
      end)
    end
    self.n_averaged = n + 1
  end
end

function SWA:on_train_batch_end(trainer)
  local epoch = trainer.current_epoch
  if self._swalr and epoch >= self._start and epoch <= self._end and trainer.is_last_batch then
    swalr_step(self, trainer.optimizers[1]) -- an epoch-interval scheduler: stepped on the epoch's last batch
  end
end

-- Lightning's BatchNorm epoch: the running statistics of the averaged weights, as a cumulative average over
-- one pass of training_step (through the hook dispatcher) over the fit's training batches, no grad.
local function update_batch_norm(trainer, model)
  local bns = {}
  for _, m in ipairs((lt.nn.modules(model))) do
    if weights.is_batch_norm(m) and m.track_running_stats then bns[#bns + 1] = m end
  end
  if #bns == 0 then return end
  local momenta = {}
  lt.no_grad(function()
    for i, m in ipairs(bns) do
      m.running_mean:zero_()
      m.running_var:fill_(1)
      if m.num_batches_tracked then m.num_batches_tracked:zero_() end
      momenta[i], m.momentum = m.momentum, false
    end
  end)
  local mods = lt.nn.modules(model)
  local modes = {}
  for i, m in ipairs(mods) do modes[i] = rawget(m, "training") end
  lt.nn.train(model, true)
  local ok, err = pcall(lt.no_grad, function()
    local n = trainer.num_training_batches
    local i = 0
    for batch in trainer._train_loader:iter() do
      if n ~= nil and i >= n then break end
      trainer._lp:call_hook("training_step", batch, i)
      i = i + 1
    end
  end)
  for i, m in ipairs(bns) do m.momentum = momenta[i] end
  for i, m in ipairs(mods) do rawset(m, "training", modes[i]) end
  if not ok then error("StochasticWeightAveraging: the BatchNorm update pass: " .. tostring(err), 0) end
end

function SWA:on_train_end(trainer, model)
  -- (the epoch counter has moved past the last epoch when training ends)
  if self._average ~= nil and trainer.current_epoch - 1 == self._end then
    weights.load_into(model, self._average, "StochasticWeightAveraging")
    update_batch_norm(trainer, model)
  end
end

--- The running mean (name -> tensor), or nil before the first SWA epoch.
function SWA:average() return self._average end

function SWA:state_dict()
  return { n_averaged = self.n_averaged, average = self._average, swalr_count = self._swalr and self._swalr.count,
    swa_lrs = self._swalr and self._swalr.swa_lrs }
end

function SWA:load_state_dict(s)
  self.n_averaged = s.n_averaged or 0
  self._average = s.average
  if s.swalr_count then self._swalr = { count = s.swalr_count, swa_lrs = s.swa_lrs } end
  self._restored = true
end

return SWA
