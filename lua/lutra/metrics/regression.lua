-- lutra.metrics.regression — MeanSquaredError, MeanAbsoluteError, R2Score (torchmetrics' meaning), and the
-- aggregations MeanMetric, SumMetric, MaxMetric, MinMetric. Each batch is reduced to a few sums in C
-- (float32 within the batch) that accumulate as Lua numbers (doubles) across batches: the state is a fixed
-- handful of numbers per output.
local lt = require "lutra"
local base = require "lutra.metrics.base"

local fmt = string.format
local shape_str = require("lutra.utils.check").shape_str

local M = {}

-- preds and target of one update as float32 [N x D] (D = num_outputs), checked.
local function pairs_2d(name, preds, target, D)
  base.check_tensor(name, "preds", preds)
  base.check_tensor(name, "target", target)
  if shape_str(preds) ~= shape_str(target) then
    error(fmt("%s: preds %s and target %s must have the same shape", name, shape_str(preds), shape_str(target)), 0)
  end
  local p, t = preds:detach():float(), target:detach():float()
  if D == 1 then
    if p:dim() > 1 and not (p:dim() == 2 and p:size(2) == 1) then
      error(fmt("%s: preds must be [N] (num_outputs = 1), got %s", name, shape_str(preds)), 0)
    end
    return p:reshape(-1, 1), t:reshape(-1, 1)
  end
  if p:dim() ~= 2 or p:size(2) ~= D then
    error(fmt("%s: preds must be [N x %d] (num_outputs = %d), got %s", name, D, D, shape_str(preds)), 0)
  end
  return p, t
end

local function col_sums(t) -- float32 [N x D] -> list of D numbers
  if t:size(1) == 0 then
    local z = {}
    for i = 1, t:size(2) do z[i] = 0 end
    return z
  end
  return t:sum(1):totable()
end

local function add_to(list, add)
  for i = 1, #list do list[i] = list[i] + add[i] end
end

local function zeros(n)
  local z = {}
  for i = 1, n do z[i] = 0 end
  return z
end

-- The mean of an error over every sample and output; err(p, t) is the batch's elementwise error.
local function error_metric(name, err, extra_opts, finish)
  local cls = base.class(name)
  local spec = { num_outputs = base.positive_integer }
  for k, v in pairs(extra_opts) do spec[k] = v end
  function cls.new(opts)
    local o = base.options(name, opts, spec)
    local self = base.new(cls, o)
    self:_add_state("sum_error", "numbers", zeros(o.num_outputs or 1), "sum")
    self:_add_state("n", "numbers", { 0 }, "sum")
    return self
  end
  function cls:_update(preds, target)
    local p, t = pairs_2d(name, preds, target, self._opts.num_outputs or 1)
    add_to(self._s.sum_error, col_sums(err(p, t)))
    self._s.n[1] = self._s.n[1] + p:size(1)
  end
  function cls:_compute()
    local s, n = self._s.sum_error, self._s.n[1]
    local v = {}
    for i = 1, #s do v[i] = finish(self._opts, s[i] / n) end -- 0 / 0: NaN before any sample, as torchmetrics
    if #v == 1 then return v[1] end
    return lt.tensor(v)
  end
  M[name] = cls.new
end

error_metric("MeanSquaredError", function(p, t) return p:sub(t):square() end, { squared = "boolean" },
  function(o, mse) return o.squared == false and math.sqrt(mse) or mse end)
error_metric("MeanAbsoluteError", function(p, t) return p:sub(t):abs() end, {}, function(_, v) return v end)

-- ---- R2Score ------------------------------------------------------------------------------------------

local R2 = base.class("R2Score")

function R2.new(opts)
  local o = base.options("R2Score", opts, { num_outputs = base.positive_integer,
    multioutput = base.one_of({ "uniform_average", "raw_values", "variance_weighted" }) })
  local self = base.new(R2, o)
  local D = o.num_outputs or 1
  self:_add_state("sum_target", "numbers", zeros(D), "sum")
  self:_add_state("sum_squared_target", "numbers", zeros(D), "sum")
  self:_add_state("residual", "numbers", zeros(D), "sum")
  self:_add_state("n", "numbers", { 0 }, "sum")
  return self
end

function R2:_update(preds, target)
  local p, t = pairs_2d("R2Score", preds, target, self._opts.num_outputs or 1)
  add_to(self._s.sum_target, col_sums(t))
  add_to(self._s.sum_squared_target, col_sums(t:square()))
  add_to(self._s.residual, col_sums(p:sub(t):square()))
  self._s.n[1] = self._s.n[1] + p:size(1)
end

-- 1 - RSS / TSS per output; a constant target gives 1 when predicted exactly, else 0 (scikit-learn's
-- force_finite, torchmetrics' rule)
function R2:_compute()
  local n = self._s.n[1]
  if n < 2 then error(fmt("R2Score: needs at least two samples, got %d", n), 0) end
  local raw, tss = {}, {}
  for i = 1, #self._s.residual do
    local sy, syy, rss = self._s.sum_target[i], self._s.sum_squared_target[i], self._s.residual[i]
    tss[i] = syy - sy * sy / n
    local rss_zero, tss_zero = math.abs(rss) <= 1e-8, math.abs(tss[i]) <= 1e-8
    if rss_zero then raw[i] = 1
    elseif tss_zero then raw[i] = 0
    else raw[i] = 1 - rss / tss[i] end
  end
  local how = self._opts.multioutput or "uniform_average"
  if how == "raw_values" then return #raw == 1 and raw[1] or lt.tensor(raw) end
  local num, den = 0, 0
  for i = 1, #raw do
    local w = how == "variance_weighted" and tss[i] or 1
    num, den = num + w * raw[i], den + w
  end
  return den == 0 and 1 or num / den
end

M.R2Score = R2.new

-- ---- aggregation: MeanMetric, SumMetric, MaxMetric, MinMetric --------------------------------------------

local NAN_STRATEGY = function(v)
  if type(v) == "number" then return nil end
  if v == "warn" or v == "ignore" or v == "error" then return nil end
  return 'must be "warn", "ignore", "error" or a number, got ' .. tostring(v)
end

-- value (a number or a tensor) as a float32 tensor with its NaNs handled by the metric's nan_strategy:
-- "warn" (default) and "ignore" drop them ("warn" says so once), "error" raises, a number replaces them.
-- Returns the tensor and the mask of the kept elements (nil: all kept).
local function values(self, value)
  local name = self:_name()
  if type(value) == "number" then value = lt.tensor({ value })
  elseif not lt.is_tensor(value) then
    error(fmt("%s: the value must be a number or a tensor, got %s", name, type(value)), 0)
  end
  local v = value:detach():float():reshape(-1)
  local nan = v:isnan()
  if nan:any():item() == 0 then return v, nil end
  local how = self._opts.nan_strategy or "warn"
  if how == "error" then error(name .. ": the value holds NaN (nan_strategy = \"error\")", 0) end
  if type(how) == "number" then return v:masked_fill(nan, how), nil end
  if how == "warn" and not self._warned then
    self._warned = true
    lt._warn(name .. ": NaN values were dropped (nan_strategy = \"warn\")")
  end
  return v:masked_fill(nan, 0), nan:logical_not():float()
end

local function aggregation(name, init, reduce, batch)
  local cls = base.class(name)
  function cls.new(opts)
    local o = base.options(name, opts, { nan_strategy = NAN_STRATEGY })
    local self = base.new(cls, o)
    self:_add_state("value", "numbers", { init }, reduce)
    return self
  end
  function cls:_update(value)
    local v, keep = values(self, value)
    if v:numel() == 0 then return end
    local b = batch(v, keep)
    if b == nil then return end
    local s = self._s.value
    if reduce == "sum" then s[1] = s[1] + b
    elseif reduce == "max" then s[1] = math.max(s[1], b)
    else s[1] = math.min(s[1], b) end
  end
  function cls:_compute() return self._s.value[1] end
  M[name] = cls.new
end

aggregation("SumMetric", 0, "sum", function(v) return v:sum():item() end)
aggregation("MaxMetric", -math.huge, "max", function(v, keep)
  if keep then
    if keep:sum():item() == 0 then return nil end
    v = v:masked_fill(keep:eq(0), -math.huge)
  end
  return v:max():item()
end)
aggregation("MinMetric", math.huge, "min", function(v, keep)
  if keep then
    if keep:sum():item() == 0 then return nil end
    v = v:masked_fill(keep:eq(0), math.huge)
  end
  return v:min():item()
end)

-- MeanMetric: the weighted mean of every value seen, update(value[, weight]) (weight: a number or a tensor
-- of value's shape; default 1 each).
local Mean = base.class("MeanMetric")

function Mean.new(opts)
  local o = base.options("MeanMetric", opts, { nan_strategy = NAN_STRATEGY })
  local self = base.new(Mean, o)
  self:_add_state("mean_value", "numbers", { 0 }, "sum")
  self:_add_state("weight", "numbers", { 0 }, "sum")
  return self
end

function Mean:_update(value, weight)
  local v, keep = values(self, value)
  local w
  if weight == nil then w = lt.ones(v:numel())
  elseif type(weight) == "number" then w = lt.full({ v:numel() }, weight)
  elseif lt.is_tensor(weight) then
    if weight:numel() ~= v:numel() then
      error(fmt("MeanMetric: weight %s must have as many elements as the value (%d)", shape_str(weight), v:numel()), 0)
    end
    w = weight:detach():float():reshape(-1)
  else
    error("MeanMetric: weight must be a number or a tensor, got " .. type(weight), 0)
  end
  if keep then w = w:mul(keep) end
  if v:numel() == 0 then return end
  self._s.mean_value[1] = self._s.mean_value[1] + v:mul(w):sum():item()
  self._s.weight[1] = self._s.weight[1] + w:sum():item()
end

function Mean:_compute() return self._s.mean_value[1] / self._s.weight[1] end -- no values: NaN (0 / 0)

M.MeanMetric = Mean.new

return M
