-- checkpoint_files_spec.lua — the checkpoint file: without outside Lua modules (Jansson from C),
-- lt.save_bytes / lt.load_bytes, out-of-memory while a header is parsed, the validation of a checkpoint's
-- contents after its checksum, and stale temporary files of killed saves (the hooks: checkpoint_hooks_spec).
local lt = require "lutra"
local ck = require "lutra.checkpoint"
local fs = require "helpers.fs"
local tmpdir, rmrf, slurp, spit = fs.tmpdir, fs.rmrf, fs.slurp, fs.spit

local function bare(e) return (tostring(e):gsub("^[^\n]-%.lua:%d+: ", "")) end
local function err_of(fn, ...)
  local ok, e = pcall(fn, ...)
  assert(not ok, "expected an error, the call succeeded")
  return bare(e)
end

local function net()
  lt.manual_seed(7)
  return { fc = lt.nn.Linear(3, 2) }
end

local function flat(t) return t:view(-1):totable() end

-- The JSON text of a checkpoint table with each tensor replaced by its dtype, shape and values: two
-- tables give the same text exactly when they hold the same values.
local function fingerprint(doc)
  local parts = {}
  local text = ck.encode(doc, function(t, name)
    parts[#parts + 1] = name .. "=" .. t:dtype() .. t:shape_str() .. table.concat(flat(t), ",")
  end)
  return text .. "|" .. table.concat(parts, ";")
end

local run = require "helpers.checkpoint_run"
local fitted, resume = run.fitted, run.resume

-- Rewrites the checkpoint at path with fn(doc) applied: a correctly checksummed file with hostile values.
local function tamper(path, fn)
  local doc = ck.read(path)
  fn(doc)
  ck.write(path, doc)
end

describe("checkpoints need no Lua module outside lutra", function()
  local saved
  before_each(function()
    saved = { loaded = package.loaded.cjson, preload = package.preload.cjson, ck = package.loaded["lutra.checkpoint"] }
    package.loaded.cjson = nil
    package.preload.cjson = function() error("module 'cjson' is not installed (test)") end
    package.loaded["lutra.checkpoint"] = nil
  end)
  after_each(function()
    package.loaded.cjson, package.preload.cjson = saved.loaded, saved.preload
    package.loaded["lutra.checkpoint"] = saved.ck
  end)

  it("lt.save / lt.load and a trainer checkpoint work without lua-cjson", function()
    local dir = tmpdir()
    local m = net()
    lt.save(dir .. "/w.safetensors", m)
    local sd = lt.load(dir .. "/w.safetensors")
    assert.are.same(flat(m.fc.weight), flat(sd["fc.weight"]))
    local t = fitted()
    t:save_checkpoint(dir .. "/c.ckpt")
    local doc = require("lutra.checkpoint").read(dir .. "/c.ckpt")
    assert.are.equal(6, doc.global_step)
    assert.is_nil(package.loaded.cjson)
    rmrf(dir)
  end)

  it("a submodule that fails to load says why every time, not 'loop or previous error'", function()
    package.preload["lutra.checkpoint"] = function() error("the real cause (test)") end
    local ok1, e1 = pcall(lt.save, "/tmp/x.safetensors", net())
    local ok2, e2 = pcall(lt.save, "/tmp/x.safetensors", net())
    package.preload["lutra.checkpoint"] = nil
    assert.is_false(ok1)
    assert.is_false(ok2)
    assert.truthy(tostring(e1):find("the real cause (test)", 1, true))
    assert.truthy(tostring(e2):find("the real cause (test)", 1, true), tostring(e2))
    -- the Trainer (which looks for lutra.checkpoint to add a ModelCheckpoint) does not swallow it either
    package.preload["lutra.checkpoint"] = function() error("the real cause (test)") end
    local ok3, e3 = pcall(lt.Trainer, { logger = false })
    package.preload["lutra.checkpoint"] = nil
    assert.is_false(ok3)
    assert.truthy(tostring(e3):find("the real cause (test)", 1, true), tostring(e3))
  end)
end)

describe("lt.save_bytes / lt.load_bytes", function()
  it("give the same bytes as the file lt.save writes, and load them back bit for bit", function()
    local dir = tmpdir()
    local m = net()
    local s = lt.save_bytes(m)
    lt.save(dir .. "/w.safetensors", m)
    assert.are.equal(slurp(dir .. "/w.safetensors"), s)
    local sd = lt.load_bytes(s)
    assert.are.same(flat(m.fc.weight), flat(sd["fc.weight"]))
    assert.are.same(flat(m.fc.bias), flat(sd["fc.bias"]))
    local m2 = net()
    lt.no_grad(function() m2.fc.weight:zero_() end)
    local r = lt.load_bytes(s, m2)
    assert.are.equal(m2, r)
    assert.are.same(flat(m.fc.weight), flat(m2.fc.weight))
    -- a file's bytes read by any means (a .love zip, a pak file) load the same way
    assert.are.same(flat(m.fc.weight), flat(lt.load_bytes(slurp(dir .. "/w.safetensors"))["fc.weight"]))
    rmrf(dir)
  end)

  it("take a state dict, int64 tensors included", function()
    local sd = { a = lt.tensor({ 1, 2, 3 }, "int64"), b = lt.ones(2, 2) }
    local back = lt.load_bytes(lt.save_bytes(sd))
    assert.are.equal("int64", back.a:dtype())
    assert.are.same({ 1, 2, 3 }, back.a:totable())
    assert.are.same({ 1, 1, 1, 1 }, flat(back.b))
  end)

  it("errors say lt.load_bytes / lt.save_bytes and what is wrong", function()
    assert.matches("^lt.load_bytes: expected the bytes of a file %(string%) as argument 1, got number",
      err_of(lt.load_bytes, 3))
    assert.matches("^lt.load_bytes: file too short %(3 bytes%)", err_of(lt.load_bytes, "abc"))
    local s = lt.save_bytes(net())
    local bad = s:sub(1, 40) .. string.char((s:byte(41) + 1) % 256) .. s:sub(42)
    assert.matches("^lt.load_bytes: ", err_of(lt.load_bytes, bad))
    assert.matches("^lt.load_bytes: .*corrupt", err_of(lt.load_bytes, s:sub(1, #s - 4) .. "\0\0\0\0"))
    assert.matches("^lt.save_bytes: expected a model or a state dict", err_of(lt.save_bytes, 3))
    assert.matches("^lt.save_bytes: the model has no parameters", err_of(lt.save_bytes, {}))
    local m = net()
    m.fc = lt.nn.Linear(2, 2)
    assert.matches("^lt.load_bytes: %(bytes%): the weights do not match the model", err_of(lt.load_bytes, s, m))
  end)
end)

describe("out of memory while a checkpoint is read", function()
  local dir, path, reference
  setup(function()
    dir = tmpdir()
    path = dir .. "/c.ckpt"
    local t = fitted()
    t:save_checkpoint(path)
    reference = fingerprint(ck.read(path))
  end)
  teardown(function() lt._io.fault_arm(0); rmrf(dir) end)

  it("every failing allocation of a read (lutra's and Jansson's) is an error saying memory, or changes nothing", function()
    lt._io.fault_arm(math.huge)
    ck.read(path)
    local n = lt._io.fault_seen()
    lt._io.fault_arm(0)
    assert.is_true(n > 20, "a read should allocate (Jansson's nodes and the tensors), counted " .. n)
    local failed = 0
    for i = 1, n do
      lt._io.fault_arm(i)
      local ok, doc = pcall(ck.read, path)
      lt._io.fault_arm(0)
      if ok then
        assert.are.equal(reference, fingerprint(doc), "allocation " .. i .. " failed and the load succeeded altered")
      else
        failed = failed + 1
        local msg = tostring(doc)
        assert.truthy(msg:find("memory", 1, true), "allocation " .. i .. ": " .. msg)
        assert.falsy(msg:find("not valid JSON", 1, true), "allocation " .. i .. ": " .. msg)
        assert.falsy(msg:find("corrupt", 1, true), "allocation " .. i .. ": " .. msg)
        assert.truthy(msg:find(path, 1, true), "allocation " .. i .. ": the message names no file: " .. msg)
      end
    end
    assert.is_true(failed > 0)
    -- and afterwards all is as before
    assert.are.equal(reference, fingerprint(ck.read(path)))
  end)
end)

describe("a checkpoint's contents are checked after its checksum", function()
  local dir, path
  before_each(function() dir = tmpdir(); path = dir .. "/c.ckpt" end)
  after_each(function() rmrf(dir) end)

  -- Each row: what to change, the key the error must name, a pattern of what it says.
  local rows = {
    { "Adam step -5", function(d) d.optimizer_states[1].state[1].step = -5 end,
      "optimizer_states.1.state.1.step", "integer in 0..2^40" },
    -- "%-?nan": PUC Lua prints 0 / 0 (negative on x86) as -nan, LuaJIT as nan
    { "Adam step NaN", function(d) d.optimizer_states[1].state[1].step = 0 / 0 end,
      "optimizer_states.1.state.1.step", "got %-?nan" },
    { "Adam step 1.5", function(d) d.optimizer_states[1].state[2].step = 1.5 end, "optimizer_states.1.state.2.step", "got 1.5" },
    { "an optimizer state that is a number", function(d) d.optimizer_states[1].state[1].exp_avg = 3 end,
      "optimizer_states.1.state.1.exp_avg", "expected a tensor, got 3" },
    { "an infinite learning rate", function(d) d.optimizer_states[1].param_groups[1].lr = math.huge end,
      "optimizer_states.1.param_groups.1.lr", "expected a finite number" },
    { "global_step 1e15", function(d) d.global_step = 1e15 end, "global_step", "integer in 0..2^40, got 1e%+15$" },
    { "global_step inconsistent with the loops", function(d) d.global_step = 5 end,
      "global_step", "inconsistent with the optimizer steps the loops recorded %(6%)" },
    { "epoch negative", function(d) d.epoch = -1 end, "epoch", "integer in 0..2^40, got %-1" },
    { "epoch inconsistent with the loops", function(d) d.epoch = 7 end,
      "epoch", "inconsistent with loops.fit_loop.epoch_progress.current.completed %(2%)" },
    { "a progress counter of 1e15", function(d)
        local p = d.loops.fit_loop["epoch_loop.batch_progress"]
        p.total.ready, p.total.started, p.total.processed, p.total.completed = 1e15, 1e15, 1e15, 1e15
      end, "loops.fit_loop.epoch_loop.batch_progress.total.ready", "got 1e%+15$" },
    { "completed beyond ready", function(d) d.loops.fit_loop.epoch_progress.total.completed = 3 end,
      "loops.fit_loop.epoch_progress.total.completed", "more than total.ready %(2%)" },
    { "current beyond total", function(d) d.loops.fit_loop["epoch_loop.batch_progress"].current.ready = 9 end,
      "loops.fit_loop.epoch_loop.batch_progress.current.ready", "more than total.ready %(6%)" },
    { "a string in the loops", function(d) d.loops.fit_loop["epoch_loop.state_dict"]._batches_that_stepped = "6" end,
      "loops.fit_loop.epoch_loop.state_dict._batches_that_stepped", "expected a number, a boolean or a table" },
    { "should_stop a number", function(d) d.should_stop = 1 end, "should_stop", "expected a boolean, got 1" },
    { "an unknown resume point", function(d) d.resume.point = "somewhere" end, "resume.point", "expected a resume point" },
    { "a scheduler's last_epoch -2", function(d) d.lr_schedulers[1].last_epoch = -2 end,
      "lr_schedulers.1.last_epoch", "integer in %-1..2^40" },
    { "a loader position 1e15", function(d) d.loaders.train.position = 1e15 end, "loaders.train.position", "integer in 0..2^40" },
    { "rng state a number", function(d) d.rng.global = 5 end, "rng.global", "expected a string, got 5" },
    { "a weight that is a string", function(d) d.state_dict["fc.weight"] = "w" end,
      "state_dict.fc.weight", "expected a tensor, got \"w\"" },
    { "a newer format", function(d) d.format_version = 99 end, "format_version", "written by a newer lutra" },
  }
  for _, r in ipairs(rows) do
    it("refuses " .. r[1] .. ", naming the file and the key", function()
      local t, model, ds = fitted()
      t:save_checkpoint(path)
      tamper(path, r[2])
      local msg = err_of(resume, path, model, ds)
      assert.truthy(msg:find(path, 1, true), msg)
      assert.truthy(msg:find("key '" .. r[3] .. "'", 1, true), msg)
      assert.matches(r[4], msg)
    end)
  end

  it("the optimizer refuses a state whose shape is not its parameter's, naming the file", function()
    local t, model, ds = fitted()
    t:save_checkpoint(path)
    tamper(path, function(d) d.optimizer_states[1].state[1].exp_avg = lt.zeros(4) end)
    local msg = err_of(resume, path, model, ds)
    assert.truthy(msg:find(path, 1, true), msg)
    assert.matches("state%[1%]%.exp_avg has shape %[4%], but parameter 1 of group 1 has shape %[1 x 3%]", msg)
  end)

  it("an optimizer's load_state_dict refuses a negative or NaN step by itself", function()
    local p = lt.param(lt.zeros(2))
    local opt = lt.optim.Adam({ p }, { lr = 0.1 })
    local sd = { param_groups = { { params = { 1 }, lr = 0.1 } },
      state = { { step = -5, exp_avg = lt.zeros(2), exp_avg_sq = lt.zeros(2) } } }
    assert.matches("Adam: load_state_dict: state%[1%]%.step must be an integer >= 0, got %-5",
      err_of(opt.load_state_dict, opt, sd))
    sd.state[1].step = 0 / 0
    assert.matches("state%[1%]%.step must be an integer >= 0, got [%-]?nan", err_of(opt.load_state_dict, opt, sd))
  end)

  it("lt.load(path) never returns strings or numbers as tensors; every lt.load error names the file", function()
    ck.write(path, { state_dict = { w = lt.ones(2), x = "abc" } })
    local msg = err_of(lt.load, path)
    assert.matches("^lt.load: ", msg)
    assert.truthy(msg:find(path .. ": key 'state_dict.x': expected a tensor, got \"abc\"", 1, true), msg)
    ck.write(path, { state_dict = 5 })
    assert.truthy(err_of(lt.load, path):find(path .. ": key 'state_dict': expected a table, got 5", 1, true))
    ck.write(path, { lutra_version = "x" })
    assert.truthy(err_of(lt.load, path):find(path .. ": the checkpoint holds no model weights", 1, true))
  end)

  it("a valid checkpoint of every kind still loads (a trainer's, weights only, lt.save's)", function()
    local t, model, ds = fitted()
    t:save_checkpoint(path)
    local t2 = resume(path, model, ds)
    assert.are.equal(9, t2.global_step)
    t:save_checkpoint(dir .. "/w.ckpt", true)
    assert.truthy(lt.load(dir .. "/w.ckpt")["fc.weight"])
  end)
end)

describe("temporary files of killed saves", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmrf(dir) end)

  -- The pid of a process that has exited.
  local function dead_pid()
    local f = assert(io.popen("sh -c 'echo $$'"))
    local pid = assert(tonumber(f:read("*l")))
    f:close()
    return pid
  end

  it("a later save of the same target removes those of dead processes, never a live one's or another target's", function()
    local p = dir .. "/c.ckpt"
    local dead = dead_pid()
    spit(p .. ".tmp." .. dead, "partial")
    spit(p .. ".tmp.1", "pid 1 is alive")               -- init: always alive
    spit(dir .. "/other.ckpt.tmp." .. dead, "another target")
    spit(p .. ".tmp.x" .. dead, "not a pid")
    spit(p .. ".tmp." .. dead .. ".1234.00ff00ff00ff00ff", "partial, named as saves name them now")
    spit(dir .. "/victim", "victim")
    assert(os.execute("ln -s victim " .. p .. ".tmp." .. dead .. ".1.link") == 0) -- not a regular file: stays
    lt.save(p, net())
    assert.is_nil(slurp(p .. ".tmp." .. dead))
    assert.is_nil(slurp(p .. ".tmp." .. dead .. ".1234.00ff00ff00ff00ff"))
    assert.are.equal(0, os.execute("test -L " .. p .. ".tmp." .. dead .. ".1.link"))
    assert.are.equal("victim", slurp(p .. ".tmp." .. dead .. ".1.link"))
    assert.are.equal("pid 1 is alive", slurp(p .. ".tmp.1"))
    assert.are.equal("another target", slurp(dir .. "/other.ckpt.tmp." .. dead))
    assert.are.equal("not a pid", slurp(p .. ".tmp.x" .. dead))
    assert.truthy(lt.load(p)["fc.weight"])
  end)
end)
