-- optim/lr_scheduler/factor.lua — PyTorch 1.13's schedulers that scale the initial lr by a factor over the
-- first iterations or each step, on lr_scheduler/init.lua's base (its chainable get_lr forms, so step()
-- sequences match PyTorch's; step(epoch) uses the closed forms where PyTorch has them):
--
--   ConstantLR{factor = 1/3, total_iters = 5}, LinearLR{start_factor = 1/3, end_factor = 1, total_iters = 5},
--   MultiplicativeLR(opt, fn | {fn, ...}), PolynomialLR{total_iters = 5, power = 1}
--
-- The file returns a function that adds them to lt.optim.lr_scheduler, given init.lua's helpers.
return function(M, H)
  local class, options, init_base = H.class, H.options, H.init_base
  local check_optimizer, current_lrs = H.check_optimizer, H.current_lrs

  local function scale(lrs, f)
    for i = 1, #lrs do lrs[i] = lrs[i] * f end
    return lrs
  end

  local function check_factor(name, what, v)
    if v > 1.0 or v < 0 then
      error(string.format("%s: %s expected to be between 0 and 1, got %s", name, what, tostring(v)), 4)
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
      error("PolynomialLR: total_iters must be a positive integer, got " .. o.total_iters, 3)
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
end
