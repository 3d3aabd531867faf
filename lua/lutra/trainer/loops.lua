-- lutra.trainer.loops — the C loops as Lua objects: trainer.fit_loop, .epoch_loop, .batch_loop,
-- .optimizer_loop, .manual_loop, .val_loop (.epoch_loop), trainer.validate_loop / test_loop / predict_loop.
--
--   loop.progress          {total = {ready, started, processed, completed}, current = {...}} (a snapshot)
--   loop.restarting        read; assigning sets it on the loop and every loop below (load_state_dict does)
--   loop.phase             "idle" | "running" | "advance" (where the loop stopped in its template)
--   loop:state_dict()      Lightning 1.6's layout: {state_dict = {...}, <progress name> = {...},
--                          ["epoch_loop.state_dict"] = ..., ["epoch_loop.batch_progress"] = ..., ...}
--   loop:load_state_dict(sd)   the counters back, restarting = true (the unfinished unit is redone)
--   loop:connect{epoch_loop = my_loop}   a Lua loop (lt.Loop, or any table with done and advance) takes the
--                          slot; it gets my_loop.trainer and runs when the parent would run the child.
--   loop:run()             (C loops other than the fit loop) runs the loop to its end, for custom parents:
--                          batch_loop:run(batch, batch_idx) trains on that batch; val_loop:run() validates.
local M = {}

-- The loop tree comes from the C loops' own table (LT_LOOP_LIST in core/src/lt_loop.h, through core._seam):
-- ID.<key> is a loop's id, INFO[id] its row {key, id, name, field, parent, slot, runnable}.
local SEAM = require("lutra.core")._seam()
local INFO, ID, BY_SLOT = {}, {}, {}
for _, row in ipairs(SEAM.loops) do
  INFO[row.id], ID[row.key] = row, row.id
  if row.slot then BY_SLOT[row.slot] = row end
end
M.ID = ID

local CLoop = {}

local function prog_copy(p, extra)
  if extra then for k, v in pairs(extra) do p[k] = v end end
  return p
end

-- what each loop saves besides its children: {key = function(trainer, lp) -> value}
local SAVERS = {
  [ID.fit] = function(lp) return { epoch_progress = lp:progress(ID.fit) } end,
  [ID.fit_epoch] = function(lp)
    local st = lp:state()
    return {
      state_dict = { _batches_that_stepped = st.batches_that_stepped },
      batch_progress = prog_copy(lp:progress(ID.fit_epoch), { is_last_batch = st.is_last_batch }),
      scheduler_progress = lp:progress(ID.fit_epoch, "scheduler"),
    }
  end,
  [ID.optimizer] = function(lp)
    return { optim_progress = { optimizer = { step = lp:progress(ID.optimizer), zero_grad = lp:progress(ID.optimizer,
      "zero_grad") }, optimizer_position = lp:state().optimizer_position } }
  end,
  [ID.manual] = function(lp) return { optim_step_progress = lp:progress(ID.manual) } end,
  [ID.val] = function(lp) return { dataloader_progress = lp:progress(ID.val) } end,
  [ID.val_epoch] = function(lp) return { batch_progress = lp:progress(ID.val_epoch) } end,
  [ID.validate] = function(lp) return { dataloader_progress = lp:progress(ID.validate) } end,
  [ID.validate_epoch] = function(lp) return { batch_progress = lp:progress(ID.validate_epoch) } end,
  [ID.test] = function(lp) return { dataloader_progress = lp:progress(ID.test) } end,
  [ID.test_epoch] = function(lp) return { batch_progress = lp:progress(ID.test_epoch) } end,
  [ID.predict] = function(lp) return { dataloader_progress = lp:progress(ID.predict) } end,
  [ID.predict_epoch] = function(lp) return { batch_progress = lp:progress(ID.predict_epoch) } end,
}

