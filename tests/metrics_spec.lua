-- tests/metrics_spec.lua — lt.metrics: values against scikit-learn (tests/fixtures/metrics.json, written by
-- tests/fixtures/gen_metrics.py) fed in several batches, forward's batch value, empty updates, state_dict and
-- clone, MetricCollection, the error texts, a state that stays the same size over 10k updates, and
-- self:log(name, metric) in a Trainer (epoch value over the whole epoch, reset between epochs, on_step
-- values, memory flat over a long epoch). DDP sync on 2 ranks: tests/dist/metrics.lua, run from here.
local lt = require "lutra"
local X = require "helpers.nn_fixtures"
local metrics = lt.metrics

local function near(a, b, tol)
  tol = tol or 1e-6
  if a ~= a and b ~= b then return true end
  return math.abs(a - b) <= math.max(tol, 1e-6 * math.abs(b))
end

-- rows first..last of a fixture tensor
local function rows(t, first, count) return t:narrow(1, first, count) end

local function check_value(what, got, expected)
  if type(expected) == "number" then
    assert(type(got) == "number", what .. ": expected a number, got " .. type(got))
    assert(near(got, expected), string.format("%s: got %.9g, expected %.9g", what, got, expected))
  else
    assert(lt.is_tensor(got), what .. ": expected a tensor, got " .. type(got))
    X.check(what, got:float(), expected, 1e-6, 1e-6)
  end
end

describe("lt.metrics against scikit-learn (metrics.json)", function()
  for _, c in ipairs(X.load("metrics.json")) do
    it(c.name .. " (" .. c.metric .. ", in " .. c.batches .. " batches)", function()
      local m = metrics[c.metric](c.opts)
      local p, t = X.tensor(c.preds), X.tensor(c.target)
      local n = p:size(1)
      local per = math.ceil(n / c.batches)
      for first = 1, n, per do
        local k = math.min(per, n - first + 1)
        m:update(rows(p, first, k), rows(t, first, k))
      end
      check_value(c.name, m:compute(), c.expected)
      -- the same data in one update gives the same value (the state is a sum over batches)
      local one = metrics[c.metric](c.opts)
      one:update(p, t)
      check_value(c.name .. " (one batch)", one:compute(), c.expected)
    end)
  end
end)

