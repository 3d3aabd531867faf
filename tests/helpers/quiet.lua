-- tests/helpers/quiet.lua — Trainer options for specs: no logger, checkpoints, summary or progress bar, then
-- each table given (later ones win): quiet { max_epochs = 2 }, quiet(defaults, overrides).
return function(...)
  local o = { logger = false, enable_checkpointing = false, enable_model_summary = false, enable_progress_bar = false }
  for i = 1, select("#", ...) do
    for k, v in pairs(select(i, ...) or {}) do o[k] = v end
  end
  return o
end
