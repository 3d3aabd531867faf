-- tests/hparams_spec.lua — save_hyperparameters (model.hparams, into checkpoints and hparams.yaml, back with
-- load_from_checkpoint) and Module:apply / requires_grad_ / freeze / unfreeze (a frozen parameter keeps its
-- place in state_dict, gets no grad, and the optimizer leaves it alone).
local lt = require "lutra"

local function tmpdir()
  local d = os.tmpname(); os.remove(d); os.execute("mkdir -p " .. d)
  return d
end

local Net = lt.nn.Module:extend("HpNet")
function Net:init(hp)
  self:save_hyperparameters(hp)
  self.backbone = lt.nn.Linear(2, hp.hidden)
  self.head = lt.nn.Linear(hp.hidden, 1)
end
function Net:forward(x) return self.head(self.backbone(x)) end
function Net:training_step(b) return lt.F.mse_loss(self(b[1]), b[2]) end
function Net:configure_optimizers()
  return lt.optim.SGD(self:parameters(), { lr = self.hparams.lr, momentum = 0.9, weight_decay = 0.1 })
end

local function loader()
  lt.manual_seed(1)
  return lt.data.DataLoader(lt.data.TensorDataset(lt.randn(8, 2), lt.randn(8, 1)), { batch_size = 4 })
end

describe("save_hyperparameters", function()
  it("from a table and from field names; into the checkpoint, hparams.yaml, and back", function()
    local dir = tmpdir()
    lt.manual_seed(0)
    local n = Net { lr = 0.05, hidden = 3, act = "relu", sizes = { 1, 2 } }
    n.dropout = 0.25
    n:save_hyperparameters("dropout")
    assert.are.same({ lr = 0.05, hidden = 3, act = "relu", sizes = { 1, 2 }, dropout = 0.25 }, n.hparams)
    local t = lt.Trainer { max_epochs = 1, default_root_dir = dir, enable_progress_bar = false,
      enable_model_summary = false, enable_checkpointing = false }
    t:fit(n, loader())
    local yaml = assert(io.open(t.logger:_log_dir() .. "/hparams.yaml")):read("*a")
    assert.matches("lr: 0.05", yaml, 1, true)
    assert.matches("dropout: 0.25", yaml, 1, true)
    assert.matches("act: relu", yaml, 1, true)
    t:save_checkpoint(dir .. "/a.ckpt")
    local ck = require("lutra.checkpoint").read(dir .. "/a.ckpt")
    assert.are.same(n.hparams, ck.hyper_parameters)
    local m2 = Net:load_from_checkpoint(dir .. "/a.ckpt")
    assert.are.same(n.hparams, m2.hparams)
    assert.is_true(m2.head.weight:allclose(n.head.weight, 0, 0))
    assert.is_true(m2.backbone.bias:allclose(n.backbone.bias, 0, 0))
    os.execute("rm -rf " .. dir)
  end)

  it("a plain model table: self:save_hyperparameters while attached, lt.nn.save_hyperparameters before", function()
    local m = { lr = 0.1 }
    lt.nn.save_hyperparameters(m, "lr", { depth = 2 })
    assert.are.same({ lr = 0.1, depth = 2 }, m.hparams)
  end)

  it("errors name the key: a tensor value, a missing field, a bad argument", function()
    local m = { x = lt.zeros(2) }
    assert.has_error(function() lt.nn.save_hyperparameters(m, "x") end,
      "save_hyperparameters: 'x' is a tensor; hyper-parameters are numbers, strings, booleans and tables of them")
    assert.has_error(function() lt.nn.save_hyperparameters(m, { f = print }) end,
      "save_hyperparameters: 'f' is a function; hyper-parameters are numbers, strings, booleans and tables of them")
    assert.has_error(function() lt.nn.save_hyperparameters(m, "nope") end,
      "save_hyperparameters: the model has no field 'nope'")
    assert.has_error(function() lt.nn.save_hyperparameters(m, 3) end,
      "save_hyperparameters: argument 1 must be a table or a field name, got number")
  end)
end)

describe("Module:apply / requires_grad_ / freeze / unfreeze", function()
  it("apply visits children before the module itself (torch's order) and returns the module", function()
    local seq = lt.nn.Sequential { lt.nn.Linear(2, 2), lt.nn.Sequential { lt.nn.ReLU(), lt.nn.Linear(2, 1) } }
    local seen = {}
    assert.are.equal(seq, seq:apply(function(m) seen[#seen + 1] = m.__name or getmetatable(m).__name end))
    assert.are.same({ "Linear", "ReLU", "Linear", "Sequential", "Sequential" }, seen)
    assert.has_error(function() seq:apply(5) end, "Module:apply: expected a function, got number")
  end)

  it("a frozen backbone keeps its weights through a fit with momentum and weight decay; the head trains", function()
    lt.manual_seed(0)
    local n = Net { lr = 0.1, hidden = 3 }
    n.backbone:freeze()
    assert.is_false(n.backbone.training)
    assert.are.equal(4, #n:parameters()) -- frozen parameters are still parameters
    local w0, h0 = n.backbone.weight:clone(), n.head.weight:clone()
    local t = lt.Trainer { max_epochs = 2, logger = false, enable_progress_bar = false, enable_model_summary = false,
      enable_checkpointing = false }
    t:fit(n, loader())
    assert.is_true(n.backbone.weight:allclose(w0, 0, 0))
    assert.is_nil(n.backbone.weight.grad)
    assert.is_false(n.head.weight:allclose(h0, 0, 0))
    assert.is_truthy(n:state_dict()["backbone.weight"])
    n.backbone:unfreeze()
    assert.is_true(n.backbone.weight:requires_grad())
    assert.is_true(n.backbone.training)
  end)

  it("requires_grad_(false) on a plain table keeps a bare lt.param in parameters and state_dict", function()
    local m = { w = lt.param(lt.ones(2)) }
    lt.nn.requires_grad_(m, false)
    assert.are.equal(1, #lt.nn.parameters(m))
    assert.is_false(m.w:requires_grad())
    assert.is_truthy(lt.nn.state_dict(m).w)
    lt.nn.requires_grad_(m, true)
    assert.is_true(m.w:requires_grad())
    assert.has_error(function() lt.nn.Linear(1, 1):requires_grad_("no") end, "requires_grad_: expected a boolean, got string")
  end)
end)
