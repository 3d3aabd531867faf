-- bf16_spec.lua — bfloat16 mixed precision: lutra's bf16 GEMM (core/src/gemm_bf16*.c) against a float64
-- reference of the bf16-rounded operands over shapes that reach every edge tile and k block, the four
-- transposes, alpha/beta, several threads; the forced fp32 path; lt.autocast's scoping; the ops under autocast
-- against PyTorch 1.13's torch.autocast("cpu", dtype=torch.bfloat16) (tests/fixtures/bf16.json, gen_bf16.py);
-- backward following the forward's precision; Trainer{precision = ...}: its values, errors, resume.
local lt = require "lutra"
local X = require "tests.helpers.nn_fixtures"
local err_of = require "tests.helpers.err_of"
local fs = require "helpers.fs"
local puc = require "helpers.puc"

local ACTIVE = lt._bf16_info().active

-- the same values, bit for bit (as float32s compare)
local function same(a, b) return a:eq(b):min():item() == 1 end
-- the specs that need the bf16 kernels say so and pass trivially elsewhere (the CPU or LUTRA_BF16_GEMM=0)
local function bf16_it(name, fn)
  if ACTIVE then it(name, fn) else pending(name .. " (no AVX512-BF16 here)") end
end

-- x rounded to bfloat16, round-to-nearest-even (8 significant bits)
local frexp = math.frexp or function(x)
  local e = math.floor(math.log(math.abs(x)) / math.log(2)) + 1
  local m = x / 2 ^ e
  if math.abs(m) >= 1 then m, e = m / 2, e + 1 elseif math.abs(m) < 0.5 then m, e = m * 2, e - 1 end
  return m, e
end
local function bf(x)
  if x == 0 or x ~= x then return x end
  local m, e = frexp(x)
  local v = m * 256
  local f = math.floor(v)
  local r = v - f
  if r > 0.5 or (r == 0.5 and f % 2 == 1) then f = f + 1 end
  return f / 256 * 2 ^ e
end

-- C = alpha op(A) op(B) + beta C0 in float64 from the bf16-rounded operands (round = false: as they are)
local function reference(ta, tb, A, B, C0, alpha, beta, round)
  local a, b, c0 = A:totable(), B:totable(), C0 and C0:totable()
  local m = ta and #a[1] or #a
  local k = ta and #a or #a[1]
  local n = tb and #b or #b[1]
  local r = round == false and function(x) return x end or bf
  local ra, rb = {}, {}
  for i = 1, m do
    ra[i] = {}
    for p = 1, k do ra[i][p] = r(ta and a[p][i] or a[i][p]) end
  end
  for p = 1, k do
    rb[p] = {}
    for j = 1, n do rb[p][j] = r(tb and b[j][p] or b[p][j]) end
  end
  local out = {}
  for i = 1, m do
    local row, ai = {}, ra[i]
    for j = 1, n do
      local s = 0
      for p = 1, k do s = s + ai[p] * rb[p][j] end
      row[j] = alpha * s + (beta ~= 0 and beta * c0[i][j] or 0)
    end
    out[i] = row
  end
  return out
end

-- max |got - ref| / max |ref|
local function rel_err(got, ref)
  local g = type(got) == "table" and got or got:totable()
  local err, big = 0, 0
  for i = 1, #ref do
    for j = 1, #ref[i] do
      err = math.max(err, math.abs(g[i][j] - ref[i][j]))
      big = math.max(big, math.abs(ref[i][j]))
    end
  end
  return err / big
end

local function operands(m, n, k, ta, tb)
  local A = ta and lt.randn(k, m) or lt.randn(m, k)
  local B = tb and lt.randn(n, k) or lt.randn(k, n)
  return A, B
end

local function gemm_bf16(C, A, B, ta, tb, alpha, beta)
  lt.autocast("bfloat16", lt._gemm, C, A, B, ta, tb, alpha, beta)
end

