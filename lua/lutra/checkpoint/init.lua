-- lutra.checkpoint — checkpoint files (safetensors + JSON metadata), lt.save / lt.load, and the trainer's
-- checkpoint contents (dump / restore).
--
--   local ckpt = require "lutra.checkpoint"
--   ckpt.write("run/epoch=3.ckpt", { epoch = 3, state_dict = model_sd, optimizer_states = {...}, ... })
--   local t = ckpt.read("run/epoch=3.ckpt")            -- the same table back (tensors are fresh copies)
--   lt.save("weights.safetensors", model)               -- weights alone (or a {name = tensor} table)
--   local sd = lt.load("weights.safetensors")           -- {name = tensor}
--   lt.load("weights.safetensors", model)               -- into the model; errors name the parameter
--   local s = lt.save_bytes(model); lt.load_bytes(s, model)  -- the same file as a Lua string
--
-- File layout: one safetensors file (any safetensors reader opens it). Every tensor found anywhere in the
-- checkpoint table is a safetensors tensor named by its path of keys joined with "." —
-- `state_dict.<param name>`, `optimizer_states.<i>.state.<param id>.exp_avg` — and the rest of the table
-- is one JSON document in __metadata__ under the key "lutra", where each tensor is replaced by
-- {"$tensor": "<name>"}. The C layer adds "format": "lutra" and "lutra_checksum" (CRC-32 of the whole
-- file) and writes atomically (temp file, fsync, rename, fsync of the directory).
--
-- JSON encoding of Lua values (decoded back to the same values): numbers with the shortest of 15..17
-- significant digits that reads back exactly, non-finite numbers as {"$float": "inf" | "-inf" | "nan"};
-- a table whose keys are exactly 1..n is an array; any other table an object with its keys sorted,
-- where an integer key n is written "#n" and a string key starting with "#" or "$" gets one more "#" in
-- front. Functions, userdata (other than tensors), cycles and float keys are errors naming the path.
-- Decoding is Jansson's (lt._io.json_decode, core/bind/l_json.c: no Lua module outside lutra, and an
-- allocation failure is an out-of-memory error, never an altered document); encoding is here, writing
-- numbers with as many digits as they need to read back exactly. After decoding, the contents are
-- checked (lua/lutra/checkpoint/validate.lua): types, ranges, consistency, each error naming the key.
local lt = require "lutra"
local core = require "lutra.core"
local validate = require "lutra.checkpoint.validate"

local C = lt._io
local IO_stat = lt._io.stat
local M = {}

local fmt, concat = string.format, table.concat
local floor, huge = math.floor, math.huge

-- An error message without the "file.lua:N: " position Lua adds.
local function bare(err)
  return (tostring(err):gsub("^[^:\n]*%.lua:%d+: ", ""))
end

