-- tied_weights_spec: a tensor shared by two modules (lm_head.weight = wte.weight) is one parameter for
-- parameters() and the optimizers (one update per step), appears under both names in state_dict (as
-- PyTorch's), and loads back, strict or not, from a file with both names or only one, keeping the tie:
-- load_state_dict, lt.save/lt.load, lt.save_bytes/lt.load_bytes and the trainer's checkpoints.
local lt = require "lutra"
local fs = require "helpers.fs"

local function tied_model()
  local m = { wte = lt.nn.Embedding(6, 4), head = lt.nn.Linear(4, 6, { bias = false }), ln = lt.nn.LayerNorm(4) }
  m.head.weight = m.wte.weight
  function m:forward(idx) return self.head(self.ln(self.wte(idx))) end
  return m
end

local function same(a, b) return (a - b):abs():max():item() == 0 end

describe("tied weights", function()
  local dir
  before_each(function() dir = fs.tmpdir() end)
  after_each(function() fs.rmrf(dir) end)

  it("are one parameter, named by their first path, and listed under both names in state_dict", function()
    local m = tied_model()
    local named, order = lt.nn.named_parameters(m)
    assert.are.same({ "head.weight", "ln.weight", "ln.bias" }, order)
    assert.is_nil(named["wte.weight"])
    assert.are.equal(3, #lt.nn.parameters(m))
    local sd = lt.nn.state_dict(m)
    assert.is_not_nil(sd["head.weight"])
    assert.is_not_nil(sd["wte.weight"])
    assert.is_true(same(sd["head.weight"], sd["wte.weight"]))
    assert.are.same({ "head.weight", "ln.weight", "ln.bias", "wte.weight" }, lt.nn.state_dict_keys(m))
  end)

  it("get one optimizer update per step from the summed gradient of both uses", function()
    lt.manual_seed(1)
    local m = tied_model()
    local untied = tied_model()
    untied.head.weight = m.wte.weight:detach():clone():requires_grad(true)
    untied.wte.weight = m.wte.weight:detach():clone():requires_grad(true)
    untied.ln.weight, untied.ln.bias = m.ln.weight:detach():clone():requires_grad(true),
      m.ln.bias:detach():clone():requires_grad(true)
    local idx, tgt = lt.tensor({ 1, 3, 5, 6 }, "int64"), lt.tensor({ 2, 2, 4, 1 }, "int64")
    local opt = lt.optim.AdamW(lt.nn.parameters(m), { lr = 0.1 })
    assert.are.equal(3, #opt.param_groups[1].params)
    local w0 = m.wte.weight:detach():clone()
    opt:zero_grad()
    lt.F.cross_entropy(m:forward(idx), tgt):backward()
    lt.F.cross_entropy(untied:forward(idx), tgt):backward()
    -- the tied gradient is the sum of the two uses' gradients
    local gsum = untied.head.weight.grad + untied.wte.weight.grad
    assert.is_true((m.wte.weight.grad - gsum):abs():max():item() < 1e-6)
    opt:step()
    -- one AdamW step of lr 0.1 moves each element by at most lr * (1 + wd-ish): two steps would move ~2 lr
    local moved = (m.wte.weight:detach() - w0):abs():max():item()
    assert.is_true(moved > 0.05 and moved < 0.11, "moved " .. moved)
    assert.is_true(m.head.weight == m.wte.weight)
  end)

  it("load strict from a state dict with both names, with either name alone, and keep the tie", function()
    lt.manual_seed(2)
    local src, m = tied_model(), tied_model()
    local sd = lt.nn.state_dict(src)
    lt.nn.load_state_dict(m, sd)
    assert.is_true(same(m.wte.weight, src.wte.weight))
    assert.is_true(m.head.weight == m.wte.weight)
    for _, drop in ipairs { "wte.weight", "head.weight" } do
      local m2 = tied_model()
      local one = {}
      for k, v in pairs(sd) do if k ~= drop then one[k] = v end end
      local r = lt.nn.load_state_dict(m2, one)
      assert.are.same({}, r.missing_keys)
      assert.is_true(same(m2.head.weight, src.wte.weight))
      assert.is_true(m2.head.weight == m2.wte.weight)
    end
    -- neither name: both are missing (strict), and the rest loads with strict=false
    local none = { ["ln.weight"] = sd["ln.weight"], ["ln.bias"] = sd["ln.bias"] }
    local ok, err = pcall(lt.nn.load_state_dict, tied_model(), none)
    assert.is_false(ok)
    assert.matches('missing key(s) in state_dict: "head.weight", "wte.weight"', err, 1, true)
    local r = lt.nn.load_state_dict(tied_model(), none, { strict = false })
    assert.are.same({ "head.weight", "wte.weight" }, r.missing_keys)
  end)

  it("round-trip through lt.save / lt.load and the bytes form, both names in the file", function()
    lt.manual_seed(3)
    local src = tied_model()
    local p = lt.save(dir .. "/tied.safetensors", src)
    local sd = lt.load(p)
    assert.is_not_nil(sd["wte.weight"])
    assert.is_not_nil(sd["head.weight"])
    local m = lt.load(p, tied_model())
    assert.is_true(same(m.wte.weight, src.wte.weight))
    assert.is_true(m.head.weight == m.wte.weight)
    local m2 = lt.load_bytes(lt.save_bytes(src), tied_model())
    assert.is_true(same(m2.head.weight, src.wte.weight))
    assert.is_true(m2.head.weight == m2.wte.weight)
    -- a file holding one name per storage (what safetensors' save_model writes) loads strict too
    local one = lt.save(dir .. "/one.safetensors", { ["wte.weight"] = src.wte.weight, ["ln.weight"] = src.ln.weight,
      ["ln.bias"] = src.ln.bias })
    local m3 = lt.load(one, tied_model())
    assert.is_true(same(m3.head.weight, src.wte.weight))
    assert.is_true(m3.head.weight == m3.wte.weight)
  end)

  it("survive a trainer checkpoint and its resume", function()
    lt.manual_seed(4)
    local function model()
      local m = tied_model()
      function m:training_step(b) return lt.F.cross_entropy(self:forward(b[1]), b[2]) end
      function m:configure_optimizers() return lt.optim.AdamW(lt.nn.parameters(self), { lr = 0.01 }) end
      return m
    end
    local ds = lt.data.TensorDataset(lt.randint(1, 7, { 16 }), lt.randint(1, 7, { 16 }))
    local function trainer(epochs)
      return lt.Trainer { max_epochs = epochs, logger = false, enable_progress_bar = false,
        enable_model_summary = false, enable_checkpointing = false, default_root_dir = dir }
    end
    local a = model()
    local t = trainer(1)
    t:fit(a, lt.data.DataLoader(ds, { batch_size = 4 }))
    local p = t:save_checkpoint(dir .. "/c.ckpt")
    local b = model()
    trainer(2):fit(b, lt.data.DataLoader(ds, { batch_size = 4 }), { ckpt_path = p })
    t = trainer(2)
    t:fit(a, lt.data.DataLoader(ds, { batch_size = 4 }), { ckpt_path = p })
    assert.is_true(b.head.weight == b.wte.weight)
    assert.is_true(same(a.wte.weight, b.wte.weight))
    local back = lt.load(p, tied_model())
    assert.is_true(back.head.weight == back.wte.weight)
  end)
end)
