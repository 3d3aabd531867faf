-- lutra.loggers — lt.loggers: experiment loggers. CSVLogger is the default logger of the Trainer.
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
-- A logger is any table with log_metrics (and optionally log_hyperparams, save, finalize, log_dir,
-- name, version); the Trainer calls them.
local lt = require "lutra"

local IO = lt._io
local M = {}
local fmt, concat = string.format, table.concat

local check_options = require("lutra.utils.check").check_options

-- A number that is an integer a double holds exactly (NaN, inf, fractions and |v| >= 2^53 are not).
local function is_count(v) return type(v) == "number" and v == math.floor(v) and v > -2 ^ 53 and v < 2 ^ 53 end

local function is_dir(path)
  local st = IO.stat(path)
  return st ~= nil and st.type == "dir"
end

--- The next free version number under root (0 when root does not exist or holds no version_N).
function M.next_version(root)
  local names = IO.listdir(root)
  if not names then return 0 end
  local best = -1
  for _, n in ipairs(names) do
    local v = n:match("^version_(%d+)$")
    if v and is_dir(root .. "/" .. n) then best = math.max(best, tonumber(v)) end
  end
  return best + 1
end

-- ---- values to CSV / YAML text -------------------------------------------------------------------

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
    if v == math.floor(v) and math.abs(v) < 2 ^ 53 then return fmt("%.0f", v) end
    for digits = 15, 16 do
      local s = fmt("%." .. digits .. "g", v)
      if tonumber(s) == v then return s end
    end
    return fmt("%.17g", v)
  elseif tv == "boolean" then return v and "true" or "false"
  elseif v == nil then return ""
  end
  local s = tostring(v)
  if s:find('[,"\r\n]') then s = '"' .. s:gsub('"', '""') .. '"' end
  return s
end

local function yaml_string(s)
  if s:match("^[%w_][%w_%.%-/ ]*$") and not s:match(" $") and not tonumber(s)
    and not ({ ["true"] = 1, ["false"] = 1, ["null"] = 1, ["yes"] = 1, ["no"] = 1, ["on"] = 1, ["off"] = 1,
      ["~"] = 1 })[s:lower()] then
    return s
  end
  return '"' .. s:gsub('[%c"\\]', function(ch)
    return ({ ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\t"] = "\\t" })[ch] or fmt("\\x%02x", ch:byte())
  end) .. '"'
end

local function yaml_scalar(v)
  local tv = type(v)
  if tv == "number" then
    if v ~= v then return ".nan" end
    if v == math.huge then return ".inf" end
    if v == -math.huge then return "-.inf" end
    return cell(v)
  elseif tv == "boolean" then return v and "true" or "false"
  elseif tv == "string" then return yaml_string(v)
  elseif lt.is_tensor(v) then
    if v:numel() == 1 then return cell(v:item()) end
    return yaml_string("tensor " .. v:shape_str())
  end
  return yaml_string(tostring(v))
end

local sorted_keys = require("lutra.utils.check").sorted_keys

--- YAML text of a table of hyper-parameters (nested tables indented; lists as "- item").
function M.to_yaml(t)
  local out = {}
  local seen = {}
  local function emit(tbl, indent)
    if seen[tbl] then out[#out + 1] = indent .. "# (cycle)"; return end
    seen[tbl] = true
    local n = #tbl
    local is_list = n > 0
    for k in pairs(tbl) do if type(k) ~= "number" or k < 1 or k > n or k ~= math.floor(k) then is_list = false end end
    if is_list then
      for i = 1, n do
        local v = tbl[i]
        if type(v) == "table" and not lt.is_tensor(v) then
          if next(v) == nil then out[#out + 1] = indent .. "- {}"
          else out[#out + 1] = indent .. "-"; emit(v, indent .. "  ") end
        else
          out[#out + 1] = indent .. "- " .. yaml_scalar(v)
        end
      end
    else
      for _, k in ipairs(sorted_keys(tbl)) do
        local v = tbl[k]
        local key = yaml_string(tostring(k))
        if type(v) == "table" and not lt.is_tensor(v) then
          if next(v) == nil then out[#out + 1] = indent .. key .. ": {}"
          else out[#out + 1] = indent .. key .. ":"; emit(v, indent .. "  ") end
        elseif type(v) ~= "function" then -- (functions are not hyper-parameters one can write down)
          out[#out + 1] = indent .. key .. ": " .. yaml_scalar(v)
        end
      end
    end
    seen[tbl] = nil
  end
  emit(t, "")
  if #out == 0 then return "{}\n" end
  return concat(out, "\n") .. "\n"
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

--- The options every file logger shares (CSV, JSON lines, TensorBoard): save_dir, name, version, prefix,
--- checked, with their defaults; level as error's, from the logger's constructor.
function M._dir_options(what, opts, level)
  level = (level or 2) + 1
  local save_dir = opts.save_dir or "."
  if type(save_dir) ~= "string" then error(what .. ": option 'save_dir' must be a string, got " .. type(save_dir), level) end
  local name = opts.name
  if name == nil then name = "lutra_logs" end
  if type(name) ~= "string" then error(what .. ": option 'name' must be a string, got " .. type(name), level) end
  local version = opts.version
  -- (inf is an integer to math.floor; below 2^53 a number is one exactly, and "%d" can print it)
  if version ~= nil and type(version) ~= "string" and not (is_count(version) and version >= 0) then
    error(what .. ": option 'version' must be an integer >= 0 or a string, got " .. tostring(version), level)
  end
  local prefix = opts.prefix or ""
  if type(prefix) ~= "string" then error(what .. ": option 'prefix' must be a string, got " .. type(prefix), level) end
  return save_dir, name, version, prefix
end

function M.CSVLogger(opts)
  opts = check_options("CSVLogger", opts, CSV_OPTIONS)
  local save_dir, name, version, prefix = M._dir_options("CSVLogger", opts)
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

function CSVLogger:_root_dir()
  if self.name == "" then return self.save_dir end
  return self.save_dir .. "/" .. self.name
end

function CSVLogger:_version()
  if self._resolved_version == nil then
    local v = self._version_opt
    if v == nil then v = M.next_version(self:_root_dir()) end
    rawset(self, "_resolved_version", v)
  end
  return self._resolved_version
end

function CSVLogger:_log_dir()
  local v = self:_version()
  local dir = type(v) == "string" and v or ("version_" .. fmt("%d", v))
  return self:_root_dir() .. "/" .. dir
end

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
  IO.write_atomic(self:_log_dir() .. "/hparams.yaml", M.to_yaml(self.hparams))
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

-- [tools: loggers] JSON lines and TensorBoard event files (lua/lutra/loggers_more.lua), loaded on first use
function M.JSONLinesLogger(opts) return require("lutra.loggers.tensorboard").JSONLinesLogger(opts) end
function M.TensorBoardLogger(opts) return require("lutra.loggers.tensorboard").TensorBoardLogger(opts) end

return require("lutra.names").strict(M, "lt.loggers")