local LOADERS = {
  [ID.fit] = function(lp, sd) if sd.epoch_progress then lp:set_progress(ID.fit, sd.epoch_progress) end end,
  [ID.fit_epoch] = function(lp, sd)
    if type(sd.state_dict) == "table" and sd.state_dict._batches_that_stepped then
      lp:set("batches_that_stepped", sd.state_dict._batches_that_stepped)
    end
    if sd.batch_progress then
      lp:set_progress(ID.fit_epoch, sd.batch_progress)
      lp:set("is_last_batch", sd.batch_progress.is_last_batch and true or false)
    end
    if sd.scheduler_progress then lp:set_progress(ID.fit_epoch, sd.scheduler_progress, "scheduler") end
  end,
  [ID.optimizer] = function(lp, sd)
    local op = sd.optim_progress
    if type(op) == "table" then
      if op.optimizer and op.optimizer.step then lp:set_progress(ID.optimizer, op.optimizer.step) end
      if op.optimizer and op.optimizer.zero_grad then lp:set_progress(ID.optimizer, op.optimizer.zero_grad, "zero_grad") end
      if op.optimizer_position then lp:set("optimizer_position", op.optimizer_position) end
    end
  end,
  [ID.manual] = function(lp, sd) if sd.optim_step_progress then lp:set_progress(ID.manual, sd.optim_step_progress) end end,
}
for _, name in ipairs { "val", "validate", "test", "predict" } do
  local id = ID[name]
  LOADERS[id] = function(lp, sd) if sd.dataloader_progress then lp:set_progress(id, sd.dataloader_progress) end end
  local eid = ID[name .. "_epoch"]
  LOADERS[eid] = function(lp, sd) if sd.batch_progress then lp:set_progress(eid, sd.batch_progress) end end
end

local RUN = SEAM.run -- the slots of the run's R table (core/bind/l_loop.c)

local function is_cloop(x) return type(x) == "table" and rawget(x, "_is_cloop") == true end

-- The counters a state dict gives the C loops (progress counts, batches_that_stepped, optimizer_position)
-- must be integers >= 0 that an int64 holds: a checkpoint is a file, and NaN, 1e300 or -1 from a damaged or
-- crafted one would reach the C loops as undefined casts or impossible states.
local COUNT_KEYS = { ready = true, started = true, processed = true, completed = true, _batches_that_stepped = true,
  optimizer_position = true }
local function check_counts(t, path, depth)
  for k, v in pairs(t) do
    local where = path == "" and tostring(k) or path .. "." .. tostring(k)
    if COUNT_KEYS[k] and not (type(v) == "number" and v == math.floor(v) and v >= 0 and v < 2 ^ 53) then
      error(string.format("load_state_dict: '%s' must be an integer >= 0, got %s", where, tostring(v)), 0)
    end
    if type(v) == "table" and depth < 4 then check_counts(v, where, depth + 1) end
  end
end

function CLoop:state_dict(prefix, into)
  prefix = prefix or ""
  into = into or {}
  local lp = self._trainer._lp
  local own = SAVERS[self._id] and SAVERS[self._id](lp) or {}
  into[prefix .. "state_dict"] = own.state_dict or {}
  for k, v in pairs(own) do if k ~= "state_dict" then into[prefix .. k] = v end end
  for _, name in ipairs(self._child_names) do
    local child = self._children[name]
    if is_cloop(child) then
      child:state_dict(prefix .. name .. ".", into)
    elseif type(child) == "table" and type(child.state_dict) == "function" then
      into[prefix .. name .. ".state_dict"] = child:state_dict()
    end
  end
  return into
end

-- The entries of sd that belong to the loop at prefix itself (not to its children).
local function own_entries(sd, prefix)
  local own = {}
  local plen = #prefix
  for k, v in pairs(sd) do
    if type(k) == "string" and k:sub(1, plen) == prefix then
      local rest = k:sub(plen + 1)
      if not rest:find(".", 1, true) then own[rest] = v end
    end
  end
  return own
end

-- Checks the counters of this C loop and of the C loops below it, so a bad one sets none.
function CLoop:_check_state(sd, prefix)
  if LOADERS[self._id] then
    for k, v in pairs(own_entries(sd, prefix)) do if type(v) == "table" then check_counts(v, prefix .. k, 1) end end
  end
  for _, name in ipairs(self._child_names) do
    local child = self._children[name]
    if is_cloop(child) then child:_check_state(sd, prefix .. name .. ".") end
  end
end

function CLoop:load_state_dict(sd, prefix)
  if type(sd) ~= "table" then error("load_state_dict: expected a table, got " .. type(sd), 2) end
  prefix = prefix or ""
  if prefix == "" then self:_check_state(sd, "") end
  local lp = self._trainer._lp
  local own = own_entries(sd, prefix)
  if LOADERS[self._id] then LOADERS[self._id](lp, own) end
  for _, name in ipairs(self._child_names) do
    local child = self._children[name]
    if is_cloop(child) then
      child:load_state_dict(sd, prefix .. name .. ".")
    elseif type(child) == "table" and type(child.load_state_dict) == "function" and sd[prefix .. name .. ".state_dict"] then
      child:load_state_dict(sd[prefix .. name .. ".state_dict"])
    end
  end
  if prefix == "" then lp:restarting(self._id, true) end
