-- callbacks/model_checkpoint.lua — lt.callbacks.ModelCheckpoint: saves checkpoints while fitting (Lightning
-- 1.6's ModelCheckpoint).
--
--   lt.callbacks.ModelCheckpoint{monitor = "val_loss", mode = "min", save_top_k = 2, save_last = true,
--                                filename = "{epoch}-{val_loss:.3f}"}
--
-- Options: dirpath (default: <logger save_dir>/<name>/version_N/checkpoints with a logger that has a
-- version, else <default_root_dir>/checkpoints), filename (a template of {metric} or {metric:fmt} fields,
-- fmt a Python format spec such as .3f, 05d, .2e; default "{epoch}-{step}"; with
-- auto_insert_metric_name=true a field becomes "name=value", giving "epoch=3-step=1200.ckpt"), monitor
-- (a key of trainer.callback_metrics, or nil: save on every trigger), mode "min"|"max", save_top_k
-- (1; -1 keeps every file, 0 saves none; files falling out of the top k are deleted), save_last
-- (also write "last.ckpt", replaced each time), save_weights_only, every_n_epochs (1), every_n_train_steps
-- (0: off), save_on_train_epoch_end (default: true when validation runs once per epoch at its end),
-- verbose. A file name already taken by another checkpoint gets "-v1", "-v2" ... appended.
--
-- Triggers: on_train_batch_end when every_n_train_steps divides global_step; at the epoch end
-- (on_train_epoch_end, or on_validation_end when save_on_train_epoch_end is false) when every_n_epochs
-- divides the epoch number. Never during the sanity check, fast_dev_run, or twice at one global step.
-- Fields (also its state_dict): best_model_path, best_model_score, best_k_models {path = score},
-- kth_best_model_path, kth_value, last_model_path, current_score, dirpath, monitor; the state also keeps
-- the global step of the last save (a resumed run does not save a second time at that step).
local lt = require "lutra"
local cbs = require "lutra.callbacks"

local IO = lt._io
local fmt = string.format
local to_number = cbs.to_number

local ModelCheckpoint = cbs.Callback:extend("ModelCheckpoint")

ModelCheckpoint.CHECKPOINT_JOIN_CHAR = "-"
ModelCheckpoint.CHECKPOINT_NAME_LAST = "last"
ModelCheckpoint.FILE_EXTENSION = ".ckpt"
ModelCheckpoint.STARTING_VERSION = 1

local OPTIONS = {
  dirpath = "string", filename = "string", monitor = "string", verbose = "boolean", save_last = "boolean",
  save_top_k = "integer", save_weights_only = "boolean", mode = "string", auto_insert_metric_name = "boolean",
  every_n_train_steps = "integer", every_n_epochs = "integer", save_on_train_epoch_end = "boolean",
}

function ModelCheckpoint:init(opts)
  opts = cbs.check_options("ModelCheckpoint", opts, OPTIONS, 3)
  self.monitor = opts.monitor
  self.verbose = opts.verbose or false
  self.save_last = opts.save_last or false
  self.save_top_k = opts.save_top_k == nil and 1 or opts.save_top_k
  self.save_weights_only = opts.save_weights_only or false
  self.auto_insert_metric_name = opts.auto_insert_metric_name ~= false
  self.mode = opts.mode or "min"
  self.filename = opts.filename
  self._save_on_train_epoch_end = opts.save_on_train_epoch_end
  if self.mode ~= "min" and self.mode ~= "max" then
    error(fmt("ModelCheckpoint: option 'mode' must be \"min\" or \"max\", got %q", self.mode), 3)
  end
  if self.save_top_k < -1 then
    error(fmt("ModelCheckpoint: option 'save_top_k' must be >= -1, got %d", self.save_top_k), 3)
  end
  if self.monitor == nil and self.save_top_k ~= -1 and self.save_top_k ~= 0 and self.save_top_k ~= 1 then
    error(fmt("ModelCheckpoint: save_top_k=%d needs a monitor: with monitor=nil there is no quantity to rank " ..
      "checkpoints by (use save_top_k = -1, 0 or 1)", self.save_top_k), 3)
  end
  local n_steps, n_epochs = opts.every_n_train_steps, opts.every_n_epochs
  if n_steps ~= nil and n_steps < 0 then error("ModelCheckpoint: option 'every_n_train_steps' must be >= 0", 3) end
  if n_epochs ~= nil and n_epochs < 0 then error("ModelCheckpoint: option 'every_n_epochs' must be >= 0", 3) end
  if n_steps == nil and n_epochs == nil then
    n_steps, n_epochs = 0, 1
  else
    n_steps, n_epochs = n_steps or 0, n_epochs or 0
    if n_steps > 0 and n_epochs > 0 then
      error("ModelCheckpoint: options 'every_n_train_steps' and 'every_n_epochs' are mutually exclusive", 3)
    end
  end
  self.every_n_train_steps, self.every_n_epochs = n_steps, n_epochs
  self.dirpath = opts.dirpath and opts.dirpath:gsub("/+$", "") or nil
  if self.dirpath == "" then self.dirpath = "/" end
  self._user_dirpath = opts.dirpath ~= nil

  self.best_model_path = ""
  self.best_model_score = nil
  self.best_k_models = {}
  self.kth_best_model_path = ""
  self.kth_value = self.mode == "min" and math.huge or -math.huge
  self.last_model_path = ""
  self.current_score = nil
  self._last_global_step_saved = -1
  self._warned_missing = false
end

function ModelCheckpoint:state_key()
  return fmt("ModelCheckpoint{monitor=%s,mode=%s,every_n_train_steps=%d,every_n_epochs=%d}", tostring(self.monitor),
    self.mode, self.every_n_train_steps, self.every_n_epochs)
end

-- ---- file names -----------------------------------------------------------------------------------

-- Python's default str() of a number: integers without a fraction, others the shortest exact form.
local function default_number(v)
  if v ~= v then return "nan" end
  if v == math.huge then return "inf" end
  if v == -math.huge then return "-inf" end
  if v == math.floor(v) and math.abs(v) < 2 ^ 53 then return fmt("%.0f", v) end
  for digits = 1, 17 do
    local s = fmt("%." .. digits .. "g", v)
    if tonumber(s) == v then
      if s:find("e") then return s end
      return s
    end
  end
  return fmt("%.17g", v)
end

-- A Python format spec ([0][width][.precision][type], with an optional sign) applied to a number.
local function format_spec(v, spec, field)
  if spec == "" then return default_number(v) end
  local flags, width, prec, ty = spec:match("^([-+ #0]*)(%d*)(%.?%d*)([fFeEgGdxX%%]?)$")
  if not flags then
    error(fmt("ModelCheckpoint: unsupported format spec '%s' in filename field {%s:%s}", spec, field, spec), 0)
  end
  if ty == "" then ty = prec ~= "" and "g" or "" end
  if ty == "" then return default_number(v) end
  if ty == "d" or ty == "x" or ty == "X" then
    return fmt("%" .. flags .. width .. ty, v >= 0 and math.floor(v) or math.ceil(v))
  end
  if ty == "%" then return fmt("%" .. flags .. width .. prec .. "f", v * 100) .. "%" end
  if ty == "F" then ty = "f" end
  if prec == "" and (ty == "f" or ty == "e" or ty == "E") then prec = ".6" end
  return fmt("%" .. flags .. width .. prec .. ty, v)
end

--- Formats a file name template with metrics ({name} or {name:spec}); a name not in metrics is 0.
function ModelCheckpoint.format_template(template, metrics, auto_insert_metric_name)
  return (template:gsub("{([^{}:]*):?([^{}]*)}", function(name, spec)
    local v = metrics[name]
    local n = to_number(v)
    local s
    if v == nil then s = format_spec(0, spec, name)
    elseif n == nil then s = tostring(v)
    else s = format_spec(n, spec, name) end
    if auto_insert_metric_name then return name .. "=" .. s end
    return s
  end))
end

--- format_checkpoint_name(metrics[, filename[, ver]]) -> path of the checkpoint for these metrics.
function ModelCheckpoint:format_checkpoint_name(metrics, filename, ver)
  filename = filename or self.filename
  if filename == nil or filename == "" then filename = "{epoch}" .. self.CHECKPOINT_JOIN_CHAR .. "{step}" end
  local name = ModelCheckpoint.format_template(filename, metrics, self.auto_insert_metric_name)
  if ver then name = name .. self.CHECKPOINT_JOIN_CHAR .. "v" .. ver end
  name = name .. self.FILE_EXTENSION
  if self.dirpath then return self.dirpath .. "/" .. name end
  return name
end

local function file_exists(path)
  return IO.stat(path) ~= nil
end

function ModelCheckpoint:_interpolated_path(metrics, del_filepath)
  local path = self:format_checkpoint_name(metrics)
  local v = self.STARTING_VERSION
  while file_exists(path) and path ~= del_filepath do
    path = self:format_checkpoint_name(metrics, nil, v)
    v = v + 1
  end
  return path
end

-- ---- where to save ----------------------------------------------------------------------------------

--- The checkpoint directory the trainer's options give (Lightning's __resolve_ckpt_dir).
function ModelCheckpoint.resolve_dirpath(trainer)
  local root = trainer.default_root_dir or "."
  local logger = trainer.logger
  if type(logger) == "table" then
    local ok, version = pcall(function() return logger.version end)
    local name = logger.name
    if ok and version ~= nil and type(name) == "string" then
      local save_dir = logger.save_dir or root
      local vdir = type(version) == "string" and version or fmt("version_%d", version)
      if name == "" then return save_dir .. "/" .. vdir .. "/checkpoints" end
      return save_dir .. "/" .. name .. "/" .. vdir .. "/checkpoints"
    end
  end
  return root .. "/checkpoints"
