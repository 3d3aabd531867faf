-- lutra.background (lt.background): a fit in a Lua state and OS thread of its own, which the host steers and
-- pulls weights from (docs/reference/background.md). The job is an lt.thread worker running M._run_job; the
-- record both states share (status, stop flag, double-buffered weights) is C: core/bind/l_background.c over
-- core/src/snapshot.c. Nothing of the job runs in the host's state: its garbage and collector are its own.
local core = require "lutra.core"
local compat = require "lutra._compat"
local pack, unpack = compat.pack, compat.unpack
local fmt = string.format

local M = {}

-- ---- the state dict as a list, with where each tensor lives --------------------------------------------

-- The model's state-dict tensors in state_dict_keys order (the tensors themselves, not detached copies:
-- load_into writes into them), with each one's owner table and key when the walk can tell them, so that a
-- later call checks with one comparison per tensor that the model still holds the same tensors.
local function collect(model)
  local mod = require "lutra.nn.module"
  local names, tensors, by_name = {}, {}, {}
  local paths = {}
  local function add(name, t)
    names[#names + 1], tensors[#tensors + 1], by_name[name] = name, t, t
  end
  mod.walk(model, {
    module = function(t, path) paths[path or ""] = t end,
    param = add, buffer = add, tied = add,
  })
  local owners, keys = {}, {}
  for i, name in ipairs(names) do
    local path, key = name:match("^(.*)%.([^.]*)$")
    if not path then path, key = "", name end
    local owner = paths[path]
    if owner ~= nil then
      local k = key
      if rawget(owner, k) ~= tensors[i] then k = tonumber(key) end
      if k ~= nil and rawget(owner, k) == tensors[i] then owners[i], keys[i] = owner, k end
    end
  end
  return { names = names, tensors = tensors, by_name = by_name, owners = owners, keys = keys }
end

-- true while every tensor is still where it was found (a tensor without a known place is found again)
local function still_same(e)
  local owners, keys, tensors = e.owners, e.keys, e.tensors
  for i = 1, #tensors do
    local o = owners[i]
    if o == nil or rawget(o, keys[i]) ~= tensors[i] then return false end
  end
  return true
end

local function shape_str(shape)
  return "[" .. table.concat(shape, " x ") .. "]"
end

-- ---- in the job's state -------------------------------------------------------------------------------

local function traceback(e)
  return { e, debug.traceback("", 2) }
end

local function run(job, setup, ...)
  local lt = require "lutra"
  -- a stop is how a job ends, not an interruption to continue: the fit's "continue with trainer:fit" note is
  -- not said (this state's own lt; the host's is untouched)
  local note = lt._note
  rawset(lt, "_note", function(line)
    if not line:match("^lutra: fit interrupted") then note(line) end
  end)
  -- and the fit's clearing of the process's interrupt flag after a stop would swallow a Ctrl-C meant for the
  -- host: the job stops on its own flag (core/bind/l_background.c), never on that one
  rawset(lt, "interrupt_clear", function() end)
  local r = pack(setup(...))
  local model, trainer, train, val = r[1], r[2], r[3], r[4]
  local is_trainer = type(trainer) == "table" and type(trainer._base_callbacks) == "table"
  if type(model) ~= "table" or not is_trainer or train == nil then
    local got = {}
    for i = 1, math.max(r.n, 3) do got[i] = type(r[i]) end
    error(fmt("lt.background: setup must return model, trainer, train_loader[, val_loader], got %s",
      table.concat(got, ", ")), 0)
  end
  local e = collect(model)
  job:_layout(e.names, e.tensors)
  job:_publish(e.tensors, trainer.global_step or 0)
  job:_set_state("running")
  local function publish()
    if not still_same(e) then
      local again = collect(model)
      for i, name in ipairs(e.names) do
        if not again.by_name[name] then error(fmt("lt.background: the job's model lost its key '%s'", name), 0) end
        again.tensors[i] = again.by_name[name]
      end
      again.names = e.names
      e = again
    end
    job:_publish(e.tensors, trainer.global_step)
  end
  -- at each step boundary (after the optimizer step): the counters, and weights when the host asked
  local Publisher = lt.callbacks.Callback:extend("BackgroundPublisher")
  function Publisher.on_train_batch_end(_, tr)
    if job:_step(tr.global_step, tr.current_epoch) then publish() end
  end
  local cbs = trainer._base_callbacks
  cbs[#cbs + 1] = Publisher {}
  trainer:fit(model, train, val)
  local stopped = trainer.interrupted
  if stopped and trainer._run then
    -- a stop ends the fit as an interrupt (on_exception ran in fit); the job does not continue it
    trainer._lp:call_hook("teardown", "fit")
    trainer._run = nil
    trainer:_end_run("interrupted")
  end
  job:_step(trainer.global_step, trainer.current_epoch)
  publish()
  job:_set_state(stopped and "stopped" or "done")
end

--- The worker's side: runs setup(...) and the fit, records how it ended.
function M._run_job(id, setup, ...)
  local job = core._bg_attach(id)
  local args = pack(...)
  local ok, err = compat.xpcall(function() return run(job, setup, unpack(args, 1, args.n)) end, traceback)
  if not ok then
    local msg, tb = err, nil
    if type(err) == "table" then msg, tb = err[1], err[2] end
    tb = tb and tb:gsub("^\n?stack traceback:", "") or ""
    job:_set_state("error", fmt("%s\njob traceback:%s", tostring(msg), tb))
  end
end

-- ---- the host's side ----------------------------------------------------------------------------------

local Job = {}
Job.__index = Job
Job.__name = "lt.background job"

-- carried into the worker: only its arguments and require
local function job_main(id, setup, ...)
  return require("lutra.background")._run_job(id, setup, ...)
end

--- lt.background(setup, ...) -> job: setup(...) runs in a new state and returns model, trainer,
--- train_loader[, val_loader]; the job runs trainer:fit there.
function M.background(setup, ...)
  if type(setup) ~= "function" then
    error("lt.background: argument #1 must be a function (setup), got " .. type(setup), 2)
  end
  local c, id = core._bg_new()
  local ok, w = pcall(core._thread_spawn, job_main, id, setup, ...)
  if not ok then error((tostring(w):gsub("lt%.thread%.spawn", "lt.background")), 2) end
  return setmetatable({ _c = c, _w = w, _models = setmetatable({}, { __mode = "k" }) }, Job)
end

-- the job's state when its thread ended without recording one (it could not start, or was stopped hard)
local function check_thread(self)
  local st = self._c:_status()
  if (st.state == "starting" or st.state == "running") and self._w:status() == "error" then
    local _, err = pcall(self._w.join, self._w)
    self._c:_set_state("error", tostring(err))
  end
end

--- job:status([t]) -> {state = "starting"|"running"|"done"|"stopped"|"error", global_step, current_epoch,
--- error}; t, when given, is filled instead of a new table.
function Job:status(t)
  if self._w:status() == "error" then check_thread(self) end
  return self._c:_status(t)
end

-- matches the host's model against the job's layout (names, shapes, dtypes); the tensors in the job's order
local function match(self, model)
  local layout = self._layout
  local e = collect(model)
  local list, seen = {}, {}
  for i, l in ipairs(layout) do
    local t = e.by_name[l.name]
    if t == nil then
      error(fmt("load_into: key '%s': the job has %s %s, the model has no such key", l.name, shape_str(l.shape),
        l.dtype), 3)
    end
    local shape = t:size()
    local mine = shape_str(shape)
    if mine ~= shape_str(l.shape) or t:dtype() ~= l.dtype then
      error(fmt("load_into: key '%s': the job has %s %s, the model has %s %s", l.name, shape_str(l.shape), l.dtype,
        mine, t:dtype()), 3)
    end
    if not t:is_contiguous() then
      error(fmt("load_into: key '%s': the model's tensor is not contiguous", l.name), 3)
    end
    list[i], seen[l.name] = t, true
  end
  for i, name in ipairs(e.names) do
    if not seen[name] then
      local t = e.tensors[i]
      error(fmt("load_into: key '%s': the model has %s %s, the job has no such key", name, shape_str(t:size()),
        t:dtype()), 3)
    end
  end
  -- the owners and keys in the job's order, for still_same
  local owners, keys, index = {}, {}, {}
  for i, name in ipairs(e.names) do index[name] = i end
  for i, l in ipairs(layout) do
    local j = index[l.name]
    owners[i], keys[i] = e.owners[j], e.keys[j]
  end
  return { tensors = list, owners = owners, keys = keys }
end

--- job:load_into(model) -> the global_step of the weights copied, or nil, "starting" before the job's first
--- snapshot. Copies into the model's own tensors; allocates nothing after the first call for a model.
function Job:load_into(model)
  if type(model) ~= "table" then error("load_into: the model must be a table, got " .. type(model), 2) end
  if not self._layout then
    self._layout = self._c:_layout_get()
    if not self._layout then
      if self._w:status() == "error" then check_thread(self) end
      return self._c:_ask() -- nil, "starting"
    end
  end
  local e = self._models[model]
  if e == nil or not still_same(e) then
    e = match(self, model)
    self._models[model] = e
  end
  return self._c:_load(e.tensors)
end

--- job:send(v): v into the job's queue (the model reads it with lt.thread.parent:receive(0)).
function Job:send(v)
  return self._w:send(v)
end

--- job:receive([timeout_s]): a value the job sent with lt.thread.parent:send(v).
function Job:receive(timeout_s)
  return self._w:receive(timeout_s)
end

--- job:stop(): the fit ends at its next batch boundary, as an interrupted fit (on_exception, teardown).
function Job:stop()
  self._c:_stop()
end

--- job:join() -> the final status table; raises the job's error (with its traceback) when it failed.
function Job:join()
  local ok, err = pcall(self._w.join, self._w)
  local st = self._c:_status()
  if not ok and st.state ~= "error" then
    self._c:_set_state("error", tostring(err))
    st = self._c:_status()
  end
  if st.state == "error" then error("lt.background: the job failed: " .. st.error, 2) end
  return st
end

--- job:close(): stops the job at once (as a collected handle: lt.thread's stop) and waits for its thread.
function Job:close()
  self._w:close()
end

Job.__tostring = function(self)
  return fmt("lt.background job (%s)", self._c:_status().state)
end

return M
