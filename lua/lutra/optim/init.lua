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
-- Methods: step([closure]) -> closure's loss, zero_grad([set_to_none = false]), add_param_group{params = ..., ...},
-- state_dict() (PyTorch's layout, 1-based param ids, tensors are copies), load_state_dict(sd).
local M = {
  SGD = require "lutra.optim.sgd",
  Adam = require "lutra.optim.adam",
  AdamW = require "lutra.optim.adamw",
  RMSprop = require "lutra.optim.rmsprop",
  is_optimizer = require("lutra.core").is_optimizer,
}

return require("lutra.names").strict(M, "lt.optim", { lr_scheduler = "lutra.optim.lr_scheduler" })
