-- optim/functional.lua — Torch7 optim's functional form: lt.optim.sgd(feval, x, config, state) and
-- lt.optim.adam(feval, x, config, state), the update rules of torch/optim's sgd.lua and adam.lua (Torch7's option
-- names and defaults, not PyTorch's: dampening defaults to momentum, Adam adds epsilon to sqrt(v) before the bias
-- correction). feval(x) returns f(x) and df/dx (a tensor of x's shape); x is updated in place; state carries the
-- buffers between calls (config is used when state is not given, as Torch7 does). Returns x, {f(x)}.
--
--   local params, grads = model:getParameters()
--   local function feval(p) grads:zero_(); local loss = crit:forward(model(input), target); loss:backward()
--     return loss:item(), grads end
--   lt.optim.sgd(feval, params, {learningRate = 0.1, momentum = 0.9})
local lt = require "lutra"
local util = require "lutra.utils.check"

local M = {}

local SGD_CONFIG = { learningRate = "number", learningRateDecay = "number", weightDecay = "number",
  momentum = "number", dampening = "number", nesterov = "boolean", learningRates = "tensor", weightDecays = "tensor" }
local ADAM_CONFIG = { learningRate = "number", learningRateDecay = "number", beta1 = "number", beta2 = "number",
  epsilon = "number", weightDecay = "number" }

-- feval(x) checked: a number (or a 1-element tensor) and a gradient tensor of x's shape, the gradient as a copy (the
-- rules below change it; feval's own tensor, often getParameters' grads, stays as backward left it)
local function evaluate(name, feval, x)
  local fx, dfdx = feval(x)
  if lt.is_tensor(fx) then fx = fx:item() end
  if type(fx) ~= "number" then error(name .. ": feval(x) must return f(x) (a number) and df/dx, got " .. type(fx), 3) end
  if not lt.is_tensor(dfdx) then
    error(name .. ": feval(x) must return df/dx (a tensor of x's shape) second, got " .. type(dfdx), 3)
  end
  if dfdx:numel() ~= x:numel() then
    error(string.format("%s: df/dx %s does not match x %s", name, dfdx:shape_str(), x:shape_str()), 3)
  end
  return fx, dfdx:detach():reshape(x:shape()):clone()
end

-- what each rule keeps in state (in config when no state is given, as Torch7 does)
local STATE_KEYS = { sgd = { "evalCounter", "dfdx" }, adam = { "t", "m", "v", "denom" } }

local function check_args(name, feval, x, config, state, spec)
  if type(feval) ~= "function" and not (type(feval) == "table" and getmetatable(feval)
      and getmetatable(feval).__call) then
    util.check_arg(name, 1, feval, "function", 3)
  end
  util.check_arg(name, 2, x, "tensor", 3)
  if state == nil then
    local with_state = {}
    for k, v in pairs(spec) do with_state[k] = v end
    for _, k in ipairs(STATE_KEYS[name]) do with_state[k] = true end
    spec = with_state
  end
  config = util.check_options(name, config, spec, 3)
  if state ~= nil and type(state) ~= "table" then util.check_arg(name, 4, state, "table", 3) end
  return config, state or config
end

--- sgd(feval, x[, config[, state]]): Torch7's optim.sgd. config: learningRate (1e-3), learningRateDecay (0),
--- weightDecay (0), momentum (0), dampening (= momentum), nesterov (false), learningRates and weightDecays (tensors
--- of x's shape: per-element factors). state: evalCounter, dfdx (the momentum buffer).
function M.sgd(feval, x, config, state)
  config, state = check_args("sgd", feval, x, config, state, SGD_CONFIG)
  local lr, lrd = config.learningRate or 1e-3, config.learningRateDecay or 0
  local wd, mom = config.weightDecay or 0, config.momentum or 0
  local damp = config.dampening or mom
  local nesterov = config.nesterov == true
  if nesterov and (mom <= 0 or damp ~= 0) then
    error("sgd: Nesterov momentum requires a momentum and zero dampening", 2)
  end
  state.evalCounter = state.evalCounter or 0
  local nevals = state.evalCounter
  local fx, dfdx = evaluate("sgd", feval, x)
  lt.no_grad(function()
    if wd ~= 0 then dfdx:add_(x * wd) end
    if config.weightDecays then dfdx:add_(x * config.weightDecays) end
    if mom ~= 0 then
      if not state.dfdx then
        state.dfdx = dfdx:clone()
      else
        state.dfdx:mul_(mom):add_(dfdx * (1 - damp))
      end
      if nesterov then dfdx:add_(state.dfdx * mom) else dfdx = state.dfdx end
    end
    local clr = lr / (1 + nevals * lrd)
    if config.learningRates then
      x:sub_(config.learningRates * dfdx * clr)
    else
      x:sub_(dfdx * clr)
    end
  end)
  state.evalCounter = state.evalCounter + 1
  return x, { fx }
end

--- adam(feval, x[, config[, state]]): Torch7's optim.adam. config: learningRate (1e-3), learningRateDecay (0),
--- beta1 (0.9), beta2 (0.999), epsilon (1e-8), weightDecay (0). state: t, m, v, denom.
function M.adam(feval, x, config, state)
  config, state = check_args("adam", feval, x, config, state, ADAM_CONFIG)
  local lr, lrd = config.learningRate or 1e-3, config.learningRateDecay or 0
  local beta1, beta2 = config.beta1 or 0.9, config.beta2 or 0.999
  local eps, wd = config.epsilon or 1e-8, config.weightDecay or 0
  local fx, dfdx = evaluate("adam", feval, x)
  lt.no_grad(function()
    if wd ~= 0 then dfdx:add_(x * wd) end
    state.t = state.t or 0
    state.m = state.m or lt.zeros(x:shape())
    state.v = state.v or lt.zeros(x:shape())
    local clr = lr / (1 + state.t * lrd)
    state.t = state.t + 1
    state.m:mul_(beta1):add_(dfdx * (1 - beta1))
    state.v:mul_(beta2):add_(dfdx * dfdx * (1 - beta2))
    state.denom = state.v:sqrt():add_(eps)
    local step = clr * math.sqrt(1 - beta2 ^ state.t) / (1 - beta1 ^ state.t)
    x:sub_(state.m / state.denom * step)
  end)
  return x, { fx }
end

return M