describe("bf16 GEMM against float64 of the bf16-rounded operands", function()
  -- m, n, k: partial 6-row tiles, partial 64-column panels and 16-column vectors, odd k, k over one and two
  -- 256-blocks, rows over a 192-row block, columns over a 1024-column block
  local SHAPES = { { 13, 67, 513 }, { 200, 20, 40 }, { 6, 1100, 18 }, { 64, 64, 64 }, { 5, 33, 257 } }
  lt.manual_seed(7)
  for _, s in ipairs(SHAPES) do
    for _, t in ipairs { { false, false }, { true, false }, { false, true }, { true, true } } do
      local m, n, k, ta, tb = s[1], s[2], s[3], t[1], t[2]
      bf16_it(string.format("%dx%dx%d transa=%s transb=%s, alpha and beta", m, n, k, tostring(ta), tostring(tb)),
        function()
          local A, B = operands(m, n, k, ta, tb)
          local C = lt.randn(m, n)
          local C0 = C:clone()
          gemm_bf16(C, A, B, ta, tb, 0.75, -0.5)
          -- only fp32 summation separates them (2^-24 per add); rounding to bf16 or not would be 2^-9
          local e = rel_err(C, reference(ta, tb, A, B, C0, 0.75, -0.5))
          assert.is_true(e < 2e-6, "relative error " .. e)
          -- and the operands really were rounded: far from the unrounded product
          assert.is_true(rel_err(C, reference(ta, tb, A, B, C0, 0.75, -0.5, false)) > 1e-4)
        end)
    end
  end

  bf16_it("beta = 0 does not read C (NaN there stays out of the result)", function()
    local A, B = operands(30, 70, 40, false, true)
    local C = lt.full({ 30, 70 }, 0 / 0)
    gemm_bf16(C, A, B, false, true, 1, 0)
    assert.is_true(rel_err(C, reference(false, true, A, B, nil, 1, 0)) < 2e-6)
  end)

  bf16_it("split over 2 threads: the same bits as on one, by rows and by columns", function()
    local was = lt.get_num_threads()
    for _, s in ipairs { { 300, 100, 256 }, { 40, 700, 256 } } do -- taller than wide: rows; wider: columns
      local A, B = operands(s[1], s[2], s[3], false, false)
      local C1, C2 = lt.zeros(s[1], s[2]), lt.zeros(s[1], s[2])
      lt.set_num_threads(1)
      gemm_bf16(C1, A, B, false, false, 1, 0)
      lt.set_num_threads(2)
      gemm_bf16(C2, A, B, false, false, 1, 0)
      lt.set_num_threads(was)
      assert.is_true(same(C1, C2))
      assert.is_true(rel_err(C2, reference(false, false, A, B, nil, 1, 0)) < 2e-6)
    end
  end)

  it("small, matrix-vector and outer products stay fp32 inside autocast", function()
    for _, s in ipairs { { 7, 70, 33 }, { 1, 300, 200 }, { 300, 1, 200 }, { 200, 300, 1 } } do
      local A, B = operands(s[1], s[2], s[3], false, false)
      local C1, C2 = lt.zeros(s[1], s[2]), lt.zeros(s[1], s[2])
      lt._gemm(C1, A, B, false, false, 1, 0)
      gemm_bf16(C2, A, B, false, false, 1, 0)
      assert.is_true(same(C1, C2), table.concat(s, "x"))
    end
  end)

  it("the forced fp32 path: autocast's products are fp32's, bit for bit; undone, bf16 again", function()
    local A, B = operands(64, 80, 96, false, true)
    local C32, Cf, Cb = lt.zeros(64, 80), lt.zeros(64, 80), lt.zeros(64, 80)
    lt._gemm(C32, A, B, false, true, 1, 0)
    lt._bf16_force_fp32(true)
    assert.is_false(lt._bf16_info().active)
    local ok, e = pcall(gemm_bf16, Cf, A, B, false, true, 1, 0)
    lt._bf16_force_fp32(false)
    assert(ok, e)
    assert.is_true(same(C32, Cf))
    gemm_bf16(Cb, A, B, false, true, 1, 0)
    assert.are.equal(ACTIVE, not same(C32, Cb))
  end)
end)