end

function ModelCheckpoint:setup(trainer, model, stage)
  if stage ~= nil and stage ~= "fit" then return end
  if not self._user_dirpath and not self._resolved then
    self.dirpath = ModelCheckpoint.resolve_dirpath(trainer)
  end
  self._resolved = true
  if self._save_on_train_epoch_end == nil then
    local vci, cve = trainer.val_check_interval, trainer.check_val_every_n_epoch
    self._save_on_train_epoch_end = (vci == nil or vci == 1.0) and (cve == nil or cve == 1)
  end
end

-- ---- triggers ---------------------------------------------------------------------------------------

local function fitting(trainer)
  local st = trainer.state
  if type(st) == "table" and st.fn ~= nil then return st.fn == "fit" end
  return true
end

function ModelCheckpoint:_should_skip(trainer)
  local fdr = trainer.fast_dev_run
  return (fdr ~= nil and fdr ~= false and fdr ~= 0) or not fitting(trainer) or trainer.sanity_checking
    or self._last_global_step_saved == trainer.global_step
end

function ModelCheckpoint:_monitor_candidates(trainer)
  local c = {}
  for k, v in pairs(trainer.callback_metrics or {}) do c[k] = v end
  if c.epoch == nil then c.epoch = trainer.current_epoch end
  c.step = trainer.global_step
  return c
