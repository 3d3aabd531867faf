-- tests/gc_host_spec.lua — lutra's GC pacing and a host's own collector (docs/guide-hosts.md, "Memory and the
-- host's garbage collector"): a collector the host stopped (collectgarbage("stop"), as games do during play)
-- stays stopped while lutra trains and hands out tensors, and lt.set_gc_pacing(false) turns the pacing off
-- for hosts that cannot be asked (PUC Lua 5.1) or pace the collector themselves.
local lt = require "lutra"
local core = require "lutra.core"
local quiet = require "helpers.quiet"

-- LuaJIT and Lua 5.2+ answer collectgarbage("isrunning"); PUC 5.1 has no way to ask
local can_ask = pcall(collectgarbage, "isrunning") and collectgarbage("isrunning") ~= nil

-- a fit run over batches of 64 x 1024 floats (256 KB each: four GC quanta per batch handed to Lua)
local function run_of(batches)
  lt.manual_seed(3)
  local ds = lt.data.TensorDataset(lt.randn(batches * 64, 1024), lt.randn(batches * 64, 1))
  local loader = lt.data.DataLoader(ds, { batch_size = 64 })
  local m = { lin = lt.nn.Linear(1024, 1) }
  function m:training_step(b) return lt.F.mse_loss(self.lin(b[1]), b[2]) end
  function m:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), { lr = 0.01 }) end
  local t = lt.Trainer(quiet { max_epochs = 1 })
  return t:fit_run(m, loader), t
end

describe("the host's collector", function()
  after_each(function()
    collectgarbage("restart")
    lt.set_gc_pacing(true)
  end)

  it("stopped by the host stays stopped while run:advance trains: no step, no cycle", function()
    if not can_ask then return pending("collectgarbage('isrunning') is missing under " .. _VERSION) end
    local run = run_of(40)
    run:advance { batches = 1 }
    collectgarbage("stop")
    core._gc_stats(true)
    local before = collectgarbage("count")
    local done = false
    while not done do
      done = run:advance { batches = 5 }
      assert.is_false(collectgarbage("isrunning"), "the collector was restarted")
    end
    local st = core._gc_stats(true)
    assert.are.equal(0, st.steps, "GC steps asked of a stopped collector")
    assert.are.equal(0, st.cycles, "GC cycles run in a stopped collector")
    -- nothing was collected: the Lua heap only grew
    assert.is_true(collectgarbage("count") >= before, "a collection ran")
  end)

  it("stopped by the host stays stopped while tensors are made (200 MB)", function()
    if not can_ask then return pending("collectgarbage('isrunning') is missing under " .. _VERSION) end
    collectgarbage("stop")
    core._gc_stats(true)
    for _ = 1, 200 * 16 do local _ = lt.zeros(16384) end -- 64 KB each
    assert.is_false(collectgarbage("isrunning"))
    local st = core._gc_stats(true)
    assert.are.equal(0, st.steps)
    assert.are.equal(0, st.cycles)
    collectgarbage("restart")
    collectgarbage()
  end)

  it("restarted, is paced again; the debt of the stopped time is not paid in one lump", function()
    collectgarbage("stop")
    for _ = 1, 64 * 16 do local _ = lt.zeros(16384) end
    collectgarbage("restart")
    core._gc_stats(true)
    local _ = lt.zeros(16384)
    local st = core._gc_stats(true)
    assert.is_true(st.max_step_kb <= 64 + 65, "a step of " .. st.max_step_kb .. " KB after the restart")
    -- past the rest a finished cycle leaves (the host's pause: up to the Lua heap again, which the spec files
    -- run before this one make tens of MB), then 32 MB more (64 KB a tensor)
    local mb = collectgarbage("count") * 2 / 1024 + 32
    for _ = 1, math.ceil(mb * 16) do local _ = lt.zeros(16384) end
    st = core._gc_stats(true)
    assert.is_true(st.steps + st.cycles >= 1, "no GC work asked after the restart")
  end)

  it("lt.set_gc_pacing(false) asks nothing of the collector; true paces again; returns the previous setting", function()
    assert.is_true(lt.set_gc_pacing(false))
    core._gc_stats(true)
    for _ = 1, 32 * 16 do local _ = lt.zeros(16384) end
    local st = core._gc_stats(true)
    assert.are.equal(0, st.steps)
    assert.are.equal(0, st.cycles)
    if can_ask then assert.is_true(collectgarbage("isrunning")) end
    assert.is_false(lt.set_gc_pacing(true))
    -- as after a restart (above): past the host's pause, up to the Lua heap that earlier spec files grew, then 32 MB
    local mb = collectgarbage("count") * 2 / 1024 + 32
    for _ = 1, math.ceil(mb * 16) do local _ = lt.zeros(16384) end
    st = core._gc_stats(true)
    assert.is_true(st.steps + st.cycles >= 1, "no GC work asked with pacing back on")
    collectgarbage()
  end)

  it("lt.set_gc_pacing refuses anything but a boolean", function()
    assert.has_error(function() lt.set_gc_pacing(1) end, "set_gc_pacing: expected a boolean, got number")
    assert.has_error(function() lt.set_gc_pacing() end, "set_gc_pacing: expected a boolean, got no value")
  end)
end)
