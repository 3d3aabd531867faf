-- callbacks/lr_finder.lua — the learning-rate range test: trainer:lr_find(...) (Lightning 1.6's
-- trainer.tuner.lr_find) and lt.callbacks.LearningRateFinder (Lightning's callback of the same test at fit
-- start). docs/reference/callbacks.md.
--
--   local finder = trainer:lr_find(model, train_loader, {min_lr = 1e-6, max_lr = 1, num_training = 100})
--   finder.results.lr, finder.results.loss    -- the curve; finder:suggestion(); finder:plot("lr.svg")
--
-- The test (as Lightning's _LRFinder): the weights and the RNG are saved; a short fit of num_training optimizer
-- steps runs with the first optimizer's learning rate set before each step to min_lr * (max_lr/min_lr)^(s/N)
-- ("exponential", s = 1..N) or min_lr + (max_lr - min_lr) s/N ("linear"), the model's own LR schedulers idle;
-- after each step the loss is smoothed (beta = 0.98, bias-corrected by 1 - beta^k after k steps); the test
-- stops early when the smoothed loss passes early_stop_threshold times the best one. Then the weights and
-- the RNG are restored. The suggestion is the rate at the steepest descent of the smoothed loss
-- (numpy.gradient's argmin over the points after the first skip_begin and before the last skip_end).
-- The short fit runs on a shallow copy of the model table (same modules, same tensors), by a trainer of its
-- own, so a LearningRateFinder can run it from inside the outer fit.
local cbs = require "lutra.callbacks"
local lt = require "lutra"
local util = require "lutra.utils.check"

local fmt = string.format

local M = {}

-- ---- the result --------------------------------------------------------------------------------------

local Finder = {}
Finder.__index = Finder

-- numpy.gradient of a list (unit spacing): one-sided differences at the ends, central inside
local function gradient(y)
  local n, g = #y, {}
  if n < 2 then return nil end
  g[1], g[n] = y[2] - y[1], y[n] - y[n - 1]
  for i = 2, n - 1 do g[i] = (y[i + 1] - y[i - 1]) / 2 end
  return g
end

--- finder:suggestion([skip_begin = 10][, skip_end = 1]): the learning rate at the steepest descent of the loss
--- curve, or nil when there are fewer than two points to compare.
function Finder:suggestion(skip_begin, skip_end)
  skip_begin, skip_end = skip_begin or 10, skip_end or 1
  local lrs, losses = self.results.lr, self.results.loss
  local y = {}
  for i = skip_begin + 1, #losses - skip_end do
    local v = losses[i]
    if v == v and v ~= math.huge and v ~= -math.huge then y[#y + 1] = v end
  end
  local g = gradient(y)
  if g == nil then self._optimal_idx = nil; return nil end
  local best = 1
  for i = 2, #g do if g[i] < g[best] then best = i end end
  self._optimal_idx = best + skip_begin -- (1-based into results, as Lightning's index after its skip)
  return lrs[self._optimal_idx]
end

--- finder:plot([path][, {suggest = true}]): the loss against log10(lr) as SVG (lua/lutra/plot/init.lua), written to
--- path when given; returns the SVG text.
function Finder:plot(path, opts)
  if path ~= nil and type(path) ~= "string" then
    error("LRFinder:plot: path must be a string (the SVG file to write), got " .. type(path), 2)
  end
  opts = util.check_options("LRFinder:plot", opts, { suggest = "boolean" })
  local xs, ys = {}, {}
  for i, lr in ipairs(self.results.lr) do
    local l = self.results.loss[i]
    if l ~= nil and l == l and l ~= math.huge and l ~= -math.huge then
      xs[#xs + 1], ys[#ys + 1] = math.log(lr) / math.log(10), l
    end
  end
  if #xs == 0 then error("LRFinder:plot: no finite loss to plot", 2) end
  local title = "learning-rate range test"
  if opts.suggest ~= false then
    local s = self:suggestion()
    if s then title = title .. fmt(" (suggested lr %.3g)", s) end
  end
  local svg = require("lutra.plot").render { path = title, x_name = "log10(lr)",
    metrics = { { name = "loss", xs = xs, ys = ys } } }
  if path ~= nil then
    local ok, err = pcall(lt._io.write_atomic, path, svg) -- atomically, as every whole file lutra writes
    if not ok then error(fmt("LRFinder:plot: cannot write %s", (tostring(err):gsub("^write: ", ""))), 2) end
  end
  return svg
end

-- ---- the callback of the short fit ------------------------------------------------------------------------

local idle_scheduler = { step = function() end, state_dict = function() return {} end, load_state_dict = function() end }

local function lr_at(o, s)
  local r = s / o.num_training
  if o.mode == "linear" then return o.min_lr + r * (o.max_lr - o.min_lr) end
  return o.min_lr * (o.max_lr / o.min_lr) ^ r
end

local function range_callback(o, finder)
  local cb = { beta = 0.98, avg_loss = 0, best_loss = 0 }
  local lrs, losses = finder.results.lr, finder.results.loss
  function cb.on_train_start(_, trainer)
    if #trainer.optimizers ~= 1 then
      error(fmt("lr_find: works with one optimizer, configure_optimizers returned %d", #trainer.optimizers), 0)
    end
    for _, c in ipairs(trainer.lr_scheduler_configs) do c.scheduler = idle_scheduler end
  end
  -- this batch ends an accumulation window: the loops' rule (the window's end or the epoch's last batch)
  local function stepping(trainer) return not trainer._lp:get("should_accumulate") end
  function cb.on_train_batch_start(_, trainer)
    local lr = lr_at(o, trainer.global_step + 1)
    for _, g in ipairs(trainer.optimizers[1].param_groups) do g.lr = lr end
    if stepping(trainer) then lrs[#lrs + 1] = lr end
  end
  function cb.on_train_batch_end(self, trainer, _, outputs)
    if not stepping(trainer) then return end
    local loss = type(outputs) == "table" and outputs.loss or nil
    if loss == nil then losses[#losses + 1] = 0 / 0; return end
    local current = lt.is_tensor(loss) and loss:item() or loss
    local step = trainer.global_step - 1 -- the 0-based index of this step (Lightning <= 1.5's global_step here)
    self.avg_loss = self.beta * self.avg_loss + (1 - self.beta) * current
    local smoothed = self.avg_loss / (1 - self.beta ^ (step + 1))
    if o.early_stop_threshold ~= nil and step > 1 and smoothed > o.early_stop_threshold * self.best_loss then
      trainer.should_stop = true -- diverging
    end
    if smoothed < self.best_loss or step == 1 then self.best_loss = smoothed end
    losses[#losses + 1] = smoothed
  end
  return cb
end

-- ---- the test ------------------------------------------------------------------------------------------

local OPTIONS = { min_lr = "number", max_lr = "number", num_training = "integer", mode = "string",
  early_stop_threshold = "number|boolean", update_attr = "boolean|string" }
M.OPTIONS = OPTIONS

local function check(what, opts, level)
  opts = util.check_options(what, opts, OPTIONS, level)
  local o = { min_lr = opts.min_lr or 1e-8, max_lr = opts.max_lr or 1, num_training = opts.num_training or 100,
    mode = opts.mode or "exponential", update_attr = opts.update_attr }
  local est = opts.early_stop_threshold
  if est == true or est == nil then est = 4.0 end
  if est == false then est = nil end -- (Lightning's None: no early stop)
  o.early_stop_threshold = est
  if not (o.min_lr > 0 and o.max_lr > o.min_lr) then
    error(fmt("%s: needs 0 < min_lr < max_lr, got min_lr = %g, max_lr = %g", what, o.min_lr, o.max_lr), level + 1)
  end
  if o.num_training < 1 then error(fmt("%s: option 'num_training' must be >= 1, got %d", what, o.num_training), level + 1) end
  if o.mode ~= "exponential" and o.mode ~= "linear" then
    error(fmt('%s: option \'mode\' must be "exponential" or "linear", got %q', what, o.mode), level + 1)
  end
  return o
end
M.check = check

-- the model's learning-rate field that update_attr names: the given name, else lr or learning_rate
local function lr_attr(model, update_attr)
  if type(update_attr) == "string" then return update_attr end
  if model.lr ~= nil then return "lr" end
  if model.learning_rate ~= nil then return "learning_rate" end
  error("lr_find: update_attr needs a field lr or learning_rate on the model (or update_attr = \"name\")", 0)
end

--- Runs the range test of `o` (from check) on model over data (a loader, or {datamodule = dm}) with the
--- outer trainer's accumulation and clipping; returns the finder.
function M.run(outer, model, data, o)
  local finder = setmetatable({ results = { lr = {}, loss = {} }, lr_min = o.min_lr, lr_max = o.max_lr,
    num_training = o.num_training, mode = o.mode }, Finder)
  -- a shallow copy of the model table: its own trainer attachment, the same modules and tensors
  local proxy = {}
  for k, v in pairs(model) do proxy[k] = v end
  setmetatable(proxy, getmetatable(model))
  local saved = {}
  for name, t in pairs(lt.nn.state_dict(model)) do saved[name] = t:clone() end
  local rng = lt.get_rng_state()
  local dm = type(data) == "table" and rawget(data, "datamodule") or nil
  local loader_state = dm == nil and type(data) == "table" and type(data.state_dict) == "function" and data:state_dict()
  local inner = lt.Trainer {
    max_steps = o.num_training, logger = false, enable_checkpointing = false, enable_progress_bar = false,
    enable_model_summary = false, num_sanity_val_steps = 0, limit_val_batches = 0,
    accumulate_grad_batches = outer and outer.accumulate_grad_batches or 1,
    gradient_clip_val = outer and outer.gradient_clip_val or nil,
    gradient_clip_algorithm = outer and outer.gradient_clip_algorithm or nil,
    callbacks = { range_callback(o, finder) },
  }
  local ok, err = pcall(inner.fit, inner, proxy, data)
  lt.nn.load_state_dict(model, saved)
  lt.set_rng_state(rng)
  if loader_state then data:load_state_dict(loader_state) end -- the loader goes on as if the test had not run
  lt.nn.zero_grad(model, true)
  if not ok then error(err, 0) end
  finder.stopped_early = inner.global_step < o.num_training
  if o.update_attr then
    local s = finder:suggestion()
    if s ~= nil then model[lr_attr(model, o.update_attr)] = s end
  end
  return finder
end

-- ---- LearningRateFinder --------------------------------------------------------------------------------

local LRF = cbs.Callback:extend("LearningRateFinder")

--- lt.callbacks.LearningRateFinder{min_lr = 1e-8, max_lr = 1, num_training = 100, mode = "exponential",
--- early_stop_threshold = 4, update_attr = true}: the range test when fit starts (on the fit's training
--- loader); with update_attr the suggestion goes into the model's lr field and into every param group of the
--- fit's optimizers.
function LRF:init(opts)
  opts = opts or {}
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  if o.update_attr == nil then o.update_attr = true end
  self._o = check("LearningRateFinder", o, 3)
end

function LRF:on_fit_start(trainer, model)
  self.optimal_lr = M.run(trainer, model, trainer:_fit_train_loader(), self._o)
  local s = self.optimal_lr:suggestion()
  if self._o.update_attr and s ~= nil then
    for _, opt in ipairs(trainer.optimizers) do
      for _, g in ipairs(opt.param_groups) do g.lr = s; g.initial_lr = s end
    end
  end
end

M.LearningRateFinder = LRF
M.Finder = Finder
return M