describe("lt.metrics forward, reset and empty updates", function()
  local p = lt.tensor({ { 0.1, 0.8, 0.1 }, { 0.7, 0.2, 0.1 }, { 0.2, 0.2, 0.6 }, { 0.3, 0.4, 0.3 } })
  local t = lt.tensor({ 2, 1, 2, 3 }, "int64")

  it("m(preds, target) returns the batch's value and adds the batch to the state", function()
    local acc = metrics.Accuracy { task = "multiclass", num_classes = 3 }
    assert.are.equal(1, acc(p:narrow(1, 1, 2), t:narrow(1, 1, 2)))
    assert.are.equal(0, acc(p:narrow(1, 3, 2), t:narrow(1, 3, 2)))
    assert.are.equal(0.5, acc:compute())
    acc:reset()
    acc:update(p, t)
    assert.are.equal(0.5, acc:compute())
    -- a data-keeping metric too: the batch value, then the value over both batches
    local auc = metrics.AUROC { task = "binary" }
    local bp, bt = lt.tensor({ 0.9, 0.1, 0.8, 0.3 }), lt.tensor({ 1, 0, 0, 1 }, "int64")
    assert.are.equal(1, auc(bp:narrow(1, 1, 2), bt:narrow(1, 1, 2)))
    assert.are.equal(0, auc(bp:narrow(1, 3, 2), bt:narrow(1, 3, 2)))
    assert.are.equal(0.75, auc:compute())
    local mx = metrics.MaxMetric()
    assert.are.equal(3, mx(lt.tensor({ 1, 3 })))
    assert.are.equal(2, mx(2))
    assert.are.equal(3, mx:compute())
  end)

  it("a rejected batch leaves the state as it was", function()
    local acc = metrics.Accuracy { task = "multiclass", num_classes = 3 }
    acc:update(p, t)
    assert.has_error(function() acc:update(p, lt.tensor({ 1, 2, 3, 4 }, "int64")) end,
      "Accuracy: target must hold classes 1..3 (1-based), got 4 at position 4")
    assert.has_error(function() acc(p, lt.tensor({ 1, 2, 3, 0 }, "int64")) end)
    assert.are.equal(0.5, acc:compute())
    assert.are.same({ { 1, 1, 0 }, { 0, 1, 1 }, { 0, 1, 1 } }, acc:state_dict().stats:totable())
  end)

  it("gives the documented results before any update", function()
    assert.are.equal(0, metrics.Accuracy({ task = "multiclass", num_classes = 3 }):compute())
    assert.are.equal(0, metrics.F1Score({ task = "binary" }):compute())
    assert.are.same({ { 0, 0 }, { 0, 0 } }, metrics.ConfusionMatrix({ task = "binary" }):compute():totable())
    assert.are.equal(0, metrics.AUROC({ task = "binary" }):compute())
    local ap = metrics.AveragePrecision({ task = "binary" }):compute()
    assert.is_true(ap ~= ap)
    local mse = metrics.MeanSquaredError():compute()
    assert.is_true(mse ~= mse)
    local mean = metrics.MeanMetric():compute()
    assert.is_true(mean ~= mean)
    assert.are.equal(0, metrics.SumMetric():compute())
    assert.are.equal(-math.huge, metrics.MaxMetric():compute())
    assert.are.equal(math.huge, metrics.MinMetric():compute())
    assert.has_error(function() metrics.R2Score():compute() end, "R2Score: needs at least two samples, got 0")
    -- an update with no rows changes nothing
    local acc = metrics.Accuracy { task = "multiclass", num_classes = 3 }
    acc:update(lt.zeros(0, 3), lt.zeros(0):long())
    assert.are.equal(0, acc:compute())
  end)

  it("AUROC and AveragePrecision of a single class: 0 and NaN (the curve is undefined)", function()
    local p1 = lt.tensor({ 0.3, 0.6, 0.9 })
    assert.are.equal(0, metrics.AUROC({ task = "binary" })(p1, lt.tensor({ 1, 1, 1 }, "int64")))
    assert.are.equal(0, metrics.AUROC({ task = "binary" })(p1, lt.tensor({ 0, 0, 0 }, "int64")))
    local ap = metrics.AveragePrecision({ task = "binary" })(p1, lt.tensor({ 0, 0, 0 }, "int64"))
    assert.is_true(ap ~= ap)
    assert.are.equal(1, metrics.AveragePrecision({ task = "binary" })(p1, lt.tensor({ 1, 1, 1 }, "int64")))
    -- multiclass AP leaves a class absent from target out of the macro mean
    local mp = lt.tensor({ { 0.8, 0.1, 0.1 }, { 0.2, 0.7, 0.1 } })
    local v = metrics.AveragePrecision({ task = "multiclass", num_classes = 3 })(mp, lt.tensor({ 1, 2 }, "int64"))
    assert.are.equal(1, v)
  end)

  it("MeanMetric weights, and NaN values by nan_strategy", function()
    local m = metrics.MeanMetric()
    m:update(lt.tensor({ 1, 3 }), lt.tensor({ 3, 1 }))
    m:update(10, 0)
    assert.are.equal(1.5, m:compute())
    local ig = metrics.MeanMetric { nan_strategy = "ignore" }
    ig:update(lt.tensor({ 1, 0 / 0, 3 }))
    assert.are.equal(2, ig:compute())
    local rep = metrics.SumMetric { nan_strategy = 5 }
    rep:update(lt.tensor({ 1, 0 / 0 }))
    assert.are.equal(6, rep:compute())
    local mx = metrics.MaxMetric { nan_strategy = "ignore" }
    mx:update(lt.tensor({ 0 / 0, 0 / 0 }))
    assert.are.equal(-math.huge, mx:compute())
    assert.has_error(function() metrics.MinMetric({ nan_strategy = "error" }):update(0 / 0) end,
      'MinMetric: the value holds NaN (nan_strategy = "error")')
  end)
end)

