-- lutra.metrics.curves — AUROC and AveragePrecision with torchmetrics' meaning, task "binary" (target int64
-- 0/1) and "multiclass" (one-vs-rest: preds [N x C], target int64 1..C; average "macro", "weighted" or
-- "none"). Without `thresholds` these keep the data: every update's preds and target are stored until compute
-- (the state grows with the updates, 4 bytes per score plus 8 per target), as torchmetrics does.
-- Curves are taken at every distinct score (ties form one point), as scikit-learn's roc_curve and
-- precision_recall_curve; preds outside [0, 1] are logits: a binary batch goes through the sigmoid, a
-- multiclass batch through the softmax over its row.
-- With `thresholds` (a count T for T evenly spaced in [0, 1], or an ascending list) the state is instead, as
-- torchmetrics' binned mode, the counts of true and false positives at each threshold (p >= t) per class: fixed
-- size, no data kept, and the curve has those T points.
local lt = require "lutra"
local base = require "lutra.metrics.base"

local fmt = string.format
local shape_str = require("lutra.utils.check").shape_str

local M = {}

local function check_thresholds(v)
  if type(v) == "number" then
    if v ~= math.floor(v) or v < 2 or v == math.huge then return "must be an integer >= 2 or a list, got " .. v end
    return nil
  end
  if type(v) ~= "table" or #v < 1 then return "must be an integer >= 2 or a list of numbers, got " .. type(v) end
  for i, t in ipairs(v) do
    if type(t) ~= "number" or not (t >= 0 and t <= 1) or (i > 1 and t <= v[i - 1]) then
      return "must hold ascending numbers in [0, 1]"
    end
  end
end

local OPTS = { task = base.one_of({ "binary", "multiclass" }), num_classes = base.positive_integer,
  average = base.one_of({ "macro", "weighted", "none" }), thresholds = check_thresholds }

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

-- ---- binned mode (thresholds): counts at each threshold, torchmetrics' definitions -----------------------

-- tp[c][t], fp[c][t] of class c at threshold t (numbers lists, flat: (c - 1) * T + t), positives per class, rows
local function binned_counts(self, c)
  local T = #self._thr
  local tps, fps = {}, {}
  for t = 1, T do
    tps[t], fps[t] = self._s.tp[(c - 1) * T + t], self._s.fp[(c - 1) * T + t]
  end
  return tps, fps, self._s.pos[c], self._s.n[1]
end

-- trapezoids over the T points of (fpr, tpr), from the highest threshold down
local function binned_auroc(tps, fps, P, n)
  local N, T = n - P, #tps
  local area, x0, y0
  for t = T, 1, -1 do
    local x, y = N > 0 and fps[t] / N or 0, P > 0 and tps[t] / P or 0
    if x0 then area = area + (x - x0) * (y + y0) / 2 else area = 0 end
    x0, y0 = x, y
  end
  return area
end

-- -sum((R_{i+1} - R_i) P_i) over the thresholds and a last point (recall 0, precision 1); no positive: 0
local function binned_ap(tps, fps, P)
  local T = #tps
  local ap = 0
  for t = 1, T do
    local prec = tps[t] + fps[t] > 0 and tps[t] / (tps[t] + fps[t]) or 1
    local r = P > 0 and tps[t] / P or 0
    local r_next = t < T and (P > 0 and tps[t + 1] / P or 0) or 0
    ap = ap - (r_next - r) * prec
  end
  return ap
end

local function binned_update(self, p, target)
  local T, thr = #self._thr, self._thr_row
  local n = target:size(1)
  if n == 0 then return end
  local C = self._opts.task == "multiclass" and self._opts.num_classes or 1
  for c = 1, C do
    local s = C == 1 and p or p:select(2, c)
    local y = (C == 1 and target or target:eq(c)):float():reshape(n, 1)
    local above = s:reshape(n, 1):ge(thr) -- [n x T]: predicted positive at each threshold
    local tp = above:mul(y):sum(1):totable()
    local all = above:sum(1):totable()
    local base_i = (c - 1) * T
    for t = 1, T do
      self._s.tp[base_i + t] = self._s.tp[base_i + t] + tp[t]
      self._s.fp[base_i + t] = self._s.fp[base_i + t] + all[t] - tp[t]
    end
    self._s.pos[c] = self._s.pos[c] + y:sum():item()
  end
  self._s.n[1] = self._s.n[1] + n
end

local function in_unit(t)
  return t:numel() == 0 or (t:min():item() >= 0 and t:max():item() <= 1)
end

local function curve_metric(name, score_fn, binned_fn, skip_nan)
  local cls = base.class(name)
  function cls.new(opts)
    local o = base.options(name, opts, OPTS)
    if o.task == nil then error(fmt('%s: option \'task\' is required ("binary" or "multiclass")', name), 2) end
    if o.task == "multiclass" and o.num_classes == nil then
      error(fmt('%s: task "multiclass" needs the option num_classes', name), 2)
    end
    local self = base.new(cls, o)
    if o.thresholds then
      local thr = o.thresholds
      if type(thr) == "number" then thr = lt.linspace(0, 1, thr):totable() end
      self._thr, self._thr_row = thr, lt.tensor(thr):reshape(1, #thr)
      local C = o.task == "multiclass" and o.num_classes or 1
      local function zeros(k)
        local z = {}
        for i = 1, k do z[i] = 0 end
        return z
      end
      self:_add_state("tp", "numbers", zeros(C * #thr), "sum")
      self:_add_state("fp", "numbers", zeros(C * #thr), "sum")
      self:_add_state("pos", "numbers", zeros(C), "sum")
      self:_add_state("n", "numbers", { 0 }, "sum")
      return self
    end
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
    if self._thr then return binned_update(self, p, target) end
    local ps, ts = self._s.preds, self._s.target
    ps[#ps + 1], ts[#ts + 1] = p:contiguous(), target:contiguous()
  end

  -- the score of class c (1 for binary) and its support
  local function class_score(self, c, p, t)
    if self._thr then
      local tps, fps, P, n = binned_counts(self, c)
      return binned_fn(tps, fps, P, n), P
    end
    local labels = self._opts.task == "binary" and t or t:eq(c):long()
    local col = self._opts.task == "binary" and p or p:select(2, c):contiguous()
    return score_fn(col, labels), labels:sum():item()
  end

  function cls:_compute()
    local o = self._opts
    local p, t
    if not self._thr then p, t = self:_cat("preds"), self:_cat("target") end
    if o.task == "binary" then return (class_score(self, 1, p, t)) end
    local C = o.num_classes
    local scores, support = {}, {}
    for c = 1, C do scores[c], support[c] = class_score(self, c, p, t) end
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

curve_metric("AUROC", auroc, binned_auroc, false)
curve_metric("AveragePrecision", average_precision, binned_ap, true)

return M
