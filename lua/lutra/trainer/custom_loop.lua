-- lutra.trainer.custom_loop — lt.Loop: the base of custom loops written in Lua, with Lightning's template.
--
--   local MyEpochLoop = lt.Loop:extend()
--   function MyEpochLoop:reset() self.n = 0 end
--   function MyEpochLoop:done() return self.n >= 3 end
--   function MyEpochLoop:advance() self.n = self.n + 1; self.trainer.fit_loop.epoch_loop.val_loop:run() end
--   trainer.fit_loop:connect{epoch_loop = MyEpochLoop()}
--
-- run(): if skip() then return on_skip() end; reset(); on_run_start(...); while not done() do
-- on_advance_start(...); advance(...); on_advance_end() end; return on_run_end(). `done` may be a method
-- or a boolean field. advance may raise lt.Loop.StopIteration (or return lt.Loop.StopIteration) to end the
-- run early, as Lightning's StopIteration. A loop connected to a slot gets self.trainer; it can connect
-- children of its own (connect{name = loop}) and run them (self.name:run()), including lutra's C loops
-- (trainer.fit_loop.epoch_loop.batch_loop:run(batch, batch_idx), ...val_loop:run()).
local Loop = {}
Loop.__index = Loop

Loop.StopIteration = setmetatable({}, { __tostring = function() return "StopIteration" end })

local function noop() end
Loop.skip = function() return false end
Loop.on_skip = noop
Loop.reset = noop
Loop.on_run_start = noop
Loop.on_advance_start = noop
Loop.on_advance_end = noop
Loop.on_run_end = noop
Loop.restarting = false

function Loop:advance() error("lt.Loop: advance is not implemented", 2) end

local function is_done(self)
  local d = self.done
  if type(d) == "function" then return d(self) end
  return d and true or false
end

--- Lightning's Loop.run, for any table with done and advance.
function Loop.run(self, ...)
  local skip, on_skip = self.skip or Loop.skip, self.on_skip or noop
  if skip(self) then return on_skip(self) end
  local reset, on_run_start = self.reset or noop, self.on_run_start or noop
  reset(self)
  on_run_start(self, ...)
  while not is_done(self) do
    local on_advance_start, on_advance_end = self.on_advance_start or noop, self.on_advance_end or noop
    on_advance_start(self, ...)
    local ok, r = pcall(self.advance, self, ...)
    if not ok then
      if r == Loop.StopIteration then break end
      error(r, 0)
    end
    if r == Loop.StopIteration then break end
    on_advance_end(self)
    self.restarting = false
  end
  local on_run_end = self.on_run_end or noop
  return on_run_end(self)
end

function Loop:connect(children)
  for k, v in pairs(children) do
    if type(v) == "table" and rawget(v, "_is_cloop") == nil then v.trainer = self.trainer end
    self[k] = v
  end
end

function Loop:state_dict() return {} end
function Loop:load_state_dict(_) end

--- A subclass: lt.Loop:extend() returns a class; calling it makes an instance (init(...) if defined).
function Loop:extend()
  local cls = setmetatable({}, { __index = self, __call = function(c, ...)
    local o = setmetatable({}, c)
    if o.init then o:init(...) end
    return o
  end })
  cls.__index = cls
  return cls
end

setmetatable(Loop, { __call = function(c, ...)
  local o = setmetatable({}, c)
  if o.init then o:init(...) end
  return o
end })

return Loop
