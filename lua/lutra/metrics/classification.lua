-- lutra.metrics.classification — Accuracy, Precision, Recall, F1Score and ConfusionMatrix with torchmetrics'
-- meaning, for task "binary", "multiclass" and "multilabel". The state is a fixed block of int64 counts that
-- core/src/metrics.c adds each batch to (no growth over an epoch):
--   binary, multilabel: [L x 4] tp, fp, tn, fn per label (L = 1 for binary)
--   multiclass:         [3 x C] tp, fp, fn per class and the sample count (tn = n - tp - fp - fn)
--   ConfusionMatrix:    [C x C] (rows = target, columns = prediction); binary [2 x 2], multilabel [L x 2 x 2]
-- Inputs (1-based classes, as lutra's indices):
--   binary:     preds any shape, float32 probabilities or logits (any value outside [0, 1]: the batch goes
--               through the sigmoid), or int64 0/1; target the same shape, int64 0/1; predicted = p > threshold
--   multiclass: preds [N x C] float32 scores (the top_k highest are predicted) or [N] int64 classes 1..C;
--               target [N] int64 1..C
--   multilabel: preds [N x L] as binary's; target [N x L] int64 0/1
local lt = require "lutra"
local base = require "lutra.metrics.base"

local K = require("lutra.core")._metrics
local fmt = string.format
local shape_str = require("lutra.utils.check").shape_str

local M = {}

local TASKS = { "binary", "multiclass", "multilabel" }
local AVERAGES = { "micro", "macro", "weighted", "none" }

local function check_task(name, o)
  if o.task == nil then
    error(fmt('%s: option \'task\' is required ("binary", "multiclass" or "multilabel")', name), 3)
  end
  if o.task == "multiclass" and o.num_classes == nil then
    error(fmt('%s: task "multiclass" needs the option num_classes', name), 3)
  end
  if o.task == "multilabel" and o.num_labels == nil then
    error(fmt('%s: task "multilabel" needs the option num_labels', name), 3)
  end
  if o.top_k and o.top_k ~= 1 and o.task ~= "multiclass" then
    error(fmt('%s: option top_k is for task "multiclass", not "%s"', name, o.task), 3)
  end
  if o.top_k and o.num_classes and o.top_k > o.num_classes then
    error(fmt("%s: top_k (%d) must be at most num_classes (%d)", name, o.top_k, o.num_classes), 3)
  end
  if o.threshold and not (o.threshold >= 0 and o.threshold <= 1) then
    error(fmt("%s: option 'threshold' must be in [0, 1], got %s", name, tostring(o.threshold)), 3)
  end
end

local function check_int64(name, what, t)
  if t:dtype() ~= "int64" then
    error(fmt("%s: %s must be int64, got %s (convert with :long())", name, what, t:dtype()), 0)
  end
end

-- The checked, contiguous (preds, target) of one update, for the counting kernels.
local function prepare(self, preds, target)
  local name, o = self:_name(), self._opts
  base.check_tensor(name, "preds", preds)
  base.check_tensor(name, "target", target)
  check_int64(name, "target", target)
  if o.task == "multiclass" then
    local C = o.num_classes
    if preds:dtype() == "float32" then
      if preds:dim() ~= 2 or preds:size(2) ~= C then
        error(fmt("%s: multiclass preds must be scores [N x %d] (num_classes = %d) or classes [N], got %s", name, C, C,
          shape_str(preds)), 0)
      end
    elseif preds:dim() ~= 1 then
      error(fmt("%s: multiclass int64 preds must be classes [N], got %s", name, shape_str(preds)), 0)
    end
    if target:dim() ~= 1 or target:size(1) ~= preds:size(1) then
      error(fmt("%s: target must be [%d] (one class per row of preds %s), got %s", name, preds:size(1),
        shape_str(preds), shape_str(target)), 0)
    end
  else
    if shape_str(preds) ~= shape_str(target) then
      error(fmt("%s: preds %s and target %s must have the same shape", name, shape_str(preds), shape_str(target)), 0)
    end
    if o.task == "multilabel" and (preds:dim() ~= 2 or preds:size(2) ~= o.num_labels) then
      error(fmt("%s: multilabel preds must be [N x %d] (num_labels = %d), got %s", name, o.num_labels, o.num_labels,
        shape_str(preds)), 0)
    end
  end
  return preds:detach():contiguous(), target:contiguous()
end

-- ---- stat scores: the shared state of Accuracy, Precision, Recall, F1Score -------------------------------

local STAT_OPTS = { task = base.one_of(TASKS), threshold = "number", num_classes = base.positive_integer,
  num_labels = base.positive_integer, average = base.one_of(AVERAGES), top_k = base.positive_integer }

local function stat_init(self)
  local o = self._opts
  if o.task == "multiclass" then
    self:_add_state("stats", "tensor", lt.zeros({ 3, o.num_classes }, "int64"), "sum")
    self:_add_state("n", "numbers", { 0 }, "sum")
  else
    self:_add_state("counts", "tensor", lt.zeros({ o.task == "binary" and 1 or o.num_labels, 4 }, "int64"), "sum")
  end
end

local function stat_update(self, preds, target)
  local p, t = prepare(self, preds, target)
  local o = self._opts
  if o.task == "multiclass" then
    K.multiclass_stats(self:_name(), p, t, o.top_k or 1, self._s.stats)
    self._s.n[1] = self._s.n[1] + t:size(1)
  else
    K.binary_counts(self:_name(), p, t, o.threshold or 0.5, self._s.counts)
  end
end

-- Per class or label: lists tp, fp, tn, fn.
local function stat_lists(self)
  local tp, fp, tn, fn = {}, {}, {}, {}
  if self._opts.task == "multiclass" then
    local s = self._s.stats:totable()
    local n = self._s.n[1]
    for j = 1, #s[1] do
      tp[j], fp[j], fn[j] = s[1][j], s[2][j], s[3][j]
      tn[j] = n - tp[j] - fp[j] - fn[j]
    end
  else
    for j, c in ipairs(self._s.counts:totable()) do tp[j], fp[j], tn[j], fn[j] = c[1], c[2], c[3], c[4] end
  end
  return tp, fp, tn, fn
end

local function safe_div(a, b) return b == 0 and 0 or a / b end

-- torchmetrics' reduction of per-class scores: micro applies score to the summed counts; macro averages
-- the classes (multiclass: those that occur in target or preds), weighted by their support (tp + fn), none
-- returns the list as a float32 tensor.
local function stat_reduce(self, score)
  local o = self._opts
  local tp, fp, tn, fn = stat_lists(self)
  if o.task == "binary" then return score(tp[1], fp[1], tn[1], fn[1]) end
  local average = o.average or "micro"
  if average == "micro" then
    local s = { 0, 0, 0, 0 }
    for j = 1, #tp do s[1], s[2], s[3], s[4] = s[1] + tp[j], s[2] + fp[j], s[3] + tn[j], s[4] + fn[j] end
    return score(s[1], s[2], s[3], s[4])
  end
  local scores = {}
  for j = 1, #tp do scores[j] = score(tp[j], fp[j], tn[j], fn[j]) end
  if average == "none" then return lt.tensor(scores) end
  local num, den = 0, 0
  for j = 1, #tp do
    local w = 1
    if average == "weighted" then w = tp[j] + fn[j]
    elseif o.task == "multiclass" and tp[j] + fp[j] + fn[j] == 0 then w = 0 end
    num, den = num + w * scores[j], den + w
  end
  return safe_div(num, den)
end

local function stat_metric(name, score_of)
  local cls = base.class(name)
  function cls.new(opts)
    local o = base.options(name, opts, STAT_OPTS)
    check_task(name, o)
    local self = base.new(cls, o)
    stat_init(self)
    return self
  end
  cls._update = stat_update
  function cls:_compute() return stat_reduce(self, score_of(self._opts.task)) end
  M[name] = cls.new
  return cls
end

stat_metric("Accuracy", function(task)
  if task == "multiclass" then return function(tp, _, _, fn) return safe_div(tp, tp + fn) end end
  return function(tp, fp, tn, fn) return safe_div(tp + tn, tp + fp + tn + fn) end
end)
stat_metric("Precision", function() return function(tp, fp) return safe_div(tp, tp + fp) end end)
stat_metric("Recall", function() return function(tp, _, _, fn) return safe_div(tp, tp + fn) end end)
stat_metric("F1Score", function() return function(tp, fp, _, fn) return safe_div(2 * tp, 2 * tp + fp + fn) end end)

-- ---- ConfusionMatrix ----------------------------------------------------------------------------------

local CM_OPTS = { task = base.one_of(TASKS), threshold = "number", num_classes = base.positive_integer,
  num_labels = base.positive_integer, normalize = base.one_of({ "true", "pred", "all", "none" }) }

local CM = base.class("ConfusionMatrix")

function CM.new(opts)
  local o = base.options("ConfusionMatrix", opts, CM_OPTS)
  check_task("ConfusionMatrix", o)
  local self = base.new(CM, o)
  if o.task == "multiclass" then
    self:_add_state("confmat", "tensor", lt.zeros({ o.num_classes, o.num_classes }, "int64"), "sum")
  else
    self:_add_state("counts", "tensor", lt.zeros({ o.task == "binary" and 1 or o.num_labels, 4 }, "int64"), "sum")
  end
  return self
end

function CM:_update(preds, target)
  local p, t = prepare(self, preds, target)
  if self._opts.task == "multiclass" then
    K.multiclass_confmat("ConfusionMatrix", p, t, self._s.confmat)
  else
    K.binary_counts("ConfusionMatrix", p, t, self._opts.threshold or 0.5, self._s.counts)
  end
end

-- rows (target 0, 1) x columns (prediction 0, 1) of one label's tp, fp, tn, fn
local function label_matrix(c) return { { c[3], c[2] }, { c[4], c[1] } } end

-- normalize over the last two dims of m (a float32 [.. x R x C] tensor); 0/0 gives 0, as torchmetrics
local function normalize(m, how)
  local d = m:dim()
  local den
  if how == "true" then den = m:sum(d, true)
  elseif how == "pred" then den = m:sum(d - 1, true)
  else den = m:sum(d, true):sum(d - 1, true) end
  -- a zero denominator has a zero numerator: 0 / tiny = 0. tiny is float32's smallest normal number: a
  -- denormal one (1e-38) reads as 0 once lt.set_flush_denormal(true) has run, and 0 / 0 is NaN
  return m:div(den:clamp(2 ^ -126))
end

function CM:_compute()
  local o = self._opts
  local m
  if o.task == "multiclass" then
    m = self._s.confmat:clone()
  else
    local list = {}
    for j, c in ipairs(self._s.counts:totable()) do list[j] = label_matrix(c) end
    m = lt.tensor(o.task == "binary" and list[1] or list, "int64")
  end
  if o.normalize == nil or o.normalize == "none" then return m end
  return normalize(m:float(), o.normalize)
end

M.ConfusionMatrix = CM.new

return M
