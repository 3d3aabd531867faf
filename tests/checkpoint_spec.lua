-- checkpoint_spec.lua — checkpoint files: the JSON encoding of the metadata, lt.save / lt.load, the
-- trainer's checkpoint contents (names of the tensors, JSON fields), and clear errors for bad input.
local LUA_EXE = require("helpers.puc").lua_exe -- luajit, or lua5.4 under tests/run --lua 5.4
local lt = require "lutra"
local ck = require "lutra.checkpoint"
local cjson = require "cjson"

local fs = require "helpers.fs"
local tmpdir, rmrf = fs.tmpdir, fs.rmrf

local function flat(t) return t:view(-1):totable() end

local function same_tensor(a, b)
  assert.are.same(a:shape(), b:shape())
  assert.are.equal(a:dtype(), b:dtype())
  local x, y = flat(a), flat(b)
  for i = 1, #x do assert.are.equal(x[i], y[i]) end
end

describe("checkpoint metadata JSON", function()
  it("gives back numbers bit for bit (15 to 17 digits), including values cjson would round", function()
    local vals = { 0.1, 1 / 3, 2 / 3, 1e-300, 5e-324, 1.7976931348623157e308, -0.0078125, 2 ^ 53, 2 ^ 53 + 2,
      123456789.123456789, 3.0000001192092896 }
    local back = ck.decode(ck.encode(vals))
    for i, v in ipairs(vals) do assert.are.equal(v, back[i]) end
  end)

  it("gives back inf, -inf and nan", function()
    local back = ck.decode(ck.encode { a = math.huge, b = -math.huge, c = 0 / 0 })
    assert.are.equal(math.huge, back.a)
    assert.are.equal(-math.huge, back.b)
    assert.is_true(back.c ~= back.c)
  end)

  it("keeps integer keys of sparse tables and tables with holes as integers", function()
    local t = { state = { [1] = { step = 3 }, [4] = { step = 5 } }, holes = { 1, nil, 3 }, neg = { [-2] = "x", [0] = "y" } }
    local back = ck.decode(ck.encode(t))
    assert.are.equal(3, back.state[1].step)
    assert.are.equal(5, back.state[4].step)
    assert.is_nil(back.state["4"])
    assert.are.equal(1, back.holes[1])
    assert.is_nil(back.holes[2])
    assert.are.equal(3, back.holes[3])
    assert.are.equal("x", back.neg[-2])
    assert.are.equal("y", back.neg[0])
  end)

  it("keeps string keys that start with # or $ and strings with quotes and control characters", function()
    local t = { ["#1"] = 1, ["$tensor"] = "a", ["##"] = 2, s = 'say "hi"\n\t\1\\' }
    local back = ck.decode(ck.encode(t))
    assert.are.equal(1, back["#1"])
    assert.is_nil(back[1])
    assert.are.equal("a", back["$tensor"])
    assert.are.equal(2, back["##"])
    assert.are.equal(t.s, back.s)
  end)

  it("writes arrays as JSON arrays and sorts object keys (same state, same bytes)", function()
    assert.are.equal('{"a":[1,2,3],"b":{"x":true,"y":false},"c":"s","e":{}}',
      ck.encode { c = "s", a = { 1, 2, 3 }, b = { y = false, x = true }, e = {} })
    assert.are.equal("[0.1,0.30000000000000004]", ck.encode { 0.1, 0.1 + 0.2 })
  end)

  it("refuses functions, cycles and float keys, naming the path", function()
    local ok, err = pcall(ck.encode, { a = { b = print } })
    assert.is_false(ok)
    assert.matches("cannot save a.b: a function", err, 1, true)
    local cyc = {}
    cyc.self = cyc
    ok, err = pcall(ck.encode, { x = cyc })
    assert.is_false(ok)
    assert.matches("cannot save x.self: the table contains itself", err, 1, true)
    ok, err = pcall(ck.encode, { t = { [1.5] = 1 } })
    assert.is_false(ok)
    assert.matches("key 1.5 is not an integer or a string", err, 1, true)
  end)

  it("decoding bad JSON names the file", function()
    local ok, err = pcall(ck.decode, "{oops", nil, "load: x.ckpt")
    assert.is_false(ok)
    assert.matches("^load: x.ckpt: the 'lutra' metadata is not valid JSON", err)
  end)
end)

