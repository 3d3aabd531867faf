-- api_args_spec.lua — the API walk: every public function of lutra called with a number, nil, a string and a
-- table where a tensor (or another argument) is expected, in its first and second positions. Each call either
-- works as documented or raises an error whose message names the function (`bad argument #1 to 'all' (tensor
-- expected, got number)`, `all: dim 5 out of range ...`); never `attempt to index/call ...` from inside lutra,
-- never a crash. The names are read from the live namespaces, so a function added later is walked too.
-- The rule itself (what "names the function" means) is shared with the API fuzzer (tests/fuzz/api_rule.lua).
local lt = require "lutra"
local rule = dofile("tests/fuzz/api_rule.lua")

-- a path in no directory: a string argument taken as a file name fails to open instead of writing a file
local BAD = { { "a number", 5 }, { "nil", nil }, { "a string", "/nonexistent/lutra-api-walk" }, { "a table", {} } }

-- Public functions that change process-wide settings: walked, with the setting put back after each call.
local function restoring()
  local threads, grad, interactive = lt.get_num_threads(), lt.is_grad_enabled(), lt.is_interactive()
  local rng = lt.get_rng_state()
  return function()
    lt.set_num_threads(threads)
    lt.set_grad_enabled(grad)
    lt.set_interactive(interactive)
    lt.set_rng_state(rng)
    lt.interrupt_clear()
  end
end

