-- lt.optim — optimizers (C objects with fused update steps) and, lazily, lt.optim.lr_scheduler.
--
--   local opt = lt.optim.SGD(model, {lr = 0.1, momentum = 0.9})       -- or a list of tensors / groups
--   opt:zero_grad(); loss:backward(); opt:step()
--   opt.param_groups[1].lr = 0.01                                      -- read and written in C
--
-- Options and defaults (PyTorch 1.13's):
--   SGD     {lr (required), momentum = 0, dampening = 0, nesterov = false, weight_decay = 0, maximize = false}
--   Adam    {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, amsgrad = false, maximize = false}
--   AdamW   as Adam, weight_decay = 1e-2 (decoupled)
--   RMSprop {lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0, centered = false, maximize = false}
--   Adagrad {lr = 1e-2, lr_decay = 0, weight_decay = 0, initial_accumulator_value = 0, eps = 1e-10, maximize = false}
--   Adadelta {lr = 1, rho = 0.9, eps = 1e-6, weight_decay = 0, maximize = false}
--   Adamax  {lr = 2e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, maximize = false}
--   NAdam   {lr = 2e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, momentum_decay = 4e-3}
--   RAdam   {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0}
--   ASGD    {lr = 1e-2, lambd = 1e-4, alpha = 0.75, t0 = 1e6, weight_decay = 0, maximize = false}
--   LBFGS   {lr = 1, max_iter = 20, max_eval, tolerance_grad = 1e-7, tolerance_change = 1e-9, history_size = 100,
--            line_search_fn} (Lua, lua/lutra/optim/lbfgs.lua; step(closure) is required)
-- Methods: step([closure]) -> closure's loss, zero_grad([set_to_none = false]), add_param_group{params = ..., ...},
-- state_dict() (PyTorch's layout, 1-based param ids, tensors are copies), load_state_dict(sd).
local M = {
  SGD = require "lutra.optim.sgd",
  Adam = require "lutra.optim.adam",
  AdamW = require "lutra.optim.adamw",
  RMSprop = require "lutra.optim.rmsprop",
  LBFGS = require "lutra.optim.lbfgs",
  is_optimizer = require("lutra.core").is_optimizer,
}

-- the C kinds of core/src/optim_adaptive.c: nothing to add in Lua beyond building the object
local util = require "lutra.optim.param_groups"
for _, kind in ipairs { "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "ASGD" } do
  M[kind] = function(params, opts)
    local opt = util.build(kind, params, opts) -- (not a tail call: errors point at the caller)
    return opt
  end
end

return require("lutra.names").strict(M, "lt.optim", { lr_scheduler = "lutra.optim.lr_scheduler" })
