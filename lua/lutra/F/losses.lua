-- F/losses.lua — more losses of lt.F, PyTorch 1.13's formulas and options: binary_cross_entropy,
-- smooth_l1_loss and huber_loss (C kernels of core/src/nn_loss.c), and compositions of differentiable tensor
-- ops (their gradients come from the ops' backward rules): kl_div, cross_entropy with class-probability
-- targets, cosine_embedding_loss, margin_ranking_loss, triplet_margin_loss, poisson_nll_loss,
-- gaussian_nll_loss. The older fused losses (cross_entropy with class indices, nll_loss, mse_loss, l1_loss,
-- bce_with_logits) are in F.lua.
--
--   local l = lt.F.huber_loss(pred, y, {delta = 0.5})
--   local l = lt.F.kl_div(logq, p, {reduction = "batchmean"})
--
-- Every loss takes its options table (or, like PyTorch's positional form, the reduction string) last.
local lt = require "lutra"
local H = require "lutra.nn.helpers"
local C = require("lutra.core")._nn

local L = {}

local function opts_of(name, opts, spec)
  if type(opts) == "string" then opts = { reduction = opts } end
  spec.reduction = "string"
  local checked = H.check_opts(name, opts, spec, 4) -- (not a tail call: levels are the same on every Lua)
  return checked
end

local function reduce(name, loss, red)
  red = red or "mean"
  if red == "mean" then return loss:mean() end
  if red == "sum" then return loss:sum() end
  if red == "none" then return loss end
  error(string.format('%s: reduction must be "mean", "sum" or "none", got "%s"', name, tostring(red)), 3)
end

local function check_tensor(name, what, x)
  if not lt.is_tensor(x) then error(string.format("%s: %s must be a tensor, got %s", name, what, type(x)), 3) end
  local dt = x:dtype()
  if dt ~= "float32" and dt ~= "float64" then
    error(string.format("%s: %s must be float32 or float64, got %s", name, what, dt), 3)
  end
end

local function same_shape(a, b)
  if a:dim() ~= b:dim() then return false end
  for d = 1, a:dim() do if a:size(d) ~= b:size(d) then return false end end
  return true
end

-- input and target of the same shape (PyTorch refuses a broadcast target for these losses)
local function check_pair(name, x, y, xn, yn)
  check_tensor(name, xn or "input", x)
  check_tensor(name, yn or "target", y)
  if x:dtype() ~= y:dtype() then -- PyTorch's composed losses would promote; its fused ones refuse: lutra refuses
    error(string.format("%s: %s is %s and %s is %s: both must have the same float dtype", name, xn or "input",
      x:dtype(), yn or "target", y:dtype()), 3)
  end
  if not same_shape(x, y) then
    error(string.format("%s: %s %s and %s %s must have the same shape", name, yn or "target", y:shape_str(),
      xn or "input", x:shape_str()), 3)
  end
end

local function where(cond, a, b) return lt.where(cond, a, b) end

--- binary_cross_entropy(p, t[, {weight, reduction}]): -w * (t*log(p) + (1-t)*log(1-p)), logs clamped at -100
--- (the C kernel of core/src/nn_loss.c; weight, broadcast to p's shape, multiplies the per-element loss)
function L.binary_cross_entropy(p, t, opts)
  local o = opts_of("binary_cross_entropy", opts, { weight = "tensor" })
  if not o.weight then return C.binary_cross_entropy(p, t, o.reduction) end
  return reduce("binary_cross_entropy", C.binary_cross_entropy(p, t, "none") * o.weight, o.reduction)
end

--- smooth_l1_loss(x, y[, {beta = 1, reduction}]): 0.5*d^2/beta where d = |x - y| < beta, else d - 0.5*beta
function L.smooth_l1_loss(x, y, opts)
  local o = opts_of("smooth_l1_loss", opts, { beta = "number" })
  return C.smooth_l1_loss(x, y, o.beta or 1.0, o.reduction)
end

--- huber_loss(x, y[, {delta = 1, reduction}]): 0.5*d^2 where d < delta, else delta*(d - 0.5*delta)
function L.huber_loss(x, y, opts)
  local o = opts_of("huber_loss", opts, { delta = "number" })
  return C.huber_loss(x, y, o.delta or 1.0, o.reduction)
end

--- kl_div(input (log-probabilities), target[, {reduction = "mean", log_target = false}]):
--- target*(log(target) - input) (0 where target = 0), or exp(target)*(target - input) when log_target.
--- reduction "batchmean" divides the sum by the batch size (input:size(1)); "mean" by the element count.
function L.kl_div(input, target, opts)
  local o = opts_of("kl_div", opts, { log_target = "boolean" })
  check_pair("kl_div", input, target)
  local loss
  if o.log_target then
    loss = target:exp() * (target - input)
  else
    -- t*log(t) is 0 at t = 0 (xlogy): log of the clamped target keeps 0*log(0) out (1e-30: a normal float32,
    -- which flush-to-zero leaves alone)
    loss = target * target:clamp(1e-30):log() - target * input
  end
  if o.reduction == "batchmean" then
    if input:dim() == 0 then return loss:sum() end
    return loss:sum() / input:size(1)
  end
  return reduce("kl_div", loss, o.reduction)
end

--- cross_entropy with class probabilities: target float32 of the input's shape [N, C, d...] (or [C]).
--- loss_n = -sum_c w_c * t_nc * log_softmax(x)_nc; t smoothed as t*(1-ls) + ls/C; "mean" divides by N*d...
function L.cross_entropy_probs(x, t, o)
  local name = "cross_entropy"
  check_pair(name, x, t)
  if o.ignore_index ~= nil then
    error("cross_entropy: ignore_index is only for class-index targets (int64), not for class probabilities", 3)
  end
  local cdim = x:dim() == 1 and 1 or 2
  local nc = x:size(cdim)
  local ls = o.label_smoothing or 0
  if ls < 0 or ls > 1 then error("cross_entropy: label_smoothing must be between 0 and 1, got " .. ls, 3) end
  if ls > 0 then t = t * (1 - ls) + ls / nc end
  local prod = x:log_softmax(cdim) * t
  if o.weight then
    local w = o.weight
    if w:dim() ~= 1 or w:size(1) ~= nc then
      error(string.format("cross_entropy: weight must be [%d] (one per class), got %s", nc, w:shape_str()), 3)
    end
    local shape = {}
    for d = 1, x:dim() do shape[d] = d == cdim and nc or 1 end
    prod = prod * w:view(shape)
  end
  local loss = -prod:sum(cdim)
  local red = o.reduction or "mean"
  if red == "mean" then return loss:sum() / (x:numel() / nc) end
  return reduce(name, loss, red)
end

-- rows of [N, D] (or one [D]) reduced over the last dim
local function rowsum(x) return x:sum(x:dim()) end

--- cosine_embedding_loss(x1, x2, y[, {margin = 0, reduction}]): 1 - cos where y = 1, max(0, cos - margin)
--- where y = -1; x1, x2 [N, D] or [D], y [N] (or a scalar) of 1 / -1.
function L.cosine_embedding_loss(x1, x2, y, opts)
  local name = "cosine_embedding_loss"
  local o = opts_of(name, opts, { margin = "number" })
  check_pair(name, x1, x2, "input1", "input2")
  check_tensor(name, "target", y)
  if x1:dim() ~= 1 and x1:dim() ~= 2 then
    error(string.format("%s: expected 1-D or 2-D inputs, got %s", name, x1:shape_str()), 2)
  end
  if (x1:dim() == 2 and (y:dim() ~= 1 or y:size(1) ~= x1:size(1))) or (x1:dim() == 1 and y:dim() ~= 0) then
    error(string.format("%s: target %s does not match the inputs %s (expected one 1 or -1 per row)", name,
      y:shape_str(), x1:shape_str()), 2)
  end
  local EPS = 1e-12
  local cos = rowsum(x1 * x2) / ((rowsum(x1 * x1) + EPS) * (rowsum(x2 * x2) + EPS)):sqrt()
  local zeros = cos * 0
  local pos = where(y:eq(1), 1 - cos, zeros)
  local neg = where(y:eq(-1), (cos - (o.margin or 0)):clamp(0), zeros)
  return reduce(name, pos + neg, o.reduction)
end

--- margin_ranking_loss(x1, x2, y[, {margin = 0, reduction}]): max(0, -y*(x1 - x2) + margin)
function L.margin_ranking_loss(x1, x2, y, opts)
  local name = "margin_ranking_loss"
  local o = opts_of(name, opts, { margin = "number" })
  check_pair(name, x1, x2, "input1", "input2")
  check_pair(name, x1, y, "input1", "target")
  return reduce(name, (-y * (x1 - x2) + (o.margin or 0)):clamp(0), o.reduction)
end

-- ||a - b + eps||_p over the last dim (PyTorch's pairwise_distance)
local function pairwise_distance(a, b, p, eps)
  local d = (a - b + eps):abs()
  if p == 1 then return rowsum(d) end
  if p == 2 then return rowsum(d * d):sqrt() end
  return rowsum(d:pow(p)):pow(1 / p)
end

--- triplet_margin_loss(anchor, positive, negative[, {margin = 1, p = 2, eps = 1e-6, swap = false, reduction}]):
--- max(0, margin + d(a, p) - d(a, n)); swap uses min(d(a, n), d(p, n)). Inputs [N, D] or [D].
function L.triplet_margin_loss(a, pos, neg, opts)
  local name = "triplet_margin_loss"
  local o = opts_of(name, opts, { margin = "number", p = "number", eps = "number", swap = "boolean" })
  check_pair(name, a, pos, "anchor", "positive")
  check_pair(name, a, neg, "anchor", "negative")
  if a:dim() ~= 1 and a:dim() ~= 2 then
    error(string.format("%s: expected 1-D or 2-D inputs, got %s", name, a:shape_str()), 2)
  end
  local margin, p, eps = o.margin or 1.0, o.p or 2, o.eps or 1e-6
  if p ~= p or p <= 0 then error("triplet_margin_loss: p must be > 0, got " .. p, 2) end
  local d_ap = pairwise_distance(a, pos, p, eps)
  local d_an = pairwise_distance(a, neg, p, eps)
  if o.swap then
    local d_pn = pairwise_distance(pos, neg, p, eps)
    d_an = where(d_pn:lt(d_an), d_pn, d_an)
  end
  return reduce(name, (d_ap - d_an + margin):clamp(0), o.reduction)
end

--- poisson_nll_loss(input, target[, {log_input = true, full = false, eps = 1e-8, reduction}]):
--- exp(input) - target*input (log_input) or input - target*log(input + eps); full adds Stirling's
--- target*log(target) - target + 0.5*log(2*pi*target) where target > 1.
function L.poisson_nll_loss(input, target, opts)
  local name = "poisson_nll_loss"
  local o = opts_of(name, opts, { log_input = "boolean", full = "boolean", eps = "number" })
  check_pair(name, input, target)
  local loss
  if o.log_input == false then
    loss = input - target * (input + (o.eps or 1e-8)):log()
  else
    loss = input:exp() - target * input
  end
  if o.full then
    local tc = target:clamp(1) -- the term is 0 where target <= 1
    local stirling = tc * tc:log() - tc + (tc * (2 * math.pi)):log() * 0.5
    loss = loss + where(target:gt(1), stirling, stirling * 0)
  end
  return reduce(name, loss, o.reduction)
end

--- gaussian_nll_loss(input, target, var[, {full = false, eps = 1e-6, reduction}]):
--- 0.5*(log(max(var, eps)) + (input - target)^2 / max(var, eps)) [+ 0.5*log(2*pi)]. var has the input's
--- shape, or lacks its last dim, or has 1 there (one variance per row).
function L.gaussian_nll_loss(input, target, var, opts)
  local name = "gaussian_nll_loss"
  local o = opts_of(name, opts, { full = "boolean", eps = "number" })
  check_pair(name, input, target)
  check_tensor(name, "var", var)
  if not same_shape(var, input) then
    local n = input:dim()
    local rows_match = var:dim() >= n - 1
    for d = 1, n - 1 do rows_match = rows_match and var:size(d) == input:size(d) end
    if rows_match and var:dim() == n - 1 then
      var = var:unsqueeze(n)
    elseif not (rows_match and var:dim() == n and var:size(n) == 1) then
      error(string.format("%s: var %s is of incorrect size for input %s", name, var:shape_str(), input:shape_str()), 2)
    end
  end
  if var:numel() > 0 and var:min():item() < 0 then error(name .. ": var has negative entry/entries", 2) end
  -- clamped in value only: the gradient passes to var unchanged, as PyTorch's in-place clamp under no_grad
  local eps = o.eps or 1e-6
  local v = var + lt.no_grad(function() return var:clamp(eps) - var end)
  local diff = input - target
  local loss = (v:log() + diff * diff / v) * 0.5
  if o.full then loss = loss + 0.5 * math.log(2 * math.pi) end
  return reduce(name, loss, o.reduction)
end

return L