-- Calls f(...) with each bad value appended to the given leading arguments; returns the calls that broke the
-- rule ("label -> message") and how many calls were made.
local function walk(list, label, names, f, ...)
  local lead = { n = select("#", ...), ... }
  local made = 0
  for _, b in ipairs(BAD) do
    local args = { n = lead.n + 1 }
    for i = 1, lead.n do args[i] = lead[i] end
    args[lead.n + 1] = b[2]
    local restore = restoring()
    local ok, e = pcall(f, unpack(args, 1, args.n))
    restore()
    made = made + 1
    local bad = rule.violation(ok, e, names)
    if bad then list[#list + 1] = string.format("%s(%s%s) -> %s", label, lead.n > 0 and "..., " or "", b[1], bad) end
  end
  return made
end

local function public_functions(ns)
  local ks = {}
  for k, v in pairs(ns) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" and type(v) == "function" then ks[#ks + 1] = k end
  end
  table.sort(ks)
  return ks
end

local function assert_clean(list, made, at_least)
  assert(made >= at_least, string.format("the walk made only %d calls (expected at least %d)", made, at_least))
  assert(#list == 0, string.format("%d of %d calls broke the rule:\n  %s", #list, made, table.concat(list, "\n  ")))
end

describe("API walk: bad arguments name the function", function()
  it("lt.* functions, with the bad value first and after a tensor", function()
    local list, made = {}, 0
    for _, k in ipairs(public_functions(lt)) do
      -- interrupt takes no argument and flags the running fit (walked below); set_flush_denormal takes any value
      -- by its truth and sets this thread's floating-point mode, which cannot be put back to "never set"
      if k ~= "interrupt" and k ~= "set_flush_denormal" then
        made = made + walk(list, "lt." .. k, { k }, lt[k])
        made = made + walk(list, "lt." .. k, { k }, lt[k], lt.ones(2, 3))
      end
    end
    lt.interrupt(5)
    lt.interrupt_clear()
    assert_clean(list, made, 1500)
  end)

  it("tensor methods, with the bad value first and after a tensor", function()
    local list, made = {}, 0
    for _, k in ipairs(public_functions(lt.Tensor.methods)) do
      local call = function(...)
        local x = lt.ones(2, 3)
        return x[k](x, ...)
      end
      made = made + walk(list, "x:" .. k, { k }, call)
      made = made + walk(list, "x:" .. k, { k }, call, lt.ones(2, 3))
    end
    assert_clean(list, made, 1000)
  end)

  it("lt.F.* functions", function()
    local list, made = {}, 0
    for _, k in ipairs(public_functions(lt.F)) do
      made = made + walk(list, "lt.F." .. k, { k }, lt.F[k])
      made = made + walk(list, "lt.F." .. k, { k }, lt.F[k], lt.ones(2, 3))
    end
    assert_clean(list, made, 400)
  end)

  -- constructors' arguments where the defaults do not build one; a loss's forward may name its functional form
  local ctor = {
    Linear = { 3, 4 }, Conv2d = { 1, 2, 3 }, Unflatten = { 2, { 1, 3 } }, AvgPool1d = { 2 }, AvgPool2d = { 2 },
    MaxPool1d = { 2 }, MaxPool2d = { 2 }, Softmax = { 2 }, LogSoftmax = { 2 },
  }
  local functional = {
    BCELoss = "binary_cross_entropy", BCEWithLogitsLoss = "binary_cross_entropy_with_logits",
    CosineEmbeddingLoss = "cosine_embedding_loss", CrossEntropyLoss = "cross_entropy",
    GaussianNLLLoss = "gaussian_nll_loss", HuberLoss = "huber_loss", KLDivLoss = "kl_div", L1Loss = "l1_loss",
    MSELoss = "mse_loss", MarginRankingLoss = "margin_ranking_loss", NLLLoss = "nll_loss",
    PoissonNLLLoss = "poisson_nll_loss", SmoothL1Loss = "smooth_l1_loss", TripletMarginLoss = "triplet_margin_loss",
  }

  it("lt.nn constructors, module forwards and module functions", function()
    local list, made, classes = {}, 0, 0
    local nn = lt.nn
    local names = {}
    for k, v in pairs(nn) do
      if type(v) == "table" and k:match("^%u") and k ~= "Module" then names[#names + 1] = k end
    end
    table.sort(names)
    for _, k in ipairs(names) do
      made = made + walk(list, "nn." .. k, { k }, function(...) return nn[k](...) end)
      local m = nn[k](unpack(ctor[k] or {}))
      classes = classes + 1
      local named = { k, functional[k] }
      made = made + walk(list, "nn." .. k .. "(...)", named, function(...) return m(...) end)
      made = made + walk(list, "nn." .. k .. "(...)", named, function(...) return m(...) end, lt.ones(2, 3))
      made = made + walk(list, "nn." .. k .. ":forward", named, function(...) return m:forward(...) end)
    end
    for _, k in ipairs(public_functions(nn)) do made = made + walk(list, "nn." .. k, { k }, nn[k]) end
    assert(classes >= 40, "walked only " .. classes .. " module classes")
    assert_clean(list, made, 600)
  end)

  it("optimizers and their methods", function()
    local list, made = {}, 0
    for _, k in ipairs(public_functions(lt.optim)) do
      made = made + walk(list, "optim." .. k, { k }, lt.optim[k])
      made = made + walk(list, "optim." .. k, { k }, lt.optim[k], lt.nn.Linear(2, 2):parameters())
      if k:match("^%u") then
        local o = lt.optim[k](lt.nn.Linear(2, 2):parameters(), { lr = 0.1 })
        for _, meth in ipairs { "step", "zero_grad", "add_param_group", "load_state_dict", "state_dict" } do
          if o[meth] then made = made + walk(list, "optim." .. k .. ":" .. meth, { meth, k }, o[meth], o) end
        end
      end
    end
    assert_clean(list, made, 200)
  end)

  it("learning-rate schedulers and their methods", function()
    local list, made = {}, 0
    local S = lt.optim.lr_scheduler
    local opts = {
      StepLR = { step_size = 2 }, MultiStepLR = { milestones = { 2 } }, ExponentialLR = { gamma = 0.9 },
      CosineAnnealingLR = { T_max = 3 }, LambdaLR = { lr_lambda = function() return 1 end },
      MultiplicativeLR = { lr_lambda = function() return 1 end }, CyclicLR = { base_lr = 0.01, max_lr = 0.1 },
      OneCycleLR = { max_lr = 0.1, total_steps = 10 }, CosineAnnealingWarmRestarts = { T_0 = 2 },
    }
    local names = {}
    for k in pairs(S) do names[#names + 1] = k end
    table.sort(names)
    for _, k in ipairs(names) do
      local o = lt.optim.SGD(lt.nn.Linear(2, 2):parameters(), { lr = 0.1, momentum = 0.9 })
      made = made + walk(list, "lr_scheduler." .. k, { k }, S[k])
      made = made + walk(list, "lr_scheduler." .. k, { k }, S[k], o)
      if k ~= "ChainedScheduler" and k ~= "SequentialLR" then -- (they take schedulers: walked above)
        local s = S[k](o, opts[k])
        for _, meth in ipairs { "step", "load_state_dict", "get_last_lr", "state_dict" } do
          made = made + walk(list, "lr_scheduler." .. k .. ":" .. meth, { meth, k }, s[meth], s)
        end
      end
    end
    assert_clean(list, made, 300)
  end)

  it("lt.data, lt.utils and lt.metrics, and the metrics' methods", function()
    local list, made = {}, 0
    for _, ns in ipairs { { "data", lt.data }, { "utils", lt.utils }, { "metrics", lt.metrics } } do
      for _, k in ipairs(public_functions(ns[2])) do
        if k ~= "FashionMNIST" then -- (without a bad argument it loads the whole dataset: walked with one below)
          made = made + walk(list, ns[1] .. "." .. k, { k }, ns[2][k])
        end
        made = made + walk(list, ns[1] .. "." .. k, { k }, ns[2][k], lt.ones(4, 3))
      end
    end
    local cls = { task = "multiclass", num_classes = 3 }
    local margs = {
      Accuracy = cls, F1Score = cls, Precision = cls, Recall = cls, ConfusionMatrix = cls,
      AUROC = { task = "binary" }, AveragePrecision = { task = "binary" }, MetricCollection = {},
    }
    for _, k in ipairs(public_functions(lt.metrics)) do
      if k:match("^%u") then
        local m = lt.metrics[k](margs[k])
        for _, meth in ipairs { "update", "forward", "compute", "reset" } do
          if m[meth] then
            made = made + walk(list, "metrics." .. k .. ":" .. meth, { meth, k }, m[meth], m)
            made = made + walk(list, "metrics." .. k .. ":" .. meth, { meth, k }, m[meth], m, lt.ones(3))
          end
        end
      end
    end
    assert_clean(list, made, 400)
  end)
end)
