-- lutra.trainer.profilers — lt.profilers: where a fit's wall time goes (Lightning 1.6's profilers).
--
--   local trainer = lt.Trainer{profiler = "simple"}          -- or lt.profilers.SimpleProfiler{filename = "prof"}
--   trainer:fit(model, loader)                               -- prints the table at the end (unless quiet)
--   for _, r in ipairs(trainer.profiler:summary()) do print(r.action, r.count, r.mean, r.total) end
--
-- The timing points are the C loops' phases (data fetch, training_step, backward, optimizer step, zero_grad,
-- gradient clipping, the evaluation steps: core/src/loop_fit.c, loop_eval.c) and every hook call of the one
-- dispatcher (core/bind/l_loop.c: each hook of each callback and of the model is its own action). Time is
-- exclusive: an action's row holds the time spent in it and not in an action it called, so the rows, with
-- "[Loop] other" (the loops' own bookkeeping between actions), add up to the wall time of the run's advances.
-- With no profiler (the default, PassThroughProfiler) the loops test one NULL pointer per point.
--
-- AdvancedProfiler adds LuaJIT's sampling profiler (jit.profile: the Lua functions and VM states where the
-- samples fell) and a row per C op: "[op] matmul" for the forward ops (timed at the binding's op entry,
-- core/bind/l_util.c) and "[backward] <node>" for the autograd backward kernels (core/src/autograd.c), exclusive
-- like every row (an op's time is not in its training_step's row).
local lt = require "lutra"
local util = require "lutra.utils.check"

local M = {}
local fmt = string.format

-- ---- the base: rows from the loops' profiler --------------------------------------------------------------

local Profiler = {}
Profiler.__index = Profiler

local function new_class(name, base)
  local cls = setmetatable({ __name = name }, { __index = base })
  cls.__index = cls
  return cls
end

-- The display names of the dispatch targets (core/bind/l_loop.c reads env.prof_names): a callback's
-- state key, the model's class name.
function M._set_names(trainer)
  local env = trainer._env
  if not env or not trainer.profiler or not trainer.profiler._active then return end
  local cbm = require "lutra.callbacks"
  local names = {}
  for i, cb in ipairs(env.cb_order or trainer._cb_order or {}) do names[i] = cbm.state_key(cb) end
  local function class_name(obj, default)
    local mt = type(obj) == "table" and getmetatable(obj)
    return type(mt) == "table" and type(mt.__name) == "string" and mt.__name
      or (type(obj) == "table" and type(rawget(obj, "__name")) == "string" and rawget(obj, "__name"))
      or default
  end
  names.model = class_name(trainer.model, "LightningModule")
  names.datamodule = class_name(rawget(trainer, "datamodule"), "DataModule")
  env.prof_names = names
end

function Profiler:_attach(trainer)
  if self._trainer and self._trainer ~= trainer then
    error(self.__name .. ": this profiler belongs to another Trainer", 3)
  end
  self._trainer = trainer
  trainer._lp:profiler(true)
end

-- rows with their mean, the time-ordered list (a row that never ran is left out)
local function finish_rows(raw)
  local rows = {}
  for _, r in ipairs(raw) do
    if r.count > 0 or r.total > 0 then
      rows[#rows + 1] = { action = r.action, count = r.count, total = r.total,
        mean = r.count > 0 and r.total / r.count or 0 }
    end
  end
  table.sort(rows, function(a, b)
    if a.total ~= b.total then return a.total > b.total end
    return a.action < b.action
  end)
  return rows
end

--- profiler:summary() -> rows {action=, count=, mean=, total=} (seconds, exclusive), largest total first.
function Profiler:summary()
  if not self._trainer then return {} end
  return finish_rows(self._trainer._lp:profiler_rows())
end

