-- tests/epoch_outputs_spec.lua — the epoch-output rule (docs/reference/hooks.md): training outputs are kept for the epoch
-- end only when training_epoch_end is defined (or an old-style on_train_epoch_end takes them); evaluation
-- keeps X_step outputs only when X_epoch_end is defined. Proven with weak references to 1 MiB tensors.
local LUA_EXE = require("helpers.puc").lua_exe -- luajit, or lua5.4 under tests/run --lua 5.4
local lt = require "lutra"

local MIB = 256 * 1024 -- float32 elements in 1 MiB

local function loader(n)
  return require("helpers.loader").make(n, function(i) return { lt.full({ 2, 1 }, i), lt.full({ 2, 1 }, 2 * i) } end)
end

local function alive(weak)
  collectgarbage()
  collectgarbage()
  local n = 0
  for _ in pairs(weak) do n = n + 1 end
  return n
end

local quiet = require "helpers.quiet"

-- A model whose training_step returns {loss, big = a fresh 1 MiB tensor}; `weak` holds every big tensor.
local function big_model(weak)
  local m = { w = lt.param(lt.ones(1, 1)), made = 0 }
  function m:training_step(batch, i)
    local big = lt.zeros(MIB)
    self.made = self.made + 1
    weak[self.made] = big
    return { loss = ((batch[1] * self.w - batch[2]) ^ 2):mean(), big = big, i = i }
  end
  function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 0.01 }) end
  return m
end

