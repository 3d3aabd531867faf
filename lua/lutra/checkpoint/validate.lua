-- lutra.checkpoint.validate — checks the contents of a checkpoint after its checksum passed (the checksum
-- says the bytes are what was written, not that what was written is sane). Used by lutra.checkpoint on
-- every read; each error is "<path>: key '<dotted key>': <what is wrong>".
--
-- The rule (docs/reference/checkpoints.md):
--   * a counter (epoch, global_step, each ready/started/processed/completed of a loop's progress, every
--     other number under `loops`, an optimizer state's `step`, a scheduler's `_step_count`, a loader's
--     numbers) is an integer in 0 .. 2^40 (about 1.1e12: far beyond any run; 1e15 is refused);
--     a scheduler's `last_epoch` may also be -1 (PyTorch's "not started");
--   * in each progress, current <= total and completed <= ready, field by field;
--   * epoch is the fit loop's completed epochs or one less (a checkpoint taken at an epoch's end);
--     global_step is the optimizer steps the loops recorded (automatic + manual);
--   * every number of an optimizer's param_groups and of a scheduler's state is finite;
--   * state_dict and grads map names to tensors; an optimizer's state holds tensors and `step` only;
--   * booleans are booleans (should_stop, is_last_batch, resume.epoch_schedulers), strings strings
--     (lutra_version, rng.global, resume.point one of the known points), format_version 1 .. this lutra's.
-- Shapes of optimizer states against the parameters are checked where the parameters are known: by the
-- optimizer's load_state_dict when a run resumes.
local lt = require "lutra"

local M = {}
local fmt, floor = string.format, math.floor

M.COUNT_MAX = 2 ^ 40

local POINTS = { boundary = true, epoch_start = true, batch_start = true, batch_end = true, val = true,
  after_val = true, epoch_end = true }
local COUNTS = { "ready", "started", "processed", "completed" }

local function show(v)
  if type(v) == "number" then
    for digits = 1, 17 do
      local t = fmt("%." .. digits .. "g", v)
      if tonumber(t) == v or v ~= v then return t end
    end
  end
  if type(v) == "string" then return fmt("%q", v) end
  if lt.is_tensor(v) then return "a tensor" end
  return "a " .. type(v)
end

local function check_fn(path)
  local function fail(key, what, v)
    error(fmt("%s: key '%s': %s, got %s", path, key, what, show(v)), 0)
  end
  local C = {}
  function C.count(key, v, lo)
    if type(v) ~= "number" or v ~= floor(v) or v < (lo or 0) or v > M.COUNT_MAX then
      fail(key, fmt("expected an integer in %d..2^40", lo or 0), v)
    end
  end
  function C.finite(key, v)
    if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then fail(key, "expected a finite number", v) end
  end
  function C.kind(key, v, t)
    if type(v) ~= t then fail(key, "expected a " .. t, v) end
  end
  function C.optional(key, v, t)
    if v ~= nil and type(v) ~= t then fail(key, "expected a " .. t, v) end
  end
  function C.tensors(key, v)
    C.kind(key, v, "table")
    for k, t in pairs(v) do
      if type(k) ~= "string" then fail(key, "expected names (strings) as keys", k) end
      if not lt.is_tensor(t) then fail(key .. "." .. k, "expected a tensor", t) end
    end
  end
  -- every number of v finite (tables walked)
  function C.all_finite(key, v)
    if type(v) == "number" then C.finite(key, v)
    elseif type(v) == "table" then
      for k, x in pairs(v) do C.all_finite(key .. "." .. tostring(k), x) end
    end
  end
  C.fail = fail
  return C
end

local function is_progress(t)
  return type(t) == "table" and type(t.current) == "table" and type(t.total) == "table"
end

-- The fit loop's state: counters everywhere, progress tables consistent.
local function check_loops(C, key, v)
  C.kind(key, v, "table")
  for k, x in pairs(v) do
    local kk = key .. "." .. tostring(k)
    if type(x) == "number" then C.count(kk, x)
    elseif type(x) == "table" then
      if is_progress(x) then
        for _, f in ipairs(COUNTS) do
          C.count(kk .. ".current." .. f, x.current[f] or 0)
          C.count(kk .. ".total." .. f, x.total[f] or 0)
          if (x.current[f] or 0) > (x.total[f] or 0) then
            C.fail(kk .. ".current." .. f, fmt("more than total.%s (%s)", f, show(x.total[f] or 0)), x.current[f])
          end
        end
        for _, side in ipairs { "current", "total" } do
          local p = x[side]
          if (p.completed or 0) > (p.ready or 0) then
            C.fail(kk .. "." .. side .. ".completed", fmt("more than %s.ready (%s)", side, show(p.ready or 0)), p.completed)
          end
        end
        if x.is_last_batch ~= nil then C.kind(kk .. ".is_last_batch", x.is_last_batch, "boolean") end
        for k2, y in pairs(x) do
          if k2 ~= "current" and k2 ~= "total" and k2 ~= "is_last_batch" then check_loops(C, kk, { [k2] = y }) end
        end
      else
        check_loops(C, kk, x)
      end
    elseif type(x) ~= "boolean" then -- booleans: is_last_batch and the like
      C.fail(kk, "expected a number, a boolean or a table", x)
    end
  end
end

local function get(t, ...)
  for _, k in ipairs { ... } do
    if type(t) ~= "table" then return nil end
    t = t[k]
  end
  return t
end