--- profiler:last_advance() -> the same rows for the last run:advance only (a frame-budgeted host's table).
function Profiler:last_advance() return finish_rows(self._last or {}) end

-- The clock runs while a run advances (trainer.lua's Run:advance); per-advance rows are the difference.
function Profiler:_clock(on)
  local t = self._trainer
  if not t then return end
  if on then
    if self._running then return end
    self._running = true
    self._before = t._lp:profiler_rows()
    t._lp:profiler_clock(true)
    if self._start_extra then self:_start_extra() end
  else
    if not self._running then return end
    self._running = false
    t._lp:profiler_clock(false)
    if self._stop_extra then self:_stop_extra() end
    local now, before, last = t._lp:profiler_rows(), self._before or {}, {}
    for i, r in ipairs(now) do
      local b = before[i] or { count = 0, total = 0 }
      last[i] = { action = r.action, count = r.count - b.count, total = r.total - b.total }
    end
    self._last = last
  end
end

--- profiler:reset(): every count and time back to zero.
function Profiler:reset()
  if self._trainer then self._trainer._lp:profiler_reset() end
  self._last = nil
  if self._reset_extra then self:_reset_extra() end
end

local function pad(s, n) return s .. string.rep(" ", n - #s) end

-- The table of rows: action, mean, calls, total, share of the wall time.
local function table_text(title, rows)
  local wall, calls = 0, 0
  for _, r in ipairs(rows) do wall, calls = wall + r.total, calls + r.count end
  local w = #"Action"
  for _, r in ipairs(rows) do if #r.action > w then w = #r.action end end
  local head = fmt("|  %s  |  Mean duration (s)  |  Num calls  |  Total time (s)  |  Percentage %%  |", pad("Action", w))
  local rule = string.rep("-", #head)
  local out = { title, "", rule, head, rule,
    fmt("|  %s  |  %-17s  |  %-9d  |  %-14.6g  |  %-12s  |", pad("Total", w), "-", calls, wall, "100 %"), rule }
  for _, r in ipairs(rows) do
    out[#out + 1] = fmt("|  %s  |  %-17.6g  |  %-9d  |  %-14.6g  |  %-12.4g  |", pad(r.action, w), r.mean, r.count,
      r.total, wall > 0 and 100 * r.total / wall or 0)
  end
  out[#out + 1] = rule
  return table.concat(out, "\n")
end

--- profiler:describe() -> the report as text (what the end of fit prints).
function Profiler:describe()
  local s = table_text(fmt("%s Profiler Report", (self._stage or "fit"):upper()), self:summary())
  if self._describe_extra then s = s .. "\n" .. self:_describe_extra() end
  return s
end

-- End of a stage (trainer.lua): the report to the file (dirpath/filename) or, unless lutra is quiet, stderr.
function Profiler:_report(stage)
  self._stage = stage
  if not self.filename and not lt.is_interactive() then return end -- quiet: nobody to print for
  local text = self:describe()
  if self.filename then
    local dir = self.dirpath or (self._trainer and self._trainer.default_root_dir) or "."
    lt._io.mkdirs(dir)
    local path = fmt("%s/%s-%s.txt", dir, stage, self.filename)
    local ok, err = pcall(lt._io.write_atomic, path, text .. "\n") -- atomically, as every whole file lutra writes
    if not ok then error(fmt("%s: cannot write %s", self.__name, (tostring(err):gsub("^write: ", ""))), 0) end
    self.report_path = path
  else
    for line in (text .. "\n"):gmatch("(.-)\n") do lt._note(line) end
  end
end

local OPTS = { dirpath = "string", filename = "string" }

-- ---- SimpleProfiler ----------------------------------------------------------------------------------------

local SimpleProfiler = new_class("SimpleProfiler", Profiler)
M.SimpleProfiler = SimpleProfiler

--- lt.profilers.SimpleProfiler{dirpath=nil, filename=nil}
setmetatable(SimpleProfiler, { __index = Profiler, __call = function(cls, opts)
  opts = util.check_options("SimpleProfiler", opts, OPTS)
  return setmetatable({ dirpath = opts.dirpath, filename = opts.filename, _active = true }, cls)
end })

-- ---- AdvancedProfiler ----------------------------------------------------------------------------------------

local AdvancedProfiler = new_class("AdvancedProfiler", Profiler)
M.AdvancedProfiler = AdvancedProfiler

local ADV_OPTS = { dirpath = "string", filename = "string", interval = "integer", top = "integer" }

--- lt.profilers.AdvancedProfiler{dirpath=nil, filename=nil, interval=1 (ms between samples), top=20}
setmetatable(AdvancedProfiler, { __index = Profiler, __call = function(cls, opts)
  opts = util.check_options("AdvancedProfiler", opts, ADV_OPTS)
  local interval, top = opts.interval or 1, opts.top or 20
  if interval < 1 then error("AdvancedProfiler: option 'interval' must be >= 1 (milliseconds), got " .. interval, 2) end
  if top < 1 then error("AdvancedProfiler: option 'top' must be >= 1, got " .. top, 2) end
  local ok, jp = pcall(require, "jit.profile")
  return setmetatable({ dirpath = opts.dirpath, filename = opts.filename, interval = interval, top = top,
    _active = true, _jp = ok and jp or nil, _samples = {}, _vmstates = {} }, cls)
end })

local VMSTATE = { N = "compiled Lua", I = "interpreted Lua", C = "C code", G = "garbage collector", J = "JIT compiler" }

function AdvancedProfiler:_start_sampling()
  local jp = self._jp
  if not jp then return end
  local samples, states = self._samples, self._vmstates
  require("lutra.core")._sigprof_quiet() -- a signal still pending at stop must not end the process (l_prof.c)
  jp.start("fi" .. self.interval, function(thread, n, vmstate)
    local where = jp.dumpstack(thread, "F", 1)
    samples[where] = (samples[where] or 0) + n
    states[vmstate] = (states[vmstate] or 0) + n
  end)
end

function AdvancedProfiler:_start_extra()
  self._trainer._lp:profiler_ops(true)
  self:_start_sampling()
end

function AdvancedProfiler:_stop_extra()
  if self._jp then self._jp.stop() end
  self._trainer._lp:profiler_ops(false)
end

function AdvancedProfiler:_reset_extra() self._samples, self._vmstates = {}, {} end

--- profiler:lua_functions() -> {{name=, samples=}, ...}: where jit.profile's samples fell, most first
--- (empty under PUC Lua, which has no jit.profile).
function AdvancedProfiler:lua_functions()
  local list = {}
  for name, n in pairs(self._samples) do list[#list + 1] = { name = name, samples = n } end
  table.sort(list, function(a, b) if a.samples ~= b.samples then return a.samples > b.samples end return a.name < b.name end)
  return list
end

-- The summary's rows whose action starts with prefix, as {op=, count=, mean=, total=} (largest total first).
local function op_rows(self, prefix)
  local list = {}
  for _, r in ipairs(self:summary()) do
    if r.action:sub(1, #prefix) == prefix then
      list[#list + 1] = { op = r.action:sub(#prefix + 1), count = r.count, mean = r.mean, total = r.total }
    end
  end
  return list
end

--- profiler:ops() -> {{op=, count=, mean=, total=}, ...}: the forward ops (the summary's "[op] name" rows).
function AdvancedProfiler:ops() return op_rows(self, "[op] ") end

--- profiler:kernels() -> {{op=, count=, mean=, total=}, ...}: the autograd backward kernels ("[backward] name").
function AdvancedProfiler:kernels() return op_rows(self, "[backward] ") end

function AdvancedProfiler:_describe_extra()
  local out = { "" }
  if not self._jp then
    out[#out + 1] = "Lua functions: no jit.profile in this Lua (LuaJIT only)"
  else
    local total = 0
    for _, n in pairs(self._vmstates) do total = total + n end
    out[#out + 1] = fmt("Lua sampling profiler (jit.profile, every %d ms): %d samples", self.interval, total)
    local states = {}
    for s, n in pairs(self._vmstates) do states[#states + 1] = fmt("%s %.1f%%", VMSTATE[s] or s, 100 * n / total) end
    table.sort(states)
    if #states > 0 then out[#out + 1] = "  VM states: " .. table.concat(states, ", ") end
    for i, f in ipairs(self:lua_functions()) do
      if i > self.top then break end
      out[#out + 1] = fmt("  %6.2f%%  %6d  %s", 100 * f.samples / total, f.samples, f.name)
    end
  end
  return table.concat(out, "\n")
end

-- ---- PassThroughProfiler (the default: nothing measured) ----------------------------------------------------

local PassThroughProfiler = new_class("PassThroughProfiler", Profiler)
M.PassThroughProfiler = PassThroughProfiler

--- lt.profilers.PassThroughProfiler{}
setmetatable(PassThroughProfiler, { __index = Profiler, __call = function(cls, opts)
  util.check_options("PassThroughProfiler", opts, {})
  return setmetatable({ _active = false }, cls)
end })
function PassThroughProfiler:_attach(trainer) self._trainer = nil; self._owner = trainer end
function PassThroughProfiler:_report() end
function PassThroughProfiler:describe() return "" end

--- The Trainer's profiler option: nil, "simple", "advanced", "pass" or a profiler object.
function M._from_option(v)
  if v == nil or v == "pass" then return PassThroughProfiler {} end
  if v == "simple" then return SimpleProfiler {} end
  if v == "advanced" then return AdvancedProfiler {} end
  return v
end

function M._check_option(v)
  if v == nil or v == "simple" or v == "advanced" or v == "pass" then return nil end
  if type(v) == "table" and type(v._clock) == "function" and type(v.summary) == "function" then return nil end
  return 'must be "simple", "advanced" or a profiler (lt.profilers.SimpleProfiler{...})'
end

return require("lutra.names").strict(M, "lt.profilers")