describe("lt.metrics state", function()
  local p = lt.tensor({ { 0.1, 0.8, 0.1 }, { 0.7, 0.2, 0.1 }, { 0.2, 0.2, 0.6 }, { 0.3, 0.4, 0.3 } })
  local t = lt.tensor({ 2, 1, 2, 3 }, "int64")

  it("state_dict / load_state_dict / clone carry the state; bad states are refused by name", function()
    local f1 = metrics.F1Score { task = "multiclass", num_classes = 3, average = "macro" }
    f1:update(p, t)
    local sd = f1:state_dict()
    local g = metrics.F1Score { task = "multiclass", num_classes = 3, average = "macro" }
    g:load_state_dict(sd)
    assert.are.equal(f1:compute(), g:compute())
    local c = f1:clone()
    c:update(p, t)
    assert.are.equal(f1:compute(), c:compute())
    assert.are.same({ { 2, 2, 0 }, { 0, 2, 2 }, { 0, 2, 2 } }, c:state_dict().stats:totable())
    assert.are.same({ { 1, 1, 0 }, { 0, 1, 1 }, { 0, 1, 1 } }, f1:state_dict().stats:totable()) -- untouched
    assert.has_error(function() g:load_state_dict({ stats = lt.zeros(3, 4, "int64"), n = { 0 } }) end,
      "F1Score:load_state_dict: state 'stats' must be a int64 tensor of shape [3 x 3], got [3 x 4]")
    assert.has_error(function() g:load_state_dict({ stats = sd.stats }) end,
      "F1Score:load_state_dict: missing state 'n'")
    assert.has_error(function() g:load_state_dict({ stats = sd.stats, n = sd.n, extra = 1 }) end,
      "F1Score:load_state_dict: unknown state 'extra'")
    -- the data of AUROC travels as one tensor
    local a = metrics.AUROC { task = "binary" }
    a:update(lt.tensor({ 0.9, 0.2 }), lt.tensor({ 1, 0 }, "int64"))
    a:update(lt.tensor({ 0.4 }), lt.tensor({ 1 }, "int64"))
    local b = a:clone()
    assert.are.same({ 3 }, b:state_dict().preds:shape())
    assert.are.equal(a:compute(), b:compute())
  end)

  it("normalizes a confusion matrix with an empty row to 0, not NaN, with denormals flushed", function()
    local was = lt.set_flush_denormal(true)
    local ok, got = pcall(function()
      local cm = metrics.ConfusionMatrix { task = "multiclass", num_classes = 3, normalize = "true" }
      cm:update(lt.tensor({ 1, 2, 1 }, "int64"), lt.tensor({ 1, 2, 2 }, "int64")) -- class 3 never a target
      return cm:compute():totable()
    end)
    lt.set_flush_denormal(was)
    assert(ok, got)
    assert.are.same({ { 1, 0, 0 }, { 0.5, 0.5, 0 }, { 0, 0, 0 } }, got)
  end)

  it("stays the same size over 10k updates (counts in int64, no growth)", function()
    local acc = metrics.Accuracy { task = "multiclass", num_classes = 3, top_k = 2 }
    local cm = metrics.ConfusionMatrix { task = "multiclass", num_classes = 3 }
    local mse = metrics.MeanSquaredError()
    local bp, bt = lt.tensor({ 0.2, 0.9, 0.6, 0.1 }), lt.tensor({ 0, 1, 1, 0 }, "int64")
    local f1 = metrics.F1Score { task = "binary" }
    acc:update(p, t)
    local first = acc:compute()
    collectgarbage()
    local live0 = lt.memory_stats().live_bytes
    for _ = 1, 10000 do
      acc:update(p, t)
      cm:update(p, t)
      f1:update(bp, bt)
      mse:update(bp, bt:float())
    end
    collectgarbage()
    local live1 = lt.memory_stats().live_bytes
    assert.is_true(live1 <= live0 + 64 * 1024, string.format("live tensor bytes %d -> %d", live0, live1))
    assert.are.same({ 3, 3 }, acc:state_dict().stats:shape())
    assert.are.equal(first, acc:compute())
    assert.are.same({ { 10000, 0, 0 }, { 0, 10000, 10000 }, { 0, 10000, 0 } }, cm:compute():totable())
    assert.are.equal(1, f1:compute())
    assert.is_true(near(mse:compute(), (0.04 + 0.01 + 0.16 + 0.01) / 4, 1e-6))
  end)
end)

