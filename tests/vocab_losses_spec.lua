-- vocab_losses_spec.lua — binary_cross_entropy, smooth_l1_loss, huber_loss, kl_div, cross_entropy with
-- class probabilities, nll_loss/cross_entropy over [N, C, d...], cosine_embedding_loss, margin_ranking_loss,
-- triplet_margin_loss, poisson_nll_loss, gaussian_nll_loss (lt.F, lua/lutra/F/losses.lua and
-- core/src/nn_loss.c) and their lt.nn modules: PyTorch 1.13 values and input gradients per reduction and
-- option (tests/fixtures/vocab_losses.json), finite-difference gradchecks, error texts.
local lt = require "lutra"
local gradcheck = require "tests.helpers.gradcheck"
local F, nn = lt.F, lt.nn

local X = require "tests.helpers.nn_fixtures"

local CASES = X.load("vocab_losses.json")
local T = X.tensor

local function errmsg(fn, ...)
  local ok, e = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

-- the case's call: positional tensors, options (a number as an option value names an input: the weight)
local function call_args(cs, ins)
  local opts, used = {}, {}
  for k, v in pairs(cs.opts) do
    if k == "weight" then
      opts[k] = ins[v]
      used[v] = true
    else
      opts[k] = v
    end
  end
  local pos = {}
  for i, t in ipairs(ins) do if not used[i] then pos[#pos + 1] = t end end
  return pos, opts
end

describe("lt.F losses (more) fixtures (PyTorch 1.13)", function()
  for _, cs in ipairs(CASES) do
    it("matches PyTorch's " .. cs.name .. " value and input gradients", function()
      local ins = {}
      for i, o in ipairs(cs.inputs) do ins[i] = T(o) end
      for _, i in ipairs(cs.wrt) do ins[i]:requires_grad(true) end
      local pos, opts = call_args(cs, ins)
      pos[#pos + 1] = opts
      local out = F[cs.fn](unpack(pos))
      X.check(cs.name .. ": output", out, cs.output)
      out:backward(T(cs.grad_output))
      for _, i in ipairs(cs.wrt) do X.check(cs.name .. ": grad of input " .. i, ins[i].grad, cs.grads[string.format("%d", i)]) end
    end)
  end
end)

describe("lt.F losses (more) finite-difference gradients", function()
  lt.manual_seed(7)
  local function probs(...) return lt.rand(...) * 0.9 + 0.05 end
  local function away(n, m) -- x, t with |x - t| >= 0.1: away from the kinks
    local t = lt.randn(n, m)
    local d = lt.randn(n, m)
    return t + d:sign() * (d:abs() + 0.1), t
  end
  local CHECKS = {
    { "binary_cross_entropy", function(p) return F.binary_cross_entropy(p, lt.rand(3, 4), "sum") end,
      { probs(3, 4) } },
    { "binary_cross_entropy weight", function(p)
      return F.binary_cross_entropy(p, lt.rand(3, 4), { weight = lt.tensor { 1, 2, 0.5, 3 }, reduction = "none" })
    end, { probs(3, 4) } },
    { "smooth_l1_loss", function(x, t) return F.smooth_l1_loss(x, t, { beta = 0.05, reduction = "none" }) end,
      { away(3, 4) } },
    { "smooth_l1_loss quadratic part", function(x, t) return F.smooth_l1_loss(x, t, { beta = 10 }) end,
      { away(3, 4) } },
    { "huber_loss", function(x, t) return F.huber_loss(x, t, { delta = 0.05, reduction = "sum" }) end, { away(3, 4) } },
    { "huber_loss quadratic part", function(x, t) return F.huber_loss(x, t, { delta = 10 }) end, { away(3, 4) } },
    { "kl_div", function(x) return F.kl_div(x, lt.rand(3, 5):softmax(2), { reduction = "batchmean" }) end,
      { lt.randn(3, 5):log_softmax(2) } },
    { "kl_div log_target", function(x, t) return F.kl_div(x, t, { log_target = true, reduction = "none" }) end,
      { lt.randn(3, 5):log_softmax(2), lt.randn(3, 5):log_softmax(2) } },
    { "cross_entropy probabilities", function(x)
      return F.cross_entropy(x, lt.rand(2, 3, 4):softmax(2),
        { label_smoothing = 0.1, weight = lt.tensor { 1, 2, 0.5 } })
    end, { lt.randn(2, 3, 4) } },
    { "cross_entropy [N, C, d, d]", function(x)
      return F.cross_entropy(x, lt.tensor { { { 1, 2 }, { 3, 1 } }, { { 2, 2 }, { 1, 3 } } }:long(), "sum")
    end, { lt.randn(2, 3, 2, 2) } },
    { "nll_loss [N, C, d]", function(x)
      return F.nll_loss(x, lt.tensor { { 1, 2, 3 }, { 3, 3, 1 } }:long(), { weight = lt.tensor { 1, 2, 3 } })
    end, { lt.randn(2, 3, 3):log_softmax(2) } },
    { "cosine_embedding_loss", function(a, b)
      return F.cosine_embedding_loss(a, b, lt.tensor { 1, -1, 1, -1 }, { margin = -0.5, reduction = "none" })
    end, { lt.randn(4, 3), lt.randn(4, 3) } },
    { "margin_ranking_loss", function(a, b)
      return F.margin_ranking_loss(a, b, lt.tensor { 1, -1, 1, -1, 1 }, { margin = 3, reduction = "sum" })
    end, { lt.randn(5), lt.randn(5) } },
    { "triplet_margin_loss", function(a, p, n)
      return F.triplet_margin_loss(a, p, n, { margin = 5, reduction = "none" })
    end, { lt.randn(3, 4), lt.randn(3, 4), lt.randn(3, 4) } },
    { "triplet_margin_loss p=1 swap", function(a, p, n)
      return F.triplet_margin_loss(a, p, n, { margin = 20, p = 1, swap = true })
    end, { lt.randn(3, 4), lt.randn(3, 4), lt.randn(3, 4) } },
    { "poisson_nll_loss", function(x) return F.poisson_nll_loss(x, lt.rand(3, 4) * 3, { full = true }) end,
      { lt.randn(3, 4) } },
    { "poisson_nll_loss rates", function(x) return F.poisson_nll_loss(x, lt.rand(3, 4) * 3, { log_input = false }) end,
      { probs(3, 4) + 0.2 } },
    { "gaussian_nll_loss", function(x, v) return F.gaussian_nll_loss(x, lt.randn(3, 4), v, { full = true }) end,
      { lt.randn(3, 4), probs(3, 4) + 0.2 } },
    { "gaussian_nll_loss var per row", function(x, v) return F.gaussian_nll_loss(x, lt.zeros(3, 4), v, "sum") end,
      { lt.randn(3, 4), probs(3) + 0.2 } },
  }
  for _, c in ipairs(CHECKS) do
    it("agrees with central differences: " .. c[1], function()
      local fixed = {}
      for i, t in ipairs(c[3]) do fixed[i] = t end
      lt.manual_seed(11) -- the targets drawn inside fn are the same in every evaluation (gradcheck restores the RNG)
      assert.is_true(gradcheck(c[2], fixed, { eps = 1e-3, rtol = 2e-2, atol = 2e-3 }))
    end)
  end
end)

describe("lt.nn loss modules", function()
  it("compute what the lt.F function computes, with the module's options", function()
    lt.manual_seed(3)
    local x, t = lt.randn(4, 5), lt.tensor { 1, 5, 2, 2 }:long()
    local m = nn.CrossEntropyLoss { label_smoothing = 0.2, reduction = "sum" }
    assert.equals(F.cross_entropy(x, t, { label_smoothing = 0.2, reduction = "sum" }):item(), m(x, t):item())
    local a, b, y = lt.randn(3, 4), lt.randn(3, 4), lt.tensor { 1, -1, 1 }
    assert.equals(F.cosine_embedding_loss(a, b, y, { margin = 0.1 }):item(),
      nn.CosineEmbeddingLoss { margin = 0.1 }(a, b, y):item())
    local p = lt.rand(3, 4) * 0.9 + 0.05
    assert.equals(F.binary_cross_entropy(p, lt.ones(3, 4), { weight = lt.ones(4) * 2 }):item(),
      nn.BCELoss { weight = lt.ones(4) * 2 }(p, lt.ones(3, 4)):item())
    assert.equals(F.kl_div(x:log_softmax(2), x:softmax(2), "batchmean"):item(),
      nn.KLDivLoss { reduction = "batchmean" }(x:log_softmax(2), x:softmax(2)):item())
    local v = lt.rand(3, 4) + 0.1
    assert.equals(F.gaussian_nll_loss(a, b, v, { full = true }):item(),
      nn.GaussianNLLLoss { full = true }(a, b, v):item())
    for _, name in ipairs { "L1Loss", "MSELoss", "NLLLoss", "BCEWithLogitsLoss", "SmoothL1Loss", "HuberLoss",
      "MarginRankingLoss", "TripletMarginLoss", "PoissonNLLLoss" } do
      assert.equals(name .. "(reduction=mean)", tostring(nn[name]()))
    end
    assert.same({}, m:parameters())
  end)

  it("reject unknown options and reductions when built", function()
    assert.matches("HuberLoss: unknown option 'beta' %(known options: delta, reduction%)",
      errmsg(nn.HuberLoss, { beta = 1 }))
    assert.matches('MSELoss: reduction must be "mean", "sum" or "none", got "batchmean"',
      errmsg(nn.MSELoss, { reduction = "batchmean" }))
    assert.matches("TripletMarginLoss: option 'swap' must be a boolean, got number",
      errmsg(nn.TripletMarginLoss, { swap = 1 }))
  end)
end)

describe("lt.F losses (more) errors", function()
  local x = lt.randn(3, 4)
  it("name the loss, the shapes and the option", function()
    assert.matches("binary_cross_entropy: all elements of input should be between 0 and 1 %(element 1 is 2%)",
      errmsg(F.binary_cross_entropy, lt.tensor { 2, 0.5 }, lt.tensor { 1, 0 }))
    assert.matches("binary_cross_entropy: input %[3 x 4%] and target %[4%] must have the same shape",
      errmsg(F.binary_cross_entropy, lt.rand(3, 4), lt.rand(4)))
    assert.matches("smooth_l1_loss: beta must be >= 0, got %-1", errmsg(F.smooth_l1_loss, x, x, { beta = -1 }))
    assert.matches("huber_loss: delta must be > 0, got 0", errmsg(F.huber_loss, x, x, { delta = 0 }))
    assert.matches('huber_loss: reduction must be "mean", "sum" or "none", got "avg"',
      errmsg(F.huber_loss, x, x, "avg"))
    assert.matches("kl_div: target %[4 x 3%] and input %[3 x 4%] must have the same shape",
      errmsg(F.kl_div, x, lt.randn(4, 3)))
    assert.matches('kl_div: reduction must be "mean", "sum" or "none", got "max"', errmsg(F.kl_div, x, x, "max"))
    -- float targets are class probabilities only when they have the input's shape
    assert.matches("cross_entropy: target must be int64, got float32", errmsg(F.cross_entropy, x, lt.rand(3, 5)))
    assert.matches("cross_entropy: ignore_index is only for class%-index targets",
      errmsg(F.cross_entropy, x, lt.rand(3, 4), { ignore_index = 1 }))
    assert.matches("cross_entropy: weight must be %[4%] %(one per class%), got %[3%]",
      errmsg(F.cross_entropy, x, lt.rand(3, 4), { weight = lt.ones(3) }))
    assert.matches("cosine_embedding_loss: target %[2%] does not match the inputs %[3 x 4%]",
      errmsg(F.cosine_embedding_loss, x, x, lt.ones(2)))
    assert.matches("cosine_embedding_loss: input2 %[4 x 3%] and input1 %[3 x 4%] must have the same shape",
      errmsg(F.cosine_embedding_loss, x, lt.randn(4, 3), lt.ones(3)))
    assert.matches("margin_ranking_loss: target %[2%] and input1 %[3%] must have the same shape",
      errmsg(F.margin_ranking_loss, lt.randn(3), lt.randn(3), lt.ones(2)))
    assert.matches("triplet_margin_loss: negative %[3 x 5%] and anchor %[3 x 4%] must have the same shape",
      errmsg(F.triplet_margin_loss, x, x, lt.randn(3, 5)))
    assert.matches("triplet_margin_loss: unknown option 'norm'", errmsg(F.triplet_margin_loss, x, x, x, { norm = 2 }))
    assert.matches("poisson_nll_loss: target must be float32 or float64, got int64",
      errmsg(F.poisson_nll_loss, x, lt.zeros(3, 4):long()))
    assert.matches("gaussian_nll_loss: var %[2%] is of incorrect size for input %[3 x 4%]",
      errmsg(F.gaussian_nll_loss, x, x, lt.ones(2)))
    assert.matches("gaussian_nll_loss: var has negative entry/entries",
      errmsg(F.gaussian_nll_loss, x, x, -lt.ones(3, 4)))
  end)
end)