end

function ModelCheckpoint:on_train_batch_end(trainer)
  if self.every_n_train_steps < 1 or self:_should_skip(trainer) then return end
  if trainer.global_step % self.every_n_train_steps ~= 0 then return end
  local cand = self:_monitor_candidates(trainer)
  self:_save_topk(trainer, cand)
  self:_save_last(trainer, cand)
end

function ModelCheckpoint:_epoch_end(trainer)
  if self:_should_skip(trainer) then return end
  local cand = self:_monitor_candidates(trainer)
  if self.every_n_epochs >= 1 and (trainer.current_epoch + 1) % self.every_n_epochs == 0 then
    self:_save_topk(trainer, cand)
  end
  self:_save_last(trainer, cand)
end

function ModelCheckpoint:on_train_epoch_end(trainer)
  if self._save_on_train_epoch_end then self:_epoch_end(trainer) end
end

function ModelCheckpoint:on_validation_end(trainer)
  if trainer.sanity_checking then return end
  self._val_ran = true
  if self._save_on_train_epoch_end == false then self:_epoch_end(trainer) end
end

-- ---- saving -----------------------------------------------------------------------------------------

function ModelCheckpoint:_save(trainer, path)
  local dir = path:match("^(.*)/[^/]*$")
  if dir and dir ~= "" and trainer.is_global_zero ~= false then -- ddp: only rank 0 writes
    local ok, err = pcall(IO.mkdirs, dir)
    if not ok then error("ModelCheckpoint: cannot create the checkpoint directory: " .. tostring(err), 0) end
  end
  self._last_global_step_saved = trainer.global_step -- before saving: it is part of the saved state
  trainer:save_checkpoint(path, self.save_weights_only)
  local logger = trainer.logger
  if type(logger) == "table" and type(logger.after_save_checkpoint) == "function" then
    logger:after_save_checkpoint(self)
  end
