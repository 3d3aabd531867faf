-- optim/lr_scheduler_more.lua — more of PyTorch 1.13's schedulers on lr_scheduler.lua's base (its chainable
-- get_lr forms, so step() sequences match PyTorch's; step(epoch) uses the closed forms where PyTorch has
-- them):
--
--   ConstantLR{factor = 1/3, total_iters = 5}, LinearLR{start_factor = 1/3, end_factor = 1, total_iters = 5},
--   MultiplicativeLR(opt, fn | {fn, ...}), PolynomialLR{total_iters = 5, power = 1},
--   CosineAnnealingWarmRestarts{T_0, T_mult = 1, eta_min = 0},
--   CyclicLR{base_lr, max_lr, step_size_up = 2000, step_size_down, mode = "triangular", gamma = 1, scale_fn,
--            scale_mode, cycle_momentum = true, base_momentum = 0.8, max_momentum = 0.9},
--   SequentialLR(opt, {schedulers = {...}, milestones = {...}}), ChainedScheduler{s1, s2, ...}
--
-- The file returns a function that adds them to lt.optim.lr_scheduler, given that file's helpers.
return function(M, H)
  local class, options, init_base = H.class, H.options, H.init_base
  local check_optimizer, current_lrs, groups_of = H.check_optimizer, H.current_lrs, H.groups_of
  local deepcopy, per_group = H.deepcopy, H.per_group

  local function scale(lrs, f)
    for i = 1, #lrs do lrs[i] = lrs[i] * f end
    return lrs
  end

  local function check_factor(name, what, v)
    if v > 1.0 or v < 0 then
      error(string.format("%s: %s expected to be between 0 and 1, got %s", name, what, tostring(v)), 3)
    end
  end

  -- ---- ConstantLR ------------------------------------------------------------------------------------

  local ConstantLR = class("ConstantLR")

  function M.ConstantLR(opt, opts)
    check_optimizer("ConstantLR", opt)
    local o = options("ConstantLR", opts, { factor = { "number", default = 1.0 / 3 },
      total_iters = { "integer", default = 5 } })
    check_factor("ConstantLR", "the constant multiplicative factor", o.factor)
    return init_base(setmetatable({ factor = o.factor, total_iters = o.total_iters }, ConstantLR), opt)
  end

  function ConstantLR:get_lr()
    local lrs = current_lrs(self)
    if self.last_epoch == 0 then return scale(lrs, self.factor) end
    if self.last_epoch ~= self.total_iters then return lrs end
    return scale(lrs, 1.0 / self.factor)
  end

  function ConstantLR:closed_form_lr()
    local r = {}
    local f = self.factor + (self.last_epoch >= self.total_iters and 1 or 0) * (1 - self.factor)
    for i, b in ipairs(self.base_lrs) do r[i] = b * f end
    return r
  end

  -- ---- LinearLR --------------------------------------------------------------------------------------

  local LinearLR = class("LinearLR")

  function M.LinearLR(opt, opts)
    check_optimizer("LinearLR", opt)
    local o = options("LinearLR", opts, { start_factor = { "number", default = 1.0 / 3 },
      end_factor = { "number", default = 1.0 }, total_iters = { "integer", default = 5 } })
    check_factor("LinearLR", "the starting multiplicative factor", o.start_factor)
    check_factor("LinearLR", "the ending multiplicative factor", o.end_factor)
    return init_base(setmetatable({ start_factor = o.start_factor, end_factor = o.end_factor,
      total_iters = o.total_iters }, LinearLR), opt)
  end

  function LinearLR:get_lr()
    local lrs = current_lrs(self)
    local e, s, f, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
    if e == 0 then return scale(lrs, s) end
    if e > n then return lrs end
    return scale(lrs, 1. + (f - s) / (n * s + (e - 1) * (f - s)))
  end

  function LinearLR:closed_form_lr()
    local r = {}
    local s, f, n = self.start_factor, self.end_factor, self.total_iters
    for i, b in ipairs(self.base_lrs) do r[i] = b * (s + (f - s) * math.min(n, self.last_epoch) / n) end
    return r
  end

  -- ---- MultiplicativeLR ------------------------------------------------------------------------------

  local MultiplicativeLR = class("MultiplicativeLR")

  function M.MultiplicativeLR(opt, fn)
    check_optimizer("MultiplicativeLR", opt)
    return init_base(setmetatable({ lr_lambdas = H.lambdas_of("MultiplicativeLR", opt, fn) }, MultiplicativeLR), opt)
  end

  function MultiplicativeLR:get_lr()
    local lrs = current_lrs(self)
    if self.last_epoch <= 0 then return lrs end
    for i = 1, #lrs do
      local f = self.lr_lambdas[i](self.last_epoch)
      if type(f) ~= "number" then
        error("MultiplicativeLR: lr_lambda(" .. self.last_epoch .. ") returned " .. type(f) .. ", expected a number", 3)
      end
      lrs[i] = lrs[i] * f
    end
    return lrs
  end

  -- ---- PolynomialLR ----------------------------------------------------------------------------------

  local PolynomialLR = class("PolynomialLR")

  function M.PolynomialLR(opt, opts)
    check_optimizer("PolynomialLR", opt)
    local o = options("PolynomialLR", opts, { total_iters = { "integer", default = 5 },
      power = { "number", default = 1.0 } })
    if o.total_iters < 1 then
      error("PolynomialLR: total_iters must be a positive integer, got " .. o.total_iters, 2)
    end
    return init_base(setmetatable({ total_iters = o.total_iters, power = o.power }, PolynomialLR), opt)
  end

  function PolynomialLR:get_lr()
    local lrs = current_lrs(self)
    local e, n = self.last_epoch, self.total_iters
    if e == 0 or e > n then return lrs end
    return scale(lrs, ((1.0 - e / n) / (1.0 - (e - 1) / n)) ^ self.power)
  end

  function PolynomialLR:closed_form_lr()
    local r = {}
    for i, b in ipairs(self.base_lrs) do
      r[i] = b * (1.0 - math.min(self.total_iters, self.last_epoch) / self.total_iters) ^ self.power
    end
    return r
  end

  -- ---- CosineAnnealingWarmRestarts -------------------------------------------------------------------

  local CAWR = class("CosineAnnealingWarmRestarts")

  function M.CosineAnnealingWarmRestarts(opt, opts)
    local name = "CosineAnnealingWarmRestarts"
    check_optimizer(name, opt)
    local o = options(name, opts, { T_0 = { "integer", required = true }, T_mult = { "integer", default = 1 },
      eta_min = { "number", default = 0 } })
    if o.T_0 <= 0 then error(name .. ": expected positive integer T_0, but got " .. o.T_0, 2) end
    if o.T_mult < 1 then error(name .. ": expected integer T_mult >= 1, but got " .. o.T_mult, 2) end
    local self = setmetatable({ T_0 = o.T_0, T_i = o.T_0, T_mult = o.T_mult, eta_min = o.eta_min, T_cur = -1 }, CAWR)
    return init_base(self, opt)
  end

  function CAWR:get_lr()
    local r = {}
    for i, b in ipairs(self.base_lrs) do
      r[i] = self.eta_min + (b - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
    end
    return r
  end

  --- sched:step([epoch]): epoch may be fractional (a restart within an epoch, as in PyTorch).
  function CAWR:step(epoch)
    self._step_count = self._step_count + 1
    if epoch == nil and self.last_epoch < 0 then epoch = 0 end
    if epoch == nil then
      epoch = self.last_epoch + 1
      self.T_cur = self.T_cur + 1
      if self.T_cur >= self.T_i then
        self.T_cur = self.T_cur - self.T_i
        self.T_i = self.T_i * self.T_mult
      end
    else
      if type(epoch) ~= "number" then
        error("CosineAnnealingWarmRestarts: step expects nothing or an epoch number, got " .. type(epoch), 2)
      end
      if epoch < 0 then error("CosineAnnealingWarmRestarts: expected non-negative epoch, but got " .. epoch, 2) end
      if epoch >= self.T_0 then
        if self.T_mult == 1 then
          self.T_cur = epoch % self.T_0
        else
          local n = math.floor(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1) / math.log(self.T_mult))
          self.T_cur = epoch - self.T_0 * (self.T_mult ^ n - 1) / (self.T_mult - 1)
          self.T_i = self.T_0 * self.T_mult ^ n
        end
      else
        self.T_i = self.T_0
        self.T_cur = epoch
      end
    end
    self.last_epoch = math.floor(epoch)
    local lrs = self:get_lr()
    for i, g in ipairs(groups_of(self.optimizer)) do g.lr = lrs[i] end
    self._last_lr = current_lrs(self)
  end

  -- ---- CyclicLR --------------------------------------------------------------------------------------

  local CyclicLR = class("CyclicLR")
  local SCALE_FNS = {
    triangular = function() return 1. end,
    triangular2 = function(_, x) return 1 / (2. ^ (x - 1)) end,
    exp_range = function(self, x) return self.gamma ^ x end,
  }

  function M.CyclicLR(opt, opts)
    check_optimizer("CyclicLR", opt)
    local o = options("CyclicLR", opts, {
      base_lr = { "number|table", required = true }, max_lr = { "number|table", required = true },
      step_size_up = { "number", default = 2000 }, step_size_down = { "number" },
      mode = { "string", default = "triangular" }, gamma = { "number", default = 1.0 }, scale_fn = { "function" },
      scale_mode = { "string", default = "cycle" }, cycle_momentum = { "boolean", default = true },
      base_momentum = { "number|table", default = 0.8 }, max_momentum = { "number|table", default = 0.9 },
    })
    local groups = groups_of(opt)
    local base_lrs = per_group("CyclicLR", "base_lr", o.base_lr, #groups)
    for i, g in ipairs(groups) do g.lr = base_lrs[i] end
    local up = o.step_size_up
    local down = o.step_size_down or up
    if not (up > 0 and down >= 0) then
      error(string.format("CyclicLR: step_size_up must be > 0 and step_size_down >= 0, got %s and %s", up, down), 2)
    end
    local scale_mode = o.scale_mode
    if o.scale_fn == nil then
      if not SCALE_FNS[o.mode] then
        error("CyclicLR: mode '" .. o.mode .. "' is invalid and scale_fn is nil (expected \"triangular\", "
          .. "\"triangular2\" or \"exp_range\")", 2)
      end
      scale_mode = o.mode == "exp_range" and "iterations" or "cycle"
    elseif scale_mode ~= "cycle" and scale_mode ~= "iterations" then
      error("CyclicLR: scale_mode must be \"cycle\" or \"iterations\", got '" .. scale_mode .. "'", 2)
    end
    local self = setmetatable({
      max_lrs = deepcopy(per_group("CyclicLR", "max_lr", o.max_lr, #groups)), total_size = up + down,
      step_ratio = up / (up + down), mode = o.mode, gamma = o.gamma, scale_mode = scale_mode,
      cycle_momentum = o.cycle_momentum, _scale_fn_custom = o.scale_fn,
    }, CyclicLR)
    if o.cycle_momentum then
      local d = opt.defaults or {}
      if d.momentum == nil then
        error("CyclicLR: optimizer must support momentum with `cycle_momentum` option enabled", 2)
      end
      local bm = per_group("CyclicLR", "base_momentum", o.base_momentum, #groups)
      for i, g in ipairs(groups) do g.momentum = bm[i] end
      self.base_momentums = {}
      for i, g in ipairs(groups) do self.base_momentums[i] = g.momentum end
      self.max_momentums = deepcopy(per_group("CyclicLR", "max_momentum", o.max_momentum, #groups))
    end
    init_base(self, opt)
    self.base_lrs = deepcopy(base_lrs)
    return self
  end

  function CyclicLR:scale_fn(x)
    if self._scale_fn_custom then return self._scale_fn_custom(x) end
    return SCALE_FNS[self.mode](self, x)
  end

  function CyclicLR:get_lr()
    local e = self.last_epoch
    local cycle = math.floor(1 + e / self.total_size)
    local x = 1. + e / self.total_size - cycle
    local scale_factor
    if x <= self.step_ratio then scale_factor = x / self.step_ratio
    else scale_factor = (x - 1) / (self.step_ratio - 1) end
    local s = self:scale_fn(self.scale_mode == "cycle" and cycle or e)
    local lrs = {}
    for i, b in ipairs(self.base_lrs) do lrs[i] = b + (self.max_lrs[i] - b) * scale_factor * s end
    if self.cycle_momentum then
      for i, g in ipairs(groups_of(self.optimizer)) do
        local bm, mm = self.base_momentums[i], self.max_momentums[i]
        g.momentum = mm - (mm - bm) * scale_factor * s
      end
    end
    return lrs
  end

  -- ---- SequentialLR and ChainedScheduler: schedulers of schedulers --------------------------------------

  -- state_dict: own fields, the children's state dicts under _schedulers
  local function composite_state_dict(self)
    local sd = {}
    for k, v in pairs(self) do
      if k ~= "optimizer" and k ~= "_schedulers" and type(v) ~= "function" then sd[k] = deepcopy(v) end
    end
    sd._schedulers = {}
    for i, s in ipairs(self._schedulers) do sd._schedulers[i] = s:state_dict() end
    return sd
  end

  local function composite_load_state_dict(self, sd)
    if type(sd) ~= "table" then error(self.name .. ": load_state_dict expects a table, got " .. type(sd), 3) end
    local children = sd._schedulers
    if type(children) ~= "table" or #children ~= #self._schedulers then
      error(string.format("%s: load_state_dict: expected _schedulers with %d state dicts, got %s", self.name,
        #self._schedulers, type(children) == "table" and tostring(#children) or type(children)), 3)
    end
    for k, v in pairs(sd) do
      if k ~= "_schedulers" then self[k] = deepcopy(v) end
    end
    for i, s in ipairs(self._schedulers) do s:load_state_dict(children[i]) end
  end

  local function check_children(name, list, opt)
    if type(list) ~= "table" or #list == 0 then
      error(name .. ": expected a non-empty list of schedulers, got " .. type(list), 3)
    end
    for i, s in ipairs(list) do
      if type(s) ~= "table" or type(s.step) ~= "function" or s.optimizer == nil then
        error(string.format("%s: schedulers[%d] is not a scheduler (got %s)", name, i, type(s)), 3)
      end
      if s.is_plateau then
        error(string.format("%s: schedulers[%d] is a ReduceLROnPlateau, which needs a metric", name, i), 3)
      end
      if s.optimizer ~= (opt or list[1].optimizer) then
        error(string.format("%s: expects all schedulers to belong to the same optimizer, but schedulers[%d] "
          .. "has another one", name, i), 3)
      end
    end
  end

  local SequentialLR = class("SequentialLR")

  function M.SequentialLR(opt, opts)
    check_optimizer("SequentialLR", opt)
    local o = options("SequentialLR", opts, { schedulers = { "table", required = true },
      milestones = { "table", required = true } })
    check_children("SequentialLR", o.schedulers, opt)
    if #o.milestones ~= #o.schedulers - 1 then
      error(string.format("SequentialLR: expects number of schedulers provided to be one more than the number of "
        .. "milestone points, but got number of schedulers %d and the number of milestones to be equal to %d",
        #o.schedulers, #o.milestones), 2)
    end
    for i, m in ipairs(o.milestones) do
      if type(m) ~= "number" or m ~= math.floor(m) then
        error("SequentialLR: milestones[" .. i .. "] must be an integer, got " .. tostring(m), 2)
      end
    end
    local self = setmetatable({ _schedulers = o.schedulers, _milestones = deepcopy(o.milestones), last_epoch = 0,
      optimizer = opt }, SequentialLR)
    -- PyTorch: undo the children's initial steps, then redo the first one's
    for _, g in ipairs(groups_of(opt)) do g.lr = g.initial_lr end
    for _, s in ipairs(self._schedulers) do s.last_epoch = s.last_epoch - 1 end
    local first = self._schedulers[1]
    first._step_count = 0
    first:step()
    self._last_lr = first:get_last_lr()
    return self
  end

  function SequentialLR:step()
    self.last_epoch = self.last_epoch + 1
    local idx = 0 -- bisect_right: milestones <= last_epoch
    for _, m in ipairs(self._milestones) do if m <= self.last_epoch then idx = idx + 1 end end
    local s = self._schedulers[idx + 1]
    if idx > 0 and self._milestones[idx] == self.last_epoch then s:step(0) else s:step() end
    self._last_lr = s:get_last_lr()
  end

  SequentialLR.state_dict = composite_state_dict
  SequentialLR.load_state_dict = composite_load_state_dict

  local ChainedScheduler = class("ChainedScheduler")

  function M.ChainedScheduler(list)
    check_children("ChainedScheduler", list)
    local opt = list[1].optimizer
    local self = setmetatable({ _schedulers = { unpack(list) }, optimizer = opt, last_epoch = 0 }, ChainedScheduler)
    self._last_lr = current_lrs(self)
    return self
  end

  function ChainedScheduler:step()
    for _, s in ipairs(self._schedulers) do s:step() end
    self.last_epoch = self.last_epoch + 1
    self._last_lr = current_lrs(self)
  end

  ChainedScheduler.state_dict = composite_state_dict
  ChainedScheduler.load_state_dict = composite_load_state_dict
end
