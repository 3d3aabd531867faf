-- lutra.loggers — lt.loggers: experiment loggers, one file a family: CSVLogger (csv.lua, the default logger of the
-- Trainer), JSONLinesLogger (json_lines.lua), TensorBoardLogger (tensorboard.lua); the directory rule they share is
-- files.lua's, the YAML of their hparams.yaml yaml.lua's.
--
--   local logger = lt.loggers.CSVLogger{save_dir = "runs", name = "mnist"}   -- runs/mnist/version_N/
--   trainer = lt.Trainer{logger = {logger, lt.loggers.TensorBoardLogger{save_dir = "runs"}}}
--
-- A logger is any table with log_metrics (and optionally log_hyperparams, save, finalize, log_dir,
-- name, version); the Trainer calls them.
local files = require "lutra.loggers.files"
local csv = require "lutra.loggers.csv"

local M = {
  CSVLogger = csv.CSVLogger,
  CSVLogger_class = csv.CSVLogger_class,
  next_version = files.next_version,
  to_yaml = require("lutra.loggers.yaml").to_yaml,
}

-- [tools: loggers] JSON lines and TensorBoard event files, loaded on first use
function M.JSONLinesLogger(opts) return require("lutra.loggers.json_lines").JSONLinesLogger(opts) end
function M.TensorBoardLogger(opts) return require("lutra.loggers.tensorboard").TensorBoardLogger(opts) end

return require("lutra.names").strict(M, "lt.loggers")
