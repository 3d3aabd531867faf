-- lutra.metrics.collection — MetricCollection (torchmetrics'): several metrics updated with the same
-- arguments and computed together, their results keyed by name with an optional prefix and postfix.
--
--   local mc = lt.metrics.MetricCollection({acc = Accuracy{...}, f1 = F1Score{...}}, {prefix = "val_"})
--   mc:update(preds, target); mc:compute()   --> {val_acc = 0.9, val_f1 = 0.8}
--   self:log_dict(mc)                         -- logs each metric object under its key
local base = require "lutra.metrics.base"
local util = require "lutra.utils.check"

local fmt = string.format

local MC = { __lutra_metric_collection = true }
local methods = {}
MC.__index = function(self, k)
  local v = methods[k]
  if v ~= nil then return v end
  v = rawget(self, "_metrics")[k]
  if v ~= nil then return v end
  if type(k) == "string" and k:sub(1, 1) ~= "_" then
    error(fmt("MetricCollection has no metric or method '%s'", k), 2)
  end
end
MC.__call = function(self, ...) return self:forward(...) end

local OPTS = { prefix = "string", postfix = "string" }

local function new(metrics, opts)
  if type(metrics) ~= "table" or base.is_metric(metrics) then
    error("MetricCollection: expected a table of name = metric (or a list of metrics), got " ..
      (base.is_metric(metrics) and "a metric" or type(metrics)), 2)
  end
  opts = util.check_options("MetricCollection", opts, OPTS, 2)
  local named, names = {}, {}
  for k, m in pairs(metrics) do
    if not base.is_metric(m) then
      error(fmt("MetricCollection: '%s' must be a metric of lt.metrics, got %s", tostring(k), type(m)), 2)
    end
    local name = type(k) == "number" and m:_name() or k
    if type(name) ~= "string" then error("MetricCollection: metric names must be strings", 2) end
    if methods[name] then error(fmt("MetricCollection: the name '%s' is a method's name", name), 2) end
    if named[name] then error(fmt("MetricCollection: two metrics are named '%s'", name), 2) end
    named[name] = m
    names[#names + 1] = name
  end
  table.sort(names)
  return setmetatable({ _metrics = named, _names = names, _prefix = opts.prefix or "",
    _postfix = opts.postfix or "" }, MC)
end

function methods:_key(name) return self._prefix .. name .. self._postfix end

--- The metrics under their logged keys (prefix .. name .. postfix), for self:log_dict.
function methods:_named_metrics()
  local t = {}
  for _, n in ipairs(self._names) do t[self:_key(n)] = self._metrics[n] end
  return t
end

function methods:keys()
  local t = {}
  for i, n in ipairs(self._names) do t[i] = self:_key(n) end
  return t
end

function methods:update(...)
  for _, n in ipairs(self._names) do self._metrics[n]:update(...) end
end

function methods:forward(...)
  local r = {}
  for _, n in ipairs(self._names) do r[self:_key(n)] = self._metrics[n]:forward(...) end
  return r
end

function methods:compute()
  local r = {}
  for _, n in ipairs(self._names) do r[self:_key(n)] = self._metrics[n]:compute() end
  return r
end

function methods:reset()
  for _, n in ipairs(self._names) do self._metrics[n]:reset() end
end

function methods:state_dict()
  local sd = {}
  for _, n in ipairs(self._names) do sd[n] = self._metrics[n]:state_dict() end
  return sd
end

function methods:load_state_dict(sd)
  if type(sd) ~= "table" then error("MetricCollection:load_state_dict: expected a table, got " .. type(sd), 2) end
  for k in pairs(sd) do
    if not self._metrics[k] then error(fmt("MetricCollection:load_state_dict: unknown metric '%s'", tostring(k)), 2) end
  end
  for _, n in ipairs(self._names) do
    if sd[n] == nil then error(fmt("MetricCollection:load_state_dict: missing metric '%s'", n), 2) end
    self._metrics[n]:load_state_dict(sd[n])
  end
end

--- A copy with copied metrics (their states too); opts {prefix=, postfix=} replace this one's.
function methods:clone(opts)
  opts = util.check_options("MetricCollection:clone", opts, OPTS, 2)
  local copies = {}
  for _, n in ipairs(self._names) do copies[n] = self._metrics[n]:clone() end
  return new(copies, { prefix = opts.prefix or self._prefix, postfix = opts.postfix or self._postfix })
end

return { MetricCollection = new,
  is_collection = function(v)
    local mt = getmetatable(v)
    return type(mt) == "table" and rawget(mt, "__lutra_metric_collection") == true
  end }
