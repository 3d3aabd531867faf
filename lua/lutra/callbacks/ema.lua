-- callbacks/ema.lua — lt.callbacks.EMA: an exponential moving average of the weights
-- (docs/reference/callbacks.md).
--
--   local ema = lt.callbacks.EMA{decay = 0.999}
--   lt.Trainer{callbacks = {ema}}:fit(model, train, val)   -- validation runs on the EMA weights
--   ema:weights()                                          -- name -> tensor
--
-- After every optimizer step (every `every_n_steps` steps): ema = decay * ema + (1 - decay) * w, starting
-- from a copy of the weights when fit starts. Validation (and the sanity check) runs with the EMA weights
-- swapped into the model, the training weights swapped back after it (validate_original_weights = true keeps
-- the training weights). The EMA weights are the callback's state in checkpoints, so a resumed fit continues
-- the same average. apply_at_end = true leaves the EMA weights in the model when fit ends.
local cbs = require "lutra.callbacks"
local weights = require "lutra.callbacks.weights"
local lt = require "lutra"

local fmt = string.format

local EMA = cbs.Callback:extend("EMA")

local OPTIONS = { decay = "number", every_n_steps = "integer", validate_original_weights = "boolean",
  apply_at_end = "boolean" }

function EMA:init(opts)
  opts = cbs.check_options("EMA", opts, OPTIONS, 3)
  local d = opts.decay or 0.999
  if not (d >= 0 and d <= 1) then error(fmt("EMA: option 'decay' must be in [0, 1], got %s", tostring(d)), 3) end
  local n = opts.every_n_steps or 1
  if n < 1 then error(fmt("EMA: option 'every_n_steps' must be >= 1, got %d", n), 3) end
  self.decay, self.every_n_steps = d, n
  self.validate_original_weights = opts.validate_original_weights == true
  self.apply_at_end = opts.apply_at_end == true
end

--- The EMA weights (name -> tensor), or nil before fit.
function EMA:weights() return self._ema end

function EMA:on_fit_start(_, model)
  if self._ema == nil or not self._restored then self._ema = weights.copies(model) end
  self._restored = nil
  self._last_step = nil
end

function EMA:on_train_batch_end(trainer, model)
  local step = trainer.global_step
  if step == self._last_step or step % self.every_n_steps ~= 0 then return end -- no step (accumulating), or not yet
  self._last_step = step
  local d = self.decay
  lt.no_grad(function()
    for _, np in ipairs(weights.params(model)) do
      local e = self._ema[np[1]]
      if e then e:mul_(d):add_(np[2]:detach() * (1 - d)) end
    end
  end)
end

function EMA:on_validation_start(_, model)
  if self._ema == nil or self.validate_original_weights then return end
  weights.swap(model, self._ema)
  self._swapped = true
end

function EMA:on_validation_end(_, model)
  if self._swapped then
    weights.swap(model, self._ema)
    self._swapped = nil
  end
end

function EMA:on_fit_end(_, model)
  if self.apply_at_end and self._ema then weights.load_into(model, self._ema, "EMA") end
end

function EMA:on_exception(_, model)
  if self._swapped then weights.swap(model, self._ema); self._swapped = nil end
end

function EMA:state_dict() return { ema = self._ema, decay = self.decay } end

function EMA:load_state_dict(s)
  if type(s.ema) ~= "table" then error("EMA: load_state_dict: no 'ema' weights in the state", 0) end
  self._ema = {}
  for k, t in pairs(s.ema) do self._ema[k] = t:clone() end
  self._restored = true
end

return EMA