describe("lt.save / lt.load", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmrf(dir) end)

  local function net()
    return lt.nn.Sequential { lt.nn.Linear(4, 3), lt.nn.ReLU(), lt.nn.Linear(3, 2), lt.nn.BatchNorm1d(2) }
  end

  it("round-trips a module's parameters and buffers bit for bit", function()
    local a = net()
    a[4].running_mean:fill_(0.25)
    local p = lt.save(dir .. "/w.safetensors", a)
    assert.are.equal(dir .. "/w.safetensors", p)
    local b = net()
    assert.are.equal(b, (lt.load(p, b)))
    for name, t in pairs(lt.nn.state_dict(a)) do same_tensor(t, lt.nn.state_dict(b)[name]) end
  end)

  it("returns the state dict {name = tensor} without a model", function()
    local a = net()
    lt.save(dir .. "/w.safetensors", a)
    local sd = lt.load(dir .. "/w.safetensors")
    local names = {}
    for k in pairs(sd) do names[#names + 1] = k end
    table.sort(names)
    assert.are.same({ "1.bias", "1.weight", "3.bias", "3.weight", "4.bias", "4.num_batches_tracked", "4.running_mean",
      "4.running_var", "4.weight" },
      names)
    same_tensor(a[1].weight, sd["1.weight"])
  end)

  it("saves a plain model table and a state dict table, int64 tensors included", function()
    local model = { enc = lt.nn.Linear(2, 2), steps = lt.tensor({ 1, 2, 3 }, "int64") }
    lt.save(dir .. "/m.safetensors", model)
    local sd = lt.load(dir .. "/m.safetensors")
    same_tensor(model.enc.weight, sd["enc.weight"])
    lt.save(dir .. "/sd.safetensors", { idx = lt.tensor({ 7, 8 }, "int64"), w = lt.ones(2, 2) })
    local sd2 = lt.load(dir .. "/sd.safetensors")
    assert.are.equal("int64", sd2.idx:dtype())
    assert.are.same({ 7, 8 }, sd2.idx:totable())
  end)

  it("writes tensors named state_dict.<name> with the lutra metadata, readable by name", function()
    lt.save(dir .. "/w.safetensors", net())
    local names, _, meta = lt._io.load(dir .. "/w.safetensors")
    table.sort(names)
    assert.are.equal("state_dict.1.bias", names[1])
    assert.are.equal("lutra", meta.format)
    assert.matches("^crc32:%x%x%x%x%x%x%x%x$", meta.lutra_checksum)
    local doc = cjson.decode(meta.lutra)
    assert.are.equal(lt.version, doc.lutra_version)
    assert.are.same({ ["$tensor"] = "state_dict.1.weight" }, doc.state_dict["1.weight"])
  end)

  it("loads a safetensors file from another writer (tensors by their own names)", function()
    lt._io.save(dir .. "/f.safetensors", { "weight", "bias" }, { lt.ones(2, 2), lt.zeros(2) }, { author = "me" })
    local sd = lt.load(dir .. "/f.safetensors")
    assert.are.same({ { 1, 1 }, { 1, 1 } }, sd.weight:totable())
    local m = lt.nn.Linear(2, 2)
    lt.load(dir .. "/f.safetensors", m)
    assert.are.same({ 0, 0 }, m.bias:totable())
  end)

  it("errors name the file and the parameter on a shape mismatch", function()
    lt.save(dir .. "/w.safetensors", net())
    local other = lt.nn.Sequential { lt.nn.Linear(4, 5), lt.nn.ReLU(), lt.nn.Linear(5, 2), lt.nn.BatchNorm1d(2) }
    local ok, err = pcall(lt.load, dir .. "/w.safetensors", other)
    assert.is_false(ok)
    assert.matches("lt.load: " .. dir .. "/w.safetensors: the weights do not match the model: load_state_dict: " ..
      "size mismatch for 1.weight: copying a tensor of shape [3 x 4] from the state_dict, the shape in the current " ..
      "model is [5 x 4]", err, 1, true)
  end)

  it("errors name the missing and unexpected parameters", function()
    lt.save(dir .. "/w.safetensors", lt.nn.Linear(2, 2))
    local ok, err = pcall(lt.load, dir .. "/w.safetensors", { fc = lt.nn.Linear(2, 2) })
    assert.is_false(ok)
    assert.matches('missing key(s) in state_dict: "fc.bias", "fc.weight"; unexpected key(s) in state_dict: "bias", "weight"',
      err, 1, true)
  end)

  it("leaves the model untouched when loading fails", function()
    lt.save(dir .. "/w.safetensors", { a = lt.nn.Linear(2, 2), b = lt.nn.Linear(2, 3) })
    local m = { a = lt.nn.Linear(2, 2), b = lt.nn.Linear(2, 4) }
    local before = flat(m.a.weight)
    assert.is_false(pcall(lt.load, dir .. "/w.safetensors", m))
    assert.are.same(before, flat(m.a.weight))
  end)

  it("errors for bad arguments, a missing file, and an unwritable directory (nothing left behind)", function()
    local ok, err = pcall(lt.save, 42, net())
    assert.is_false(ok)
    assert.matches("lt.save: expected a file path (string) as argument 1, got number", err, 1, true)
    ok, err = pcall(lt.save, dir .. "/x", "model")
    assert.is_false(ok)
    assert.matches("lt.save: expected a model or a state dict {name = tensor} as argument 2, got string", err, 1, true)
    ok, err = pcall(lt.load, dir .. "/missing.safetensors")
    assert.is_false(ok)
    assert.matches("lt.load: " .. dir .. "/missing.safetensors: cannot open: No such file or directory", err, 1, true)
    ok, err = pcall(lt.save, dir .. "/no/such/dir/w.safetensors", net())
    assert.is_false(ok)
    assert.matches("lt.save: " .. dir .. "/no/such/dir/w.safetensors: cannot create temporary file", err, 1, true)
    lt._io.mkdirs(dir .. "/ro")
    os.execute("chmod 555 '" .. dir .. "/ro'")
    if lt._io.writable_dir(dir .. "/ro") then -- root ignores the mode: nothing to test
      os.execute("chmod 755 '" .. dir .. "/ro'")
      return
    end
    ok, err = pcall(lt.save, dir .. "/ro/w.safetensors", net())
    os.execute("chmod 755 '" .. dir .. "/ro'")
    assert.is_false(ok)
    assert.matches("Permission denied", err, 1, true)
    assert.are.same({}, lt._io.listdir(dir .. "/ro"))
  end)

  it("a failed save leaves the previous file intact", function()
    local p = dir .. "/w.safetensors"
    lt.save(p, net())
    local before = lt._io.read_all(p)
    local ok, err = pcall(lt.save, p, { w = lt.ones(2), f = "not a tensor" })
    assert.is_false(ok)
    assert.matches("lt.save: " .. p .. ": the model has no parameters or buffers to save", err, 1, true)
    ok, err = pcall(lt.save, p, { ["a\255"] = lt.ones(1), ok = lt.ones(1) }) -- refused by the writer itself
    assert.is_false(ok)
    assert.matches("name is not valid UTF-8", err, 1, true)
    assert.are.equal(before, lt._io.read_all(p))
  end)
end)

