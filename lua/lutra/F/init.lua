-- F.lua — lt.F: the functional forms of the nn layers and the losses (PyTorch's torch.nn.functional).
--
--   local loss = lt.F.cross_entropy(logits, targets)                     -- targets int64, 1..C
--   local loss = lt.F.cross_entropy(logits, targets, {label_smoothing = 0.1, ignore_index = 1})
--   local y = lt.F.conv2d(x, w, b, {stride = 2, padding = 1})
--
-- Dims are 1-based (softmax(x, 2) is over the classes of [N, C]); class targets, ignore_index and
-- embedding indices are 1-based. Reductions: "mean" (default), "sum", "none". Losses take either an
-- options table or, like PyTorch's positional form, the reduction string.
local lt = require "lutra"
local core = require "lutra.core"
local H = require "lutra.nn.helpers"
local util = require "lutra.utils.check"
local C = core._nn
local FL = require "lutra.F.losses"
local FA = require "lutra.F.args"

local F = {}

-- ---- layers -----------------------------------------------------------------------------------------

F.linear = lt.linear

-- conv1d, conv2d, conv_transpose2d and the pools: lua/lutra/F/vision.lua (merged below)

--- dropout(x[, p = 0.5[, training = true[, inplace = false]]]) or dropout(x, {p, training, inplace}): inverted
--- dropout, mask from lt's RNG; inplace as the activations' (lua/lutra/F/args.lua)
function F.dropout(x, ...)
  local p, training, inplace = FA.args("dropout", { { "p", "probability", 0.5 },
    { "training", "boolean", true }, { "inplace", "boolean", false } }, ...)
  return FA.result(inplace, x, C.dropout(x, p, training), "dropout")
end

--- batch_norm(x, running_mean, running_var[, weight[, bias[, training=false[, momentum=0.1[, eps=1e-5]]]]])
--- (PyTorch's order); in training the running stats (when given) are updated in place.
function F.batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps)
  return C.batch_norm(x, running_mean, running_var, weight, bias, training and true or false, momentum or 0.1,
    eps or 1e-5)
end

--- layer_norm(x, normalized_shape (number or list)[, weight[, bias[, eps=1e-5]]])
function F.layer_norm(x, shape, weight, bias, eps)
  if type(shape) ~= "number" and type(shape) ~= "table" then
    error("layer_norm: normalized_shape must be a number or a list of sizes, got " .. type(shape), 2)
  end
  if not lt.is_tensor(x) then error("layer_norm: expected a tensor input, got " .. type(x), 2) end
  local k = type(shape) == "table" and #shape or 1
  if type(shape) == "table" then
    local n, xs = x:dim(), x:shape()
    for i = 1, k do
      if xs[n - k + i] ~= shape[i] then
        error(string.format("layer_norm: input %s does not end with the normalized shape %s", x:shape_str(),
          H.shape_str(shape)), 2)
      end
    end
  elseif x:size(-1) ~= shape then
    error(string.format("layer_norm: input %s does not end with the normalized shape [%d]", x:shape_str(), shape), 2)
  end
  return C.layer_norm(x, k, weight, bias, eps or 1e-5)
end

--- embedding(indices int64 1-based, weight [n, d][, padding_idx])
function F.embedding(idx, weight, padding_idx) return C.embedding(idx, weight, padding_idx) end

-- the activations that are tensor methods: argument 1 checked here (x:relu() of a number says nothing useful)
local function tensor_in(fname, x) return util.check_arg(fname, 1, x, "tensor", 2) end

--- gelu(x[, {approximate = "none"|"tanh"}]): exact GELU (erf), or its tanh approximation (PyTorch's forms)
function F.gelu(x, opts)
  local o = H.check_opts("gelu", opts, { approximate = "string" })
  local a = o.approximate or "none"
  tensor_in("gelu", x)
  if a == "none" then return x:gelu() end
  if a == "tanh" then return core._gelu_tanh(x) end
  error("gelu: approximate must be \"none\" or \"tanh\", got \"" .. a .. "\"", 2)
end
function F.tanh(x) return tensor_in("tanh", x):tanh() end
function F.sigmoid(x) return tensor_in("sigmoid", x):sigmoid() end
function F.softmax(x, dim) return tensor_in("softmax", x):softmax(dim) end
function F.log_softmax(x, dim) return tensor_in("log_softmax", x):log_softmax(dim) end

-- ---- losses -----------------------------------------------------------------------------------------

local function loss_opts(name, opts, spec)
  if type(opts) == "string" then return { reduction = opts } end
  local checked = H.check_opts(name, opts, spec, 4) -- (not a tail call: levels are the same on every Lua)
  return checked
end

--- cross_entropy(logits [N, C] (or [N, C, d...]), targets int64 1..C [N] | class probabilities (float) of
--- the logits' shape, opts); opts: reduction, ignore_index (1-based), label_smoothing, weight [C]
function F.cross_entropy(logits, targets, opts)
  local o = loss_opts("cross_entropy", opts,
    { reduction = "string", ignore_index = "number", label_smoothing = "number", weight = "tensor" })
  -- float targets of the logits' shape are class probabilities; other float targets are refused in C (int64)
  local tdt = lt.is_tensor(targets) and targets:dtype()
  if (tdt == "float32" or tdt == "float64") and lt.is_tensor(logits)
    and targets:shape_str() == logits:shape_str() then
    return FL.cross_entropy_probs(logits, targets, o)
  end
  return C.cross_entropy(logits, targets, o.weight, o.ignore_index, o.label_smoothing or 0, o.reduction)
end

--- nll_loss(log_probs, targets, opts {reduction, ignore_index, weight})
function F.nll_loss(logp, targets, opts)
  local o = loss_opts("nll_loss", opts, { reduction = "string", ignore_index = "number", weight = "tensor" })
  return C.nll_loss(logp, targets, o.weight, o.ignore_index, o.reduction)
end

function F.mse_loss(x, y, opts)
  local o = loss_opts("mse_loss", opts, { reduction = "string" })
  return C.mse_loss(x, y, o.reduction)
end

function F.l1_loss(x, y, opts)
  local o = loss_opts("l1_loss", opts, { reduction = "string" })
  return C.l1_loss(x, y, o.reduction)
end

--- binary_cross_entropy_with_logits(x, y, opts {reduction, pos_weight [last dim]})
function F.binary_cross_entropy_with_logits(x, y, opts)
  local o = loss_opts("binary_cross_entropy_with_logits", opts, { reduction = "string", pos_weight = "tensor" })
  return C.binary_cross_entropy_with_logits(x, y, o.pos_weight, o.reduction)
end

-- binary_cross_entropy, smooth_l1_loss, huber_loss, kl_div, cosine_embedding_loss, margin_ranking_loss,
-- triplet_margin_loss, poisson_nll_loss, gaussian_nll_loss (lua/lutra/F/losses.lua)
for k, v in pairs(FL) do
  if k ~= "cross_entropy_probs" then F[k] = v end
end

-- modules area: relu, leaky_relu, silu, elu, softplus, mish, hardtanh, hardswish, hardsigmoid, prelu
-- (lua/lutra/F/activation.lua)
for k, v in pairs(require "lutra.F.activation") do F[k] = v end

-- one_hot, pad, normalize, cosine_similarity, interpolate (lua/lutra/F/utilities.lua)
for k, v in pairs(require "lutra.F.utilities") do F[k] = v end

-- vision: conv1d/2d, conv_transpose2d, max/avg/adaptive pools, group_norm, instance_norm, dropout2d
-- (lua/lutra/F/vision.lua; its _-prefixed helpers stay there)
for k, v in pairs(require "lutra.F.vision") do
  if k:sub(1, 1) ~= "_" then F[k] = v end
end
-- gpt area: scaled_dot_product_attention (lua/lutra/F/attention.lua)
for k, v in pairs(require "lutra.F.attention") do F[k] = v end

-- The functions composed in Lua of other ops: an error of an inner op (cosine_similarity's sum, instance_norm's
-- group_norm, conv1d's conv2d) is named by the function called first (util.call_as: one pcall per call).
for _, k in ipairs { "normalize", "cosine_similarity", "instance_norm", "group_norm", "conv1d", "pad", "cross_entropy",
  "max_pool1d", "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d" } do
  local f = F[k]
  F[k] = function(...) return util.call_as(k, f, ...) end
end

return require("lutra.names").strict(F, "lt.F")
