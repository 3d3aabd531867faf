-- loggers/tensorboard.lua — lt.loggers.TensorBoardLogger (docs/reference/loggers.md), with the directory rule
-- of every file logger (lua/lutra/loggers/files.lua): <save_dir>/<name>/version_N, N the next free one.
--
--   TensorBoardLogger{save_dir=".", name="lutra_logs", version=nil, prefix="", flush_secs=nil, default_hp_metric=true}
--     log_dir/events.out.tfevents.<time>.<host>: TFRecord framing (masked CRC-32C) of Event protobufs
--     (core/src/tb_event.proto through protobuf-c, core/src/tb_writer.c); each log_metrics call is one Event at
--     its step whose Summary holds a simple_value per metric (TensorBoard's scalars). log_hyperparams(params[,
--     metrics]) as Lightning 1.6's: hparams.yaml as CSVLogger, then (metrics nil -> {hp_metric = -1} when
--     default_hp_metric, a number -> {hp_metric = n}) the metrics as scalars at step 0 and the HParams plugin's
--     three summaries (core/src/tb_hparams.c, core/src/tb_hparams.proto) of the flattened params.
-- Several loggers at once: lt.Trainer{logger = {csv, tb, jsonl}} (each gets every call).
local lt = require "lutra"
local core = require "lutra.core"
local files = require "lutra.loggers.files"
local yaml = require "lutra.loggers.yaml"

local M = {}
local fmt = string.format
local IO = lt._io
local check_options = require("lutra.utils.check").check_options

-- ---- TensorBoardLogger --------------------------------------------------------------------------------------

local TensorBoardLogger = files.dir_class("TensorBoardLogger")
M.TensorBoardLogger_class = TensorBoardLogger
local TB_OPTIONS = { save_dir = true, name = true, version = true, prefix = true, flush_secs = "number",
  default_hp_metric = "boolean" }

function M.TensorBoardLogger(opts)
  opts = check_options("TensorBoardLogger", opts, TB_OPTIONS)
  local save_dir, name, version, prefix = files.dir_options("TensorBoardLogger", opts)
  if opts.flush_secs ~= nil and not (opts.flush_secs >= 0) then
    error("TensorBoardLogger: option 'flush_secs' must be a number >= 0, got " .. tostring(opts.flush_secs), 2)
  end
  return setmetatable({ save_dir = save_dir, name = name, _version_opt = version, prefix = prefix, hparams = {},
    flush_secs = opts.flush_secs or 0, default_hp_metric = opts.default_hp_metric ~= false }, TensorBoardLogger)
end

local function hostname()
  local f = io.open("/etc/hostname", "r")
  local h = f and f:read("*l")
  if f then f:close() end
  return (h and h ~= "" and h or "localhost"):gsub("[^%w%-%.]", "_")
end

function TensorBoardLogger:_writer()
  if not self._w then
    self:_ensure_dir()
    local wall = core._wall_time()
    local path = fmt("%s/events.out.tfevents.%d.%s", self:_log_dir(), math.floor(wall), hostname())
    local w, created = core._tb_open(path, wall)
    rawset(self, "_w", w)
    rawset(self, "event_file_path", created)
    rawset(self, "_flushed", IO.now())
  end
  return self._w
end

function TensorBoardLogger:_flush_when_due()
  if IO.now() - self._flushed >= self.flush_secs then
    self._w:flush()
    rawset(self, "_flushed", IO.now())
  end
end

-- a row of metrics (prefixed) as sorted tags and their numbers; `method` names the call in the error
local function tags_and_numbers(method, row)
  local tags, values = {}, {}
  for k in pairs(row) do tags[#tags + 1] = k end
  table.sort(tags)
  for i, k in ipairs(tags) do
    local v = row[k]
    if type(v) ~= "number" then
      error(fmt("TensorBoardLogger:%s: metric '%s' must be a number or a one-element tensor, got %s", method, k,
        type(v)), 3)
    end
    values[i] = v
  end
  return tags, values
end

function TensorBoardLogger:log_metrics(metrics, step)
  local tags, values = tags_and_numbers("log_metrics", files.prefixed("TensorBoardLogger", self.prefix, metrics))
  self:_writer():scalars(step or 0, core._wall_time(), tags, values)
  self:_flush_when_due()
end

-- a table whose keys are exactly 1..n (n > 0): a list, which Lightning logs as its text, not flattened
local function is_list(t)
  local n = #t
  if n == 0 then return false end
  for k in pairs(t) do if type(k) ~= "number" or k < 1 or k > n or k ~= math.floor(k) then return false end end
  return true
end

-- a value the HParams plugin can hold: numbers, strings and booleans as they are, a one-element tensor as its
-- number, a list as its JSON text, anything else (a larger tensor, a function) as its text
local function hparam_value(v)
  v = files.plain(v, 0)
  if type(v) ~= "table" then return v end
  local ok, text = pcall(core._json_line, v)
  return ok and text or tostring(v)
end

-- Lightning's _flatten_dict and _sanitize_params: nested tables as "a/b" names (keys as text), into `out`
local function flatten_hparams(params, prefix, out, depth)
  for k, v in pairs(params) do
    local name = prefix .. tostring(k)
    if type(v) == "table" and not lt.is_tensor(v) and not is_list(v) and depth < 16 then
      flatten_hparams(v, name .. "/", out, depth + 1)
    else
      out[name] = hparam_value(v)
    end
  end
  return out
end

-- Lightning's TensorBoardLogger.log_hyperparams: metrics nil -> {hp_metric = -1} (default_hp_metric), a number
-- or a one-element tensor -> {hp_metric = it}; with metrics, those as scalars at step 0 and the HParams
-- plugin's summaries of this call's params. (Their MetricInfo tags are the scalars' tags, prefix included, so
-- the HParams tab finds the values.)
function TensorBoardLogger:log_hyperparams(params, metrics)
  if params == nil then params = {} end -- (Lightning's _convert_params: None is {})
  if metrics == nil then
    if self.default_hp_metric then metrics = { hp_metric = -1 } end
  elseif type(metrics) == "number" or lt.is_tensor(metrics) then
    metrics = { hp_metric = metrics }
  elseif type(metrics) ~= "table" then
    error(fmt("TensorBoardLogger:log_hyperparams: metrics must be a table, a number or a one-element tensor, got %s",
      type(metrics)), 2)
  end
  local tags, values -- checked before anything is written
  if metrics ~= nil and next(metrics) ~= nil then
    tags, values = tags_and_numbers("log_hyperparams", files.prefixed("TensorBoardLogger", self.prefix, metrics))
  end
  files.merge_hparams(self, "TensorBoardLogger", params)
  IO.write_atomic(self:_log_dir() .. "/hparams.yaml", yaml.to_yaml(self.hparams))
  if not tags then return end
  local flat = flatten_hparams(params, "", {}, 0)
  local names, vals = {}, {}
  for k in pairs(flat) do names[#names + 1] = k end
  table.sort(names)
  for i, k in ipairs(names) do vals[i] = flat[k] end
  local w, wall = self:_writer(), core._wall_time()
  w:scalars(0, wall, tags, values)
  w:hparams(wall, names, vals, tags)
  self:_flush_when_due()
end

function TensorBoardLogger:save() if self._w then self._w:flush() end end

function TensorBoardLogger:finalize(status)
  if self._w then self._w:close(); rawset(self, "_w", nil) end
  rawset(self, "status", status)
end

return M
