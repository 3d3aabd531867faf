-- callbacks/finetuning.lua — lt.callbacks.BaseFinetuning and BackboneFinetuning: Lightning 1.6's
-- (docs/reference/callbacks.md).
--
--   lt.callbacks.BackboneFinetuning{unfreeze_backbone_at_epoch = 10, lambda_func = function(e) return 1.5 end,
--     backbone_initial_ratio_lr = 0.1, should_align = true, train_bn = true}
--
-- The model must have a module field `backbone`. Before training the backbone is frozen (Module:freeze's
-- parameters off; with train_bn the BatchNorm layers stay trainable); at epoch unfreeze_backbone_at_epoch its
-- parameters are turned on and added to the first optimizer as a new param group with the learning rate
-- backbone_initial_lr (default: the first group's rate times backbone_initial_ratio_lr); each later epoch
-- multiplies that rate by lambda_func(epoch + 1), capped at the first group's rate when should_align. The
-- optimizers' groups are in the callback's checkpoint state and come back on resume (BaseFinetuning).
local cbs = require "lutra.callbacks"
local lt = require "lutra"
local MM = require "lutra.nn.module"

local fmt = string.format

-- ---- BaseFinetuning: freeze / make_trainable / unfreeze_and_add_param_group ------------------------------

local Base = cbs.Callback:extend("BaseFinetuning")

local is_bn = require("lutra.callbacks.weights").is_batch_norm

local own_params

--- The modules below `modules` (a module or a list of them) that hold parameters themselves: the leaves, and
--- parents with parameters of their own (Lightning's BaseFinetuning.flatten_modules).
local function leaves(modules)
  local list = {}
  local roots = (type(modules) == "table" and modules[1] ~= nil and not MM.is_module_instance(modules)) and modules
    or { modules }
  for _, root in ipairs(roots) do
    for _, m in ipairs((lt.nn.modules(root))) do
      if #(lt.nn.children(m)) == 0 or #own_params(m) > 0 then list[#list + 1] = m end
    end
  end
  return list
end

-- the parameters a module holds itself (not its children's)
function own_params(m)
  local own = {}
  local children = lt.nn.children(m)
  local inner = {}
  for _, c in ipairs(children) do for _, p in ipairs(lt.nn.parameters(c)) do inner[p] = true end end
  for _, p in ipairs(lt.nn.parameters(m)) do if not inner[p] then own[#own + 1] = p end end
  return own
end

--- BaseFinetuning.freeze(modules[, train_bn = true]): parameters off and eval mode, except BatchNorm
--- layers when train_bn.
function Base.freeze(modules, train_bn)
  if train_bn == nil then train_bn = true end
  for _, m in ipairs(leaves(modules)) do
    if not (train_bn and is_bn(m)) then
      for _, p in ipairs(own_params(m)) do MM.requires_grad_({ p = p }, false) end
      lt.nn.train(m, false)
    end
  end
end

--- BaseFinetuning.make_trainable(modules): parameters on and train mode.
function Base.make_trainable(modules)
  for _, m in ipairs(leaves(modules)) do
    for _, p in ipairs(own_params(m)) do MM.requires_grad_({ p = p }, true) end
    lt.nn.train(m, true)
  end
end

--- BaseFinetuning.unfreeze_and_add_param_group(modules, optimizer[, lr][, initial_denom_lr = 10][, train_bn =
--- true]): make_trainable, then the parameters that are not in the optimizer yet join it as a new group with
--- lr (default: the first group's rate / initial_denom_lr).
function Base.unfreeze_and_add_param_group(modules, optimizer, lr, initial_denom_lr, train_bn)
  Base.make_trainable(modules)
  local params_lr = lr or optimizer.param_groups[1].lr
  local denom = lr == nil and (initial_denom_lr or 10) or 1
  local have = {}
  for _, g in ipairs(optimizer.param_groups) do for _, p in ipairs(g.params) do have[p] = true end end
  local params = {}
  for _, m in ipairs(leaves(modules)) do
    if train_bn ~= false or not is_bn(m) then
      for _, p in ipairs(own_params(m)) do
        if p:requires_grad() and not have[p] then params[#params + 1] = p; have[p] = true end
      end
    end
  end
  if #params > 0 then optimizer:add_param_group { params = params, lr = params_lr / denom } end
end

-- ---- the optimizers' param groups in checkpoints (Lightning's _internal_optimizer_metadata) -------------
-- Groups added by the callback are not in what configure_optimizers returns on resume, so the callback keeps
-- every optimizer's groups by parameter name (stored at each epoch start, after finetune_function) and, when
-- a checkpoint is loaded (before the optimizers' states, which then set every group's hyper-parameters and
-- state), adds the groups the fresh optimizers lack.

-- {params = {names...}, lr = ...} per group of the optimizer
local function groups_by_name(model, optimizer)
  local named, order = lt.nn.named_parameters(model)
  local name_of = {}
  for _, n in ipairs(order) do if name_of[named[n]] == nil then name_of[named[n]] = n end end
  local groups = {}
  for i, g in ipairs(optimizer.param_groups) do
    local names = {}
    for j, p in ipairs(g.params) do
      names[j] = name_of[p] or error(fmt("BaseFinetuning: param_groups[%d].params[%d] of the optimizer is not a " ..
        "parameter of the model (its groups are saved by parameter name)", i, j), 0)
    end
    groups[i] = { params = names, lr = g.lr }
  end
  return groups
end

function Base:on_fit_start(_, model)
  self:freeze_before_training(model)
  -- the parameters of the groups added back from a checkpoint were trainable when it was saved
  for _, p in ipairs(self._restored_params or {}) do MM.requires_grad_({ p = p }, true) end
end

function Base:on_train_epoch_start(trainer, model)
  local meta = {}
  for i, opt in ipairs(trainer.optimizers) do
    self:finetune_function(model, trainer.current_epoch, opt, i - 1)
    meta[i] = groups_by_name(model, opt)
  end
  self._internal_optimizer_metadata = meta
end

function Base:state_dict() return { internal_optimizer_metadata = self._internal_optimizer_metadata } end

function Base:load_state_dict(s) self._internal_optimizer_metadata = s.internal_optimizer_metadata end

--- Called by the checkpoint's restore before the optimizers' states load: the groups they lack, added back.
function Base:on_load_checkpoint(trainer, model, state)
  self._restored_params = nil
  local meta = type(state) == "table" and state.internal_optimizer_metadata or nil
  if type(meta) ~= "table" then return end -- (saved before the groups were kept, or before any epoch)
  local named = lt.nn.named_parameters(model)
  local restored = {}
  for i, opt in ipairs(trainer.optimizers or {}) do
    local saved = meta[i] or {}
    for j = #opt.param_groups + 1, #saved do
      local params = {}
      for k, name in ipairs(saved[j].params) do
        params[k] = named[name] or error(fmt("BaseFinetuning: the checkpoint's optimizer %d param group %d holds '%s', " ..
          "which the model does not have", i, j, tostring(name)), 0)
        restored[#restored + 1] = params[k]
      end
      opt:add_param_group { params = params, lr = saved[j].lr }
    end
  end
  self._restored_params = restored
end

function Base.freeze_before_training() error("BaseFinetuning: define freeze_before_training(self, model)", 0) end
function Base.finetune_function() error("BaseFinetuning: define finetune_function(self, model, epoch, optimizer, opt_idx)", 0) end

-- ---- BackboneFinetuning ---------------------------------------------------------------------------------

local Backbone = Base:extend("BackboneFinetuning")
Backbone.freeze, Backbone.make_trainable = Base.freeze, Base.make_trainable
Backbone.unfreeze_and_add_param_group = Base.unfreeze_and_add_param_group

local OPTIONS = { unfreeze_backbone_at_epoch = "integer", lambda_func = "function", backbone_initial_ratio_lr = "number",
  backbone_initial_lr = "number", should_align = "boolean", initial_denom_lr = "number", train_bn = "boolean",
  verbose = "boolean", rounding = "integer" }

function Backbone:init(opts)
  opts = cbs.check_options("BackboneFinetuning", opts, OPTIONS, 3)
  self.unfreeze_backbone_at_epoch = opts.unfreeze_backbone_at_epoch or 10
  if self.unfreeze_backbone_at_epoch < 0 then
    error("BackboneFinetuning: option 'unfreeze_backbone_at_epoch' must be >= 0", 3)
  end
  self.lambda_func = opts.lambda_func or function() return 1.5 end
  self.backbone_initial_ratio_lr = opts.backbone_initial_ratio_lr or 0.1
  self.backbone_initial_lr = opts.backbone_initial_lr
  self.should_align = opts.should_align ~= false
  self.initial_denom_lr = opts.initial_denom_lr or 10
  self.train_bn = opts.train_bn ~= false
  self.verbose = opts.verbose == true
  self.rounding = opts.rounding or 12
end

local function backbone_of(model)
  local b = type(model) == "table" and model.backbone or nil
  if type(b) ~= "table" then
    error("BackboneFinetuning: the model should have a module field `backbone` (model.backbone = lt.nn...)", 0)
  end
  return b
end

function Backbone:on_fit_start(trainer, model)
  local backbone = backbone_of(model)
  Base.on_fit_start(self, trainer, model)
  -- resumed after the unfreeze: the backbone as the unfreeze epoch left it (its group is back in the optimizer)
  if self._restored_params and #self._restored_params > 0 then Base.make_trainable(backbone) end
end

function Backbone:freeze_before_training(model) Base.freeze(backbone_of(model), self.train_bn) end

function Backbone:finetune_function(model, epoch, optimizer, opt_idx)
  if opt_idx ~= 0 then return end
  local current_lr = optimizer.param_groups[1].lr
  if epoch == self.unfreeze_backbone_at_epoch then
    local initial = self.backbone_initial_lr or current_lr * self.backbone_initial_ratio_lr
    self.previous_backbone_lr = initial
    Base.unfreeze_and_add_param_group(backbone_of(model), optimizer, initial, self.initial_denom_lr, self.train_bn)
    if self.verbose then
      lt._note(fmt("lutra: BackboneFinetuning: current lr %.*g, backbone lr %.*g", self.rounding, current_lr,
        self.rounding, initial))
    end
  elseif epoch > self.unfreeze_backbone_at_epoch and self.previous_backbone_lr then
    local nxt = self.lambda_func(epoch + 1) * self.previous_backbone_lr
    if self.should_align and nxt > current_lr then nxt = current_lr end
    local groups = optimizer.param_groups
    groups[#groups].lr = nxt
    self.previous_backbone_lr = nxt
    if self.verbose then
      lt._note(fmt("lutra: BackboneFinetuning: current lr %.*g, backbone lr %.*g", self.rounding, current_lr,
        self.rounding, nxt))
    end
  end
end

function Backbone:state_dict()
  local s = Base.state_dict(self)
  s.previous_backbone_lr = self.previous_backbone_lr
  return s
end

function Backbone:load_state_dict(s)
  Base.load_state_dict(self, s)
  self.previous_backbone_lr = s.previous_backbone_lr
end

return { BaseFinetuning = Base, BackboneFinetuning = Backbone }
