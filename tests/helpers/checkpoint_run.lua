-- tests/helpers/checkpoint_run.lua — the short fit the checkpoint specs save and resume from (checkpoint_files_spec,
-- checkpoint_hooks_spec): a Linear(3, 1) trained 2 epochs of 3 batches with Adam and StepLR, then resumed to 3.
local lt = require "lutra"
local quiet = require "helpers.quiet"

local M = {}

-- A trainer fitted for 2 epochs of 3 batches with Adam and StepLR, and its model.
function M.fitted(extra, callbacks)
  lt.manual_seed(3)
  local ds = lt.data.TensorDataset(lt.randn(24, 3), lt.randn(24, 1))
  local model = { fc = lt.nn.Linear(3, 1) }
  function model:training_step(b) return lt.F.mse_loss(self.fc(b[1]), b[2]) end
  function model:configure_optimizers()
    local opt = lt.optim.Adam(lt.nn.parameters(self), { lr = 0.05 })
    return { optimizer = opt, lr_scheduler = lt.optim.lr_scheduler.StepLR(opt, { step_size = 1, gamma = 0.5 }) }
  end
  for k, v in pairs(extra or {}) do model[k] = v end
  local t = lt.Trainer(quiet { max_epochs = 2, callbacks = callbacks })
  t:fit(model, lt.data.DataLoader(ds, { batch_size = 8 }))
  return t, model, ds
end

function M.resume(path, model, ds, callbacks)
  local t = lt.Trainer(quiet { max_epochs = 3, callbacks = callbacks })
  t:fit(model, lt.data.DataLoader(ds, { batch_size = 8 }), { ckpt_path = path })
  return t
end

return M
