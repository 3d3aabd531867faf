-- loggers/csv.lua — lt.loggers.CSVLogger, the default logger of the Trainer.
--
--   local logger = lt.loggers.CSVLogger{save_dir = "runs", name = "mnist"}   -- runs/mnist/version_N/
--   trainer = lt.Trainer{logger = logger}
--   logger.log_dir                    --> "runs/mnist/version_0"
--   -- after fit: runs/mnist/version_0/metrics.csv and hparams.yaml
--   require("lutra.plot").svg(logger.log_dir .. "/metrics.csv")
--
-- CSVLogger{save_dir=".", name="lutra_logs", version=nil, prefix=""} (Lightning 1.6's CSVLogger):
--   version nil → the next free `version_N` under <save_dir>/<name> (decided on first use, so two
--   loggers made in one process before logging share nothing); an integer N → `version_N`; a string →
--   that directory name. log_dir = <save_dir>/<name>/<version dir>.
--   log_metrics(metrics, step): one row of metrics.csv; the columns are `epoch` (when logged: the
--     trainer adds it), `step`, then each metric in order of first appearance (sorted within one call).
--     A metric not seen before adds a column: the file is rewritten with the longer header and the old
--     rows padded with empty cells, as Lightning does. Each row is flushed to disk when written.
--   log_hyperparams(params): merged into hparams, written to hparams.yaml (atomically) at once.
--   save(): flushes; finalize(status): flushes and closes ("success", "failed", "interrupted"...).
--   state_dict(): nothing to restore (a resumed run logs into a new version, like Lightning).
local lt = require "lutra"
local files = require "lutra.loggers.files"
local yaml = require "lutra.loggers.yaml"

local IO = lt._io
local M = {}
local fmt, concat = string.format, table.concat

local check_options = require("lutra.utils.check").check_options
local is_count = files.is_count

-- ---- values to CSV text ---------------------------------------------------------------------------

local function scalar(v)
  if lt.is_tensor(v) then
    if v:numel() ~= 1 then error("CSVLogger: a logged tensor must have one element, got shape " .. v:shape_str(), 4) end
    v = v:item()
  end
  return v
end

local function cell(v)
  local tv = type(v)
  if tv == "number" then
    if v ~= v then return "nan" end
    if v == math.huge then return "inf" end
    if v == -math.huge then return "-inf" end
    return yaml.number(v)
  elseif tv == "boolean" then return v and "true" or "false"
  elseif v == nil then return ""
  end
  local s = tostring(v)
  if s:find('[,"\r\n]') then s = '"' .. s:gsub('"', '""') .. '"' end
  return s
end

-- ---- CSVLogger -----------------------------------------------------------------------------------

local CSVLogger = {}
CSVLogger.__index = function(self, k)
  if k == "log_dir" then return self:_log_dir() end
  if k == "version" then return self:_version() end
  if k == "experiment" then return self end
  return CSVLogger[k]
end
CSVLogger.__name = "CSVLogger"

local CSV_OPTIONS = { save_dir = true, name = true, version = true, prefix = true, flush_logs_every_n_steps = true }

function M.CSVLogger(opts)
  opts = check_options("CSVLogger", opts, CSV_OPTIONS)
  local save_dir, name, version, prefix = files.dir_options("CSVLogger", opts)
  -- accepted for Lightning's signature; every row is flushed when written anyway (rows are few and small)
  local flush_n = opts.flush_logs_every_n_steps
  if flush_n ~= nil and not (is_count(flush_n) and flush_n >= 1) then
    error("CSVLogger: option 'flush_logs_every_n_steps' must be an integer >= 1, got " .. tostring(flush_n), 2)
  end
  local self = setmetatable({
    save_dir = save_dir, name = name, prefix = prefix,
    _version_opt = version,
    hparams = {},
    _columns = {}, _colset = {}, _rows = 0,
    _file = nil,
  }, CSVLogger)
  return self
end

CSVLogger._root_dir, CSVLogger._version, CSVLogger._log_dir = files.root_dir, files.version, files.log_dir

function CSVLogger:_ensure_dir()
  if not self._dir_made then
    local dir = self:_log_dir()
    local ok, err = pcall(IO.mkdirs, dir)
    if not ok then error("CSVLogger: cannot create the log directory: " .. tostring(err), 0) end
    rawset(self, "_dir_made", true)
    rawset(self, "metrics_file_path", dir .. "/metrics.csv")
  end
end

local function header_line(cols)
  local h = {}
  for i, c in ipairs(cols) do h[i] = cell(c) end
  return concat(h, ",") .. "\n"
end

-- Rewrites metrics.csv with the current header; old rows get empty cells for the new columns.
function CSVLogger:_rewrite(old_ncols)
  if self._file then self._file:close(); self._file = nil end
  local path = self.metrics_file_path
  local text = ""
  local f = io.open(path, "rb")
  if f then text = f:read("*a"); f:close() end
  local pad = string.rep(",", #self._columns - old_ncols)
  local lines = { header_line(self._columns) }
  local first = true
  -- rows never hold raw newlines in cells we write except inside quotes; metric names are the only
  -- strings and they are quoted by cell(); values are numbers. So rows are lines.
  for line in text:gmatch("([^\n]*)\n") do
    if first then first = false
    else lines[#lines + 1] = line .. pad .. "\n" end
  end
  IO.write_atomic(path, concat(lines))
end

function CSVLogger:log_metrics(metrics, step)
  if type(metrics) ~= "table" then error("CSVLogger:log_metrics: expected a table of metrics, got " .. type(metrics), 2) end
  self:_ensure_dir()
  local row = {}
  local new = {}
  for k, v in pairs(metrics) do
    local key = tostring(k)
    if self.prefix ~= "" and key ~= "epoch" then key = self.prefix .. "-" .. key end
    row[key] = scalar(v)
    if not self._colset[key] and key ~= "step" then new[#new + 1] = key end
  end
  if step ~= nil then row.step = step end
  local old_ncols = #self._columns
  if not self._colset.step then new[#new + 1] = "step" end
  if #new > 0 then
    table.sort(new, function(a, b)
      local ra = a == "epoch" and 0 or a == "step" and 1 or 2
      local rb = b == "epoch" and 0 or b == "step" and 1 or 2
      if ra ~= rb then return ra < rb end
      return a < b
    end)
    for _, k in ipairs(new) do
      self._colset[k] = true
      self._columns[#self._columns + 1] = k
    end
    if old_ncols > 0 then self:_rewrite(old_ncols) end
  end
  if not self._file then
    -- the first row starts the file afresh (a reused version directory is overwritten, as in Lightning)
    local first = old_ncols == 0
    local f, err = io.open(self.metrics_file_path, first and "wb" or "ab")
    if not f then error("CSVLogger: cannot open " .. tostring(err), 0) end
    self._file = f
    if first then f:write(header_line(self._columns)) end
  end
  local cells = {}
  for i, c in ipairs(self._columns) do cells[i] = cell(row[c]) end
  self._file:write(concat(cells, ","), "\n")
  self._file:flush()
  self._rows = self._rows + 1
end

function CSVLogger:log_hyperparams(params)
  if params == nil then return end
  if type(params) ~= "table" then error("CSVLogger:log_hyperparams: expected a table, got " .. type(params), 2) end
  for k, v in pairs(params) do self.hparams[k] = v end
  self:_ensure_dir()
  IO.write_atomic(self:_log_dir() .. "/hparams.yaml", yaml.to_yaml(self.hparams))
end

function CSVLogger:save()
  if self._file then self._file:flush() end
end

function CSVLogger:finalize(status)
  self:save()
  if self._file then self._file:close(); self._file = nil end
  rawset(self, "status", status)
end

function CSVLogger:state_dict() return {} end
function CSVLogger:load_state_dict() end

function CSVLogger:__tostring()
  return fmt("CSVLogger(%s)", self._resolved_version and self:_log_dir() or self:_root_dir())
end

M.CSVLogger_class = CSVLogger

return M