describe("damaged checkpoint files", function()
  local dir, path, bytes
  setup(function()
    dir = tmpdir()
    path = dir .. "/small.ckpt"
    lt.save(path, { a = lt.tensor { 1, 2, 3 }, b = lt.tensor({ { 4 } }, "int64") })
    bytes = lt._io.read_all(path)
  end)
  teardown(function() rmrf(dir) end)

  local function load_bytes(b, name)
    local p = dir .. "/" .. name
    local f = assert(io.open(p, "wb"))
    f:write(b)
    f:close()
    return pcall(lt.load, p), p
  end

  it("a truncation at every length is a clear error naming the file (header length, header, data)", function()
    local seen = {}
    for n = 0, #bytes - 1 do
      local p = dir .. "/t.ckpt"
      local f = assert(io.open(p, "wb"))
      f:write(bytes:sub(1, n))
      f:close()
      local ok, err = pcall(lt.load, p)
      assert.is_false(ok, "a file cut at " .. n .. " bytes loaded")
      assert.are.equal(1, select(2, err:gsub("lt.load: " .. p:gsub("%p", "%%%0") .. ": ", "")), err)
      local hlen = 0
      for i = 8, 1, -1 do hlen = hlen * 256 + bytes:byte(i) end
      if n < 8 then assert.matches("file too short", err, 1, true)
      elseif n < 8 + hlen then assert.matches("truncated: header length %d+ runs past the end of the file", err)
      else assert.matches("run past the end of the data buffer %(%d+ bytes%): the file is truncated or corrupt", err) end
      seen[#seen + 1] = err
    end
    assert.are.equal(#bytes, #seen)
  end)

  it("a changed byte anywhere is a clear error naming the file (never a crash, never a silent load)", function()
    local hlen = 0
    for i = 8, 1, -1 do hlen = hlen * 256 + bytes:byte(i) end
    local regions = { length = 0, header = 0, data = 0 }
    for i = 1, #bytes do
      local b = bytes:byte(i)
      local changed = bytes:sub(1, i - 1) .. string.char((b + 1) % 256) .. bytes:sub(i + 1)
      local _, p = load_bytes(changed, "c.ckpt")
      local ok, err = pcall(lt.load, p)
      assert.is_false(ok, "a change at byte " .. i .. " loaded")
      assert.matches("lt.load: " .. p, err, 1, true)
      local region = i <= 8 and "length" or i <= 8 + hlen and "header" or "data"
      regions[region] = regions[region] + 1
      if region == "data" then
        assert.matches("checksum mismatch: the file says crc32:%x+, its contents give crc32:%x+: the file is corrupt", err)
      elseif region == "length" then
        assert.is_truthy(err:find("header length", 1, true) or err:find("JSON", 1, true)
          or err:find("belong to no tensor", 1, true), err)
      end
    end
    assert.are.equal(8, regions.length)
    assert.is_true(regions.header > 50)
    assert.are.equal(#bytes - 8 - hlen, regions.data)
    assert.is_true(regions.data >= 20)
  end)

  it("a safetensors file whose metadata is not JSON says so", function()
    lt._io.save(dir .. "/j.safetensors", { "w" }, { lt.ones(1) }, { lutra = "{not json" })
    local ok, err = pcall(lt.load, dir .. "/j.safetensors")
    assert.is_false(ok)
    assert.matches("lt.load: " .. dir .. "/j.safetensors: the 'lutra' metadata is not valid JSON", err, 1, true)
  end)

  it("a file that is not a safetensors file at all says so", function()
    load_bytes(string.rep("\255", 64), "junk.bin")
    local ok, err = pcall(lt.load, dir .. "/junk.bin")
    assert.is_false(ok)
    assert.matches("header length %d+ is absurd", err)
  end)
end)

describe("trainer:save_checkpoint", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmrf(dir) end)

  local function fitted(opts)
    lt.manual_seed(3)
    local ds = lt.data.TensorDataset(lt.randn(24, 3), lt.randn(24, 1))
    local train = lt.data.DataLoader(ds, { batch_size = 8, shuffle = true })
    local model = { fc = lt.nn.Linear(3, 1), hparams = { lr = 0.05, hidden = { 3, 1 }, name = "tiny" } }
    function model:training_step(b) return lt.F.mse_loss(self.fc(b[1]), b[2]) end
    function model:configure_optimizers()
      local opt = lt.optim.Adam(lt.nn.parameters(self), { lr = self.hparams.lr })
      return { optimizer = opt, lr_scheduler = lt.optim.lr_scheduler.StepLR(opt, { step_size = 1, gamma = 0.5 }) }
    end
    function model:on_save_checkpoint(c) c.note = "from the model" end
    local t = lt.Trainer { max_epochs = 2, logger = false, enable_progress_bar = false, enable_model_summary = false,
      enable_checkpointing = false, callbacks = opts and opts.callbacks }
    t:fit(model, train)
    return t, model
  end

  it("holds weights, optimizer tensors and every state as JSON (Lightning's layout)", function()
    local t = fitted()
    local p = dir .. "/c.ckpt"
    assert.are.equal(p, t:save_checkpoint(p))
    local names, tensors, meta = lt._io.load(p)
    local set = {}
    for _, n in ipairs(names) do set[n] = true end
    assert.is_true(set["state_dict.fc.weight"] and set["state_dict.fc.bias"])
    assert.is_true(set["optimizer_states.1.state.1.exp_avg"] and set["optimizer_states.1.state.2.exp_avg_sq"])
    same_tensor(t.optimizers[1]:state_dict().state[1].exp_avg, tensors["optimizer_states.1.state.1.exp_avg"])
    local doc = cjson.decode(meta.lutra)
    assert.are.equal(2, doc.epoch)
    assert.are.equal(6, doc.global_step)
    assert.are.equal(lt.version, doc.lutra_version)
    assert.are.equal(6, doc.optimizer_states[1].state[1].step) -- ids 1..n: a JSON array
    assert.are.equal(0.05, doc.optimizer_states[1].param_groups[1].initial_lr)
    assert.are.equal(2, doc.lr_schedulers[1].last_epoch)
    assert.are.equal(2, doc.loops.fit_loop.epoch_progress.current.completed)
    assert.are.equal(64, #doc.rng.global)
    assert.are.equal(2, doc.loaders.train.epoch)
    assert.are.same({ lr = 0.05, hidden = { 3, 1 }, name = "tiny" }, doc.hyper_parameters)
    assert.are.equal("from the model", doc.note)
    assert.are.equal("boundary", doc.resume.point)
  end)

  it("keeps each callback's state_dict under its state key, and calls on_save_checkpoint", function()
    local seen
    local cb = { state_key = "Counter" }
    function cb:state_dict() return { count = 7 } end
    function cb:on_save_checkpoint(_, _, c) seen = c.global_step end
    local t = fitted { callbacks = { cb, lt.callbacks.EarlyStopping { monitor = "x", strict = false } } }
    t:save_checkpoint(dir .. "/c.ckpt")
    local doc = ck.read(dir .. "/c.ckpt")
    assert.are.equal(6, seen)
    assert.are.same({ count = 7 }, doc.callbacks.Counter)
    assert.are.equal(3, doc.callbacks["EarlyStopping{monitor=x,mode=min}"].patience)
    assert.are.equal(math.huge, doc.callbacks["EarlyStopping{monitor=x,mode=min}"].best_score)
  end)

  it("hyper-parameters that hold functions are saved without them", function()
    local t, model = fitted()
    model.hparams.activation = lt.relu
    model.hparams.nested = { fn = print, n = 2 }
    t:save_checkpoint(dir .. "/h.ckpt")
    local doc = ck.read(dir .. "/h.ckpt")
    assert.is_nil(doc.hyper_parameters.activation)
    assert.are.same({ n = 2 }, doc.hyper_parameters.nested)
    assert.are.equal("tiny", doc.hyper_parameters.name)
  end)

  it("on resume calls the model's on_load_checkpoint(checkpoint) and callbacks' on_load_checkpoint(state)", function()
    local cbx = { state_key = "Counter", count = 7 }
    function cbx:state_dict() return { count = self.count } end
    local t = fitted { callbacks = { cbx } }
    t:save_checkpoint(dir .. "/c.ckpt")
    local got_model, got_cb, loaded
    local cby = { state_key = "Counter", count = 0 }
    function cby:on_load_checkpoint(_, _, state) got_cb = state.count end
    function cby:load_state_dict(state) loaded = state.count; self.count = state.count end
    lt.manual_seed(3)
    local ds = lt.data.TensorDataset(lt.randn(24, 3), lt.randn(24, 1))
    local model = { fc = lt.nn.Linear(3, 1) }
    function model:training_step(b) return lt.F.mse_loss(self.fc(b[1]), b[2]) end
    function model:configure_optimizers()
      local opt = lt.optim.Adam(lt.nn.parameters(self), { lr = 0.05 })
      return { optimizer = opt, lr_scheduler = lt.optim.lr_scheduler.StepLR(opt, { step_size = 1, gamma = 0.5 }) }
    end
    function model:on_load_checkpoint(c) got_model = c.note end
    local t2 = lt.Trainer { max_epochs = 3, logger = false, enable_progress_bar = false, enable_model_summary = false,
      enable_checkpointing = false, callbacks = { cby } }
    t2:fit(model, lt.data.DataLoader(ds, { batch_size = 8, shuffle = true }), { ckpt_path = dir .. "/c.ckpt" })
    assert.are.equal("from the model", got_model)
    assert.are.equal(7, got_cb)
    assert.are.equal(7, loaded)
    assert.are.equal(9, t2.global_step)
  end)

  it("weights_only leaves the training state out", function()
    local t = fitted()
    t:save_checkpoint(dir .. "/w.ckpt", true)
    local doc = ck.read(dir .. "/w.ckpt")
    assert.is_table(doc.state_dict)
    assert.is_nil(doc.optimizer_states)
    assert.is_nil(doc.loops)
  end)

  it("an unwritable path is an error naming it; the previous checkpoint stays", function()
    local t = fitted()
    local ok, err = pcall(t.save_checkpoint, t, dir .. "/missing/dir/c.ckpt")
    assert.is_false(ok)
    assert.matches("save_checkpoint: " .. dir .. "/missing/dir/c.ckpt: cannot create temporary file", err, 1, true)
    local p = dir .. "/c.ckpt"
    t:save_checkpoint(p)
    local before = lt._io.read_all(p)
    t.model.bad = { fn = print } -- a model table with a function field is fine (not state)...
    rawset(t.model, "on_save_checkpoint", function(_, c) c.bad = print end) -- ...but a function in the checkpoint is not
    ok, err = pcall(t.save_checkpoint, t, p)
    assert.is_false(ok)
    assert.matches("save_checkpoint: " .. p .. ": cannot save bad: a function", err, 1, true)
    assert.are.equal(before, lt._io.read_all(p))
  end)

  it("before any run it says there is no model", function()
    local t = lt.Trainer { logger = false, enable_progress_bar = false }
    local ok, err = pcall(t.save_checkpoint, t, dir .. "/x.ckpt")
    assert.is_false(ok)
    assert.matches("save_checkpoint: the trainer has no model yet", err, 1, true)
  end)
end)

describe("a process killed (SIGKILL) while it writes checkpoints", function()
  local dir
  setup(function() dir = tmpdir() end)
  teardown(function() rmrf(dir) end)

  local function last_logged(log)
    local f = io.open(log, "r")
    if not f then return 0 end
    local last = 0
    for line in f:lines() do last = tonumber(line:match("^saved (%d+)$")) or last end
    f:close()
    return last
  end

  it("never leaves a damaged file: the checkpoint at the path loads whole, as the last save or the next", function()
    local child = string.format(LUA_EXE .. " -e %q tests/ckpt_kill_test.lua",
      "package.path = [[" .. package.path .. "]] package.cpath = [[" .. package.cpath .. "]]")
    local kills, checked = 0, 0
    for k = 0, 24 do
      local p, log = dir .. "/ck" .. k .. ".safetensors", dir .. "/log" .. k
      -- first let the child write one checkpoint (so later kills hit a replacement of an existing file)
      local delay = 0.12 + 0.013 * k
      local cmd = string.format("sh -c '%s %q %q 2 >/dev/null 2>&1 & pid=$!; sleep %.3f; kill -9 $pid; wait $pid' 2>/dev/null",
        child:gsub("'", "'\\''"), p, log, delay)
      os.execute(cmd)
      kills = kills + 1
      local n = last_logged(log)
      local st = lt._io.stat(p)
      if n == 0 then
        -- killed before the first save was logged: no file, or the first one complete
        if st then assert.are.equal(1, lt.load(p).count:totable()[1]) end
      else
        assert.is_table(st, "no checkpoint after " .. n .. " logged saves")
        local sd = lt.load(p) -- raises on any damage (checksum over the whole file)
        local c = sd.count:totable()[1]
        assert.is_true(c == n or c == n + 1, string.format("file holds save %d, the log says %d", c, n))
        assert.are.equal(c, sd.big[1]:item())
        assert.are.equal(c, sd.big[sd.big:size(1)]:item())
        assert.are.equal(-c, sd.small[3][5]:item())
        checked = checked + 1
      end
      -- at most one temporary file left behind, never in place of the checkpoint
      local tmps = 0
      for _, name in ipairs(lt._io.listdir(dir)) do
        if name:find("ck" .. k .. ".safetensors.tmp.", 1, true) then tmps = tmps + 1 end
      end
      assert.is_true(tmps <= 1)
    end
    assert.are.equal(25, kills)
    assert.is_true(checked >= 15, "only " .. checked .. " kills came after a first save")
  end)
end)