describe("LUTRA_BF16_GEMM=0", function()
  it("forces the fp32 path from the start: autocast's products are fp32's, bit for bit, and a note says so once",
    function()
    -- the child: the lutra binary, or the PUC interpreter with the module built for it (as cpus_spec's)
    local runner = rawget(_G, "jit") and (os.getenv("LUTRA_BIN") or "build/bin/release/cli/lutra")
      or "env " .. puc.module_env(os.getenv("LUTRA_CONFIG") or "release") .. puc.lua_exe
    local code = "local lt = require 'lutra'; lt.set_interactive(true); lt.manual_seed(1); " ..
      "local A, B = lt.randn(64, 96), lt.randn(96, 80); " ..
      "local C1, C2 = lt.zeros(64, 80), lt.zeros(64, 80); lt._gemm(C1, A, B, false, false, 1, 0); " ..
      "lt.autocast('bf16', lt._gemm, C2, A, B, false, false, 1, 0); lt.autocast('bf16', print, ''); " ..
      "io.write(tostring(lt._bf16_info().active), ' ', tostring(C1:eq(C2):min():item() == 1))"
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write(code)
    f:close()
    local p = io.popen("LUTRA_BF16_GEMM=0 " .. runner .. " " .. fs.q(script) .. " 2>&1")
    local out = p:read("*a")
    p:close()
    os.remove(script)
    -- the one-time note (stderr), then the answer
    local note = "lutra: note: bfloat16 autocast computes in fp32 here: " ..
      (lt._bf16_info().supported and "LUTRA_BF16_GEMM=0" or "this CPU has no AVX512-BF16")
    assert.matches(note, out, 1, true)
    assert.is_nil(out:find(note, out:find(note, 1, true) + 1, true))
    assert.matches("false true$", out)
  end)
end)

describe("lt.autocast", function()
  it("turns on for fn only and returns its results", function()
    assert.is_false(lt.is_autocast_enabled())
    local a, b = lt.autocast("bfloat16", function(x) return lt.is_autocast_enabled(), x end, 5)
    assert.is_true(a)
    assert.are.equal(5, b)
    assert.is_false(lt.is_autocast_enabled())
  end)

  it("nests, and enabled = false turns it off inside", function()
    lt.autocast("bf16", function()
      lt.autocast({ device_type = "cpu", dtype = "bfloat16", enabled = false }, function()
        assert.is_false(lt.is_autocast_enabled())
        lt.autocast("cpu", function() assert.is_true(lt.is_autocast_enabled()) end)
        assert.is_false(lt.is_autocast_enabled())
      end)
      assert.is_true(lt.is_autocast_enabled())
    end)
    assert.is_false(lt.is_autocast_enabled())
  end)

  it("an error inside restores the state and passes through unchanged", function()
    local e = err_of(lt.autocast, "bfloat16", function()
      lt.autocast("bfloat16", function() error({ code = 7 }) end)
    end)
    assert.is_false(lt.is_autocast_enabled())
    assert.is_truthy(e:match("table"))
    local ok, v = pcall(lt.autocast, "bfloat16", function() error({ code = 7 }) end)
    assert.is_false(ok)
    assert.are.equal(7, v.code)
    assert.is_false(lt.is_autocast_enabled())
  end)

  it("names what is wrong", function()
    assert.matches("the CPU has no float16 autocast", err_of(lt.autocast, "float16", print), 1, true)
    assert.matches("unknown dtype 'int8'", err_of(lt.autocast, "int8", print), 1, true)
    assert.matches("device_type 'cuda' is not available", err_of(lt.autocast, { device_type = "cuda" }, print), 1,
      true)
    assert.matches("unknown option 'dtpye'", err_of(lt.autocast, { dtpye = "bfloat16" }, print), 1, true)
    assert.matches("bad argument #2 to 'autocast' (function expected, got nil)", err_of(lt.autocast, "bf16"), 1, true)
    assert.matches("bad argument #1 to 'autocast'", err_of(lt.autocast, 3, print), 1, true)
  end)
end)

-- ---- ops under autocast against PyTorch -------------------------------------------------------------------

local OPS = {
  linear = function(x, w, b) return lt.F.linear(x, w, b) end,
  linear_3d = function(x, w, b) return lt.F.linear(x, w, b) end,
  matmul_batched = function(a, b) return lt.matmul(a, b) end,
  matmul_bt = function(a, b) return lt.matmul(a, b:t()) end,
  conv2d = function(x, w, b) return lt.F.conv2d(x, w, b, { padding = 1 }) end,
}

-- max |got - ref| over max |ref| of a fixture tensor
local function rel(got, ref)
  local g = got:contiguous():view(-1):totable()
  local err, big = 0, 0
  for i, r in ipairs(ref.data) do
    err = math.max(err, math.abs(g[i] - r))
    big = math.max(big, math.abs(r))
  end
  return err / big
end

-- out and input gradients of sum(op(inputs) * gout), under autocast when `ac`
local function run_case(c, ac)
  local ins = {}
  for i, t in ipairs(c.inputs) do ins[i] = X.tensor(t):requires_grad(true) end
  local out = ac and lt.autocast("bfloat16", OPS[c.name], unpack(ins)) or OPS[c.name](unpack(ins))
  local loss = (out * X.tensor(c.gout)):sum()
  loss:backward() -- outside autocast: the nodes carry their forward's precision
  local grads = {}
  for i, t in ipairs(ins) do grads[i] = t.grad end
  return out, grads
end

describe("ops under autocast against PyTorch's torch.autocast(\"cpu\", dtype=torch.bfloat16) (bf16.json)", function()
  local cases = X.load("bf16.json")
  for _, c in ipairs(cases) do
    if OPS[c.name] then
      bf16_it(c.name .. ": output and gradients", function()
        local out, grads = run_case(c, true)
        -- exact: the same bf16-rounded operands summed in float64; fp32 summation alone stays under 1e-5
        assert.is_true(rel(out, c.exact.out) < 1e-5, c.name .. " out vs exact: " .. rel(out, c.exact.out))
        for i, g in ipairs(c.exact.grads) do
          assert.is_true(rel(grads[i], g) < 1e-5, c.name .. " grad " .. i .. " vs exact: " .. rel(grads[i], g))
        end
        -- PyTorch: its outputs and the gradients of its bf16 ops are bf16 (2^-9 relative rounding each, up to
        -- twice over in a gradient), lutra's stay fp32: within 5e-3 of the largest value
        assert.is_true(rel(out, c.torch.out) < 5e-3, c.name .. " out vs torch: " .. rel(out, c.torch.out))
        for i, g in ipairs(c.torch.grads) do
          assert.is_true(rel(grads[i], g) < 5e-3, c.name .. " grad " .. i .. " vs torch: " .. rel(grads[i], g))
        end
        -- without autocast the same op misses the exact bf16 values by the rounding it skipped
        local out32 = run_case(c, false)
        assert.is_true(rel(out32, c.exact.out) > 1e-4)
      end)
    end
  end

  bf16_it("a 2-layer MLP's loss and gradients (mlp_step)", function()
    local c
    for _, cs in ipairs(cases) do if cs.name == "mlp_step" then c = cs end end
    local x, y = X.tensor(c.x), lt.tensor(c.y, "int64")
    local p = {}
    for i, t in ipairs(c.params) do p[i] = X.tensor(t):requires_grad(true) end
    local loss = lt.autocast("bfloat16", function()
      local h = lt.F.relu(lt.F.linear(x, p[1], p[2]))
      return lt.F.cross_entropy(lt.F.linear(h, p[3], p[4]), y)
    end)
    loss:backward()
    -- The same bf16-rounded operands make the logits of both; PyTorch's are rounded to bf16 once more (2^-9
    -- relative each, averaging out in the mean loss): 8e-6 apart here, where fp32's loss is 8e-5 away
    assert.is_true(math.abs(loss:item() - c.loss) < 3e-5 * math.abs(c.loss), loss:item() .. " vs " .. c.loss)
    -- Gradients as a whole (Frobenius norm): a pre-activation within bf16's rounding of 0 falls on the other side
    -- of the ReLU in one of the two (PyTorch adds a bf16-rounded bias, lutra the fp32 one), moving one term of a
    -- 64-row sum: 2-3% of the norm for the first layer (fp32 against PyTorch's autocast is 3.5-4% off)
    for i, g in ipairs(c.grads) do
      assert.is_true(p[i].grad:dtype() == "float32")
      local r = X.tensor(g)
      local e = (p[i].grad - r):pow(2):sum():sqrt():item() / r:pow(2):sum():sqrt():item()
      assert.is_true(e < 3e-2, "grad " .. i .. ": " .. e)
    end
  end)
end)

describe("autocast in the other GEMM ops", function()
  bf16_it("attention's products: bf16 inside autocast (close to fp32, not equal), fp32 again after", function()
    lt.manual_seed(3)
    local q, k, v = lt.randn(2, 2, 40, 32), lt.randn(2, 2, 40, 32), lt.randn(2, 2, 40, 32)
    local F = lt.F.scaled_dot_product_attention
    local y32 = F(q, k, v)
    local y16 = lt.autocast("bfloat16", F, q, k, v)
    assert.is_false(same(y32, y16))
    assert.is_true(((y16 - y32):abs():max():item()) < 2e-2 * y32:abs():max():item())
    assert.is_true(same(y32, F(q, k, v)))
  end)

  bf16_it("the recurrent products (LSTM): bf16 inside autocast, forward and backward", function()
    lt.manual_seed(4)
    local rnn = lt.nn.LSTM(32, 64)
    local x = lt.randn(5, 16, 32)
    local y32 = rnn(x)
    local y16 = lt.autocast("bfloat16", function() return rnn(x) end)
    y32, y16 = type(y32) == "table" and y32[1] or y32, type(y16) == "table" and y16[1] or y16
    assert.is_false(same(y32, y16))
    assert.is_true(((y16 - y32):abs():max():item()) < 2e-2)
  end)

  it("parameters, gradients and optimizer state stay float32", function()
    local m = lt.nn.Linear(64, 64)
    local opt = lt.optim.Adam(lt.nn.parameters(m), { lr = 1e-3 })
    lt.autocast("bfloat16", function()
      local l = m(lt.randn(16, 64)):pow(2):mean()
      l:backward()
      opt:step()
      assert.are.equal("float32", l:dtype())
    end)
    for _, p in ipairs(lt.nn.parameters(m)) do
      assert.are.equal("float32", p:dtype())
      assert.are.equal("float32", p.grad:dtype())
    end
  end)

  bf16_it("backward follows the forward's precision wherever it is called", function()
    lt.manual_seed(5)
    local w = lt.randn(48, 64):requires_grad(true)
    local x, g = lt.randn(32, 64), lt.randn(32, 48)
    local function grad(ac_fwd, ac_bwd)
      w.grad = nil
      local y = ac_fwd and lt.autocast("bf16", lt.F.linear, x, w) or lt.F.linear(x, w)
      local function bw() lt.sum(y * g):backward() end
      if ac_bwd then lt.autocast("bf16", bw) else bw() end
      return w.grad:clone()
    end
    assert.is_true(same(grad(true, false), grad(true, true)))
    assert.is_true(same(grad(false, false), grad(false, true)))
    assert.is_false(same(grad(true, false), grad(false, false)))
  end)
end)

-- ---- the Trainer -----------------------------------------------------------------------------------------

local BASE = { enable_progress_bar = false, enable_model_summary = false, logger = false, enable_checkpointing = false,
  default_root_dir = os.getenv("TMPDIR") or "/tmp", max_epochs = 2 }
local function topts(extra)
  local t = {}
  for k, v in pairs(BASE) do t[k] = v end
  for k, v in pairs(extra or {}) do t[k] = v end
  return t
end

local function setup(seed, seen)
  lt.manual_seed(1)
  local train = lt.data.DataLoader(lt.data.TensorDataset(lt.randn(64, 64), lt.randn(64, 64)), { batch_size = 16 })
  lt.manual_seed(seed)
  local model = { net = lt.nn.Sequential(lt.nn.Linear(64, 64), lt.nn.ReLU(), lt.nn.Linear(64, 64)) }
  function model:forward(x) return self.net(x) end
  function model:training_step(b)
    if seen then seen[#seen + 1] = lt.is_autocast_enabled() end
    return lt.F.mse_loss(self:forward(b[1]), b[2])
  end
  function model:configure_optimizers() return lt.optim.Adam(lt.nn.parameters(self), { lr = 1e-2 }) end
  return model, train
end

local function weights(m)
  local out = {}
  for k, v in pairs(lt.nn.state_dict(m)) do out[k] = v:view(-1):totable() end
  return out
end
local function same_bits(a, b)
  for k, xs in pairs(a) do
    for i = 1, #xs do if xs[i] ~= b[k][i] then return false end end
  end
  return true
end

describe("Trainer{precision = ...}", function()
  it("takes Lightning's names and says which it runs with", function()
    assert.are.equal("32-true", lt.Trainer(topts()).precision)
    for _, v in ipairs { 32, "32", "32-true" } do assert.are.equal("32-true", lt.Trainer(topts { precision = v }).precision) end
    for _, v in ipairs { "bf16", "bf16-mixed" } do
      assert.are.equal("bf16-mixed", lt.Trainer(topts { precision = v }).precision)
    end
  end)

  it("float16 and unknown values are errors that say why", function()
    for _, v in ipairs { 16, "16", "16-mixed" } do
      assert.matches("option 'precision' is float16, which the CPU has no autocast for",
        err_of(lt.Trainer, topts { precision = v }), 1, true)
    end
    assert.matches([[option 'precision' must be "32-true" (or 32, "32") or "bf16-mixed" (or "bf16"), got "fp8"]],
      err_of(lt.Trainer, topts { precision = "fp8" }), 1, true)
    assert.matches("option 'precision' must be", err_of(lt.Trainer, topts { precision = true }), 1, true)
  end)

  it("autocast is on during the run only", function()
    local seen = {}
    local model, train = setup(2, seen)
    lt.Trainer(topts { precision = "bf16-mixed", max_epochs = 1 }):fit(model, train)
    assert.are.equal(4, #seen)
    for _, s in ipairs(seen) do assert.is_true(s) end
    assert.is_false(lt.is_autocast_enabled())
    seen = {}
    model, train = setup(2, seen)
    lt.Trainer(topts { max_epochs = 1 }):fit(model, train)
    for _, s in ipairs(seen) do assert.is_false(s) end
  end)

  bf16_it("bf16 trains to other bits than fp32; each is repeatable bit for bit", function()
    local function run(p)
      local model, train = setup(2)
      lt.Trainer(topts { precision = p }):fit(model, train)
      return weights(model)
    end
    local a, b, c = run("bf16-mixed"), run("bf16-mixed"), run("32-true")
    assert.is_true(same_bits(a, b))
    assert.is_false(same_bits(a, c))
  end)

  it("resume is bitwise within a precision", function()
    local dir = fs.tmpdir()
    local model, train = setup(2)
    lt.Trainer(topts { precision = "bf16-mixed", max_epochs = 3, enable_checkpointing = true,
      callbacks = { lt.callbacks.ModelCheckpoint { dirpath = dir, save_top_k = -1 } } }):fit(model, train)
    local final = weights(model)
    local files = {}
    for _, n in ipairs(lt._io.listdir(dir) or {}) do if n:match("%.ckpt$") then files[#files + 1] = dir .. "/" .. n end end
    assert.is_true(#files >= 2)
    for _, f in ipairs(files) do
      local m2, train2 = setup(99)
      lt.Trainer(topts { precision = "bf16-mixed", max_epochs = 3 }):fit(m2, train2, nil, { ckpt_path = f })
      assert.is_true(same_bits(final, weights(m2)), "resumed from " .. f)
    end
    fs.rmrf(dir)
  end)
end)

describe("lutra fit CONFIG.lua --trainer.precision", function()
  local skip = puc.needs_luajit("runs the lutra binary, which embeds LuaJIT")
  if skip then
    pending(skip)
    return
  end
  local BIN = os.getenv("LUTRA_BIN") or "build/bin/release/cli/lutra"
  local ABS_BIN = BIN:sub(1, 1) == "/" and BIN or (os.getenv("PWD") .. "/" .. BIN)
  local CONFIG = [[
local lt = require "lutra"
local model = { net = lt.nn.Linear(2, 1) }
function model:training_step(b)
  assert(lt.is_autocast_enabled() == (os.getenv("WANT_BF16") == "1"), "autocast state in training_step")
  return lt.F.mse_loss(self.net(b[1]), b[2])
end
function model:configure_optimizers() return lt.optim.SGD(self.net:parameters(), { lr = 0.1 }) end
local x = lt.randn(8, 2)
local Data = lt.DataModule:extend("Data")
function Data:train_dataloader() return lt.data.DataLoader(lt.data.TensorDataset(x, x:sum(2, true)), { batch_size = 4 }) end
return { model = model, data = Data(),
  trainer = { max_epochs = 1, enable_progress_bar = false, enable_model_summary = false, logger = false,
    enable_checkpointing = false } }
]]
  local function run(dir, env, ...)
    local words = {}
    for i, a in ipairs { ... } do words[i] = fs.q(a) end
    local p = io.popen("cd " .. fs.q(dir) .. " && " .. env .. " " .. fs.q(ABS_BIN) .. " " .. table.concat(words, " ")
      .. " 2>&1; echo \"exit $?\"")
    local out = p:read("*a")
    p:close()
    return out
  end

  it("bf16-mixed runs the hooks under autocast; float16 is refused, named", function()
    local dir = fs.tmpdir()
    local f = assert(io.open(dir .. "/config.lua", "w"))
    f:write(CONFIG)
    f:close()
    assert.matches("exit 0", run(dir, "WANT_BF16=1", "fit", "config.lua", "--trainer.precision", "bf16-mixed"), 1, true)
    assert.matches("exit 0", run(dir, "WANT_BF16=0", "fit", "config.lua", "--trainer.precision", "32-true"), 1, true)
    local out = run(dir, "WANT_BF16=0", "fit", "config.lua", "--trainer.precision", "16-mixed")
    assert.matches("--trainer.precision is float16, which the CPU has no autocast for", out, 1, true)
    assert.is_nil(out:match("exit 0"))
    fs.rmrf(dir)
  end)
end)
