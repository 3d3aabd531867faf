-- tests/hooks_order_spec.lua — the order of every hook call (Lightning 1.6's order, restricted to
-- lutra's hooks) for fit, validate, test and predict, recorded from a model and a callback that define ALL
-- hooks, compared with sequences written out here.
local lt = require "lutra"

-- n batches of {x [2 x 1], y [2 x 1]}; a plain Lua loader (a table with len() and iter())
local function loader(n)
  return require("helpers.loader").make(n, function(i) return { lt.full({ 2, 1 }, i), lt.full({ 2, 1 }, 2 * i) } end)
end

local CALLBACK_HOOKS = {
  "setup", "teardown", "on_fit_start", "on_fit_end", "on_sanity_check_start", "on_sanity_check_end",
  "on_train_start", "on_train_end", "on_train_epoch_start", "on_train_epoch_end", "on_train_batch_start",
  "on_train_batch_end", "on_validation_start", "on_validation_end", "on_validation_epoch_start",
  "on_validation_epoch_end", "on_validation_batch_start", "on_validation_batch_end", "on_test_start", "on_test_end",
  "on_test_epoch_start", "on_test_epoch_end", "on_test_batch_start", "on_test_batch_end", "on_predict_start",
  "on_predict_end", "on_predict_epoch_start", "on_predict_epoch_end", "on_predict_batch_start",
  "on_predict_batch_end", "on_before_zero_grad", "on_before_backward", "on_after_backward",
  "on_before_optimizer_step", "on_save_checkpoint", "on_load_checkpoint", "on_exception",
}

-- the arguments a record shows: stage, batch_idx, dataloader_idx, optimizer_idx
local function show(name, args)
  local a = args
  local function s(...) return name .. "(" .. table.concat({ ... }, ",") .. ")" end
  if name == "setup" or name == "teardown" then return s(a[1]) end
  if name == "on_train_batch_start" then return s(a[2]) end
  if name == "on_train_batch_end" then return s(a[3]) end
  if name:match("^on_%a+_batch_start$") then return s(a[2], a[3]) end
  if name:match("^on_%a+_batch_end$") then return s(a[3], a[4]) end
  if name == "training_step" then return s(a[2], a[3] ~= nil and type(a[3]) == "number" and a[3] or nil) end
  if name == "validation_step" or name == "test_step" or name == "predict_step" then return s(a[2], a[3]) end
  if name == "on_before_optimizer_step" then return s(a[2]) end
  if name == "optimizer_zero_grad" then return s(a[1], a[2], a[4]) end
  if name == "optimizer_step" then return s(a[1], a[2], a[4]) end
  if name == "backward" then return s(a[3]) end
  if name == "configure_gradient_clipping" then return s(a[2]) end
  if name == "lr_scheduler_step" then return s(a[2]) end
  return name
end

-- A model defining every hook (recording each call), and a callback defining every callback hook.
local function recorder(opts)
  opts = opts or {}
  local calls = {}
  local function rec(name, ...) calls[#calls + 1] = show(name, { ... }) end
  local m = { w = lt.param(lt.zeros(1, 1)), w2 = lt.param(lt.zeros(1, 1)) }
  local simple = { "prepare_data", "on_fit_start", "on_fit_end", "on_train_start", "on_train_end",
    "on_train_epoch_start", "on_validation_start", "on_validation_end", "on_validation_epoch_start",
    "on_validation_epoch_end", "on_test_start", "on_test_end", "on_test_epoch_start", "on_test_epoch_end",
    "on_predict_start", "on_predict_end", "on_predict_epoch_start", "on_validation_model_eval",
    "on_validation_model_train", "on_test_model_eval", "on_test_model_train", "on_predict_model_eval",
    "on_after_backward", "on_save_checkpoint", "on_load_checkpoint" }
  for _, h in ipairs(simple) do m[h] = function(self, ...) rec(h, ...) end end
  function m:on_train_epoch_end() rec("on_train_epoch_end") end
  for _, h in ipairs { "setup", "teardown", "on_train_batch_start", "on_train_batch_end", "on_validation_batch_start",
    "on_validation_batch_end", "on_test_batch_start", "on_test_batch_end", "on_predict_batch_start",
    "on_predict_batch_end", "on_before_zero_grad", "on_before_backward", "on_before_optimizer_step",
    "on_predict_epoch_end" } do
    m[h] = function(self, ...) rec(h, ...) end
  end
  if opts.stop_at then
    function m:on_train_batch_start(batch, i)
      rec("on_train_batch_start", batch, i)
      if i == opts.stop_at then return -1 end
    end
  end
  function m:configure_callbacks() rec("configure_callbacks"); return {} end
  function m:configure_optimizers()
    rec("configure_optimizers")
    local o1 = lt.optim.SGD({ self.w }, { lr = 0.1 })
    if opts.two_optimizers then
      local o2 = lt.optim.SGD({ self.w2 }, { lr = 0.1 })
      return { o1, o2 }
    end
    local s = lt.optim.lr_scheduler.StepLR(o1, { step_size = 1 })
    return { optimizer = o1, lr_scheduler = s }
  end
  function m:training_step(batch, i, k)
    rec("training_step", batch, i, k)
    local w = (k == 1) and self.w2 or self.w
    return ((batch[1] * w - batch[2]) ^ 2):mean()
  end
  if not opts.no_epoch_end then
    function m:training_epoch_end(outputs) rec("training_epoch_end") end
  end
  function m:validation_step(batch, i, dl) rec("validation_step", batch, i, dl); return { x = i } end
  function m:validation_epoch_end(outs) rec("validation_epoch_end") end
  function m:test_step(batch, i, dl) rec("test_step", batch, i, dl); return { x = i } end
  function m:test_epoch_end(outs) rec("test_epoch_end") end
  function m:predict_step(batch, i, dl) rec("predict_step", batch, i, dl); return batch[1] end
  function m:optimizer_zero_grad(epoch, i, opt, k) rec("optimizer_zero_grad", epoch, i, opt, k); opt:zero_grad() end
  function m:backward(loss, opt, k) rec("backward", loss, opt, k); loss:backward() end
  function m:configure_gradient_clipping(opt, k, v, a) rec("configure_gradient_clipping", opt, k, v, a) end
  function m:optimizer_step(epoch, i, opt, k, closure) rec("optimizer_step", epoch, i, opt, k); opt:step(closure) end
  function m:lr_scheduler_step(s, k, metric) rec("lr_scheduler_step", s, k, metric); s:step() end

  local cb = {}
  for _, h in ipairs(CALLBACK_HOOKS) do
    cb[h] = function(self, trainer, model, ...)
      assert(model == m, "callbacks get (self, trainer, model, ...)")
      calls[#calls + 1] = "Callback." .. show(h, { ... })
    end
  end
  return m, cb, calls
end

local function trainer(cb, opts)
  local o = { callbacks = { cb }, logger = false, enable_checkpointing = false, enable_model_summary = false,
    enable_progress_bar = false }
  for k, v in pairs(opts or {}) do o[k] = v end
  return lt.Trainer(o)
end

local function both(name) return { "Callback." .. name, name } end

local function flatten(list)
  local out = {}
  local function add(x)
    if type(x) == "table" then for _, y in ipairs(x) do add(y) end else out[#out + 1] = x end
  end
  add(list)
  return out
end

local function eval_epoch(noun, n)
  local seq = { "on_" .. noun .. "_model_eval", both("on_" .. noun .. "_start"), both("on_" .. noun .. "_epoch_start") }
  for i = 0, n - 1 do
    seq[#seq + 1] = {
      "Callback.on_" .. noun .. "_batch_start(" .. i .. ",0)", "on_" .. noun .. "_batch_start(" .. i .. ",0)",
      noun .. "_step(" .. i .. ")",
      "Callback.on_" .. noun .. "_batch_end(" .. i .. ",0)", "on_" .. noun .. "_batch_end(" .. i .. ",0)",
    }
  end
  seq[#seq + 1] = { noun .. "_epoch_end", both("on_" .. noun .. "_epoch_end"), both("on_" .. noun .. "_end"),
    "on_" .. noun .. "_model_train" }
  return seq
end

-- one automatic-optimization batch with optimizer k (0-based)
local function opt_block(epoch, i, k, opts)
  opts = opts or {}
  local seq = {}
  local function add(x) seq[#seq + 1] = x end
  local step = not opts.accumulate
  if step then add(("optimizer_step(%d,%d,%d)"):format(epoch, i, k)) end
  add(opts.two and ("training_step(%d,%d)"):format(i, k) or ("training_step(%d)"):format(i))
  if opts.zero_grad ~= false then
    add("Callback.on_before_zero_grad"); add("on_before_zero_grad")
    add(("optimizer_zero_grad(%d,%d,%d)"):format(epoch, i, k))
  end
  add("Callback.on_before_backward"); add("on_before_backward")
  add(("backward(%d)"):format(k))
  add("Callback.on_after_backward"); add("on_after_backward")
  if step then
    add(("Callback.on_before_optimizer_step(%d)"):format(k)); add(("on_before_optimizer_step(%d)"):format(k))
    add(("configure_gradient_clipping(%d)"):format(k))
  end
  return seq
end

local function train_batch(epoch, i, opts)
  opts = opts or {}
  local seq = { ("Callback.on_train_batch_start(%d)"):format(i), ("on_train_batch_start(%d)"):format(i) }
  if opts.stop then return seq end
  local nopt = opts.two and 2 or 1
  for k = 0, nopt - 1 do seq[#seq + 1] = opt_block(epoch, i, k, opts) end
  if opts.sched then seq[#seq + 1] = "lr_scheduler_step(0)" end
  seq[#seq + 1] = { ("Callback.on_train_batch_end(%d)"):format(i), ("on_train_batch_end(%d)"):format(i) }
  return seq
end

-- head: the calls before on_fit_start (default: those of a fit without a datamodule); loaders: the data hooks'
-- calls {sanity = ..., fit = ...}: after on_sanity_check_start, and at the fit loop's start before on_train_start
local function fit_prefix(sanity, head, loaders)
  local seq = head or { "configure_callbacks", "prepare_data", "Callback.setup(fit)", "setup(fit)", "configure_optimizers" }
  loaders = loaders or {}
  seq[#seq + 1] = both("on_fit_start")
  if sanity then
    seq[#seq + 1] = { "Callback.on_sanity_check_start", loaders.sanity or {}, eval_epoch("validation", sanity),
      "Callback.on_sanity_check_end" }
  end
  seq[#seq + 1] = { loaders.fit or {}, both("on_train_start") }
  return seq
end

local function fit_suffix()
  return { both("on_train_end"), both("on_fit_end"), "Callback.teardown(fit)", "teardown(fit)" }
end

local function assert_sequence(expected, got)
  expected = flatten(expected)
  for i = 1, math.max(#expected, #got) do
    if expected[i] ~= got[i] then
      local lo, hi = math.max(1, i - 4), math.min(math.max(#expected, #got), i + 4)
      local ctx = {}
      for j = lo, hi do
        ctx[#ctx + 1] = ("%s%3d  expected %-40s got %s"):format(j == i and ">" or " ", j, tostring(expected[j]),
          tostring(got[j]))
      end
      error("hook sequences differ at call " .. i .. ":\n" .. table.concat(ctx, "\n"), 2)
    end
  end
end

describe("hook order", function()
  it("fit: 2 epochs x 2 batches, 2 validation batches, sanity check of 2 (Lightning 1.6's order)", function()
    local m, cb, calls = recorder()
    trainer(cb, { max_epochs = 2 }):fit(m, loader(2), loader(2))
    local expected = { fit_prefix(2) }
    for epoch = 0, 1 do
      expected[#expected + 1] = both("on_train_epoch_start")
      for i = 0, 1 do expected[#expected + 1] = train_batch(epoch, i, { sched = i == 1 }) end
      expected[#expected + 1] = eval_epoch("validation", 2)
      expected[#expected + 1] = { "training_epoch_end", both("on_train_epoch_end") }
    end
    expected[#expected + 1] = fit_suffix()
    assert_sequence(expected, calls)
  end)

  it("fit without training_epoch_end calls no training_epoch_end", function()
    local m, cb, calls = recorder { no_epoch_end = true }
    trainer(cb, { max_epochs = 1, num_sanity_val_steps = 0 }):fit(m, loader(2), loader(1))
    local expected = { fit_prefix(nil), both("on_train_epoch_start") }
    for i = 0, 1 do expected[#expected + 1] = train_batch(0, i, { sched = i == 1 }) end
    expected[#expected + 1] = { eval_epoch("validation", 1), both("on_train_epoch_end"), fit_suffix() }
    assert_sequence(expected, calls)
  end)

  it("accumulate_grad_batches = 2 over 4 batches: zero_grad on batches 0 and 2, steps on 1 and 3", function()
    local m, cb, calls = recorder()
    trainer(cb, { max_epochs = 1, accumulate_grad_batches = 2 }):fit(m, loader(4))
    local expected = { fit_prefix(nil), both("on_train_epoch_start") }
    for i = 0, 3 do
      local acc = i % 2 == 0
      expected[#expected + 1] = train_batch(0, i, { accumulate = acc, zero_grad = acc, sched = i == 3 })
    end
    expected[#expected + 1] = { "training_epoch_end", both("on_train_epoch_end"), fit_suffix() }
    assert_sequence(expected, calls)
  end)

  it("-1 from on_train_batch_start at batch 1 ends the epoch: no step, no on_train_batch_end, epoch-end hooks run",
    function()
      local m, cb, calls = recorder { stop_at = 1 }
      local t = trainer(cb, { max_epochs = 1 })
      t:fit(m, loader(3), loader(1))
      local expected = { fit_prefix(1), both("on_train_epoch_start"), train_batch(0, 0), train_batch(0, 1, { stop = true }),
        "training_epoch_end", both("on_train_epoch_end"), fit_suffix() }
      assert_sequence(expected, calls)
      assert.are.equal(1, t.global_step)
    end)

  it("two optimizers: each batch runs the closure and step of optimizer 0 then 1, optimizer_idx passed", function()
    local m, cb, calls = recorder { two_optimizers = true }
    local t = trainer(cb, { max_epochs = 1 })
    t:fit(m, loader(2))
    local expected = { fit_prefix(nil), both("on_train_epoch_start") }
    for i = 0, 1 do expected[#expected + 1] = train_batch(0, i, { two = true }) end
    expected[#expected + 1] = { "training_epoch_end", both("on_train_epoch_end"), fit_suffix() }
    assert_sequence(expected, calls)
    assert.are.equal(4, t.global_step) -- Lightning 1.6: steps of every optimizer
  end)

  it("validate: setup, eval epoch, teardown with stage 'validate'", function()
    local m, cb, calls = recorder()
    trainer(cb):validate(m, loader(2))
    assert_sequence({ "configure_callbacks", "prepare_data", "Callback.setup(validate)", "setup(validate)",
      eval_epoch("validation", 2), "Callback.teardown(validate)", "teardown(validate)" }, calls)
  end)

  it("test: setup, eval epoch, teardown with stage 'test'", function()
    local m, cb, calls = recorder()
    trainer(cb):test(m, loader(3))
    assert_sequence({ "configure_callbacks", "prepare_data", "Callback.setup(test)", "setup(test)",
      eval_epoch("test", 3), "Callback.teardown(test)", "teardown(test)" }, calls)
  end)

  it("predict: no predict_model_train, on_predict_epoch_end with the results", function()
    local m, cb, calls = recorder()
    local preds = trainer(cb):predict(m, loader(2))
    local seq = { "configure_callbacks", "prepare_data", "Callback.setup(predict)", "setup(predict)",
      "on_predict_model_eval", both("on_predict_start"), both("on_predict_epoch_start") }
    for i = 0, 1 do
      seq[#seq + 1] = { ("Callback.on_predict_batch_start(%d,0)"):format(i), ("on_predict_batch_start(%d,0)"):format(i),
        ("predict_step(%d)"):format(i), ("Callback.on_predict_batch_end(%d,0)"):format(i),
        ("on_predict_batch_end(%d,0)"):format(i) }
    end
    seq[#seq + 1] = { both("on_predict_epoch_end"), both("on_predict_end"), "Callback.teardown(predict)",
      "teardown(predict)" }
    assert_sequence(seq, calls)
    assert.are.equal(2, #preds)
    assert.are.same({ { 2 }, { 2 } }, preds[2]:totable())
  end)

  it("several validation loaders: validation_step gets dataloader_idx, batch hooks always do", function()
    local m, cb, calls = recorder()
    trainer(cb):validate(m, { loader(1), loader(1) })
    local want = { "configure_callbacks", "prepare_data", "Callback.setup(validate)", "setup(validate)",
      "on_validation_model_eval", both("on_validation_start"), both("on_validation_epoch_start"),
      "Callback.on_validation_batch_start(0,0)", "on_validation_batch_start(0,0)", "validation_step(0,0)",
      "Callback.on_validation_batch_end(0,0)", "on_validation_batch_end(0,0)",
      "Callback.on_validation_batch_start(0,1)", "on_validation_batch_start(0,1)", "validation_step(0,1)",
      "Callback.on_validation_batch_end(0,1)", "on_validation_batch_end(0,1)",
      "validation_epoch_end", both("on_validation_epoch_end"), both("on_validation_end"), "on_validation_model_train",
      "Callback.teardown(validate)", "teardown(validate)" }
    assert_sequence(want, calls)
  end)

  it("callbacks run in list order before the model; a built-in ModelCheckpoint runs last", function()
    local order = {}
    local function cb(name) return { on_train_start = function() order[#order + 1] = name end } end
    local cbs = lt.callbacks
    local mc = cbs.ModelCheckpoint { dirpath = os.tmpname() .. "_dir", save_top_k = 0 }
    mc.on_train_start = function() order[#order + 1] = "ModelCheckpoint" end
    local m = { w = lt.param(lt.zeros(1, 1)) }
    function m:training_step(b) return ((b[1] * self.w) ^ 2):mean() end
    function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 0.1 }) end
    function m:on_train_start() order[#order + 1] = "model" end
    local t = lt.Trainer { callbacks = { cb("a"), mc, cb("b") }, max_steps = 1, logger = false,
      enable_model_summary = false, enable_progress_bar = false }
    t:fit(m, loader(1))
    assert.are.same({ "a", "b", "ModelCheckpoint", "model" }, order)
  end)
end)

-- Lightning 1.6 with a LightningDataModule: its prepare_data before the model's; its setup/teardown before
-- the callbacks' and the model's (trainer._call_setup_hook / _call_teardown_hook); the loaders from the
-- datamodule only, asked for where Lightning's loops ask: val_dataloader after on_sanity_check_start (or at the
-- fit loop's start without a sanity check), train_dataloader at the fit loop's start, before on_train_start.
describe("hook order with a DataModule", function()
  local function recording_dm(calls, opts)
    opts = opts or {}
    local D = lt.DataModule:extend("RecDM")
    function D:prepare_data() calls[#calls + 1] = "DataModule.prepare_data" end
    function D:setup(stage) calls[#calls + 1] = "DataModule.setup(" .. stage .. ")" end
    function D:teardown(stage) calls[#calls + 1] = "DataModule.teardown(" .. stage .. ")" end
    for _, h in ipairs { "train", "val", "test", "predict" } do
      if not (opts.no_val and h == "val") then
        D[h .. "_dataloader"] = function()
          calls[#calls + 1] = "DataModule." .. h .. "_dataloader"
          return loader(2)
        end
      end
    end
    return D()
  end

  local function dm_fit_prefix(sanity, no_val)
    local head = { "configure_callbacks", "DataModule.prepare_data", "prepare_data", "DataModule.setup(fit)",
      "Callback.setup(fit)", "setup(fit)", "configure_optimizers" }
    local loaders = { fit = { "DataModule.train_dataloader" } }
    if not no_val then
      if sanity then loaders.sanity = { "DataModule.val_dataloader" }
      else loaders.fit[2] = "DataModule.val_dataloader" end
    end
    return fit_prefix(sanity, head, loaders)
  end

  it("fit(model, {datamodule = dm}): the datamodule's hooks first, its loaders, its teardown first", function()
    local m, cb, calls = recorder()
    local dm = recording_dm(calls)
    local t = trainer(cb, { max_epochs = 1 })
    t:fit(m, { datamodule = dm })
    local expected = { dm_fit_prefix(2), both("on_train_epoch_start") }
    for i = 0, 1 do expected[#expected + 1] = train_batch(0, i, { sched = i == 1 }) end
    expected[#expected + 1] = { eval_epoch("validation", 2), "training_epoch_end", both("on_train_epoch_end"),
      both("on_train_end"), both("on_fit_end"), "DataModule.teardown(fit)", "Callback.teardown(fit)", "teardown(fit)" }
    assert_sequence(expected, calls)
    assert.are.equal(dm, t.datamodule)
    assert.are.equal(t, dm.trainer)
  end)

  it("num_sanity_val_steps = 0: train_dataloader, then val_dataloader, at the fit loop's start", function()
    local m, cb, calls = recorder()
    local dm = recording_dm(calls)
    trainer(cb, { max_epochs = 1, num_sanity_val_steps = 0 }):fit(m, dm)
    local expected = { dm_fit_prefix(nil), both("on_train_epoch_start") }
    for i = 0, 1 do expected[#expected + 1] = train_batch(0, i, { sched = i == 1 }) end
    expected[#expected + 1] = { eval_epoch("validation", 2), "training_epoch_end", both("on_train_epoch_end"),
      both("on_train_end"), both("on_fit_end"), "DataModule.teardown(fit)", "Callback.teardown(fit)", "teardown(fit)" }
    assert_sequence(expected, calls)
  end)

  it("fit(model, dm) positional; a datamodule without val_dataloader: no validation, no model fallback", function()
    local m, cb, calls = recorder()
    function m:val_dataloader() calls[#calls + 1] = "val_dataloader"; return loader(1) end
    local dm = recording_dm(calls, { no_val = true })
    trainer(cb, { max_epochs = 1 }):fit(m, dm)
    local expected = { dm_fit_prefix(nil, true), both("on_train_epoch_start") }
    for i = 0, 1 do expected[#expected + 1] = train_batch(0, i, { sched = i == 1 }) end
    expected[#expected + 1] = { "training_epoch_end", both("on_train_epoch_end"), both("on_train_end"),
      both("on_fit_end"), "DataModule.teardown(fit)", "Callback.teardown(fit)", "teardown(fit)" }
    assert_sequence(expected, calls)
  end)

  for _, case in ipairs { { "validate", "validation", "val" }, { "test", "test", "test" } } do
    local fn, noun, short = case[1], case[2], case[3]
    it(fn .. "(model, {datamodule = dm}): setup, then " .. short .. "_dataloader, the epoch, teardown", function()
      local m, cb, calls = recorder()
      local dm = recording_dm(calls)
      trainer(cb)[fn](trainer(cb), m, { datamodule = dm })
      assert_sequence({ "configure_callbacks", "DataModule.prepare_data", "prepare_data",
        "DataModule.setup(" .. fn .. ")", "Callback.setup(" .. fn .. ")", "setup(" .. fn .. ")",
        "DataModule." .. short .. "_dataloader", eval_epoch(noun, 2), "DataModule.teardown(" .. fn .. ")",
        "Callback.teardown(" .. fn .. ")", "teardown(" .. fn .. ")" }, calls)
    end)
  end

  it("the model's own *_dataloader hooks when fit, test and predict get no loaders", function()
    local m, cb, calls = recorder()
    for _, h in ipairs { "train", "val", "test", "predict" } do
      m[h .. "_dataloader"] = function(self)
        assert.are.equal(m, self)
        calls[#calls + 1] = h .. "_dataloader"
        return loader(1)
      end
    end
    local t = trainer(cb, { max_epochs = 1, num_sanity_val_steps = 0 })
    t:fit(m)
    local cut = {}
    for i = 1, 11 do cut[i] = calls[i] end
    assert.are.same({ "configure_callbacks", "prepare_data", "Callback.setup(fit)", "setup(fit)",
      "configure_optimizers", "Callback.on_fit_start", "on_fit_start", "train_dataloader", "val_dataloader",
      "Callback.on_train_start", "on_train_start" }, cut)
    for k in pairs(calls) do calls[k] = nil end
    local preds = t:predict(m)
    assert.are.equal(1, #preds)
    assert.are.equal("predict_dataloader", calls[5])
  end)

  it("fit(model, train_loader) with the model's val_dataloader: validation from the hook (Lightning's source)", function()
    local m, cb, calls = recorder()
    function m:val_dataloader() calls[#calls + 1] = "val_dataloader"; return loader(1) end
    trainer(cb, { max_epochs = 1, num_sanity_val_steps = 0 }):fit(m, loader(2))
    local expected = { fit_prefix(nil, nil, { fit = { "val_dataloader" } }), both("on_train_epoch_start") }
    for i = 0, 1 do expected[#expected + 1] = train_batch(0, i, { sched = i == 1 }) end
    expected[#expected + 1] = { eval_epoch("validation", 1), "training_epoch_end", both("on_train_epoch_end"),
      fit_suffix() }
    assert_sequence(expected, calls)
  end)

  it("fit(model, train_loader) with the model's val_dataloader and a sanity check: asked after its start", function()
    local m, cb, calls = recorder()
    function m:val_dataloader() calls[#calls + 1] = "val_dataloader"; return loader(1) end
    trainer(cb, { max_epochs = 1 }):fit(m, loader(1))
    local expected = { fit_prefix(1, nil, { sanity = { "val_dataloader" } }), both("on_train_epoch_start"),
      train_batch(0, 0, { sched = true }), eval_epoch("validation", 1), "training_epoch_end", both("on_train_epoch_end"),
      fit_suffix() }
    assert_sequence(expected, calls)
  end)

  it("errors: loaders and a datamodule together; a datamodule hook's error names the datamodule", function()
    local m, cb = recorder()
    local calls = {}
    local dm = recording_dm(calls)
    local t = trainer(cb, { max_epochs = 1 })
    assert.has_error(function() t:fit(m, loader(1), nil, { datamodule = dm }) end,
      "fit: give the loaders or a datamodule, not both (fit(model, {datamodule = dm}))")
    assert.has_error(function() t:fit(m, { datamodule = 5 }) end,
      "fit: option 'datamodule' must be a lt.DataModule (or a table with *_dataloader methods), got number")
    local m2 = { w = lt.param(lt.zeros(1)) }
    function m2:training_step() end
    function m2:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 1 }) end
    assert.has_error(function() t:fit(m2) end, "fit: no training dataloader given (fit(model, train_loader[, " ..
      "val_loader]), fit(model, {datamodule = dm}) or a train_dataloader hook)")
    function dm:setup() error("no data here", 0) end
    local ok, err = pcall(function() t:fit(m, dm) end)
    assert.is_false(ok)
    assert.matches("setup (datamodule): no data here", tostring(err), 1, true)
  end)
end)