describe("AUROC and AveragePrecision with thresholds (binned)", function()
  it("keep counts of fixed size instead of the data, and approach the exact value with many thresholds", function()
    lt.manual_seed(3)
    local exact, binned = metrics.AUROC { task = "binary" }, metrics.AUROC { task = "binary", thresholds = 1001 }
    local ap_exact = metrics.AveragePrecision { task = "binary" }
    local ap_binned = metrics.AveragePrecision { task = "binary", thresholds = 1001 }
    for _ = 1, 200 do
      local p = lt.rand(16)
      local y = p:add(lt.rand(16):mul(0.8)):gt(0.9):long() -- scores that carry information about y
      exact:update(p, y)
      binned:update(p, y)
      ap_exact:update(p, y)
      ap_binned:update(p, y)
    end
    local sd = binned:state_dict()
    assert.are.equal(1001, #sd.tp) -- the same size after 200 updates as after none
    assert.are.same({ 3200 }, sd.n)
    assert.is_nil(sd.preds)
    assert.are.same({ 3200 }, exact:state_dict().preds:shape()) -- the exact mode keeps every score
    assert.is_true(math.abs(exact:compute() - binned:compute()) < 2e-3,
      string.format("exact %.6f, binned %.6f", exact:compute(), binned:compute()))
    assert.is_true(math.abs(ap_exact:compute() - ap_binned:compute()) < 5e-3,
      string.format("exact %.6f, binned %.6f", ap_exact:compute(), ap_binned:compute()))
    assert.has_error(function() metrics.AUROC { task = "binary", thresholds = { 0.5, 0.2 } } end,
      "AUROC: option 'thresholds' must hold ascending numbers in [0, 1]")
    assert.has_error(function() metrics.AUROC { task = "binary", thresholds = 1 } end,
      "AUROC: option 'thresholds' must be an integer >= 2 or a list, got 1")
  end)
end)

describe("lt.metrics.MetricCollection", function()
  local p = lt.tensor({ { 0.1, 0.8, 0.1 }, { 0.7, 0.2, 0.1 }, { 0.2, 0.2, 0.6 }, { 0.3, 0.4, 0.3 } })
  local t = lt.tensor({ 2, 1, 2, 3 }, "int64")
  local function make(opts)
    return metrics.MetricCollection({
      acc = metrics.Accuracy { task = "multiclass", num_classes = 3 },
      f1 = metrics.F1Score { task = "multiclass", num_classes = 3, average = "macro" },
    }, opts)
  end

  it("updates every metric with the same arguments and keys the results with prefix and postfix", function()
    local mc = make { prefix = "val_", postfix = "_x" }
    local batch = mc(p, t)
    assert.are.same({ val_acc_x = 0.5, val_f1_x = 0.5 }, batch)
    assert.are.same({ val_acc_x = 0.5, val_f1_x = 0.5 }, mc:compute())
    assert.are.same({ "val_acc_x", "val_f1_x" }, mc:keys())
    assert.are.equal(0.5, mc.acc:compute()) -- a metric by its name
    local c = mc:clone { prefix = "test_" }
    c:update(p:narrow(1, 1, 2), t:narrow(1, 1, 2))
    assert.are.same({ test_acc_x = 4 / 6, test_f1_x = c.f1:compute() }, c:compute())
    assert.are.equal(0.5, mc.acc:compute())
    local sd = mc:state_dict()
    local other = make()
    other:load_state_dict(sd)
    assert.are.same({ acc = 0.5, f1 = 0.5 }, other:compute())
    mc:reset()
    assert.are.same({ val_acc_x = 0, val_f1_x = 0 }, mc:compute())
    -- a list takes the class names
    local l = metrics.MetricCollection { metrics.MeanMetric(), metrics.SumMetric() }
    l:update(lt.tensor({ 1, 2 }))
    assert.are.same({ MeanMetric = 1.5, SumMetric = 3 }, l:compute())
  end)

  it("refuses what is not a metric, duplicate and method names, unknown options", function()
    assert.has_error(function() metrics.MetricCollection { acc = 1 } end,
      "MetricCollection: 'acc' must be a metric of lt.metrics, got number")
    assert.has_error(function() metrics.MetricCollection { update = metrics.SumMetric() } end,
      "MetricCollection: the name 'update' is a method's name")
    assert.has_error(function() metrics.MetricCollection { metrics.SumMetric(), metrics.SumMetric() } end,
      "MetricCollection: two metrics are named 'SumMetric'")
    assert.has_error(function() metrics.MetricCollection({ a = metrics.SumMetric() }, { prefx = "a" }) end)
    assert.has_error(function() return make().nope end, "MetricCollection has no metric or method 'nope'")
  end)
end)

describe("lt.metrics errors", function()
  local function err(f)
    local ok, e = pcall(f)
    assert(not ok, "expected an error")
    return (tostring(e):gsub("^[^:]*:%d+: ", ""))
  end
  local p = lt.tensor({ { 0.1, 0.8, 0.1 }, { 0.7, 0.2, 0.1 } })

  it("names the metric, the option and the shapes", function()
    assert.are.equal('Accuracy: option \'task\' is required ("binary", "multiclass" or "multilabel")',
      err(function() metrics.Accuracy {} end))
    assert.are.equal('Precision: task "multilabel" needs the option num_labels',
      err(function() metrics.Precision { task = "multilabel" } end))
    assert.are.equal('Recall: option \'average\' must be one of "micro", "macro", "weighted", "none", got mean',
      err(function() metrics.Recall { task = "binary", average = "mean" } end))
    assert.are.equal("Accuracy: top_k (4) must be at most num_classes (3)",
      err(function() metrics.Accuracy { task = "multiclass", num_classes = 3, top_k = 4 } end))
    assert.are.equal('F1Score: option top_k is for task "multiclass", not "binary"',
      err(function() metrics.F1Score { task = "binary", top_k = 2 } end))
    assert.are.equal("Accuracy: option 'threshold' must be in [0, 1], got 2",
      err(function() metrics.Accuracy { task = "binary", threshold = 2 } end))
    assert.are.equal("AUROC: option 'task' must be one of \"binary\", \"multiclass\", got multilabel",
      err(function() metrics.AUROC { task = "multilabel" } end))
    assert.matches("^ConfusionMatrix: unknown option 'normalise'",
      err(function() metrics.ConfusionMatrix { task = "binary", normalise = "true" } end))
    assert.matches("^lt.metrics has no 'Acuracy' %(did you mean 'Accuracy'%?%)", err(function() return metrics.Acuracy end))
    local acc = metrics.Accuracy { task = "multiclass", num_classes = 4 }
    assert.are.equal("Accuracy: multiclass preds must be scores [N x 4] (num_classes = 4) or classes [N], got [2 x 3]",
      err(function() acc:update(p, lt.tensor({ 1, 2 }, "int64")) end))
    local b = metrics.Accuracy { task = "binary" }
    assert.are.equal("Accuracy: target must be int64, got float32 (convert with :long())",
      err(function() b:update(lt.tensor({ 0.2 }), lt.tensor({ 1 })) end))
    assert.are.equal("Accuracy: target must hold 0 or 1, got 2 at position 2",
      err(function() b:update(lt.tensor({ 0.2, 0.4 }), lt.tensor({ 1, 2 }, "int64")) end))
    assert.are.equal("Accuracy: preds [2] and target [3] must have the same shape",
      err(function() b:update(lt.tensor({ 0.2, 0.4 }), lt.tensor({ 1, 0, 1 }, "int64")) end))
    assert.are.equal("Accuracy: preds hold NaN at position 1",
      err(function() b:update(lt.tensor({ 0 / 0 }), lt.tensor({ 1 }, "int64")) end))
    assert.are.equal("Accuracy: preds must be a tensor, got number", err(function() b:update(1, 1) end))
    assert.are.equal("MeanSquaredError: preds must be [N x 2] (num_outputs = 2), got [3]",
      err(function() metrics.MeanSquaredError({ num_outputs = 2 }):update(lt.zeros(3), lt.zeros(3)) end))
    assert.are.equal("AUROC: target must hold classes 1..3 (1-based), got values in 0..1",
      err(function() metrics.AUROC({ task = "multiclass", num_classes = 3 }):update(p, lt.tensor({ 0, 1 }, "int64")) end))
  end)
end)

-- ---- self:log(name, metric) in a Trainer ------------------------------------------------------------------

-- n batches of 4 rows: x = the class (1..3) as the batch's features, y = the class.
local function class_batches(n)
  local list = {}
  for i = 1, n do
    local y = lt.tensor({ (i % 3) + 1, ((i + 1) % 3) + 1, (i % 3) + 1, 3 }, "int64")
    list[i] = { y:float():reshape(4, 1), y }
  end
  return list
end
local function class_loader(n) return require("helpers.loader").of(class_batches(n)) end

local function opts(o)
  local t = { enable_checkpointing = false, enable_model_summary = false, enable_progress_bar = false, logger = false }
  for k, v in pairs(o or {}) do t[k] = v end
  return t
end

-- Scores [4 x 3] that predict the true class in epoch 2 and class 1 in epoch 1 (different accuracies per epoch).
local function scores(model, x)
  local y = x:reshape(-1):long()
  local s = lt.zeros(4, 3)
  for r = 1, 4 do s[r][model.current_epoch == 0 and 1 or y[r]:item()] = 1 end
  return s, y
end

local function fake_logger()
  local l = { rows = {} }
  function l:log_metrics(m, step)
    local r = { step = step }
    for k, v in pairs(m) do r[k] = v end
    self.rows[#self.rows + 1] = r
  end
  return l
end

local function acc3() return metrics.Accuracy { task = "multiclass", num_classes = 3 } end

describe("self:log(name, metric)", function()
  it("logs compute() over the whole epoch at its end, resets between epochs; on_step logs forward's batch value",
    function()
      local m = { w = lt.param(lt.zeros(1)), acc = acc3(), step_acc = acc3(), val_acc = acc3() }
      local ref_train, ref_val, batch_values, counts = { acc3(), acc3() }, { acc3(), acc3() }, {}, {}
      function m:training_step(batch)
        local s, y = scores(self, batch[1])
        self.acc:update(s, y)
        ref_train[self.current_epoch + 1]:update(s, y)
        self:log("train_acc", self.acc, { on_epoch = true, on_step = false })
        batch_values[#batch_values + 1] = self.step_acc(s, y)
        self:log("step_acc", self.step_acc, { on_step = true, on_epoch = false })
        return (self.w * 0):sum()
      end
      function m:validation_step(batch)
        local s, y = scores(self, batch[1])
        self.val_acc:update(s, y)
        if not self.trainer.sanity_checking then ref_val[self.current_epoch + 1]:update(s, y) end
        self:log("val_acc", self.val_acc)
      end
      function m:on_train_epoch_end() counts[#counts + 1] = self.acc._update_count end
      function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 0 }) end
      local lg = fake_logger()
      local t = lt.Trainer(opts { max_epochs = 2, logger = lg, log_every_n_steps = 1, num_sanity_val_steps = 2 })
      t:fit(m, class_loader(5), class_loader(3))
      assert.are.same({ 5, 5 }, counts) -- the whole epoch was in the state at its end, and only that epoch
      local train, val, steps = {}, {}, {}
      for _, r in ipairs(lg.rows) do
        if r.train_acc then train[#train + 1] = r.train_acc end
        if r.val_acc then val[#val + 1] = r.val_acc end
        if r.step_acc then steps[#steps + 1] = r.step_acc end
      end
      local expected_train = { ref_train[1]:compute(), ref_train[2]:compute() }
      assert.is_true(expected_train[1] < 1) -- epoch 1 predicts class 1 only
      assert.are.same(expected_train, train)
      assert.are.equal(1, expected_train[2])
      assert.are.same({ ref_val[1]:compute(), ref_val[2]:compute() }, val) -- without the sanity batches
      assert.are.same(batch_values, steps)
      assert.are.equal(10, #steps)
      assert.are.equal(1, t.callback_metrics.train_acc)
      assert.are.equal(1, t.callback_metrics.val_acc)
      assert.are.equal(0, m.acc._update_count) -- reset after the epoch's value
      assert.are.equal(0, m.val_acc._update_count)
      assert.are.equal(0, m.step_acc._update_count)
    end)

  it("logs a metric updated without forward at each step as its compute() so far, and a MetricCollection by key",
    function()
      local m = { w = lt.param(lt.zeros(1)), sum = metrics.SumMetric(),
        mc = metrics.MetricCollection({ acc = acc3(), mean = metrics.MeanMetric() }, { prefix = "c_" }) }
      function m:training_step(batch)
        local s, y = scores(self, batch[1])
        self.sum:update(y:float())
        self:log("sum", self.sum, { on_step = true, on_epoch = true })
        self.mc.acc:update(s, y)
        self.mc.mean:update(y:float())
        self:log_dict(self.mc)
        return (self.w * 0):sum()
      end
      function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 0 }) end
      local lg = fake_logger()
      local t = lt.Trainer(opts { max_epochs = 1, logger = lg, log_every_n_steps = 1 })
      t:fit(m, class_loader(3))
      local sums, running, last = {}, 0, nil
      for i, b in ipairs(class_batches(3)) do
        running = running + b[2]:sum():item()
        sums[i] = running
        last = b
      end
      local got = {}
      for _, r in ipairs(lg.rows) do if r.sum_step then got[#got + 1] = r.sum_step end end
      assert.are.same(sums, got) -- on_step and on_epoch: the running sum, compute() of the state so far
      assert.are.equal(running, t.callback_metrics.sum_epoch)
      -- the collection's metrics, logged on_step only (training_step's default), are reset after each step:
      -- the last value is the last batch's
      local s, y = scores({ current_epoch = 0 }, last[1])
      assert.are.equal(acc3()(s, y), t.callback_metrics.c_acc)
      assert.are.equal(metrics.MeanMetric()(y:float()), t.callback_metrics.c_mean)
      assert.are.equal(0, m.mc.acc._update_count)
    end)

  it("refuses a metric whose compute() is not one number, naming it", function()
    local m = { w = lt.param(lt.zeros(1)),
      per_class = metrics.Accuracy { task = "multiclass", num_classes = 3, average = "none" } }
    function m:training_step(batch)
      local s, y = scores(self, batch[1])
      self.per_class(s, y)
      self:log("per_class", self.per_class)
      return (self.w * 0):sum()
    end
    function m:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 0 }) end
    local t = lt.Trainer(opts { max_epochs = 1 })
    local ok, e = pcall(function() t:fit(m, class_loader(2)) end)
    assert.is_false(ok)
    assert.matches("the value of 'per_class' must be a number or a one%-element tensor, got a tensor of shape %[3%]",
      tostring(e))
  end)
end)

describe("memory with metrics logged", function()
  it("stays flat over a 10000-batch epoch that logs metric objects on_step and on_epoch (no collectgarbage())", function()
    -- a fresh process (tests/helpers/child.lua), as tests/memory_spec.lua's RSS check. The first reading is
    -- taken after 2000 batches: LuaJIT compiles the loop's traces in the first ~1000, and its trace buffers
    -- add ~2.4 MB of RSS once (flat with -joff), which landed after a reading at batch 500 in some runs.
    local out = require("helpers.child").run([[
      local lt = require "lutra"
      local M = lt.metrics
      local rss_kb = require "tests.helpers.rss"
      lt.manual_seed(0)
      local x, y = lt.randn(16, 8), lt.randint(1, 5, { 16 })
      local N = 10000
      local loader = { len = function() return N end, iter = function()
        local i = 0
        return function() i = i + 1; if i <= N then return { x, y } end end
      end }
      local m = { net = lt.nn.Linear(8, 4), acc = M.Accuracy { task = "multiclass", num_classes = 4 },
        f1 = M.F1Score { task = "multiclass", num_classes = 4, average = "macro" },
        cm = M.ConfusionMatrix { task = "multiclass", num_classes = 4 }, loss = M.MeanMetric() }
      local rss, live = {}, {}
      function m:training_step(batch)
        local out = self.net(batch[1])
        local loss = lt.F.cross_entropy(out, batch[2])
        self:log("acc", self.acc(out, batch[2]) and self.acc, { on_step = true, on_epoch = true })
        self.f1:update(out, batch[2])
        self:log("f1", self.f1, { on_epoch = true })
        self.cm:update(out, batch[2])
        self.loss:update(loss)
        self:log("loss", self.loss, { on_epoch = true, prog_bar = true })
        return loss
      end
      function m:on_train_batch_end(_, _, i)
        if i == 2000 or i == N - 1 then rss[#rss + 1], live[#live + 1] = rss_kb(), lt.memory_stats().live_bytes end
      end
      function m:configure_optimizers() return lt.optim.SGD(self.net:parameters(), { lr = 0.01 }) end
      local t = lt.Trainer { max_epochs = 1, logger = false, enable_checkpointing = false, enable_progress_bar = false,
        enable_model_summary = false, log_every_n_steps = 1 }
      t:fit(m, loader)
      io.write(string.format("RSS %d %d LIVE %d %d ACC %s CM %d\n", rss[1], rss[2], live[1], live[2],
        tostring(t.callback_metrics.acc_epoch), m.cm:compute():sum():item()))
    ]])
    local r1, r2, l1, l2, acc, cm = out:match("RSS (%d+) (%d+) LIVE (%d+) (%d+) ACC (%S+) CM (%d+)")
    assert(r1, "child process failed: " .. out)
    r1, r2, l1, l2 = tonumber(r1), tonumber(r2), tonumber(l1), tonumber(l2)
    assert.is_true(tonumber(acc) > 0)
    assert.are.equal(10000 * 16, tonumber(cm)) -- every batch counted, in a [4 x 4] state
    assert.is_true(l2 <= l1 * 1.5 + 4 * 1024 * 1024, string.format("live tensor bytes %d -> %d", l1, l2))
    if not os.getenv("LUTRA_SANITIZER") then
      assert.is_true(r2 <= r1 * 1.10, string.format("RSS grew from %d KiB after 2000 batches to %d KiB after 10000", r1, r2))
    end
  end)
end)