local function check_optimizer(C, key, o)
  C.kind(key, o, "table")
  C.kind(key .. ".param_groups", o.param_groups, "table")
  for g, pg in pairs(o.param_groups) do
    local gk = key .. ".param_groups." .. tostring(g)
    C.kind(gk, pg, "table")
    C.kind(gk .. ".params", pg.params, "table")
    for i, id in pairs(pg.params) do C.count(gk .. ".params." .. tostring(i), id, 1) end
    for k, x in pairs(pg) do if k ~= "params" then C.all_finite(gk .. "." .. tostring(k), x) end end
  end
  if o.state == nil then return end
  C.kind(key .. ".state", o.state, "table")
  for id, st in pairs(o.state) do
    local sk = key .. ".state." .. tostring(id)
    C.kind(sk, st, "table")
    for k, x in pairs(st) do
      if k == "step" then C.count(sk .. ".step", x)
      elseif not lt.is_tensor(x) then C.fail(sk .. "." .. tostring(k), "expected a tensor", x) end
    end
  end
end

local function check_scheduler(C, key, s)
  C.kind(key, s, "table")
  for k, x in pairs(s) do
    local kk = key .. "." .. tostring(k)
    if k == "last_epoch" then C.count(kk, x, -1)
    elseif k == "_step_count" then C.count(kk, x)
    else C.all_finite(kk, x) end
  end
end

--- validate(doc, path, format_version): raises "<path>: key '<key>': ..." on the first bad field.
function M.validate(doc, path, format_version)
  local C = check_fn(path)
  if doc.format_version ~= nil then C.count("format_version", doc.format_version, 1) end
  if (doc.format_version or 1) > format_version then
    C.fail("format_version", fmt("written by a newer lutra (this one reads format %d)", format_version), doc.format_version)
  end
  C.optional("lutra_version", doc.lutra_version, "string")
  if doc.state_dict ~= nil then C.tensors("state_dict", doc.state_dict) end
  if doc.grads ~= nil then C.tensors("grads", doc.grads) end
  if doc.epoch ~= nil then C.count("epoch", doc.epoch) end
  if doc.global_step ~= nil then C.count("global_step", doc.global_step) end
  C.optional("should_stop", doc.should_stop, "boolean")
  if doc.optimizer_states ~= nil then
    C.kind("optimizer_states", doc.optimizer_states, "table")
    for i, o in pairs(doc.optimizer_states) do check_optimizer(C, "optimizer_states." .. tostring(i), o) end
  end
  if doc.lr_schedulers ~= nil then
    C.kind("lr_schedulers", doc.lr_schedulers, "table")
    for i, s in pairs(doc.lr_schedulers) do check_scheduler(C, "lr_schedulers." .. tostring(i), s) end
  end
  if doc.rng ~= nil then
    C.kind("rng", doc.rng, "table")
    C.optional("rng.global", doc.rng.global, "string")
  end
  if doc.resume ~= nil then
    C.kind("resume", doc.resume, "table")
    local p = doc.resume.point
    if p ~= nil and not POINTS[p] then C.fail("resume.point", "expected a resume point (boundary, batch_end, ...)", p) end
    if doc.resume.epoch ~= nil then C.count("resume.epoch", doc.resume.epoch) end
    C.optional("resume.epoch_schedulers", doc.resume.epoch_schedulers, "boolean")
  end
  if doc.loaders ~= nil then
    C.kind("loaders", doc.loaders, "table")
    local function loader(key, l)
      if l == false then return end
      C.kind(key, l, "table")
      for k, x in pairs(l) do
        if type(x) == "number" then C.count(key .. "." .. tostring(k), x) end
      end
    end
    if doc.loaders.train ~= nil then loader("loaders.train", doc.loaders.train) end
    if doc.loaders.val ~= nil then
      C.kind("loaders.val", doc.loaders.val, "table")
      for i, l in pairs(doc.loaders.val) do loader("loaders.val." .. tostring(i), l) end
    end
  end
  if doc.callbacks ~= nil then
    C.kind("callbacks", doc.callbacks, "table")
    for k, s in pairs(doc.callbacks) do C.kind("callbacks." .. tostring(k), s, "table") end
  end
  if doc.metrics ~= nil then C.kind("metrics", doc.metrics, "table") end
  local fit = get(doc, "loops", "fit_loop")
  if doc.loops ~= nil then
    C.kind("loops", doc.loops, "table")
    if fit ~= nil then check_loops(C, "loops.fit_loop", fit) end
  end
  if type(fit) == "table" then
    -- the counters the trainer reports come from the loops: the top-level copies must agree with them
    local done = get(fit, "epoch_progress", "current", "completed")
    if doc.epoch ~= nil and done ~= nil and (doc.epoch > done or doc.epoch < done - 1) then
      C.fail("epoch", fmt("inconsistent with loops.fit_loop.epoch_progress.current.completed (%s)", show(done)), doc.epoch)
    end
    local auto = get(fit, "epoch_loop.batch_loop.optimizer_loop.optim_progress", "optimizer", "step", "total", "completed")
    local manual = get(fit, "epoch_loop.batch_loop.manual_loop.optim_step_progress", "total", "completed")
    local steps = (auto or 0) + (manual or 0)
    if doc.global_step ~= nil and (auto ~= nil or manual ~= nil) and doc.global_step ~= steps then
      C.fail("global_step", fmt("inconsistent with the optimizer steps the loops recorded (%s)", show(steps)),
        doc.global_step)
    end
  end
end

return M