describe("epoch outputs", function()
  it("keeps no batch output alive without training_epoch_end (memory does not grow with the epoch)", function()
    local weak = setmetatable({}, { __mode = "v" })
    local m = big_model(weak)
    local seen = {}
    local probe = { on_train_epoch_end = function(_, trainer) seen[#seen + 1] = alive(weak) end }
    lt.Trainer(quiet { max_epochs = 2, callbacks = { probe } }):fit(m, loader(6))
    assert.are.equal(12, m.made)
    assert.are.same({ 0, 0 }, seen)
    assert.are.equal(0, alive(weak))
  end)

  it("keeps every batch output alive with training_epoch_end and passes them batch-major", function()
    local weak = setmetatable({}, { __mode = "v" })
    local m = big_model(weak)
    local got
    function m:training_epoch_end(outputs)
      got = { n = #outputs, alive = alive(weak), same = rawequal(outputs[3].big, weak[3]), i = outputs[4].i }
    end
    lt.Trainer(quiet { max_epochs = 1 }):fit(m, loader(5))
    assert.are.same({ n = 5, alive = 5, same = true, i = 3 }, got)
    assert.are.equal(0, alive(weak)) -- released once the epoch is over
  end)

  it("kept losses are detached and divided by accumulate_grad_batches", function()
    local m = { w = lt.param(lt.ones(1, 1)) }
    local returned = {}
    function m:training_step(batch)
      local loss = ((batch[1] * self.w) ^ 2):mean()
      returned[#returned + 1] = loss:item()
      return loss
    end
    function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 0 }) end
    local kept
    function m:training_epoch_end(outputs) kept = outputs end
    lt.Trainer(quiet { max_epochs = 1, accumulate_grad_batches = 2 }):fit(m, loader(4))
    assert.are.equal(4, #kept)
    for i = 1, 4 do
      assert.is_nil(kept[i].loss:grad_fn())
      assert.is_false(kept[i].loss:requires_grad())
      assert.is_true(math.abs(kept[i].loss:item() - returned[i] / 2) < 1e-6)
    end
  end)

  it("with two optimizers the outputs are outputs[batch][optimizer]", function()
    local m = { a = lt.param(lt.ones(1, 1)), b = lt.param(lt.ones(1, 1)) }
    function m:training_step(batch, i, k)
      local w = k == 0 and self.a or self.b
      return { loss = ((batch[1] * w) ^ 2):mean(), k = k, i = i }
    end
    function m:configure_optimizers()
      return { lt.optim.SGD({ self.a }, { lr = 0 }), lt.optim.SGD({ self.b }, { lr = 0 }) }
    end
    local kept
    function m:training_epoch_end(outputs) kept = outputs end
    lt.Trainer(quiet { max_epochs = 1 }):fit(m, loader(3))
    assert.are.equal(3, #kept)
    assert.are.same({ 2, 0, 1, 2 }, { kept[3][1].i, kept[3][1].k, kept[3][2].k, #kept[3] })
  end)

  it("batches whose training_step returns nil are dropped from the outputs (no step either)", function()
    local m = { w = lt.param(lt.ones(1, 1)) }
    function m:training_step(batch, i)
      if i % 2 == 1 then return nil end
      return ((batch[1] * self.w) ^ 2):mean()
    end
    function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 0 }) end
    local kept
    function m:training_epoch_end(outputs) kept = outputs end
    local t = lt.Trainer(quiet { max_epochs = 1 })
    t:fit(m, loader(4))
    assert.are.equal(2, #kept)
    assert.are.equal(4, t.global_step) -- Lightning counts the optimizer_step calls
  end)

  it("the old on_train_epoch_end(self, outputs) receives the outputs and prints the deprecation line once", function()
    local script = [[
      local lt = require "lutra"
      local function loader(n)
        local b = {}
        for i = 1, n do b[i] = { lt.full({ 1, 1 }, i) } end
        return { len = function() return n end, iter = function() local i = 0; return function() i = i + 1; return b[i] end end }
      end
      local m = { w = lt.param(lt.ones(1, 1)) }
      function m:training_step(batch) return ((batch[1] * self.w) ^ 2):mean() end
      function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 0 }) end
      local counts = {}
      function m:on_train_epoch_end(outputs) counts[#counts + 1] = #outputs end
      local cbcount
      local cb = { on_train_epoch_end = function(self, trainer, model, outputs) cbcount = #outputs end }
      local opts = { max_epochs = 2, logger = false, enable_checkpointing = false, enable_model_summary = false,
        enable_progress_bar = false, callbacks = { cb } }
      lt.Trainer(opts):fit(m, loader(3))
      lt.Trainer(opts):fit(m, loader(3))
      io.stdout:write(table.concat(counts, ","), " ", cbcount, "\n")
    ]]
    local f = assert(io.open(os.tmpname(), "w"))
    local path = os.tmpname() .. ".lua"
    f:close()
    f = assert(io.open(path, "w"))
    f:write(script)
    f:close()
    -- LUTRA_QUIET=0: the line is a warning, which a script whose stdout is not a terminal keeps quiet
    local cmd = string.format("LUTRA_QUIET=0 " .. LUA_EXE ..
      " -e 'package.path=%q..package.path; package.cpath=%q..package.cpath' %s 2>&1",
      "./lua/?.lua;./lua/?/init.lua;", package.cpath .. ";", path)
    local p = io.popen(cmd)
    local out = p:read("*a")
    p:close()
    os.remove(path)
    local line = "lutra: on_train_epoch_end(self, outputs) is deprecated; define training_epoch_end(self, outputs) " ..
      "to receive the epoch's outputs"
    local n = 0
    for l in out:gmatch("[^\n]+") do if l == line then n = n + 1 end end
    assert.are.equal(1, n, out)
    assert.truthy(out:find("3,3,3,3 3", 1, true), out)
  end)

  it("a training_epoch_end defined during the run is seen at the next epoch start", function()
    local m = { w = lt.param(lt.ones(1, 1)) }
    function m:training_step(batch, i) return { loss = ((batch[1] * self.w) ^ 2):mean(), i = i } end
    function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 0 }) end
    local got = {}
    function m:on_train_epoch_end()
      if not self.training_epoch_end then
        self.training_epoch_end = function(_, outputs) got[#got + 1] = #outputs end
      end
    end
    lt.Trainer(quiet { max_epochs = 3 }):fit(m, loader(2))
    assert.are.same({ 2, 2 }, got)
  end)

  it("evaluation keeps X_step outputs only when X_epoch_end is defined, nil outputs dropped", function()
    local weak = setmetatable({}, { __mode = "v" })
    local m = {}
    function m:validation_step(batch, i)
      local big = lt.zeros(MIB)
      weak[#weak + 1] = big
      return big
    end
    local seen
    local probe = { on_validation_end = function() seen = alive(weak) end }
    lt.Trainer(quiet { callbacks = { probe } }):validate(m, loader(4))
    assert.are.equal(0, seen)

    local got
    function m:test_step(batch, i)
      if i == 1 then return nil end
      return { i = i }
    end
    function m:test_epoch_end(outputs) got = outputs end
    lt.Trainer(quiet {}):test(m, loader(4))
    assert.are.same({ { i = 0 }, { i = 2 }, { i = 3 } }, got)

    function m:validation_epoch_end(outputs) got = { #outputs, alive(weak) } end
    lt.Trainer(quiet {}):validate(m, loader(3))
    assert.are.same({ 3, 3 }, got)
  end)

  it("with several evaluation loaders X_epoch_end gets one list per loader", function()
    local m = {}
    function m:test_step(batch, i, dl) return dl * 10 + i end
    local got
    function m:test_epoch_end(outputs) got = outputs end
    lt.Trainer(quiet {}):test(m, { loader(2), loader(3) })
    assert.are.same({ { 0, 1 }, { 10, 11, 12 } }, got)
  end)
end)
