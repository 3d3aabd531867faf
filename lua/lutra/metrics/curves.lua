-- lutra.metrics.curves — AUROC and AveragePrecision with torchmetrics' meaning, task "binary" (target int64
-- 0/1) and "multiclass" (one-vs-rest: preds [N x C], target int64 1..C; average "macro", "weighted" or
-- "none"). These keep the data: every update's preds and target are stored until compute (the state grows
-- with the updates, 4 + 8 bytes per sample and class), as torchmetrics without `thresholds`.
-- Curves are taken at every distinct score (ties form one point), as scikit-learn's roc_curve and
-- precision_recall_curve; preds outside [0, 1] are logits: a binary batch goes through the sigmoid, a
-- multiclass batch through the softmax over its row.
local lt = require "lutra"
local base = require "lutra.metrics.base"

local fmt = string.format
local shape_str = require("lutra.util").shape_str

local M = {}

local OPTS = { task = base.one_of({ "binary", "multiclass" }), num_classes = base.positive_integer,
  average = base.one_of({ "macro", "weighted", "none" }) }

-- Cumulative true and false positives at each distinct score, from the highest: lists tps, fps.
local function clf_curve(scores, labels)
  local order = lt.argsort(scores, 1, { descending = true, stable = true }):totable()
  local s, y = scores:totable(), labels:totable()
  local tps, fps = {}, {}
  local tp, fp = 0, 0
  for i, k in ipairs(order) do
    if y[k] == 1 then tp = tp + 1 else fp = fp + 1 end
    local nxt = order[i + 1]
    if nxt == nil or s[nxt] ~= s[k] then
      tps[#tps + 1], fps[#fps + 1] = tp, fp
    end
  end
  return tps, fps
end

-- Area under the ROC curve (trapezoids from (0, 0)); 0 when a class is missing (torchmetrics: its rates
-- are taken as 0).
local function auroc(scores, labels)
  local tps, fps = clf_curve(scores, labels)
  local P, N = tps[#tps] or 0, fps[#fps] or 0
  if P == 0 or N == 0 then return 0 end
  local area, x0, y0 = 0, 0, 0
  for i = 1, #tps do
    local x, y = fps[i] / N, tps[i] / P
    area = area + (x - x0) * (y + y0) / 2
    x0, y0 = x, y
  end
  return area
end

-- sum over thresholds of (R_n - R_{n-1}) P_n (scikit-learn's average_precision_score); NaN without a
-- positive target (recall undefined).
local function average_precision(scores, labels)
  local tps, fps = clf_curve(scores, labels)
  local P = tps[#tps] or 0
  if P == 0 then return 0 / 0 end
  local ap, r0 = 0, 0
  for i = 1, #tps do
    local r = tps[i] / P
    ap = ap + (r - r0) * tps[i] / (tps[i] + fps[i])
    r0 = r
  end
  return ap
end

local function in_unit(t)
  return t:numel() == 0 or (t:min():item() >= 0 and t:max():item() <= 1)
end

local function curve_metric(name, score_fn, skip_nan)
  local cls = base.class(name)
  function cls.new(opts)
    local o = base.options(name, opts, OPTS)
    if o.task == nil then error(fmt('%s: option \'task\' is required ("binary" or "multiclass")', name), 2) end
    if o.task == "multiclass" and o.num_classes == nil then
      error(fmt('%s: task "multiclass" needs the option num_classes', name), 2)
    end
    local self = base.new(cls, o)
    local row = o.task == "multiclass" and { o.num_classes } or {}
    self:_add_state("preds", "cat", { row = row, dtype = "float32" }, "cat")
    self:_add_state("target", "cat", { row = {}, dtype = "int64" }, "cat")
    return self
  end

  function cls:_update(preds, target)
    base.check_tensor(name, "preds", preds)
    base.check_tensor(name, "target", target)
    if target:dtype() ~= "int64" then
      error(fmt("%s: target must be int64, got %s (convert with :long())", name, target:dtype()), 0)
    end
    if preds:dtype() ~= "float32" then
      error(fmt("%s: preds must be float32 scores, got %s", name, preds:dtype()), 0)
    end
    local o = self._opts
    local p = preds:detach()
    if o.task == "binary" then
      if shape_str(p) ~= shape_str(target) then
        error(fmt("%s: preds %s and target %s must have the same shape", name, shape_str(p), shape_str(target)), 0)
      end
      p, target = p:reshape(-1), target:reshape(-1)
      if p:isnan():any():item() ~= 0 then error(name .. ": preds hold NaN", 0) end
      if target:numel() > 0 and (target:min():item() < 0 or target:max():item() > 1) then
        error(fmt("%s: binary target must hold 0 or 1", name), 0)
      end
      if not in_unit(p) then p = p:sigmoid() end
    else
      local C = o.num_classes
      if p:dim() ~= 2 or p:size(2) ~= C then
        error(fmt("%s: multiclass preds must be [N x %d] (num_classes = %d), got %s", name, C, C, shape_str(p)), 0)
      end
      if target:dim() ~= 1 or target:size(1) ~= p:size(1) then
        error(fmt("%s: target must be [%d] (one class per row of preds %s), got %s", name, p:size(1), shape_str(p),
          shape_str(target)), 0)
      end
      if p:isnan():any():item() ~= 0 then error(name .. ": preds hold NaN", 0) end
      if target:numel() > 0 and (target:min():item() < 1 or target:max():item() > C) then
        error(fmt("%s: target must hold classes 1..%d (1-based), got values in %d..%d", name, C, target:min():item(),
          target:max():item()), 0)
      end
      if not in_unit(p) then p = p:softmax(2) end
    end
    local ps, ts = self._s.preds, self._s.target
    ps[#ps + 1], ts[#ts + 1] = p:contiguous(), target:contiguous()
  end

  function cls:_compute()
    local o = self._opts
    local p, t = self:_cat("preds"), self:_cat("target")
    if o.task == "binary" then return score_fn(p, t) end
    local C = o.num_classes
    local scores, support = {}, {}
    for c = 1, C do
      local labels = t:eq(c):long()
      support[c] = labels:sum():item()
      scores[c] = score_fn(p:select(2, c):contiguous(), labels)
    end
    local average = o.average or "macro"
    if average == "none" then return lt.tensor(scores) end
    -- macro: the mean over classes; weighted: by support; a NaN class score (AveragePrecision of a class
    -- absent from target) is left out, as torchmetrics does
    local num, den = 0, 0
    for c = 1, C do
      if not (skip_nan and scores[c] ~= scores[c]) then
        local w = average == "weighted" and support[c] or 1
        num, den = num + w * scores[c], den + w
      end
    end
    if den == 0 then return 0 / 0 end
    return num / den
  end
  M[name] = cls.new
end

curve_metric("AUROC", auroc, false)
curve_metric("AveragePrecision", average_precision, true)

return M
