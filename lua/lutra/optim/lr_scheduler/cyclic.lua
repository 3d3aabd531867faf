-- optim/lr_scheduler/cyclic.lua — PyTorch 1.13's cyclic schedulers, on lr_scheduler/init.lua's base (its
-- chainable get_lr forms, so step() sequences match PyTorch's; step(epoch) uses the closed forms where PyTorch
-- has them):
--
--   CosineAnnealingWarmRestarts{T_0, T_mult = 1, eta_min = 0},
--   CyclicLR{base_lr, max_lr, step_size_up = 2000, step_size_down, mode = "triangular", gamma = 1, scale_fn,
--            scale_mode, cycle_momentum = true, base_momentum = 0.8, max_momentum = 0.9}
--
-- The file returns a function that adds them to lt.optim.lr_scheduler, given init.lua's helpers.
return function(M, H)
  local class, options, init_base = H.class, H.options, H.init_base
  local check_optimizer, current_lrs, groups_of = H.check_optimizer, H.current_lrs, H.groups_of
  local deepcopy, per_group = H.deepcopy, H.per_group

  -- ---- CosineAnnealingWarmRestarts -------------------------------------------------------------------

  local CAWR = class("CosineAnnealingWarmRestarts")

  function M.CosineAnnealingWarmRestarts(opt, opts)
    local name = "CosineAnnealingWarmRestarts"
    check_optimizer(name, opt)
    local o = options(name, opts, { T_0 = { "integer", required = true }, T_mult = { "integer", default = 1 },
      eta_min = { "number", default = 0 } })
    if o.T_0 <= 0 then error(name .. ": expected positive integer T_0, but got " .. o.T_0, 3) end
    if o.T_mult < 1 then error(name .. ": expected integer T_mult >= 1, but got " .. o.T_mult, 3) end
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
      error(string.format("CyclicLR: step_size_up must be > 0 and step_size_down >= 0, got %s and %s", up, down), 3)
    end
    local scale_mode = o.scale_mode
    if o.scale_fn == nil then
      if not SCALE_FNS[o.mode] then
        error("CyclicLR: mode '" .. o.mode .. "' is invalid and scale_fn is nil (expected \"triangular\", "
          .. "\"triangular2\" or \"exp_range\")", 3)
      end
      scale_mode = o.mode == "exp_range" and "iterations" or "cycle"
    elseif scale_mode ~= "cycle" and scale_mode ~= "iterations" then
      error("CyclicLR: scale_mode must be \"cycle\" or \"iterations\", got '" .. scale_mode .. "'", 3)
    end
    local self = setmetatable({
      max_lrs = deepcopy(per_group("CyclicLR", "max_lr", o.max_lr, #groups)), total_size = up + down,
      step_ratio = up / (up + down), mode = o.mode, gamma = o.gamma, scale_mode = scale_mode,
      cycle_momentum = o.cycle_momentum, _scale_fn_custom = o.scale_fn,
    }, CyclicLR)
    if o.cycle_momentum then
      local d = opt.defaults or {}
      if d.momentum == nil then
        error("CyclicLR: optimizer must support momentum with `cycle_momentum` option enabled", 3)
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
end
