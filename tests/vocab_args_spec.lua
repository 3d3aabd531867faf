-- vocab_args_spec.lua — PyTorch's calling convention for every constructor of lt.help's public list (lt.nn.*,
-- lt.optim.*, lt.optim.lr_scheduler.*): PyTorch 1.13's positional arguments build what the same values by name in
-- an options table build; a name given both ways, an unknown option and one positional value too many are errors
-- naming the constructor and the option. A public constructor with no case here fails the first test, so a new
-- one cannot miss the convention.
local lt = require "lutra"
local err_of = require "tests.helpers.err_of"
local SIG = require "lutra.utils.signatures"
local unpack = require("lutra._compat").unpack

local nn, S = lt.nn, lt.optim.lr_scheduler

-- constructors that take no PyTorch-style arguments (containers take their children, ChainedScheduler its list;
-- Module is the base class; Identity ignores its arguments as PyTorch's does)
local EXEMPT = { ["lt.nn.Module"] = true, ["lt.nn.Sequential"] = true, ["lt.nn.ModuleList"] = true,
  ["lt.nn.ModuleDict"] = true, ["lt.nn.Identity"] = true, ["lt.optim.lr_scheduler.ChainedScheduler"] = true }

-- PyTorch's positional names of the Transformer classes (their own argument lists in nn/transformer.lua)
local LAYER = { "d_model", "nhead", "dim_feedforward", "dropout", "activation", "layer_norm_eps", "batch_first",
  "norm_first" }
local TRANSFORMER_NAMES = {
  TransformerEncoderLayer = LAYER, TransformerDecoderLayer = LAYER,
  TransformerEncoder = { "encoder_layer", "num_layers", "norm", "enable_nested_tensor" },
  TransformerDecoder = { "decoder_layer", "num_layers", "norm" },
  Transformer = { "d_model", "nhead", "num_encoder_layers", "num_decoder_layers", "dim_feedforward", "dropout",
    "activation", "custom_encoder", "custom_decoder", "layer_norm_eps", "batch_first", "norm_first" },
}

local function w4() return lt.ones(4) end

-- name -> the positional values to try (PyTorch's order; nil is "not given"), n = how many
local function args(...) return { n = select("#", ...), ... } end
local NN = {
  Linear = args(3, 4, false),
  Conv1d = args(2, 4, 3, 2, 1, 1, 2, false),
  Conv2d = args(4, 8, 4, 2, 1, 1, 2, false, "zeros"),
  ConvTranspose2d = args(4, 2, 4, 2, 1, 1, 2, false, 1),
  Embedding = args(10, 4, 2),
  BatchNorm1d = args(4, 1e-3, 0.2, false, false),
  BatchNorm2d = args(4, 1e-3, 0.2, true, true),
  InstanceNorm1d = args(4, 1e-3, 0.2, true, false),
  InstanceNorm2d = args(4, 1e-3, 0.2, true, true),
  LayerNorm = args({ 4 }, 1e-3, false),
  GroupNorm = args(2, 4, 1e-3, false),
  MaxPool1d = args(3, 2, 1, 1),
  MaxPool2d = args({ 3, 3 }, { 2, 1 }, 1, 1),
  AvgPool1d = args(3, 2, 1, true, false),
  AvgPool2d = args(3, 2, 1, true, false),
  AdaptiveAvgPool1d = args(4),
  AdaptiveAvgPool2d = args({ 2, 3 }),
  AdaptiveMaxPool1d = args(4),
  AdaptiveMaxPool2d = args({ 2, 3 }),
  Upsample = args(nil, 2, "bilinear", false),
  PixelShuffle = args(3),
  PixelUnshuffle = args(2),
  UpsamplingNearest2d = args(nil, 2),
  UpsamplingBilinear2d = args({ 4, 4 }),
  Dropout = args(0.2, true),
  Dropout2d = args(0.2, true),
  Dropout3d = args(0.2, true),
  ReLU = args(true),
  Tanh = args(),
  Sigmoid = args(),
  GELU = args("tanh"),
  LeakyReLU = args(0.2, true),
  Softmax = args(2),
  LogSoftmax = args(-1),
  SiLU = args(true),
  Mish = args(true),
  Hardswish = args(true),
  Hardsigmoid = args(true),
  ELU = args(0.5, true),
  Softplus = args(2, 10),
  Hardtanh = args(-2, 2, true),
  PReLU = args(3, 0.1),
  Flatten = args(1, 2),
  Unflatten = args(2, { 2, 3 }),
  RNN = args(3, 4, 2, "relu", false, true, 0.1, true),
  GRU = args(3, 4, 2, false, true, 0.1, true),
  LSTM = args(3, 4, 2, false, true, 0.1, true),
  RNNCell = args(3, 4, false, "relu"),
  GRUCell = args(3, 4, false),
  LSTMCell = args(3, 4, false),
  MultiheadAttention = args(8, 2, 0.1, false),
  TransformerEncoderLayer = args(8, 2, 16, 0.1, "gelu"),
  TransformerDecoderLayer = args(8, 2, 16, 0.1, "gelu"),
  TransformerEncoder = args(nn.TransformerEncoderLayer(8, 2, 16), 2, nn.LayerNorm({ 8 })),
  TransformerDecoder = args(nn.TransformerDecoderLayer(8, 2, 16), 2, nn.LayerNorm({ 8 })),
  Transformer = args(8, 2, 1, 1, 16, 0.1),
  -- losses (PyTorch's deprecated size_average and reduce left out: nil)
  L1Loss = args(nil, nil, "sum"),
  MSELoss = args(nil, nil, "none"),
  CrossEntropyLoss = args(w4(), nil, 2, nil, "sum", 0.1),
  NLLLoss = args(w4(), nil, 2, nil, "sum"),
  BCELoss = args(w4(), nil, nil, "sum"),
  BCEWithLogitsLoss = args(nil, nil, nil, "sum", w4()), -- (lutra's has no weight)
  SmoothL1Loss = args(nil, nil, "sum", 0.5),
  HuberLoss = args("sum", 0.5),
  KLDivLoss = args(nil, nil, "batchmean", true),
  CosineEmbeddingLoss = args(0.1, nil, nil, "sum"),
  MarginRankingLoss = args(0.1, nil, nil, "sum"),
  TripletMarginLoss = args(0.5, 1, 1e-5, true, nil, nil, "sum"),
  PoissonNLLLoss = args(false, true, nil, 1e-6, nil, "sum"),
  GaussianNLLLoss = args(),
}

local OPTIM = {
  SGD = args(0.1, 0.9, 0.1, 1e-4, false),
  Adam = args(1e-3, { 0.8, 0.9 }, 1e-6, 0.1, true),
  AdamW = args(1e-3, { 0.8, 0.9 }, 1e-6, 0.1, true),
  RMSprop = args(1e-2, 0.9, 1e-6, 0.1, 0.5, true),
  Adagrad = args(0.1, 0.01, 0.1, 0.2, 1e-8),
  Adadelta = args(1.0, 0.8, 1e-5, 0.1),
  Adamax = args(2e-3, { 0.8, 0.9 }, 1e-6, 0.1),
  NAdam = args(2e-3, { 0.8, 0.9 }, 1e-6, 0.1, 5e-3),
  RAdam = args(1e-3, { 0.8, 0.9 }, 1e-6, 0.1),
  ASGD = args(0.01, 1e-3, 0.5, 100, 0.1),
  LBFGS = args(0.5, 10, 12, 1e-6, 1e-8, 50, "strong_wolfe"),
}

local function half(e) return 0.5 ^ e end
-- schedulers: a function of a fresh optimizer giving the positional values after it
local SCHED = {
  StepLR = function() return args(2, 0.5) end,
  MultiStepLR = function() return args({ 1, 3 }, 0.5) end,
  ExponentialLR = function() return args(0.9) end,
  CosineAnnealingLR = function() return args(10, 0.01) end,
  LambdaLR = function() return args(half) end,
  MultiplicativeLR = function() return args(function() return 0.9 end) end,
  OneCycleLR = function() return args(0.1, 100, nil, nil, 0.2, "linear", true, 0.8, 0.9, 10, 100, true) end,
  ReduceLROnPlateau = function() return args("max", 0.5, 1, 1e-3, "abs", 1, 0.001, 1e-9) end,
  ConstantLR = function() return args(0.5, 3) end,
  LinearLR = function() return args(0.5, 1.0, 3) end,
  PolynomialLR = function() return args(4, 2.0) end,
  CosineAnnealingWarmRestarts = function() return args(3, 2, 0.01) end,
  CyclicLR = function() return args(0.01, 0.1, 2, 3, "triangular2", 1.0, nil, "cycle", false) end,
  SequentialLR = function(opt)
    return args({ S.ConstantLR(opt, 0.5, 2), S.ExponentialLR(opt, 0.9) }, { 2 })
  end,
}

-- ---- what is built, compared -------------------------------------------------------------------------------

-- A module's fields, deep, with tensors as their shapes (weights are drawn anew each time)
local function fingerprint(v, seen)
  seen = seen or {}
  if lt.is_tensor(v) then return "tensor" .. v:shape_str() end
  if type(v) == "function" then return "function" end
  -- a number by its value: Lua 5.3+ prints the integer 100 as "100" and the float an optimizer keeps as "100.0"
  if type(v) == "number" then return string.format("%.17g", v) end
  if type(v) ~= "table" then return tostring(v) end
  if seen[v] then return "<seen>" end
  seen[v] = true
  local keys = {}
  for k in pairs(v) do
    if k ~= "_path" and k ~= "_paths_assigned" then keys[#keys + 1] = k end
  end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = tostring(k) .. "=" .. fingerprint(v[k], seen) end
  return "{" .. table.concat(parts, ",") .. "}"
end

local function names_of(kind, name)
  if kind == "nn" then return TRANSFORMER_NAMES[name] or SIG.nn[name] end
  return SIG[kind][name]
end

-- the same values by name, in one options table
local function as_options(names, a)
  local o = {}
  for i = 1, a.n do
    if a[i] ~= nil then o[names[i]] = a[i] end
  end
  return o
end

local function first_given(a)
  for i = 1, a.n do if a[i] ~= nil then return i end end
end

local function params() return { lt.randn(3):requires_grad(true) } end

-- the lr of every step of a scheduler's first 6 steps
local function lr_trace(opt, sched, plateau)
  local t = {}
  for i = 1, 6 do
    opt:step()
    if plateau then sched:step(i % 3) else sched:step() end
    t[i] = opt.param_groups[1].lr
  end
  return table.concat(t, " ")
end

describe("PyTorch's positional arguments", function()
  it("every public constructor has a case here (lt.help's public list)", function()
    local names = require("lutra.help").public_api()
    local missing = {}
    for _, full in ipairs(names) do
      local nn_name = full:match("^lt%.nn%.([A-Z]%w*)$")
      local opt_name = full:match("^lt%.optim%.([A-Z]%w*)$")
      local sched_name = full:match("^lt%.optim%.lr_scheduler%.([A-Z]%w*)$")
      local covered = EXEMPT[full] or (nn_name and NN[nn_name]) or (opt_name and OPTIM[opt_name])
        or (sched_name and SCHED[sched_name])
      if (nn_name or opt_name or sched_name) and not covered then missing[#missing + 1] = full end
    end
    assert.are.same({}, missing)
  end)

  describe("modules and losses", function()
    for name, a in pairs(NN) do
      local names = names_of("nn", name)
      it(name .. ": positional values build what the same options build; both ways, unknown, too many", function()
        local ctor = nn[name]
        assert.is_table(names, "no signature for " .. name)
        local m1 = ctor(unpack(a, 1, a.n))
        local m2 = ctor(as_options(names, a))
        assert.are.equal(fingerprint(m2), fingerprint(m1))
        assert.are.equal(tostring(m2), tostring(m1))
        local i = first_given(a)
        if i then
          local both = { n = i }
          for j = 1, i do both[j] = a[j] end
          both[i + 1], both.n = { [names[i]] = a[i] }, i + 1
          assert.matches(name .. ": option '" .. names[i] .. "' given both as argument #" .. i ..
            " and in the options table", err_of(ctor, unpack(both, 1, both.n)), 1, true)
        end
        local bad = { n = a.n + 1 }
        for j = 1, a.n do bad[j] = a[j] end
        bad[a.n + 1] = { bogus_option = 1 }
        assert.matches(name .. ": unknown option 'bogus_option'", err_of(ctor, unpack(bad, 1, bad.n)), 1, true)
        local many = {}
        for j = 1, #names + 1 do many[j] = j <= a.n and a[j] or 0 end
        assert.matches(name .. ": ", err_of(ctor, unpack(many, 1, #names + 1)), 1, true)
        assert.matches("positional arguments", err_of(ctor, unpack(many, 1, #names + 1)), 1, true)
      end)
    end
  end)

  describe("optimizers", function()
    for name, a in pairs(OPTIM) do
      local names = SIG.optim[name]
      it(name .. "(params, ...): positional values set the options the same names set; errors", function()
        local ctor = lt.optim[name]
        local o1 = ctor(params(), unpack(a, 1, a.n))
        local o2 = ctor(params(), as_options(names, a))
        local g1, g2 = o1.param_groups[1], o2.param_groups[1]
        for _, k in ipairs(names) do
          assert.are.equal(fingerprint(g2[k]), fingerprint(g1[k]), name .. " " .. k)
          if a[_] ~= nil then assert.are.equal(fingerprint(a[_]), fingerprint(g1[k]), name .. " " .. k) end
        end
        assert.matches(name .. ": option 'lr' given both as argument #1 and in the options table",
          err_of(ctor, params(), a[1], { lr = a[1] }), 1, true)
        assert.matches(name .. ": unknown option 'bogus_option' (known options: ",
          err_of(ctor, params(), a[1], { bogus_option = 1 }), 1, true)
        local many = {}
        for j = 1, #names + 2 do many[j] = a[j] or 1 end
        assert.matches(name .. ": takes at most " .. #names .. " positional arguments",
          err_of(ctor, params(), unpack(many, 1, #names + 2)), 1, true)
      end)
    end
  end)

  describe("LR schedulers", function()
    for name, make in pairs(SCHED) do
      local names = SIG.lr_scheduler[name]
      it(name .. "(optimizer, ...): positional values schedule as the same options; errors", function()
        local ctor = S[name]
        local opt1 = lt.optim.SGD(params(), 0.05, 0.9)
        local s1 = ctor(opt1, unpack(make(opt1)))
        local opt2 = lt.optim.SGD(params(), 0.05, 0.9)
        local a2 = make(opt2)
        local s2 = ctor(opt2, as_options(names, a2))
        local plateau = name == "ReduceLROnPlateau"
        assert.are.equal(lr_trace(opt2, s2, plateau), lr_trace(opt1, s1, plateau))
        local opt3 = lt.optim.SGD(params(), 0.05, 0.9)
        local a3 = make(opt3)
        assert.matches(name .. ": option '" .. names[1] .. "' given both as argument #1 and in the options table",
          err_of(ctor, opt3, a3[1], { [names[1]] = a3[1] }), 1, true)
        assert.matches(name .. ": unknown option 'bogus_option'",
          err_of(ctor, opt3, a3[1], { bogus_option = 1 }), 1, true)
      end)
    end
  end)

  it("the examples of the issue: Conv2d(nc, ndf, 4, 2, 1, {bias = false}), Conv2d(1, 64, {5, 5}, {1, 1}, {2, 2})",
    function()
      local c = nn.Conv2d(3, 8, 4, 2, 1, { bias = false })
      assert.are.same({ 4, 4 }, c.kernel_size)
      assert.are.same({ 2, 2 }, c.stride)
      assert.is_nil(c.bias)
      local d = nn.Conv2d(1, 64, { 5, 5 }, { 1, 1 }, { 2, 2 })
      assert.are.same({ 64, 1, 5, 5 }, d.weight:shape())
      assert.are.same({ 2, 2 }, d.padding)
      assert.matches("LeakyReLU: unknown option 'foo' (known options: inplace, negative_slope)",
        err_of(nn.LeakyReLU, 0.2, { foo = 1 }), 1, true)
      assert.are.equal(0.2, nn.LeakyReLU(0.2, true).negative_slope)
      assert.is_true(nn.ReLU { inplace = true }.inplace)
      assert.are.equal(0.1, nn.BatchNorm2d(64, 1e-5, 0.1).momentum)
      assert.are.equal(1.0, lt.optim.Adadelta(params(), 1.0).param_groups[1].lr)
    end)

  it("PyTorch's deprecated size_average and reduce are refused by name", function()
    assert.matches("CrossEntropyLoss: unknown option 'size_average'", err_of(nn.CrossEntropyLoss, nil, true), 1, true)
    assert.matches("MSELoss: unknown option 'reduce'", err_of(nn.MSELoss, nil, false), 1, true)
  end)

  it("inplace = true writes into the input where no gradient is recorded, and gives PyTorch's values either way",
    function()
      local x = lt.tensor { -1, 2, -3 }
      local y = nn.ReLU(true)(x)
      assert.are.same({ 0, 2, 0 }, x:totable())
      assert.are.same({ 0, 2, 0 }, y:totable())
      local z = lt.tensor { -1, 2, -3 }
      nn.LeakyReLU(0.5, true)(z)
      assert.are.same({ -0.5, 2, -1.5 }, z:totable())
      local p = lt.tensor({ -1, 2, -3 }):requires_grad(true)
      local h = p * 1
      local out = nn.ReLU(true)(h)
      assert.are.same({ 0, 2, 0 }, out:totable())
      out:sum():backward()
      assert.are.same({ 0, 1, 0 }, p.grad:totable())
      local u = lt.tensor { -1, 2, -3 }
      nn.ReLU()(u)
      assert.are.same({ -1, 2, -3 }, u:totable())
    end)
end)