-- "load: <path>: what" (the C layer's form) as "<new>: <path>: what".
local function reword(err, op, new)
  local s = bare(err)
  if s:sub(1, #op + 2) == op .. ": " then return new .. ": " .. s:sub(#op + 3) end
  return new .. ": " .. s
end

M.FORMAT_VERSION = 1

-- ---- JSON encoding ------------------------------------------------------------------------------

local ESC = { ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t", ["\b"] = "\\b",
  ["\f"] = "\\f" }
local function quote(s)
  return '"' .. s:gsub('[%c"\\]', function(ch) return ESC[ch] or fmt("\\u%04x", ch:byte()) end) .. '"'
end

local function number_text(v)
  if v ~= v then return '{"$float":"nan"}' end
  if v == huge then return '{"$float":"inf"}' end
  if v == -huge then return '{"$float":"-inf"}' end
  if v == floor(v) and v > -2 ^ 53 and v < 2 ^ 53 then return fmt("%.0f", v) end
  for digits = 15, 17 do
    local s = fmt("%." .. digits .. "g", v)
    if tonumber(s) == v then return s end
  end
  return fmt("%.17g", v)
end

local function key_text(k, path)
  if type(k) == "number" then
    if k ~= floor(k) or k ~= k or k == huge or k == -huge then
      error(fmt("checkpoint: cannot save %s: key %s is not an integer or a string", path, tostring(k)), 0)
    end
    return quote("#" .. fmt("%.0f", k))
  elseif type(k) == "string" then
    local c = k:sub(1, 1)
    if c == "#" or c == "$" then return quote("#" .. k) end
    return quote(k)
  end
  error(fmt("checkpoint: cannot save %s: a key of type %s (keys are strings or integers)", path, type(k)), 0)
end

local function join(path, k)
  local ks = type(k) == "number" and fmt("%.0f", k) or tostring(k)
  if path == "" then return ks end
  return path .. "." .. ks
end

local function is_array(t)
  local n = 0
  for k in pairs(t) do
    if type(k) ~= "number" or k < 1 or k ~= floor(k) then return false end
    n = n + 1
  end
  return n > 0 and n == #t and t[n] ~= nil
end

-- Encodes v as JSON; on_tensor(t, name) is called for each tensor and returns nothing.
local function encode(v, on_tensor)
  local out, active = {}, {}
  local function enc(x, path)
    local tx = type(x)
    if tx == "nil" then out[#out + 1] = "null"
    elseif tx == "boolean" then out[#out + 1] = x and "true" or "false"
    elseif tx == "number" then out[#out + 1] = number_text(x)
    elseif tx == "string" then out[#out + 1] = quote(x)
    elseif lt.is_tensor(x) then
      if not on_tensor then error(fmt("checkpoint: cannot save %s: a tensor where only plain values are allowed", path), 0) end
      on_tensor(x, path)
      out[#out + 1] = '{"$tensor":' .. quote(path) .. "}"
    elseif tx == "table" then
      if active[x] then error(fmt("checkpoint: cannot save %s: the table contains itself (a cycle)", path), 0) end
      active[x] = true
      if is_array(x) then
        out[#out + 1] = "["
        for i = 1, #x do
          if i > 1 then out[#out + 1] = "," end
          enc(x[i], join(path, i))
        end
        out[#out + 1] = "]"
      else
        local keys = {}
        for k in pairs(x) do keys[#keys + 1] = k end
        table.sort(keys, function(a, b)
          local ta, tb = type(a), type(b)
          if ta ~= tb then return ta == "number" end
          return a < b
        end)
        out[#out + 1] = "{"
        for i, k in ipairs(keys) do
          if i > 1 then out[#out + 1] = "," end
          out[#out + 1] = key_text(k, join(path, k))
          out[#out + 1] = ":"
          enc(x[k], join(path, k))
        end
        out[#out + 1] = "}"
      end
      active[x] = nil
    else
      error(fmt("checkpoint: cannot save %s: a %s (checkpoints hold tensors, numbers, strings, booleans and tables)",
        path == "" and "the checkpoint" or path, tx), 0)
    end
  end
  enc(v, "")
  return concat(out)
end
M.encode = encode

-- ---- JSON decoding ------------------------------------------------------------------------------

local FLOATS = { nan = 0 / 0, inf = huge, ["-inf"] = -huge }

-- Restores what encode changed; tensors[name] gives the tensor for a placeholder. what names the file.
local function restore(v, tensors, what)
  if type(v) ~= "table" then return v end
  local tname, fname = v["$tensor"], v["$float"]
  if tname ~= nil and next(v, next(v)) == nil then
    local t = tensors and tensors[tname]
    if not t then error(fmt("%s: the metadata refers to tensor '%s', which the file does not hold", what, tostring(tname)), 0) end
    return t
  end
  if fname ~= nil and next(v, next(v)) == nil then
    local x = FLOATS[fname]
    if not x then error(fmt("%s: the metadata holds an unknown float '%s'", what, tostring(fname)), 0) end
    return x
  end
  local r = {}
  for k, x in pairs(v) do
    local key = k
    if type(k) == "string" and k:sub(1, 1) == "#" then
      local rest = k:sub(2)
      if rest:match("^%-?%d+$") then key = tonumber(rest) else key = rest end
    end
    r[key] = restore(x, tensors, what)
  end
  return r
end

--- decode(json_text[, tensors, what]) -> value (the inverse of encode).
function M.decode(text, tensors, what)
  what = what or "checkpoint"
  local v, msg, kind = C.json_decode(text)
  if kind == "memory" then error(fmt("%s: %s (the 'lutra' metadata)", what, msg), 0) end
  if kind then error(fmt("%s: the 'lutra' metadata is not valid JSON (%s)", what, msg), 0) end
  return restore(v, tensors, what)
end

-- ---- files --------------------------------------------------------------------------------------

-- The names, tensors and metadata of a checkpoint table (what the C layer writes); name is for messages.
local function flatten(file, tbl)
  if type(tbl) ~= "table" then error("save: " .. file .. ": expected a table to save, got " .. type(tbl), 3) end
  local names, tensors, seen = {}, {}, {}
  local ok, doc = pcall(encode, tbl, function(t, name)
    if seen[name] then error(fmt("checkpoint: cannot save: two tensors named '%s'", name), 0) end
    seen[name] = true
    names[#names + 1] = name
    tensors[#tensors + 1] = t
  end)
  if not ok then error("save: " .. file .. ": " .. tostring(doc):gsub("^checkpoint: ", ""), 3) end
  return names, tensors, { lutra = doc }
end

--- write(path, tbl): tbl's tensors (anywhere inside) as safetensors tensors, the rest as JSON. Atomic.
function M.write(path, tbl)
  if type(path) ~= "string" then error("save: expected a file path (string), got " .. type(path), 2) end
  C.save(path, flatten(path, tbl))
end

--- write_bytes(tbl) -> string: the file write would make, as bytes.
function M.write_bytes(tbl)
  local names, tensors, meta = flatten("(bytes)", tbl)
  return C.save_bytes(names, tensors, meta)
end

--- read(path) -> tbl, info. info = {lutra = true|false, names = {...}, tensors = {name = tensor},
--- checksum_verified}. A safetensors file from another writer (no "lutra" metadata) gives tbl = nil.
-- The checkpoint table of a loaded file (nil for a file without lutra metadata), checked.
local function parse(name, names, tensors, meta, verified)
  local info = { names = names, tensors = tensors, meta = meta, checksum_verified = verified, lutra = false }
  local doc = meta.lutra
  if doc == nil then return nil, info end
  info.lutra = true
  local v = M.decode(doc, tensors, "load: " .. name)
  if type(v) ~= "table" then error("load: " .. name .. ": the 'lutra' metadata is not a JSON object", 0) end
  validate.validate(v, "load: " .. name, M.FORMAT_VERSION)
  return v, info
end

function M.read(path)
  if type(path) ~= "string" then error("load: expected a file path (string), got " .. type(path), 2) end
  return parse(path, C.load(path))
end

--- read_bytes(s[, name]) -> as read, from the bytes of a file (name for messages, default "(bytes)").
function M.read_bytes(s, name)
  name = name or "(bytes)"
  return parse(name, C.load_bytes(s, name))
end

-- ---- lt.save / lt.load ---------------------------------------------------------------------------

local function model_state_dict(model)
  local f = rawget(model, "state_dict") or (getmetatable(model) and model.state_dict)
  if type(f) == "function" then return (f(model)) end
  return (lt.nn.state_dict(model))
end

local function is_state_dict(t)
  if next(t) == nil then return false end
  for k, v in pairs(t) do
    if type(k) ~= "string" or not lt.is_tensor(v) then return false end
  end
  return true
end

-- The weights-only checkpoint table of a model or state dict (fname, where for messages).
local function weights_table(fname, where, obj, argn)
  if type(obj) ~= "table" then
    error(fmt("%s: expected a model or a state dict {name = tensor} as argument %d, got %s", fname, argn, type(obj)), 3)
  end
  local sd = is_state_dict(obj) and obj or model_state_dict(obj)
  if next(sd) == nil then error(fname .. ": " .. where .. "the model has no parameters or buffers to save", 3) end
  return { state_dict = sd, lutra_version = lt.version }
end

--- lt.save(path, model_or_state_dict): the weights alone, as a checkpoint with only `state_dict`.
function M.save(path, obj)
  if type(path) ~= "string" then error("lt.save: expected a file path (string) as argument 1, got " .. type(path), 2) end
  local tbl = weights_table("lt.save", path .. ": ", obj, 2)
  local ok, err = pcall(M.write, path, tbl)
  if not ok then error(reword(err, "save", "lt.save"), 2) end
  return path
end

--- lt.save_bytes(model_or_state_dict) -> string: the file lt.save writes, as a Lua string.
function M.save_bytes(obj)
  local tbl = weights_table("lt.save_bytes", "", obj, 1)
  local ok, s = pcall(M.write_bytes, tbl)
  if not ok then error((reword(s, "save", "lt.save_bytes"):gsub("^lt%.save_bytes: %(bytes%): ", "lt.save_bytes: ")), 2) end
  return s
end

-- The {name = tensor} state dict of a read file: a lutra checkpoint's `state_dict`, or every tensor of a
-- safetensors file from another writer.
local function weights_of(name, v, info)
  if v == nil then return info.tensors end
  if v.state_dict == nil then
    error("load: " .. name .. ": the checkpoint holds no model weights (no state_dict)", 0)
  end
  return v.state_dict
end

--- The {name = tensor} state dict stored in path.
function M.load_state_dict_file(path) return weights_of(path, M.read(path)) end

-- Loads sd into model (strictly) or returns sd; fname and name for messages.
local function into_model(fname, name, sd, model, argn)
  if model == nil then return sd end
  if type(model) ~= "table" then error(fmt("%s: expected a model table as argument %d, got %s", fname, argn, type(model)), 3) end
  local f = rawget(model, "load_state_dict") or (getmetatable(model) and model.load_state_dict)
  local ok2, err = pcall(function()
    if type(f) == "function" then f(model, sd) else lt.nn.load_state_dict(model, sd) end
  end)
  if not ok2 then
    error(fmt("%s: %s: the weights do not match the model: %s", fname, name, bare(err)), 3)
  end
  return model, sd
end

--- lt.load(path[, model]): returns the state dict {name = tensor}; with a model, loads it (strictly: names
--- and shapes must match) and returns the model.
function M.load(path, model)
  if type(path) ~= "string" then error("lt.load: expected a file path (string) as argument 1, got " .. type(path), 2) end
  local ok, sd = pcall(M.load_state_dict_file, path)
  if not ok then error(reword(sd, "load", "lt.load"), 2) end
  return into_model("lt.load", path, sd, model, 2)
end

--- lt.load_bytes(s[, model]): lt.load from the bytes of a file (a Lua string).
function M.load_bytes(s, model)
  if type(s) ~= "string" then error("lt.load_bytes: expected the bytes of a file (string) as argument 1, got " .. type(s), 2) end
  local ok, sd = pcall(function() return weights_of("(bytes)", M.read_bytes(s)) end)
  if not ok then error((reword(sd, "load", "lt.load_bytes"):gsub("^lt%.load_bytes: %(bytes%): ", "lt.load_bytes: ")), 2) end
  return into_model("lt.load_bytes", "(bytes)", sd, model, 2)
end


-- ---- the trainer's checkpoint (trainer:save_checkpoint, fit{ckpt_path=}) -------------------------------
--
-- Contents (Lightning's layout): epoch, global_step, lutra_version, format_version, state_dict (the model's
-- weights), and unless weights_only: optimizer_states (opt:state_dict() per optimizer), lr_schedulers
-- (sched:state_dict() per scheduler), loops = {fit_loop = the fit loop's state_dict}, callbacks
-- ({[state_key] = state}), loaders = {train = ..., val = {...}} (loader:state_dict()), rng = {global =
-- lt.get_rng_state()}, should_stop, metrics ({callback, progress_bar, logged} at save time), grads (the
-- accumulated gradients when accumulate_grad_batches > 1), resume (where in the loops the checkpoint was
-- taken, see below); hyper_parameters (model.hparams) when present; datamodule (its state_dict) when not empty.
--
-- Where a checkpoint resumes. A checkpoint is taken at a point of the loops; a run resumed from it
-- continues with what the interrupted run did after that point, so its final weights are the same bits:
--   "boundary"   between training batches (a paused or interrupted run), or outside fit: the next batch.
--   "epoch_start" in on_train_epoch_start: the epoch start hooks run again, then the epoch.
--   "batch_start" in a training batch before its optimizer step: the batch is run again.
--   "batch_end"  after the step (on_train_batch_end, e.g. ModelCheckpoint every_n_train_steps): the batch
--                counts as done; the resumed run first does the end of that batch (the validation when one
--                is due there, plateau schedulers, the logging step), then the next batch.
--   "val"        during validation inside fit: the validation runs again from its start, then as above.
--   "after_val"  in on_validation_end: the validation counts as done (its metrics are restored).
--   "epoch_end"  in training_epoch_end / on_train_epoch_end (ModelCheckpoint's default): the epoch counts as
--                done; plateau schedulers with interval "epoch" step at the restore, as they would have right
--                after on_train_epoch_end; the next epoch follows.
-- Hooks later than the saving one in the same event (e.g. the model's on_train_batch_end after the
-- callbacks') do not run again. Epoch-aggregated training metrics of an epoch resumed in its middle cover
-- the batches run after the resume.

local plain_copy
-- A checkpoint hook (on_save_checkpoint / on_load_checkpoint) of a callback (index i) or of the model (i nil),
-- when the target defines it: through the hook dispatcher's one-target entry (a checkpoint is saved and loaded
-- with no run attached too), so an error reads as other hooks' ("<hook> (callback #i): ...") plus suffix
-- (the file being resumed from).
local call_hook_target = core._call_hook_target

local function loops_ids()
  local ok, loops = pcall(require, "lutra.trainer.loops")
  return ok and loops.ID or nil
end

local function copy_counts(c)
  return { ready = c.ready or 0, started = c.started or 0, processed = c.processed or 0, completed = c.completed or 0 }
end

local ZERO = { ready = 0, started = 0, processed = 0, completed = 0 }

-- The resume point of the trainer's loops now (see above).
local function resume_point(trainer)
  local lp = rawget(trainer, "_lp")
  local ID = loops_ids()
  if not lp or not ID then return "boundary" end
  local st = lp:state()
  local run = rawget(trainer, "_run")
  if not st.fit_running or not run or run.stage ~= "fit" or st.sanity_checking then return "boundary" end
  local fit_phase = lp:phase(ID.fit)
  local F = lp:progress(ID.fit).current
  local E = lp:progress(ID.fit_epoch).current
  if lp:phase(ID.val) ~= "idle" then
    if lp:get("current_hook") == "on_validation_end" then return "after_val" end
    return "val"
  end
  if fit_phase == "running" and F.ready > F.completed then
    if F.started > F.completed then return "epoch_end" end
    return "epoch_start"
  end
  if fit_phase == "advance" and lp:phase(ID.fit_epoch) ~= "idle" and E.ready > E.completed then
    if E.processed > E.completed then return "batch_end" end
    return "batch_start"
  end
  return "boundary"
end
M.resume_point = resume_point

-- Optional numbers of a loader (its number of batches).
local function loader_batches(l)
  local ok, n = pcall(function() return #l end)
  if ok and type(n) == "number" then return n end
  return nil
end

local function loader_state(l)
  local ok, f = pcall(function() return l.state_dict end)
  if ok and type(f) == "function" then return f(l) end
  return nil
end

-- The fit loop's state_dict adjusted to the resume point (a copy), and what to do at restore.
local function loops_state_for(trainer, point)
  local sd = trainer:_loops_state_dict()
  local out = {}
  for k, v in pairs(sd) do out[k] = v end
  local function zero_current(key)
    local p = out[key]
    if type(p) == "table" and type(p.current) == "table" then
      local np = {}
      for k, v in pairs(p) do np[k] = v end
      np.current = copy_counts(ZERO)
      out[key] = np
    end
  end
  local function set(key, fn)
    local p = out[key]
    if type(p) == "table" then
      local np = {}
      for k, v in pairs(p) do np[k] = v end
      np.total = copy_counts(p.total or ZERO)
      np.current = copy_counts(p.current or ZERO)
      fn(np)
      out[key] = np
    end
  end
  -- the in-fit validation starts afresh wherever it is needed next
  zero_current("epoch_loop.val_loop.dataloader_progress")
  zero_current("epoch_loop.val_loop.epoch_loop.batch_progress")
  local epoch_boundary = false
  if point == "batch_end" then
    set("epoch_loop.batch_progress", function(p)
      p.current.completed = p.current.processed
      p.total.completed = p.total.processed
    end)
  elseif point == "batch_start" then
    set("epoch_loop.batch_progress", function(p)
      p.current.ready, p.current.started, p.current.processed = p.current.completed, p.current.completed, p.current.completed
      p.total.ready, p.total.started, p.total.processed = p.total.completed, p.total.completed, p.total.completed
    end)
  elseif point == "epoch_end" then
    set("epoch_progress", function(p)
      p.current.processed, p.current.completed = p.current.started, p.current.started
      p.total.processed, p.total.completed = p.total.started, p.total.started
      p.current.ready, p.total.ready = p.current.started, p.total.started
    end)
    epoch_boundary = true
  elseif point == "epoch_start" then
    set("epoch_progress", function(p)
      p.current.ready, p.current.started, p.current.processed = p.current.completed, p.current.completed, p.current.completed
      p.total.ready, p.total.started, p.total.processed = p.total.completed, p.total.completed, p.total.completed
    end)
    epoch_boundary = true
  elseif point == "boundary" then
    local F = out.epoch_progress and out.epoch_progress.current
    if F and F.completed >= F.ready then epoch_boundary = true end
  end
  if epoch_boundary then
    zero_current("epoch_loop.batch_progress")
    zero_current("epoch_loop.scheduler_progress")
    local b = out["epoch_loop.batch_progress"]
    if type(b) == "table" then b.is_last_batch = false end
  end
  return out, epoch_boundary
end

local function copy_metrics(t)
  local r = {}
  for k, v in pairs(t or {}) do
    local n = v
    if lt.is_tensor(v) then n = v:numel() == 1 and v:item() or nil end
    if type(n) == "number" or type(n) == "string" or type(n) == "boolean" then r[k] = n end
  end
  return r
end

-- A copy of v without what a checkpoint cannot hold (functions, userdata other than tensors, cycles):
-- hyper-parameters may name an activation function; that must not make every checkpoint fail.
plain_copy = function(v, seen)
  local tv = type(v)
  if tv == "number" or tv == "string" or tv == "boolean" or lt.is_tensor(v) then return v end
  if tv ~= "table" then return nil end
  seen = seen or {}
  if seen[v] then return nil end
  seen[v] = true
  local r = {}
  for k, x in pairs(v) do
    if type(k) == "string" or (type(k) == "number" and k == floor(k)) then r[k] = plain_copy(x, seen) end
  end
  seen[v] = nil
  return r
end

--- The checkpoint table of a trainer now (Lightning's dump_checkpoint).
function M.dump_trainer(trainer, weights_only)
  local model = trainer.model
  if type(model) ~= "table" then
    error("save_checkpoint: the trainer has no model yet (call fit, validate or test first)", 0)
  end
  local ck = {
    epoch = trainer.current_epoch,
    global_step = trainer.global_step,
    lutra_version = lt.version,
    format_version = M.FORMAT_VERSION,
    state_dict = model_state_dict(model),
  }
  if not weights_only then
    local point = resume_point(trainer)
    local cbm = require "lutra.callbacks"
    local loops_sd, epoch_boundary = loops_state_for(trainer, point)
    ck.loops = { fit_loop = loops_sd }
    local opt_states = {}
    for i, opt in ipairs(trainer.optimizers or {}) do opt_states[i] = opt:state_dict() end
    ck.optimizer_states = opt_states
    local scheds = {}
    for i, cfg in ipairs(trainer.lr_scheduler_configs or {}) do
      local sc = cfg.scheduler
      scheds[i] = (type(sc) == "table" or type(sc) == "userdata") and type(sc.state_dict) == "function" and sc:state_dict() or {}
    end
    ck.lr_schedulers = scheds
    -- loaders, each adjusted to the resume point
    local loaders = {}
    local train = rawget(trainer, "_train_loader")
    if train then
      local s = loader_state(train)
      if type(s) == "table" then
        local n = loader_batches(train)
        local E = loops_sd["epoch_loop.batch_progress"]
        local done = E and E.current and (E.current.completed >= (trainer.num_training_batches or math.huge)
          or (E.is_last_batch and E.current.completed == E.current.ready))
        if epoch_boundary or done then
          -- nothing of this epoch's data is left: the next iter() starts a new pass (even when
          -- limit_train_batches stopped the epoch before the loader's end)
          if n then s.position = n end
        elseif E and E.current then
          s.position = E.current.completed
        end
        loaders.train = s
      end
    end
    local vals = {}
    local val_touched = 0
    if point == "val" then
      local ID = loops_ids()
      val_touched = ID and trainer._lp:progress(ID.val).current.ready or 0
    end
    for i, l in ipairs(rawget(trainer, "_val_loaders") or {}) do
      local s = loader_state(l)
      if type(s) == "table" then
        if i <= val_touched then
          s.position = 0 -- the validation runs again: this loader's epoch replays from its start
        else
          -- the next validation starts a new pass (even after a sanity check that stopped early)
          s.position = loader_batches(l) or s.position
        end
      end
      vals[i] = s or false
    end
    loaders.val = vals
    ck.loaders = loaders
    ck.rng = { global = lt.get_rng_state() }
    -- a stop decided inside a run (EarlyStopping, Timer) holds for its resumption; after fit is over, a
    -- resumed run (with more epochs) trains on
    ck.should_stop = (trainer._lp:state().fit_running and trainer.should_stop) and true or false
    ck.metrics = {
      callback = copy_metrics(rawget(trainer, "_callback_metrics") and trainer.callback_metrics),
      progress_bar = copy_metrics(rawget(trainer, "_progress_bar_metrics") and trainer.progress_bar_metrics),
      logged = copy_metrics(rawget(trainer, "_logged_metrics")),
    }
    ck.resume = { point = point }
    if point == "epoch_end" then
      -- plateau schedulers with interval "epoch" step right after on_train_epoch_end
      local ID = loops_ids()
      local E = trainer._lp:progress(ID.fit_epoch).current
      local st = trainer._lp:state()
      ck.resume.epoch_schedulers = (E.ready == trainer.num_training_batches or st.is_last_batch) and true or false
      ck.resume.epoch = trainer.current_epoch
    end
    if (trainer.accumulate_grad_batches or 1) > 1 then
      local grads = {}
      local named = lt.nn.named_parameters(model)
      for name, p in pairs(named) do
        local g = p.grad
        if g ~= nil then grads[name] = g:detach() end
      end
      ck.grads = grads
    end
    -- callbacks' states (on_save_checkpoint may return one, Lightning 1.5 style; state_dict() wins)
    local states, seen = {}, {}
    for i, cb in ipairs(trainer.callbacks or {}) do
      local key = cbm.state_key(cb)
      seen[key] = (seen[key] or 0) + 1
      if seen[key] > 1 then key = key .. "#" .. seen[key] end
      local state
      local saved = call_hook_target(cb, "on_save_checkpoint", i, nil, trainer, model, ck)
      if type(saved) == "table" then state = saved end
      if type(cb.state_dict) == "function" then
        local r = cb:state_dict()
        if type(r) == "table" then state = r end
      end
      if state ~= nil then states[key] = state end
    end
    ck.callbacks = states
    -- the datamodule's state (Lightning's datamodule.state_dict(), restored by load_state_dict on resume)
    local dm = rawget(trainer, "datamodule")
    if type(dm) == "table" and type(dm.state_dict) == "function" then
      local r = dm:state_dict()
      if r ~= nil and type(r) ~= "table" then
        error("save_checkpoint: the datamodule's state_dict must return a table, got " .. type(r), 0)
      end
      if r ~= nil and next(r) ~= nil then ck.datamodule = r end
    end
  end
  if type(model) == "table" and model.hparams ~= nil then ck.hyper_parameters = plain_copy(model.hparams) end
  call_hook_target(model, "on_save_checkpoint", nil, nil, ck)
  return ck
end

--- trainer:save_checkpoint(path[, weights_only]): the checkpoint of the trainer now, written atomically.
function M.save_trainer(trainer, path, weights_only)
  if type(path) ~= "string" then error("save_checkpoint: expected a file path (string), got " .. type(path), 3) end
  local ck = M.dump_trainer(trainer, weights_only)
  local ok, err = pcall(M.write, path, ck)
  if not ok then error(reword(err, "save", "save_checkpoint"), 0) end
  return path
end

-- ---- restore -----------------------------------------------------------------------------------------

--- The newest checkpoint of the trainer's run: the checkpoint callbacks' directories (their last_model_path
--- first), then every version directory of the logger. nil when there is none.
function M.find_last(trainer)
  local cbm = require "lutra.callbacks"
  local MC = cbm.ModelCheckpoint
  local best, best_t
  local function consider(path)
    local st = path and path ~= "" and IO_stat(path)
    if st and st.type == "file" and (best_t == nil or st.mtime > best_t) then best, best_t = path, st.mtime end
  end
  local dirs = {}
  for _, cb in ipairs(trainer.callbacks or {}) do
    if cbm.is_model_checkpoint(cb) then
      consider(cb.last_model_path)
      if cb.dirpath then dirs[#dirs + 1] = cb.dirpath end
    end
  end
  for _, d in ipairs(dirs) do consider(MC.newest_in(d)) end
  if best then return best end
  -- a new process has a new logger version: look at the run's other versions
  local lg = trainer.logger
  local roots = {}
  if type(lg) == "table" and type(lg.save_dir) == "string" then
    roots[#roots + 1] = lg.name and lg.name ~= "" and (lg.save_dir .. "/" .. lg.name) or lg.save_dir
  end
  for _, root in ipairs(roots) do
    for _, n in ipairs(lt._io.listdir(root) or {}) do
      if n:match("^version_") then consider(MC.newest_in(root .. "/" .. n .. "/checkpoints")) end
    end
  end
  consider(MC.newest_in((trainer.default_root_dir or ".") .. "/checkpoints"))
  return best
end

local function restore_error(path, msg)
  error(fmt("fit: cannot resume from %s: %s", path, msg), 0)
end

--- Restores a trainer (after configure_optimizers, before on_fit_start) from a checkpoint file.
function M.restore_trainer(trainer, path)
  if type(path) ~= "string" then error("fit: ckpt_path must be a file path or \"last\", got " .. type(path), 0) end
  if path == "last" then
    local found = M.find_last(trainer)
    if not found then
      lt._warn("fit: ckpt_path=\"last\" found no checkpoint of this run; training from the start")
      return nil
    end
    path = found
  end
  local ok, ck = pcall(M.read, path)
  if not ok then
    local msg = bare(ck)
    local head = "load: " .. path .. ": "
    if msg:sub(1, #head) == head then msg = msg:sub(#head + 1) end
    restore_error(path, msg)
  end
  if ck == nil then
    restore_error(path, "it is a safetensors file without lutra metadata (weights alone from another program?); " ..
      "load it with lt.load(path, model) instead")
  end
  if type(ck.state_dict) ~= "table" then restore_error(path, "it holds no model weights (no state_dict)") end
  if ck.loops == nil or ck.optimizer_states == nil then
    restore_error(path, "it holds weights only (lt.save or save_weights_only); load it with lt.load(path, model) " ..
      "and fit without ckpt_path")
  end
  local model = trainer.model
  -- the model: on_load_checkpoint, then the weights (strict)
  local resuming = " (resuming from " .. path .. ")"
  call_hook_target(model, "on_load_checkpoint", nil, resuming, ck)
  local okw, errw = pcall(function()
    local f = rawget(model, "load_state_dict") or (getmetatable(model) and model.load_state_dict)
    if type(f) == "function" then f(model, ck.state_dict) else lt.nn.load_state_dict(model, ck.state_dict) end
  end)
  if not okw then
    restore_error(path, "the checkpoint does not match the model: " .. bare(errw))
  end
  -- callbacks
  local cbm = require "lutra.callbacks"
  local states = ck.callbacks or {}
  local seen = {}
  for i, cb in ipairs(trainer.callbacks or {}) do
    local key = cbm.state_key(cb)
    seen[key] = (seen[key] or 0) + 1
    if seen[key] > 1 then key = key .. "#" .. seen[key] end
    local state = states[key]
    if state ~= nil then
      call_hook_target(cb, "on_load_checkpoint", i, resuming, trainer, model, state)
      if type(cb.load_state_dict) == "function" then
        local okc, errc = pcall(cb.load_state_dict, cb, state)
        if not okc then restore_error(path, fmt("callback #%d (key 'callbacks.%s'): %s", i, key, bare(errc))) end
      end
    end
  end
  -- the datamodule
  local dm = rawget(trainer, "datamodule")
  if type(ck.datamodule) == "table" and type(dm) == "table" and type(dm.load_state_dict) == "function" then
    local okd, errd = pcall(dm.load_state_dict, dm, ck.datamodule)
    if not okd then restore_error(path, "the datamodule (key 'datamodule'): " .. bare(errd)) end
  end
  -- optimizers and schedulers
  local opts = trainer.optimizers or {}
  if #ck.optimizer_states ~= #opts then
    restore_error(path, fmt("it holds the state of %d optimizer(s), configure_optimizers returned %d",
      #ck.optimizer_states, #opts))
  end
  for i, opt in ipairs(opts) do
    local oko, erro = pcall(opt.load_state_dict, opt, ck.optimizer_states[i])
    if not oko then restore_error(path, fmt("optimizer %d: %s", i, bare(erro))) end
  end
  local scheds = trainer.lr_scheduler_configs or {}
  local saved_scheds = ck.lr_schedulers or {}
  if #saved_scheds ~= #scheds then
    restore_error(path, fmt("it holds the state of %d LR scheduler(s), configure_optimizers returned %d",
      #saved_scheds, #scheds))
  end
  for i, cfg in ipairs(scheds) do
    local sc = cfg.scheduler
    if type(sc.load_state_dict) == "function" then
      local oks, errs = pcall(sc.load_state_dict, sc, saved_scheds[i])
      if not oks then restore_error(path, fmt("LR scheduler %d: %s", i, bare(errs))) end
    end
  end
  -- accumulated gradients
  if type(ck.grads) == "table" then
    local named = lt.nn.named_parameters(model)
    for name, g in pairs(ck.grads) do
      local p = named[name]
      if p then p.grad = g end
    end
  end
  -- loops
  if type(ck.loops) == "table" and type(ck.loops.fit_loop) == "table" then
    local okl, errl = pcall(trainer._loops_load_state_dict, trainer, ck.loops.fit_loop)
    if not okl then restore_error(path, "key 'loops.fit_loop': " .. bare(errl)) end
  end
  local resume = ck.resume or {}
  local point = resume.point or "boundary"
  if point == "batch_end" or point == "val" or point == "after_val" then
    local okr, errr = pcall(trainer._lp.set, trainer._lp, "resume_advance_end", point == "after_val" and 2 or 1)
    if not okr then restore_error(path, "this build's loops cannot resume inside a batch (" .. tostring(errr) .. ")") end
  end
  local lp = trainer._lp
  lp:set("should_stop", ck.should_stop and true or false)
  -- metrics as they were (callbacks and plateau schedulers read them)
  local m = ck.metrics or {}
  for k, v in pairs(m.callback or {}) do trainer._callback_metrics[k] = v end
  for k, v in pairs(m.progress_bar or {}) do trainer._progress_bar_metrics[k] = v end
  for k, v in pairs(m.logged or {}) do trainer._logged_metrics[k] = v end
  -- the trainer clears its metrics when fitting starts, then puts these back
  trainer._ckpt_metrics = { _callback_metrics = m.callback or {}, _progress_bar_metrics = m.progress_bar or {},
    _logged_metrics = m.logged or {} }
  -- plateau schedulers of the epoch end that the interrupted run stepped after the checkpoint
  if point == "epoch_end" and resume.epoch_schedulers and rawget(trainer, "_automatic") ~= false then
    for i, cfg in ipairs(scheds) do
      local freq = cfg.frequency or 1
      if cfg.reduce_on_plateau and cfg.interval ~= "step" and ((resume.epoch or 0) + 1) % freq == 0 then
        trainer:_lua_hook("lr_scheduler_step", nil, nil, cfg.opt_idx, i - 1)
      end
    end
  end
  -- data, then the RNG (M.restore_pending)
  trainer._ckpt_pending = { path = path, loaders = ck.loaders or {}, rng = ck.rng }
  M.restore_pending(trainer)
  trainer.ckpt_path = path
  return ck
end

-- The loaders' states of the checkpoint being resumed, and its RNG last (nothing before may draw from it).
-- Loaders that the data hooks give when the loops start (lua/lutra/trainer/init.lua's _load_fit_loaders) get
-- theirs then, which calls this again; the RNG waits for them all, as their construction may draw from it.
function M.restore_pending(trainer)
  local p = rawget(trainer, "_ckpt_pending")
  local run = rawget(trainer, "_run")
  local path, loaders = p.path, p.loaders
  if p.train ~= "done" and not (run and run.train_pending) then
    p.train = "done"
    local train = rawget(trainer, "_train_loader")
    if train and type(loaders.train) == "table" and type(train.load_state_dict) == "function" then
      local okl, errl = pcall(train.load_state_dict, train, loaders.train)
      if not okl then restore_error(path, "the training loader: " .. bare(errl)) end
    end
  end
  if p.val ~= "done" and not (run and run.val_pending) then
    p.val = "done"
    for i, l in ipairs(rawget(trainer, "_val_loaders") or {}) do
      local s = (loaders.val or {})[i]
      if type(s) == "table" and type(l.load_state_dict) == "function" then
        local okl, errl = pcall(l.load_state_dict, l, s)
        if not okl then restore_error(path, fmt("validation loader %d: %s", i, bare(errl))) end
      end
    end
  end
  if p.train ~= "done" or p.val ~= "done" then return end
  trainer._ckpt_pending = nil
  if type(p.rng) == "table" and type(p.rng.global) == "string" then
    local okr, errr = pcall(lt.set_rng_state, p.rng.global)
    if not okr then restore_error(path, "key 'rng.global': " .. bare(errr)) end
  end
end
return M
