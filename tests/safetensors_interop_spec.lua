-- safetensors_interop_spec.lua — lutra's checkpoints read by independent code: tests/safetensors_reader.py
-- (Python json + struct, its own CRC-32), Python's strict JSON parser for the metadata, and PyTorch
-- computing with the saved weights.
local lt = require "lutra"

local PY = "/usr/bin/python3"

local fs = require "helpers.fs"
local tmpdir, rmrf = fs.tmpdir, fs.rmrf

local function run(cmd)
  local f = assert(io.popen(cmd .. " 2>&1; echo \"exit=$?\""))
  local out = f:read("*a")
  f:close()
  local code = tonumber(out:match("exit=(%d+)%s*$"))
  return out:gsub("exit=%d+%s*$", ""), code
end

local function have_python()
  local f = io.open(PY, "rb")
  if f then f:close() return true end
  return false
end

local function sum_of(t)
  local s = 0
  for _, v in ipairs(t:view(-1):totable()) do s = s + v end
  return s
end

describe("safetensors interop", function()
  local dir
  setup(function() dir = tmpdir() end)
  teardown(function() rmrf(dir) end)

  local function checkpoint()
    lt.manual_seed(11)
    local ds = lt.data.TensorDataset(lt.randn(32, 5), lt.randn(32, 2))
    local train = lt.data.DataLoader(ds, { batch_size = 8, shuffle = true })
    local model = { net = lt.nn.Sequential { lt.nn.Linear(5, 7), lt.nn.ReLU(), lt.nn.Linear(7, 2) } }
    function model:forward(x) return self.net(x) end
    function model:training_step(b)
      local l = lt.F.mse_loss(self:forward(b[1]), b[2])
      self:log("train_loss", l)
      return l
    end
    function model:configure_optimizers() return lt.optim.Adam(lt.nn.parameters(self), { lr = 0.01 }) end
    local t = lt.Trainer { max_epochs = 2, logger = false, enable_progress_bar = false, enable_model_summary = false,
      enable_checkpointing = false, callbacks = { lt.callbacks.EarlyStopping { monitor = "nothing", strict = false } } }
    t:fit(model, train)
    local p = dir .. "/run.ckpt"
    t:save_checkpoint(p)
    return p, t, model
  end

  it("the independent reader verifies the checksum and sees every tensor with lutra's shapes and sums", function()
    if not have_python() then pending("no " .. PY) return end
    local p, t, model = checkpoint()
    local out, code = run(PY .. " tests/safetensors_reader.py --json --verify-checksum '" .. p .. "'")
    assert.are.equal(0, code, out)
    local cjson = require "cjson"
    local seen = {}
    for line in out:gmatch("[^\n]+") do
      local r = cjson.decode(line)
      seen[r.name] = r
    end
    local sd = lt.nn.state_dict(model)
    for name, tensor in pairs(sd) do
      local r = seen["state_dict." .. name]
      assert.is_table(r, "reader lacks state_dict." .. name)
      assert.are.equal("F32", r.dtype)
      assert.are.same(tensor:shape(), r.shape)
      assert.are.equal(sum_of(tensor), r.sum)
    end
    local st = t.optimizers[1]:state_dict().state
    local r = seen["optimizer_states.1.state.1.exp_avg_sq"]
    assert.is_table(r)
    assert.are.equal(sum_of(st[1].exp_avg_sq), r.sum)
  end)

  it("the metadata is strict JSON for Python (no NaN/Infinity literals) with Lightning's fields", function()
    if not have_python() then pending("no " .. PY) return end
    local p = checkpoint()
    local script = [[
import json, sys
sys.path.insert(0, "tests")
import safetensors_reader as r
tensors, meta = r.read(sys.argv[1], True)
def bad(c): raise ValueError("constant " + c)
doc = json.loads(meta["lutra"], parse_constant=bad)
es = [v for k, v in doc["callbacks"].items() if k.startswith("EarlyStopping")][0]
print(meta["format"], doc["epoch"], doc["global_step"], doc["lutra_version"], sorted(doc)[0], es["best_score"]["$float"],
      doc["state_dict"]["net.1.weight"]["$tensor"])
]]
    local sf = dir .. "/meta.py"
    local f = assert(io.open(sf, "w"))
    f:write(script)
    f:close()
    local out, code = run(PY .. " '" .. sf .. "' '" .. p .. "'")
    assert.are.equal(0, code, out)
    assert.are.equal("lutra 2 8 " .. lt.version .. " callbacks inf state_dict.net.1.weight\n", out)
  end)

  it("PyTorch computes the same outputs from weights saved with lt.save", function()
    if not have_python() then pending("no " .. PY) return end
    local ok = select(2, run(PY .. " -c 'import torch'")) == 0
    if not ok then pending("no torch for " .. PY) return end
    lt.manual_seed(5)
    local net = lt.nn.Sequential { lt.nn.Linear(5, 7), lt.nn.Tanh(), lt.nn.Linear(7, 3) }
    local p = dir .. "/w.safetensors"
    lt.save(p, net)
    local x = lt.arange(0, 10):view(2, 5) * 0.1
    local y = net(x):view(-1):totable()
    local script = [[
import json, struct, sys, torch
buf = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", buf[:8])
hdr = json.loads(buf[8:8 + n])
data = buf[8 + n:]
def t(name):
    e = hdr["state_dict." + name]
    b, en = e["data_offsets"]
    vals = struct.unpack("<%df" % ((en - b) // 4), data[b:en])
    return torch.tensor(vals, dtype=torch.float32).reshape(e["shape"])
net = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))
net.load_state_dict({"0.weight": t("1.weight"), "0.bias": t("1.bias"), "2.weight": t("3.weight"), "2.bias": t("3.bias")})
x = torch.arange(0, 10, dtype=torch.float32).reshape(2, 5) * 0.1
print(" ".join(repr(v) for v in net(x).detach().reshape(-1).tolist()))
]]
    local sf = dir .. "/forward_check.py"
    local f = assert(io.open(sf, "w"))
    f:write(script)
    f:close()
    local out, code = run(PY .. " '" .. sf .. "' '" .. p .. "'")
    assert.are.equal(0, code, out)
    local i = 0
    for v in out:gmatch("%S+") do
      i = i + 1
      assert.is_true(math.abs(tonumber(v) - y[i]) < 1e-6, string.format("output %d: torch %s, lutra %.9g", i, v, y[i]))
    end
    assert.are.equal(6, i)
  end)

  it("the independent reader rejects a lutra checkpoint with one changed data byte (checksum)", function()
    if not have_python() then pending("no " .. PY) return end
    local p = checkpoint()
    local b = lt._io.read_all(p)
    local i = #b - 5
    lt._io.write_atomic(dir .. "/bad.ckpt", b:sub(1, i - 1) .. string.char((b:byte(i) + 1) % 256) .. b:sub(i + 1))
    local out, code = run(PY .. " tests/safetensors_reader.py --verify-checksum '" .. dir .. "/bad.ckpt'")
    assert.are.equal(1, code)
    assert.matches("checksum mismatch", out, 1, true)
  end)
end)