end

function CLoop:connect(children)
  if type(children) ~= "table" then error("connect: expected {name = loop}, got " .. type(children), 2) end
  for name, loop in pairs(children) do
    local slot = self._slots[name]
    if slot == nil then
      local known = {}
      for n in pairs(self._slots) do known[#known + 1] = n end
      table.sort(known)
      error(string.format("connect: %s has no child loop '%s' (children: %s)", self._name, tostring(name),
        #known > 0 and table.concat(known, ", ") or "none"), 2)
    end
    if is_cloop(loop) then
      if loop._id ~= self._default_children[name]._id then
        error(string.format("connect: a C loop can only take its own slot ('%s' is %s)", name, loop._name), 2)
      end
      self._children[name] = loop
      self._trainer._lp:set_custom(slot, false)
    else
      if type(loop) ~= "table" or type(loop.advance) ~= "function" or loop.done == nil then
        error(string.format("connect: '%s' must be a loop (a table with done and advance, e.g. lt.Loop)", name), 2)
      end
      loop.trainer = self._trainer
      self._children[name] = loop
      self._trainer._lp:set_custom(slot, true)
    end
  end
end

function CLoop:run(batch, batch_idx)
  local info = INFO[self._id]
  if not info.runnable then error("run: " .. self._name .. " cannot be run on its own", 2) end
  local t = self._trainer
  if not t._env.R then error("run: " .. self._name .. " runs only inside a trainer run (from a custom loop)", 2) end
  if batch ~= nil then t._env.R[RUN.train_batch] = batch end
  if batch_idx ~= nil then t._lp:set("batch_idx", batch_idx) end
  t._lp:run_slot(info.slot)
end

local CLoopMT = {
  __index = function(self, k)
    local v = CLoop[k]
    if v ~= nil then return v end
    local lp = rawget(self, "_trainer")._lp
    if k == "progress" then return lp:progress(self._id) end
    if k == "restarting" then return lp:restarting(self._id) end
    if k == "phase" then return lp:phase(self._id) end
    if k == "trainer" then return rawget(self, "_trainer") end
    if k == "_batches_that_stepped" and rawget(self, "_id") == ID.fit_epoch then return lp:get("batches_that_stepped") end
    if k == "batch_idx" and rawget(self, "_id") == ID.fit_epoch then return lp:get("batch_idx") end
    local c = rawget(self, "_children")[k]
    if c ~= nil then return c end
    return nil
  end,
  __newindex = function(self, k, v)
    if k == "restarting" then
      self._trainer._lp:restarting(self._id, v and true or false)
    elseif self._slots[k] then
      self:connect { [k] = v }
    else
      rawset(self, k, v)
    end
  end,
  __tostring = function(self) return "Loop(" .. self._name .. ")" end,
}

local function make(trainer, info)
  local l = { _is_cloop = true, _trainer = trainer, _name = info.name, _id = info.id, _children = {},
    _default_children = {}, _child_names = {}, _slots = {} }
  return setmetatable(l, CLoopMT)
end

--- The trainer's loop objects (fit_loop, validate_loop, test_loop, predict_loop), built from the C table: each
--- loop is a child of its parent under its field name, and a slot of the parent when a host loop can take it.
function M.build(trainer)
  local made, roots = {}, {}
  for id = 0, #INFO do
    local info = INFO[id]
    local l = make(trainer, info)
    made[info.key] = l
    if info.parent == nil then
      roots[info.field] = l
    else
      local p = made[info.parent]
      p._children[info.field] = l
      p._default_children[info.field] = l
      p._child_names[#p._child_names + 1] = info.field
      if info.slot then p._slots[info.field] = info.slot end
    end
  end
  return roots.fit_loop, roots.validate_loop, roots.test_loop, roots.predict_loop
end

-- The Lua loop in a slot (called by the C loops through env.run_custom): found from the trainer down the
-- loop's path (its name).
function M.run_custom(trainer, slot)
  local node
  for field in BY_SLOT[slot].name:gmatch("[^.]+") do
    node = node == nil and trainer[field] or rawget(node, "_children")[field]
  end
  if type(node.run) == "function" then return node:run() end
  return require("lutra.trainer.custom_loop").run(node)
end

return M
