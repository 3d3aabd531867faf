-- alloc_fail_spec.lua — the allocation-failure sweep: every allocation (lutra's allocator and Jansson's,
-- through lt._io.fault_arm) of a training step, a checkpoint save, a load and a resume fails in turn. Each
-- failure must be a Lua error saying "memory" (never "corrupt" or "not valid JSON"), leak nothing (lutra's
-- live bytes and tensors, Jansson's live blocks, back where they were after a full collection), load
-- nothing altered, and leave the state usable: the same operation then succeeds with the same result.
-- Run it under ASan too: tests/run --config asan (docs/reliability.md).
local lt = require "lutra"
local ck = require "lutra.checkpoint"
local quiet = require "helpers.quiet"
local fs = require "helpers.fs"

local IO = lt._io

-- The JIT off for this file: a compiled trace keeps the objects it was recorded with (a model, a trainer)
-- alive as constants, which would look like leaks in the live counts.
local jit_was_on = jit and jit.status()
local function jit_off() if jit then jit.off(); jit.flush() end end
local function jit_restore() if jit and jit_was_on then jit.on() end end

local function flat(t) return t:view(-1):totable() end

local function weights(model)
  local out = {}
  for name, p in pairs(lt.nn.named_parameters(model)) do out[name] = flat(p) end
  return out
end

local function fs_show(l) return string.format("%d bytes, %d tensors, %d JSON blocks", l.bytes, l.tensors, l.json) end

-- Collects until nothing more goes: objects in weak-keyed tables (lutra.data's proxies) that refer to one
-- another go one link per cycle.
local function collect()
  local n = lt.memory_stats().live_tensors
  for _ = 1, 20 do
    collectgarbage()
    local m = lt.memory_stats().live_tensors
    if m == n then break end
    n = m
  end
  collectgarbage()
end

local function live()
  collect()
  local s = lt.memory_stats()
  return { bytes = s.live_bytes, tensors = s.live_tensors, json = IO.json_live() }
end

-- A leak is growth: after a failure there may be less alive (a half-built object collected), never more
-- tensors or Jansson blocks; live bytes may differ by one small buffer of process-wide state resized by a
-- run (SLACK), but a leak that repeats with each failure exceeds it within a few failures.
local SLACK = 4096
local function no_leak(before, i, err)
  local now = live()
  assert(now.bytes <= before.bytes + SLACK and now.tensors <= before.tensors and now.json <= before.json,
    string.format("allocation %s (%s): leaked: %s -> %s", tostring(i), tostring(err), fs_show(before), fs_show(now)))
end

-- Runs op once to count its allocations, then once per allocation with that one failing. check(ok, err, i,
-- before) judges each outcome (before: live() after the counting run, which may create what stays, such
-- as an optimizer's state); returns the number of allocations and how many failures became errors.
local function sweep(op, check, prepare)
  prepare = prepare or function() end
  prepare()
  IO.fault_arm(math.huge)
  local ok0, e0 = pcall(op)
  local n = IO.fault_seen()
  IO.fault_arm(0)
  assert(ok0, "the operation fails without injected failures: " .. tostring(e0))
  prepare()
  pcall(op)
  prepare()
  local before = live()
  local errors = 0
  for i = 1, n do
    if i > 1 then prepare() end
    IO.fault_arm(i)
    local ok, err = pcall(op)
    IO.fault_arm(0)
    if not ok then
      errors = errors + 1
      local msg = tostring(err)
      assert(msg:find("memory", 1, true), "allocation " .. i .. " of " .. n .. ": the error does not say memory: " .. msg)
      assert(not msg:find("corrupt", 1, true) and not msg:find("not valid JSON", 1, true),
        "allocation " .. i .. ": out of memory reported as damage: " .. msg)
    end
    check(ok, err, i, before)
  end
  return n, errors
end

local function data()
  lt.manual_seed(11)
  return lt.data.TensorDataset(lt.randn(16, 4), lt.randn(16, 2))
end

local function new_model()
  lt.manual_seed(5)
  local m = { l1 = lt.nn.Linear(4, 8), l2 = lt.nn.Linear(8, 2) }
  function m:forward(x) return self.l2(lt.F.relu(self.l1(x))) end
  function m:training_step(b) return lt.F.mse_loss(self:forward(b[1]), b[2]) end
  function m:configure_optimizers()
    local opt = lt.optim.Adam(lt.nn.parameters(self), { lr = 0.01 })
    return { optimizer = opt, lr_scheduler = lt.optim.lr_scheduler.StepLR(opt, { step_size = 1, gamma = 0.5 }) }
  end
  return m
end

local function fit(model, epochs, ckpt_path)
  local t = lt.Trainer(quiet { max_epochs = epochs })
  t:fit(model, lt.data.DataLoader(data(), { batch_size = 8 }), { ckpt_path = ckpt_path })
  return t
end

describe("what a fit leaves behind", function()
  setup(jit_off)
  teardown(jit_restore)
  -- in a fresh process (tests/helpers/child.lua): in the busted process other specs' objects move the counts
  it("fitted trainers, their models and loaders are collected once nothing holds them", function()
    local out = require("helpers.child").run([[
      if jit then jit.off() end -- LuaJIT: no traces holding references; PUC Lua has no JIT
      local lt = require "lutra"
      local weak = setmetatable({}, { __mode = "k" })
      local function fit_once()
        local model = { fc = lt.nn.Linear(4, 2) }
        function model:training_step(b) return lt.F.mse_loss(self.fc(b[1]), b[2]) end
        function model:configure_optimizers() return lt.optim.Adam(lt.nn.parameters(self), { lr = 0.01 }) end
        local dl = lt.data.DataLoader(lt.data.TensorDataset(lt.randn(16, 4), lt.randn(16, 2)), { batch_size = 8 })
        local t = lt.Trainer { max_epochs = 1, logger = false, enable_checkpointing = false,
          enable_progress_bar = false, enable_model_summary = false }
        t:fit(model, dl)
        weak[t], weak[model], weak[dl] = "trainer", "model", "loader"
      end
      for _ = 1, 6 do fit_once() end
      for _ = 1, 10 do collectgarbage() end
      local n = 0
      for _ in pairs(weak) do n = n + 1 end
      print("alive " .. n .. " tensors " .. lt.memory_stats().live_tensors)
    ]])
    assert.are.equal("alive 0 tensors 0", out:match("alive %d+ tensors %d+"), out)
  end)
end)

describe("allocation-failure sweep", function()
  local dir
  setup(function() jit_off(); dir = fs.tmpdir() end)
  teardown(function() IO.fault_arm(0); fs.rmrf(dir); jit_restore() end)

  it("a training step (forward, loss, backward, Adam step): out of memory, no leak, training goes on", function()
    local model = new_model()
    local opt = lt.optim.Adam(lt.nn.parameters(model), { lr = 0.01 })
    local x, y = lt.randn(16, 4), lt.randn(16, 2)
    local function step()
      opt:zero_grad()
      local loss = lt.F.mse_loss(model:forward(x), y)
      loss:backward()
      opt:step()
      return loss:item()
    end
    step()
    local n, errors = sweep(step, function(ok, err, i, before)
      if not ok then no_leak(before, i, err) end
    end)
    assert.is_true(n >= 10, "a step should allocate, counted " .. n)
    assert.is_true(errors > 0)
    -- usable: the next steps train, with finite weights
    for _ = 1, 3 do local l = step(); assert.is_true(l == l and l < math.huge) end
    for _, w in pairs(weights(model)) do for _, v in ipairs(w) do assert.is_true(v == v) end end
  end)

  -- A model trained for one epoch, its trainer, and the checkpoint at dir/name.
  local function checkpointed(name)
    local model = new_model()
    local t = fit(model, 1)
    local path = dir .. "/" .. name
    t:save_checkpoint(path)
    return model, t, path
  end

  it("a checkpoint save: out of memory, the previous file stays whole, no leak", function()
    local _, t, path = checkpointed("save.ckpt")
    local reference = fs.slurp(path)
    local n, errors = sweep(function() t:save_checkpoint(path) end, function(ok, _, _, before)
      assert.are.equal(reference, fs.slurp(path)) -- ok or not, the file is a whole checkpoint (the same one)
      if not ok then no_leak(before, "of the save", "") end
    end)
    assert.is_true(n > 0 and errors > 0, n .. " allocations, " .. errors .. " errors")
  end)

  it("a load (lt.load into a model, and the whole checkpoint): out of memory, nothing altered, no leak", function()
    local model, _, path = checkpointed("load.ckpt")
    local saved = weights(model)
    local reference = ck.encode((ck.read(path)), function() end)
    local target = new_model()
    local original = weights(target)
    local function reset()
      lt.no_grad(function()
        for name, p in pairs(lt.nn.named_parameters(target)) do p:copy_(lt.tensor(original[name]):view(p:shape())) end
      end)
    end
    local n = sweep(function() lt.load(path, target) end, function(ok, _, _, before)
      if ok then
        assert.are.same(saved, weights(target))
      else
        assert.are.same(original, weights(target)) -- a failed load changes nothing
        no_leak(before, "of the load", "")
      end
    end, reset)
    assert.is_true(n > 0)
    local m = sweep(function() return ck.read(path) end, function(ok, doc)
      if ok then assert.are.equal(reference, ck.encode(doc, function() end)) end
    end)
    assert.is_true(m >= n, "the whole checkpoint has as much to allocate")
  end)

  it("a resume (fit{ckpt_path=}): out of memory, no leak, and a later resume gives the same weights", function()
    local _, _, path = checkpointed("resume.ckpt")
    local expected = weights(fit(new_model(), 2, path).model)
    local n, errors = sweep(function() fit(new_model(), 2, path) end, function(ok, err, i, before)
      if not ok then no_leak(before, i, err) end
    end)
    assert.is_true(n > 100 and errors > 0, n .. " allocations, " .. errors .. " errors")
    assert.are.same(expected, weights(fit(new_model(), 2, path).model))
  end)
end)
