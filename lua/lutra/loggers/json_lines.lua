-- loggers/json_lines.lua — lt.loggers.JSONLinesLogger (docs/reference/loggers.md), with the directory rule of
-- every file logger (lua/lutra/loggers/files.lua): <save_dir>/<name>/version_N, N the next free one.
--
--   JSONLinesLogger{save_dir=".", name="lutra_logs", version=nil, prefix=""}
--     log_dir/metrics.jsonl: one JSON object a line (Jansson, core/bind/l_json_line.c), {"step": s, <metric>: v, ...}
--     with keys sorted; NaN and infinities as the strings "nan", "inf", "-inf". hparams.json: the hyper-parameters.
local lt = require "lutra"
local core = require "lutra.core"
local files = require "lutra.loggers.files"

local M = {}
local IO = lt._io
local check_options = require("lutra.utils.check").check_options

-- ---- JSONLinesLogger ---------------------------------------------------------------------------------------

local JSONLinesLogger = files.dir_class("JSONLinesLogger")
M.JSONLinesLogger_class = JSONLinesLogger
local JSON_OPTIONS = { save_dir = true, name = true, version = true, prefix = true }

function M.JSONLinesLogger(opts)
  opts = check_options("JSONLinesLogger", opts, JSON_OPTIONS)
  local save_dir, name, version, prefix = files.dir_options("JSONLinesLogger", opts)
  return setmetatable({ save_dir = save_dir, name = name, _version_opt = version, prefix = prefix, hparams = {},
    _rows = 0 }, JSONLinesLogger)
end

function JSONLinesLogger:log_metrics(metrics, step)
  local row = files.prefixed("JSONLinesLogger", self.prefix, metrics)
  if step ~= nil then row.step = step end
  local line = core._json_line(row)
  self:_ensure_dir()
  if not self._file then
    local path = self:_log_dir() .. "/metrics.jsonl"
    local f, err = io.open(path, self._rows == 0 and "wb" or "ab") -- a reused version starts afresh, as CSV
    if not f then error("JSONLinesLogger: cannot open " .. tostring(err), 0) end
    rawset(self, "_file", f)
    rawset(self, "metrics_file_path", path)
  end
  self._file:write(line, "\n")
  self._file:flush()
  self._rows = self._rows + 1
end

function JSONLinesLogger:log_hyperparams(params)
  if not files.merge_hparams(self, "JSONLinesLogger", params) then return end
  IO.write_atomic(self:_log_dir() .. "/hparams.json", core._json_line(files.plain(self.hparams, 0)) .. "\n")
end

function JSONLinesLogger:save() if self._file then self._file:flush() end end

function JSONLinesLogger:finalize(status)
  if self._file then self._file:close(); rawset(self, "_file", nil) end
  rawset(self, "status", status)
end

return M
