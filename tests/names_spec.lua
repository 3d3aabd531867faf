-- names_spec: a name that does not exist in lt's namespaces or among the tensor methods is an error naming it,
-- its namespace and the nearest existing name (lua/lutra/names.lua, core/bind/l_names.c); lazy submodules,
-- private names, feature checks and the REPL's completion keep working.
local lt = require "lutra"
local names = require "lutra.names"
local complete = require "lutra.cli.repl_complete"

local function err_of(f)
  local ok, e = pcall(f)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

describe("missing names", function()
  local cases = {
    { "lt", function() return lt.zerso end, "lt has no 'zerso' (did you mean 'zeros'?)" },
    { "lt.nn", function() return lt.nn.Linaer end, "lt.nn has no 'Linaer' (did you mean 'Linear'?)" },
    { "lt.F", function() return lt.F.cross_entropi end, "lt.F has no 'cross_entropi' (did you mean 'cross_entropy'?)" },
    { "lt.optim", function() return lt.optim.Adamm end, "lt.optim has no 'Adamm' (did you mean 'Adam'?)" },
    { "lt.optim (case)", function() return lt.optim.sgd end, "lt.optim has no 'sgd' (did you mean 'SGD'?)" },
    { "lt.optim.lr_scheduler", function() return lt.optim.lr_scheduler.StepRL end,
      "lt.optim.lr_scheduler has no 'StepRL' (did you mean 'StepLR'?)" },
    { "lt.data", function() return lt.data.DataLoder end, "lt.data has no 'DataLoder' (did you mean 'DataLoader'?)" },
    { "lt.callbacks (lazy name)", function() return lt.callbacks.EarlyStoping end,
      "lt.callbacks has no 'EarlyStoping' (did you mean 'EarlyStopping'?)" },
    { "lt.loggers", function() return lt.loggers.CSVLoger end, "lt.loggers has no 'CSVLoger' (did you mean 'CSVLogger'?)" },
    { "lt.nn.init", function() return lt.nn.init.kaiming_normal end,
      "lt.nn.init has no 'kaiming_normal' (did you mean 'kaiming_normal_'?)" },
  }
  for _, cs in ipairs(cases) do
    it("in " .. cs[1] .. " names the namespace and the nearest name", function()
      assert.matches(cs[3], err_of(cs[2]), 1, true)
    end)
  end

  it("gives no suggestion when nothing is close", function()
    local e = err_of(function() return lt.optim.Frobnicator end)
    assert.matches("lt.optim has no 'Frobnicator'$", e)
  end)

  it("points at the caller's line", function()
    assert.matches("names_spec.lua:%d+: lt.nn has no", err_of(function() return lt.nn.Conv3x end))
  end)

  it("in the tensor methods names the method and tensors", function()
    local x = lt.zeros(3)
    assert.matches("names_spec.lua:%d+: tensor has no method 'sahpe' %(did you mean 'shape'%?%)",
      err_of(function() return x:sahpe() end))
    assert.matches("tensor has no method 'nume1' (did you mean 'numel'?)", err_of(function() return x.nume1 end), 1, true)
    assert.matches("tensor has no method 'completely_unknown'$", err_of(function() return x:completely_unknown() end))
  end)

  it("keeps private names nil and x.grad readable", function()
    assert.is_nil(lt._no_such_thing)
    assert.is_nil(lt.nn._no_such_thing)
    assert.is_nil(lt.zeros(2)._no_such_thing)
    assert.is_nil(lt.zeros(2).grad)
  end)

  it("still loads lazy submodules and lets users add names", function()
    assert.is_table(lt.optim.lr_scheduler)
    assert.is_function(lt.optim.lr_scheduler.StepLR)
    assert.is_not_nil(lt.callbacks.EarlyStopping)
    assert.is_not_nil(lt.nn.LayerNorm)
    lt.nn.MyLayer = 1
    assert.equal(1, lt.nn.MyLayer)
    lt.nn.MyLayer = nil
  end)

  it("answers feature checks with names.has without raising", function()
    assert.is_true(names.has(lt, "zeros"))
    assert.is_true(names.has(lt.optim, "lr_scheduler"))
    assert.is_true(names.has(lt.nn, "LSTM"))
    assert.is_false(names.has(lt.optim, "Adadlta"))
    assert.is_false(names.has({}, "x"))
  end)

  it("leaves the REPL's completion as it was", function()
    _G.lt = lt
    local c = complete.complete("lt.optim.Ad")
    _G.lt = nil
    local set = {}
    for _, v in ipairs(c) do set[v] = true; assert.matches("^lt%.optim%.Ad", v) end
    assert.is_true(set["lt.optim.Adam("] and set["lt.optim.AdamW("])
    _G.x = lt.zeros(2)
    local m = complete.complete("x:sha")
    _G.x = nil
    assert.are.same({ "x:shape(", "x:shape_str(" }, m)
  end)
end)
