-- nn/loss.lua — the losses as modules (PyTorch's nn.*Loss): each holds its options and calls the lt.F
-- function of the same loss (F/init.lua, F/losses.lua), so the module and the function cannot disagree.
--
--   local crit = lt.nn.CrossEntropyLoss{label_smoothing = 0.1}
--   local loss = crit(logits, targets)
--   local trip = lt.nn.TripletMarginLoss{margin = 0.5}; trip(anchor, positive, negative)
local Module = require("lutra.nn.module").Module
local H = require "lutra.nn.helpers"

local LOSSES = {}

-- name = {F function, number of tensor arguments, option spec}
local SPECS = {
  L1Loss = { "l1_loss", 2, {} },
  MSELoss = { "mse_loss", 2, {} },
  CrossEntropyLoss = { "cross_entropy", 2, { weight = "tensor", ignore_index = "number", label_smoothing = "number" } },
  NLLLoss = { "nll_loss", 2, { weight = "tensor", ignore_index = "number" } },
  BCELoss = { "binary_cross_entropy", 2, { weight = "tensor" } },
  BCEWithLogitsLoss = { "binary_cross_entropy_with_logits", 2, { pos_weight = "tensor" } },
  SmoothL1Loss = { "smooth_l1_loss", 2, { beta = "number" } },
  HuberLoss = { "huber_loss", 2, { delta = "number" } },
  KLDivLoss = { "kl_div", 2, { log_target = "boolean" } },
  CosineEmbeddingLoss = { "cosine_embedding_loss", 3, { margin = "number" } },
  MarginRankingLoss = { "margin_ranking_loss", 3, { margin = "number" } },
  TripletMarginLoss = { "triplet_margin_loss", 3,
    { margin = "number", p = "number", eps = "number", swap = "boolean" } },
  PoissonNLLLoss = { "poisson_nll_loss", 2, { log_input = "boolean", full = "boolean", eps = "number" } },
  GaussianNLLLoss = { "gaussian_nll_loss", 3, { full = "boolean", eps = "number" } },
}

for name, spec in pairs(SPECS) do
  local fname, nargs, opts_spec = spec[1], spec[2], spec[3]
  local cls = Module:extend(name)
  local full_spec = { reduction = "string" }
  for k, v in pairs(opts_spec) do full_spec[k] = v end
  function cls:init(opts)
    local o = H.check_opts(name, opts, full_spec, 3)
    local red = o.reduction or "mean"
    if red ~= "mean" and red ~= "sum" and red ~= "none" and not (red == "batchmean" and name == "KLDivLoss") then
      error(string.format('%s: reduction must be "mean", "sum" or "none"%s, got "%s"', name,
        name == "KLDivLoss" and ' (or "batchmean")' or "", red), 3)
    end
    local keep = {}
    for k, v in pairs(o) do keep[k] = v end
    keep.reduction = red
    rawset(self, "_opts", keep)
    self.reduction = red
  end
  function cls:extra_repr() return "reduction=" .. self.reduction end
  if nargs == 2 then
    function cls:forward(input, target) return require("lutra.F")[fname](input, target, self._opts) end
  else
    function cls:forward(a, b, c) return require("lutra.F")[fname](a, b, c, self._opts) end
  end
  LOSSES[name] = cls
end

return LOSSES