end

local function remove(path, trainer)
  if trainer.is_global_zero == false then return end -- ddp: only rank 0 touches the files
  if path and path ~= "" and file_exists(path) then os.remove(path) end
end

function ModelCheckpoint:_save_topk(trainer, cand)
  if self.save_top_k == 0 then return end
  if self.monitor == nil then
    local path = self:_interpolated_path(cand, self.best_model_path)
    local previous = self.best_model_path
    self.best_model_path = path -- before saving: it is part of the saved state
    self:_save(trainer, path)
    if self.save_top_k == 1 and previous ~= "" and previous ~= path then remove(previous, trainer) end
    return
  end
  local raw = cand[self.monitor]
  if raw == nil then
    local keys = {}
    for k in pairs(cand) do keys[#keys + 1] = k end
    table.sort(keys)
    local msg = fmt("ModelCheckpoint(monitor=%q) could not find the monitored key in the returned metrics: %s. " ..
      "HINT: did you call self:log(%q, value) in the model?", self.monitor, table.concat(keys, ", "), self.monitor)
    if self._val_ran then error(msg, 0) end
    if not self._warned_missing then
      self._warned_missing = true
      lt._warn(msg)
    end
    return
  end
  local current = to_number(raw)
  if current == nil then
    error(fmt("ModelCheckpoint: the monitored metric %q is a %s, expected a number", self.monitor, type(raw)), 0)
  end
  if self:check_monitor_top_k(current) then
    self:_update_best_and_save(current, trainer, cand)
  elseif self.verbose then
    io.stderr:write(fmt("Epoch %d, global step %d: %q was not in top %d\n", trainer.current_epoch,
      trainer.global_step, self.monitor, self.save_top_k))
  end
end

local function better(mode, a, b)
  if mode == "min" then return a < b end
  return a > b
end

local function count(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

--- Whether current enters the top k.
function ModelCheckpoint:check_monitor_top_k(current)
  if current == nil then return false end
  if self.save_top_k == -1 then return true end
  if count(self.best_k_models) < self.save_top_k then return true end
  local kth = self.best_k_models[self.kth_best_model_path]
  if kth == nil then return true end
  return better(self.mode, current, kth)
end

-- the key of t whose value is extreme by pick(a, b) (ties: the smaller path, for determinism)
local function arg_extreme(t, first_wins)
  local best_k, best_v
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v = t[k]
    if best_k == nil or first_wins(v, best_v) then best_k, best_v = k, v end
  end
  return best_k
end

function ModelCheckpoint:_update_best_and_save(current, trainer, cand)
  local k = self.save_top_k == -1 and count(self.best_k_models) + 1 or self.save_top_k
  local del_filepath
  if count(self.best_k_models) == k and k > 0 then
    del_filepath = self.kth_best_model_path
    self.best_k_models[del_filepath] = nil
  end
  if current ~= current then current = self.mode == "min" and math.huge or -math.huge end
  local path = self:_interpolated_path(cand, del_filepath)
  self.current_score = current
  self.best_k_models[path] = current
  if count(self.best_k_models) == k then
    -- the worst of the kept: max for "min", min for "max"
    self.kth_best_model_path = arg_extreme(self.best_k_models, function(a, b) return better(self.mode, b, a) end)
    self.kth_value = self.best_k_models[self.kth_best_model_path]
  end
  self.best_model_path = arg_extreme(self.best_k_models, function(a, b) return better(self.mode, a, b) end)
  self.best_model_score = self.best_k_models[self.best_model_path]
  if self.verbose then
    io.stderr:write(fmt("Epoch %d, global step %d: %q reached %s (best %s), saving model to %q as top %d\n",
      trainer.current_epoch, trainer.global_step, self.monitor, default_number(current),
      default_number(self.best_model_score), path, k))
  end
  self:_save(trainer, path)
  if del_filepath ~= nil and del_filepath ~= path then remove(del_filepath, trainer) end
end

function ModelCheckpoint:_save_last(trainer, cand)
  if not self.save_last then return end
  local path = self:format_checkpoint_name(cand, self.CHECKPOINT_NAME_LAST)
  local previous = self.last_model_path
  self.last_model_path = path
  self:_save(trainer, path)
  if previous ~= "" and previous ~= path then remove(previous, trainer) end
end

-- ---- state ------------------------------------------------------------------------------------------

function ModelCheckpoint:state_dict()
  local bk = {}
  for p, v in pairs(self.best_k_models) do bk[p] = v end
  return {
    monitor = self.monitor, best_model_score = self.best_model_score, best_model_path = self.best_model_path,
    current_score = self.current_score, dirpath = self.dirpath, best_k_models = bk,
    kth_best_model_path = self.kth_best_model_path, kth_value = self.kth_value, last_model_path = self.last_model_path,
    -- lutra: so that a resumed run does not save twice at the step it was saved at
    last_global_step_saved = self._last_global_step_saved,
  }
end

function ModelCheckpoint:load_state_dict(sd)
  if type(sd) ~= "table" then error("ModelCheckpoint:load_state_dict: expected a table, got " .. type(sd), 2) end
  if sd.dirpath == nil or sd.dirpath == self.dirpath then
    self.best_model_score = sd.best_model_score
    self.kth_best_model_path = sd.kth_best_model_path or ""
    if sd.kth_value ~= nil then self.kth_value = sd.kth_value end
    self.best_k_models = {}
    for p, v in pairs(sd.best_k_models or {}) do self.best_k_models[p] = v end
    self.last_model_path = sd.last_model_path or ""
    self.current_score = sd.current_score
    if sd.last_global_step_saved ~= nil then self._last_global_step_saved = sd.last_global_step_saved end
  else
    lt._warn(fmt("ModelCheckpoint: the checkpoint's dirpath %q differs from this callback's " ..
      "%q; only best_model_path is restored", tostring(sd.dirpath), tostring(self.dirpath)))
  end
  self.best_model_path = sd.best_model_path or ""
end

--- The newest checkpoint file (".ckpt") in dir, or nil.
function ModelCheckpoint.newest_in(dir)
  local names = IO.listdir(dir)
  if not names then return nil end
  local best, best_t
  table.sort(names)
  for _, n in ipairs(names) do
    if n:sub(-#ModelCheckpoint.FILE_EXTENSION) == ModelCheckpoint.FILE_EXTENSION then
      local st = IO.stat(dir .. "/" .. n)
      if st and st.type == "file" and (best_t == nil or st.mtime > best_t) then best, best_t = dir .. "/" .. n, st.mtime end
    end
  end
  return best
end

return ModelCheckpoint
