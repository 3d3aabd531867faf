-- lutra.metrics.base — what every metric of lt.metrics shares (torchmetrics' Metric): declared states of
-- fixed size, update/compute/reset, forward (`m(preds, target)` updates and returns the batch's value),
-- state_dict/load_state_dict, clone, and the sum of states across DDP ranks before compute.
--
-- A metric class declares its states in its constructor (self:_add_state) and defines _update(...) and
-- _compute(); everything else comes from here. State kinds:
--   "tensor"   a tensor of fixed shape (int64 counts), reduced across batches and ranks by reduce
--   "numbers"  a fixed-length list of Lua numbers (doubles: sums of float values without float32's drift)
--   "cat"      a list of tensors concatenated along dim 1: the data itself (AUROC, AveragePrecision); the
--              only kind that grows with the updates
-- reduce: "sum", "max", "min" (tensor, numbers) or "cat".
local lt = require "lutra"
local util = require "lutra.utils.check"

local M = {}

local fmt = string.format

local Metric = {}
M.Metric = Metric

-- A metric class named name: instances are callable (forward) and inherit Metric's methods.
function M.class(name)
  local cls = { __name = name, __lutra_metric = true }
  cls.__index = function(self, k)
    local v = cls[k]
    if v ~= nil then return v end
    v = Metric[k]
    if v ~= nil then return v end
    if type(k) == "string" and k:sub(1, 1) ~= "_" then
      error(fmt("%s has no field '%s'", name, k), 2)
    end
    return nil
  end
  cls.__call = function(self, ...) return self:forward(...) end
  cls.__tostring = function(self) return name .. "()" end
  return cls
end

function M.is_metric(v)
  local mt = getmetatable(v)
  return type(mt) == "table" and rawget(mt, "__lutra_metric") == true
end

-- A new instance of cls built from the checked options (kept for clone).
function M.new(cls, opts)
  return setmetatable({ _opts = opts, _states = {}, _s = {}, _update_count = 0 }, cls)
end

local function copy_value(kind, v)
  if kind == "tensor" then return v:clone() end
  if kind == "numbers" then
    local t = {}
    for i = 1, #v do t[i] = v[i] end
    return t
  end
  local t = {}
  for i = 1, #v do t[i] = v[i] end
  return t
end

--- self:_add_state(name, kind, default, reduce): declares a state; default is its value after reset
--- (a tensor, a list of numbers, or for "cat" the shape of one row, e.g. {} or {C}, and its dtype:
--- {row = {C}, dtype = "float32"}).
function Metric:_add_state(name, kind, default, reduce)
  self._states[#self._states + 1] = { name = name, kind = kind, default = default, reduce = reduce }
  self._s[name] = kind == "cat" and {} or copy_value(kind, default)
end

function Metric:_name() return getmetatable(self).__name end

-- Errors of a metric's own code are raised at the user's call (level 3 from here), without the position
-- inside lutra's files that the checks and the C kernels raised them at.
local function strip(e) return (tostring(e):gsub("^[^\n:]*lutra[^\n:]*%.lua:%d+: ", "")) end
M.strip = strip

local function protected(f, ...)
  local r = { pcall(f, ...) }
  if not r[1] then error(strip(r[2]), 3) end
  return r[2]
end

function Metric:update(...)
  protected(self._update, self, ...)
  self._update_count = self._update_count + 1
end

--- The metric over every update since the last reset (summed over the ranks of a DDP run first).
function Metric:compute()
  local D = lt.distributed
  if D.is_initialized() and D.world_size() > 1 and self._opts.sync_on_compute ~= false then
    local saved = self:_snapshot()
    self:_sync(D)
    local ok, v = pcall(self._compute, self)
    self:_restore(saved)
    if not ok then error(strip(v), 2) end
    return v
  end
  return protected(self._compute, self)
end

function Metric:reset()
  for _, st in ipairs(self._states) do
    self._s[st.name] = st.kind == "cat" and {} or copy_value(st.kind, st.default)
  end
  self._update_count = 0
  self._forward_cache = nil
end

function Metric:_snapshot()
  local s = {}
  for _, st in ipairs(self._states) do s[st.name] = self._s[st.name] end
  return s
end

function Metric:_restore(saved)
  for _, st in ipairs(self._states) do self._s[st.name] = saved[st.name] end
end

local function combine_numbers(a, b, reduce)
  for i = 1, #a do
    if reduce == "sum" then a[i] = a[i] + b[i]
    elseif reduce == "max" then a[i] = math.max(a[i], b[i])
    else a[i] = math.min(a[i], b[i]) end
  end
end

-- Adds the states in saved (taken before a batch-only update) to the current (batch) states.
function Metric:_merge(saved)
  for _, st in ipairs(self._states) do
    local cur, old = self._s[st.name], saved[st.name]
    if st.kind == "tensor" then
      if st.reduce == "sum" then cur:add_(old)
      elseif st.reduce == "max" then self._s[st.name] = lt.maximum(cur, old)
      else self._s[st.name] = lt.minimum(cur, old) end
    elseif st.kind == "numbers" then
      combine_numbers(cur, old, st.reduce)
    else
      local list = {}
      for i = 1, #old do list[#list + 1] = old[i] end
      for i = 1, #cur do list[#list + 1] = cur[i] end
      self._s[st.name] = list
    end
  end
end

--- forward: m(preds, target) adds the batch to the state and returns the metric of the batch alone.
function Metric:forward(...)
  local saved, count = self:_snapshot(), self._update_count
  self:reset()
  local ok, v = pcall(function(...)
    self:_update(...)
    return self:_compute()
  end, ...)
  if not ok then
    self:_restore(saved)
    self._update_count = count
    error(strip(v), 2)
  end
  self:_merge(saved)
  self._update_count = count + 1
  self._forward_cache = v
  return v
end

-- The concatenation of a "cat" state (an empty tensor of its row shape when there were no updates).
function Metric:_cat(name)
  local list = self._s[name]
  if #list == 1 then return list[1] end
  if #list > 1 then return lt.cat(list, 1) end
  for _, st in ipairs(self._states) do
    if st.name == name then
      local shape = { 0 }
      for i, d in ipairs(st.default.row) do shape[i + 1] = d end
      return lt.zeros(shape, st.default.dtype)
    end
  end
end

--- The states as a table of name = tensor (a copy) or list of numbers; "cat" states as one tensor.
function Metric:state_dict()
  local sd = {}
  for _, st in ipairs(self._states) do
    if st.kind == "cat" then sd[st.name] = self:_cat(st.name):clone()
    else sd[st.name] = copy_value(st.kind, self._s[st.name]) end
  end
  return sd
end

local function shape_of(v) return lt.is_tensor(v) and util.shape_str(v) or type(v) end

function Metric:load_state_dict(sd)
  local name = self:_name()
  if type(sd) ~= "table" then error(fmt("%s:load_state_dict: expected a table, got %s", name, type(sd)), 2) end
  local known = {}
  for _, st in ipairs(self._states) do
    known[st.name] = true
    local v = sd[st.name]
    if v == nil then error(fmt("%s:load_state_dict: missing state '%s'", name, st.name), 2) end
    local cur = st.kind == "cat" and nil or self._s[st.name]
    if st.kind == "tensor" then
      if not lt.is_tensor(v) or util.shape_str(v) ~= util.shape_str(cur) or v:dtype() ~= cur:dtype() then
        error(fmt("%s:load_state_dict: state '%s' must be a %s tensor of shape %s, got %s", name, st.name,
          cur:dtype(), util.shape_str(cur), shape_of(v)), 2)
      end
    elseif st.kind == "numbers" then
      if type(v) ~= "table" or #v ~= #cur then
        error(fmt("%s:load_state_dict: state '%s' must be a list of %d numbers", name, st.name, #cur), 2)
      end
    elseif not lt.is_tensor(v) or v:dtype() ~= st.default.dtype or v:dim() ~= #st.default.row + 1 then
      error(fmt("%s:load_state_dict: state '%s' must be a %s tensor of %d dims, got %s", name, st.name,
        st.default.dtype, #st.default.row + 1, shape_of(v)), 2)
    end
  end
  for k in pairs(sd) do
    if not known[k] then error(fmt("%s:load_state_dict: unknown state '%s'", name, tostring(k)), 2) end
  end
  for _, st in ipairs(self._states) do
    local v = sd[st.name]
    if st.kind == "cat" then self._s[st.name] = v:numel() > 0 and { v:clone() } or {}
    else self._s[st.name] = copy_value(st.kind, v) end
  end
  self._forward_cache = nil
end

--- A new metric with the same options and a copy of the state.
function Metric:clone()
  local cls = getmetatable(self)
  local m = cls.new(self._opts)
  m:load_state_dict(self:state_dict())
  m._update_count = self._update_count
  return m
end

-- ---- DDP: the states of every rank combined in place (torchmetrics' sync) -----------------------------

-- Concatenates every rank's rows of t along dim 1, with all_reduce only: each rank writes its rows at
-- its offset into a zero buffer and the buffers are summed.
local function all_gather_rows(D, t)
  local W, r = D.world_size(), D.rank()
  local counts = {}
  for i = 1, W do counts[i] = 0 end
  counts[r + 1] = t:size(1)
  counts = D.all_reduce_numbers(counts, "sum")
  local total, offset = 0, 0
  for i = 1, W do
    if i <= r then offset = offset + counts[i] end
    total = total + counts[i]
  end
  local shape = t:shape()
  shape[1] = total
  local buf = lt.zeros(shape, t:dtype())
  if t:size(1) > 0 then buf:narrow(1, offset + 1, t:size(1)):copy_(t) end
  D.all_reduce(buf, "sum")
  return buf
end

function Metric:_sync(D)
  local by_op = { sum = {}, max = {}, min = {} }
  local nums = { sum = {}, max = {}, min = {} }
  for _, st in ipairs(self._states) do
    if st.kind == "tensor" then
      local t = self._s[st.name]:clone()
      self._s[st.name] = t
      table.insert(by_op[st.reduce], t)
    elseif st.kind == "numbers" then
      table.insert(nums[st.reduce], st.name)
    else
      self._s[st.name] = { all_gather_rows(D, self:_cat(st.name)) }
    end
  end
  for _, op in ipairs({ "sum", "max", "min" }) do
    if #by_op[op] > 0 then D.all_reduce(by_op[op], op) end
    if #nums[op] > 0 then
      local flat = {}
      for _, n in ipairs(nums[op]) do
        for _, v in ipairs(self._s[n]) do flat[#flat + 1] = v end
      end
      flat = D.all_reduce_numbers(flat, op)
      local k = 0
      for _, n in ipairs(nums[op]) do
        local list = {}
        for i = 1, #self._s[n] do
          k = k + 1
          list[i] = flat[k]
        end
        self._s[n] = list
      end
    end
  end
end

-- ---- shared option and input checks --------------------------------------------------------------------

--- Checks a constructor's options against spec (util.check_options), adding the options every metric takes.
function M.options(name, opts, spec)
  spec.sync_on_compute = "boolean"
  local checked = util.check_options(name, opts, spec, 4) -- (not a tail call: levels are the same on every Lua)
  return checked
end

function M.one_of(list)
  return function(v)
    for _, x in ipairs(list) do if v == x then return nil end end
    local q = {}
    for i, x in ipairs(list) do q[i] = '"' .. x .. '"' end
    return fmt("must be one of %s, got %s", table.concat(q, ", "), tostring(v))
  end
end

function M.positive_integer(v)
  if type(v) ~= "number" or v ~= math.floor(v) or v < 1 or v == math.huge then
    return "must be an integer >= 1, got " .. tostring(v)
  end
end

function M.check_tensor(name, what, v)
  if not lt.is_tensor(v) then error(fmt("%s: %s must be a tensor, got %s", name, what, type(v)), 0) end
  return v
end

return M
