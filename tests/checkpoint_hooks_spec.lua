-- checkpoint_hooks_spec.lua — on_save_checkpoint / on_load_checkpoint of the model and the callbacks: called
-- through the hook dispatcher's one-target entry (core._call_hook_target), with a run attached or not; their
-- errors read as other hooks' ("<hook> (callback #i): <message>" and a traceback), the file being resumed
-- from named after the message.
local core = require "lutra.core"
local fs = require "helpers.fs"
local tmpdir, rmrf = fs.tmpdir, fs.rmrf

local function bare(e) return (tostring(e):gsub("^[^\n]-%.lua:%d+: ", "")) end
local function err_of(fn, ...)
  local ok, e = pcall(fn, ...)
  assert(not ok, "expected an error, the call succeeded")
  return bare(e)
end

local run = require "helpers.checkpoint_run"
local fitted, resume = run.fitted, run.resume

describe("errors in on_save_checkpoint / on_load_checkpoint", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmrf(dir) end)

  it("carry the hook's name, and the callback's index, like other hook errors", function()
    local t = fitted { on_save_checkpoint = function() error("model save boom") end }
    assert.matches("^on_save_checkpoint: model save boom", err_of(t.save_checkpoint, t, dir .. "/c.ckpt"))
    local cb = { on_save_checkpoint = function() error("cb save boom") end }
    local t2 = fitted(nil, { cb })
    assert.matches("^on_save_checkpoint %(callback #1%): cb save boom", err_of(t2.save_checkpoint, t2, dir .. "/c.ckpt"))
  end)

  it("on_load_checkpoint errors name the hook and the file resumed from", function()
    local t, model, ds = fitted()
    local p = dir .. "/c.ckpt"
    t:save_checkpoint(p)
    model.on_load_checkpoint = function() error("model load boom") end
    local msg = err_of(resume, p, model, ds)
    assert.matches("^on_load_checkpoint: model load boom", msg)
    assert.truthy(msg:find(p, 1, true), msg)
    model.on_load_checkpoint = nil
    local cb = { state_dict = function() return { n = 1 } end, load_state_dict = function() end,
      on_load_checkpoint = function() error("cb load boom") end }
    local t2 = fitted(nil, { cb })
    t2:save_checkpoint(p)
    msg = err_of(resume, p, model, ds, { cb })
    assert.matches("^on_load_checkpoint %(callback #1%): cb load boom", msg)
    assert.truthy(msg:find(p, 1, true), msg)
    -- a callback's load_state_dict that refuses its state: the file and the key are named
    cb.on_load_checkpoint = function() end
    cb.load_state_dict = function() error("bad state") end
    msg = err_of(resume, p, model, ds, { cb })
    assert.truthy(msg:find(p, 1, true), msg)
    assert.matches("callback #1 %(key 'callbacks%..-'%): bad state", msg)
  end)
end)

describe("checkpoint hooks through the dispatcher", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmrf(dir) end)

  it("a failing hook's message carries its traceback, as other hook errors do, the file after the message", function()
    local t, model, ds = fitted { on_save_checkpoint = function() error("model save boom") end }
    local msg = err_of(t.save_checkpoint, t, dir .. "/c.ckpt")
    assert.matches("^on_save_checkpoint: model save boom\nstack traceback:\n", msg)
    assert.truthy(msg:find("checkpoint_hooks_spec.lua", 1, true), msg)
    model.on_save_checkpoint = nil
    local p = dir .. "/c.ckpt"
    t:save_checkpoint(p)
    model.on_load_checkpoint = function() error("model load boom") end
    msg = err_of(resume, p, model, ds)
    assert.truthy(msg:find("^on_load_checkpoint: model load boom %(resuming from " .. p:gsub("%p", "%%%0")
      .. "%)\nstack traceback:\n"), msg)
  end)

  it("an error object that is not a string: its __tostring, else its type", function()
    local obj = setmetatable({}, { __tostring = function() return "an object's own text" end })
    local t = fitted(nil, { { on_save_checkpoint = function() error(obj) end } })
    assert.matches("^on_save_checkpoint %(callback #1%): an object's own text", err_of(t.save_checkpoint, t,
      dir .. "/c.ckpt"))
    t = fitted { on_save_checkpoint = function() error(true) end }
    assert.matches("^on_save_checkpoint: %(error object is a boolean value%)", err_of(t.save_checkpoint, t,
      dir .. "/c.ckpt"))
  end)

  it("a hook error raised inside keeps its own name (no second prefix)", function()
    local t = fitted { on_save_checkpoint = function()
      error({ lutra_hook_error = true, msg = "on_fit_start: inner boom" }, 0)
    end }
    assert.are.equal("on_fit_start: inner boom", err_of(t.save_checkpoint, t, dir .. "/c.ckpt"))
  end)

  it("runs with a run attached: a callback saving in on_train_epoch_end names both hooks", function()
    local saver = {}
    function saver:on_train_epoch_end(trainer) trainer:save_checkpoint(dir .. "/e.ckpt") end
    local msg = err_of(fitted, { on_save_checkpoint = function() error("inner save boom") end }, { saver })
    assert.matches("^on_train_epoch_end %(callback #1%): on_save_checkpoint: inner save boom", msg)
  end)

  it("results come back, and a target without the hook is not called", function()
    local seen = {}
    local obj = { on_save_checkpoint = function(self, a, b) seen[#seen + 1] = { self, a, b }; return a + b, "x" end }
    local r1, r2 = core._call_hook_target(obj, "on_save_checkpoint", nil, nil, 2, 3)
    assert.are.same({ 5, "x" }, { r1, r2 })
    assert.are.equal(obj, seen[1][1])
    assert.are.equal(0, select("#", core._call_hook_target({}, "on_save_checkpoint", 1, nil, 2, 3)))
    assert.are.equal(0, select("#", core._call_hook_target({ on_save_checkpoint = 5 }, "on_save_checkpoint")))
  end)
end)
