-- optim/lr_scheduler/chained.lua — PyTorch 1.13's schedulers of schedulers, on lr_scheduler/init.lua's base:
--
--   SequentialLR(opt, {schedulers = {...}, milestones = {...}}), ChainedScheduler{s1, s2, ...}
--
-- The file returns a function that adds them to lt.optim.lr_scheduler, given init.lua's helpers.
return function(M, H)
  local class, options, check_optimizer = H.class, H.options, H.check_optimizer
  local current_lrs, groups_of, deepcopy = H.current_lrs, H.groups_of, H.deepcopy

  -- ---- SequentialLR and ChainedScheduler: schedulers of schedulers --------------------------------------

  -- state_dict: own fields, the children's state dicts under _schedulers
  local function composite_state_dict(self)
    local sd = {}
    for k, v in pairs(self) do
      if k ~= "optimizer" and k ~= "_schedulers" and type(v) ~= "function" then sd[k] = deepcopy(v) end
    end
    sd._schedulers = {}
    for i, s in ipairs(self._schedulers) do sd._schedulers[i] = s:state_dict() end
    return sd
  end

  local function composite_load_state_dict(self, sd)
    if type(sd) ~= "table" then error(self.name .. ": load_state_dict expects a table, got " .. type(sd), 3) end
    local children = sd._schedulers
    if type(children) ~= "table" or #children ~= #self._schedulers then
      error(string.format("%s: load_state_dict: expected _schedulers with %d state dicts, got %s", self.name,
        #self._schedulers, type(children) == "table" and tostring(#children) or type(children)), 3)
    end
    for k, v in pairs(sd) do
      if k ~= "_schedulers" then self[k] = deepcopy(v) end
    end
    for i, s in ipairs(self._schedulers) do s:load_state_dict(children[i]) end
  end

  local function check_children(name, list, opt, level) -- level: the caller's, seen from here
    if type(list) ~= "table" or #list == 0 then
      error(name .. ": expected a non-empty list of schedulers, got " .. type(list), level)
    end
    for i, s in ipairs(list) do
      if type(s) ~= "table" or type(s.step) ~= "function" or s.optimizer == nil then
        error(string.format("%s: schedulers[%d] is not a scheduler (got %s)", name, i, type(s)), level)
      end
      if s.is_plateau then
        error(string.format("%s: schedulers[%d] is a ReduceLROnPlateau, which needs a metric", name, i), level)
      end
      if s.optimizer ~= (opt or list[1].optimizer) then
        error(string.format("%s: expects all schedulers to belong to the same optimizer, but schedulers[%d] "
          .. "has another one", name, i), level)
      end
    end
  end

  local SequentialLR = class("SequentialLR")

  function M.SequentialLR(opt, opts)
    check_optimizer("SequentialLR", opt)
    local o = options("SequentialLR", opts, { schedulers = { "table", required = true },
      milestones = { "table", required = true } })
    check_children("SequentialLR", o.schedulers, opt, 4) -- (through the positional-argument wrapper)
    if #o.milestones ~= #o.schedulers - 1 then
      error(string.format("SequentialLR: expects number of schedulers provided to be one more than the number of "
        .. "milestone points, but got number of schedulers %d and the number of milestones to be equal to %d",
        #o.schedulers, #o.milestones), 3)
    end
    for i, m in ipairs(o.milestones) do
      if type(m) ~= "number" or m ~= math.floor(m) then
        error("SequentialLR: milestones[" .. i .. "] must be an integer, got " .. tostring(m), 3)
      end
    end
    local self = setmetatable({ _schedulers = o.schedulers, _milestones = deepcopy(o.milestones), last_epoch = 0,
      optimizer = opt }, SequentialLR)
    -- PyTorch: undo the children's initial steps, then redo the first one's
    for _, g in ipairs(groups_of(opt)) do g.lr = g.initial_lr end
    for _, s in ipairs(self._schedulers) do s.last_epoch = s.last_epoch - 1 end
    local first = self._schedulers[1]
    first._step_count = 0
    first:step()
    self._last_lr = first:get_last_lr()
    return self
  end

  function SequentialLR:step()
    self.last_epoch = self.last_epoch + 1
    local idx = 0 -- bisect_right: milestones <= last_epoch
    for _, m in ipairs(self._milestones) do if m <= self.last_epoch then idx = idx + 1 end end
    local s = self._schedulers[idx + 1]
    if idx > 0 and self._milestones[idx] == self.last_epoch then s:step(0) else s:step() end
    self._last_lr = s:get_last_lr()
  end

  SequentialLR.state_dict = composite_state_dict
  SequentialLR.load_state_dict = composite_load_state_dict

  local ChainedScheduler = class("ChainedScheduler")

  function M.ChainedScheduler(list)
    check_children("ChainedScheduler", list, nil, 3)
    local opt = list[1].optimizer
    local self = setmetatable({ _schedulers = { unpack(list) }, optimizer = opt, last_epoch = 0 }, ChainedScheduler)
    self._last_lr = current_lrs(self)
    return self
  end

  function ChainedScheduler:step()
    for _, s in ipairs(self._schedulers) do s:step() end
    self.last_epoch = self.last_epoch + 1
    self._last_lr = current_lrs(self)
  end

  ChainedScheduler.state_dict = composite_state_dict
  ChainedScheduler.load_state_dict = composite_load_state_dict
end
