-- infer_spec.lua — lt.infer: compiled plans equal to model(x) for every supported module, no allocation per call,
-- clear refusals, weight sharing, and the plain-Lua export under luajit, lua5.1 and lua5.4 without lutra.
local lt = require "lutra"
local nn = lt.nn

local function close(a, b, tol)
  local d = (a - b):abs():max():item()
  assert(d <= (tol or 1e-5), "max difference " .. d)
end

local function check(model, x, tol)
  model:eval()
  local plan = lt.infer.compile(model, x)
  local want = lt.no_grad(function() return model(x) end)
  local got = plan(x)
  assert.same(want:shape(), got:shape())
  close(got, want, tol)
  return plan
end

local function flat(t) return t:contiguous():view(-1):totable() end

-- the message of the error f(...) raises (and that it raises one)
local function error_of(f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error")
  return tostring(err)
end

describe("lt.infer.compile", function()
  before_each(function() lt.manual_seed(7) end)

  it("runs an MLP equal to model(x), through plan(x) and plan:run", function()
    local m = nn.Sequential { nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4) }
    local x = lt.randn(1, 32)
    local plan = check(m, x)
    local out = plan:run(flat(x), {})
    local want = flat(m(x))
    for i = 1, 4 do assert(math.abs(out[i] - want[i]) < 1e-5) end
    assert.equal(4, #out)
    -- a tensor as input of run, and a batch
    plan:run(x, out)
    assert(math.abs(out[1] - want[1]) < 1e-5)
    check(m, lt.randn(5, 32))
    check(m, lt.randn(64, 200):narrow(2, 1, 32)) -- large enough for BLAS, non-contiguous input
  end)

  it("sizes the plan with {batch = n}", function()
    local m = nn.Linear(6, 3)
    local plan = lt.infer.compile(m, lt.randn(1, 6), { batch = 4 })
    assert.same({ 4, 3 }, plan.out_shape)
    local x = lt.randn(4, 6)
    close(plan(x), m(x))
  end)

  it("matches every activation module", function()
    local acts = { nn.ReLU(), nn.Tanh(), nn.Sigmoid(), nn.GELU(), nn.GELU { approximate = "tanh" }, nn.LeakyReLU(0.2),
      nn.SiLU(), nn.ELU(0.7), nn.Softplus { beta = 2, threshold = 3 }, nn.Hardtanh(-0.5, 0.8), nn.PReLU(4, 0.3),
      nn.Softmax(2), nn.LogSoftmax(-1), nn.Softmax(1) }
    for _, a in ipairs(acts) do
      local m = nn.Sequential { nn.Linear(5, 4), a }
      check(m, lt.randn(3, 5) * 3)
    end
    check(nn.PReLU(3), lt.randn(2, 3, 5))
  end)

  it("matches LayerNorm, BatchNorm (eval), Dropout (eval), Flatten, Unflatten and Identity", function()
    check(nn.Sequential { nn.Linear(6, 8), nn.LayerNorm(8), nn.Dropout(0.5), nn.Identity() }, lt.randn(2, 6))
    check(nn.LayerNorm({ 3, 4 }, { elementwise_affine = false }), lt.randn(2, 3, 4))
    local bn = nn.BatchNorm1d(8)
    bn.running_mean:copy_(lt.randn(8))
    bn.running_var:copy_(lt.rand(8) + 0.5)
    lt.no_grad(function() bn.weight:copy_(lt.randn(8)) end)
    check(nn.Sequential { nn.Linear(6, 8), bn, nn.ReLU() }, lt.randn(3, 6))
    local bn2 = nn.BatchNorm2d(3)
    bn2.running_mean:copy_(lt.randn(3))
    check(nn.Sequential { bn2, nn.Flatten(), nn.Linear(3 * 4 * 4, 2) }, lt.randn(2, 3, 4, 4))
    check(nn.Sequential { nn.Linear(12, 12), nn.Unflatten(2, { 3, 4 }), nn.Softmax(2) }, lt.randn(2, 12))
  end)

  it("matches Embedding on int64 indices", function()
    local m = nn.Sequential { nn.Embedding(10, 4), nn.Flatten(), nn.Linear(12, 2) }
    local idx = lt.tensor({ { 1, 5, 10 }, { 3, 3, 7 } }):long()
    local plan = check(m, idx)
    assert.has_error(function() plan(lt.tensor({ { 1, 5, 11 }, { 3, 3, 7 } }):long()) end,
      "lt.infer: Embedding: index 11 is out of range [1, 10] (input position 3)")
  end)

  it("matches Conv1d and Conv2d (stride, padding, dilation, groups, 'same') and the pools", function()
    check(nn.Conv2d(3, 4, 3), lt.randn(2, 3, 7, 6))
    check(nn.Conv2d(4, 6, { 3, 2 }, { stride = 2, padding = { 1, 0 }, dilation = { 1, 2 }, groups = 2 }),
      lt.randn(1, 4, 9, 8))
    check(nn.Conv2d(2, 3, 4, { padding = "same" }), lt.randn(1, 2, 6, 6))
    check(nn.Conv1d(3, 5, 3, { stride = 2, padding = 1 }), lt.randn(2, 3, 11))
    check(nn.Conv1d(3, 5, 3), lt.randn(3, 9)) -- unbatched
    check(nn.Sequential { nn.Conv2d(1, 2, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
      nn.Linear(2 * 3 * 3, 3) }, lt.randn(2, 1, 6, 6))
    check(nn.MaxPool2d(3, 2, { padding = 1, ceil_mode = true }), lt.randn(1, 2, 8, 7))
    check(nn.MaxPool2d(2, 1, { dilation = 2 }), lt.randn(1, 2, 6, 6))
    check(nn.AvgPool2d(3, 2, { padding = 1, ceil_mode = true }), lt.randn(1, 2, 8, 7))
    check(nn.AvgPool2d(3, 2, { padding = 1, count_include_pad = false }), lt.randn(1, 2, 7, 7))
    check(nn.MaxPool1d(3, 2), lt.randn(2, 3, 10))
    check(nn.AvgPool1d(2), lt.randn(2, 3, 10))
  end)

  it("steps LSTMCell, GRUCell and RNNCell with the state carried between calls", function()
    for _, make in ipairs { function() return nn.LSTMCell(5, 6) end, function() return nn.GRUCell(5, 6) end,
      function() return nn.RNNCell(5, 6) end, function() return nn.RNNCell(5, 6, { nonlinearity = "relu" }) end } do
      local cell = make()
      local xs = {}
      for t = 1, 4 do xs[t] = lt.randn(2, 5) end
      local plan = lt.infer.compile(cell, xs[1])
      local h, c
      for t = 1, 4 do
        if cell.mode == "lstm" then h, c = cell(xs[t], h and { h, c }) else h = cell(xs[t], h) end
        close(plan(xs[t]), h)
      end
      plan:reset_state()
      local h1 = cell(xs[1])
      close(plan(xs[1]), h1)
    end
  end)

  it("traces a forward of its own: sub-modules, residuals, numbers, constant tensors, nested modules", function()
    local Block = nn.Module:extend("Block")
    function Block:init(n)
      self.fc = nn.Linear(n, n)
      self.norm = nn.LayerNorm(n)
    end
    function Block:forward(x) return x + self.fc(self.norm(x)):gelu() end
    local Net = nn.Module:extend("Net")
    function Net:init()
      self.inp = nn.Linear(6, 8)
      self.blocks = nn.ModuleList { Block(8), Block(8) }
      self.scale = lt.randn(8)
      self.head = nn.Sequential { nn.ReLU(), nn.Linear(8, 3) }
    end
    function Net:forward(x)
      local h = self.inp(x):tanh()
      for _, b in ipairs(self.blocks) do h = b(h) end
      h = h * self.scale + 0.5
      h = (h - 1) / 2 + 1 - h:sigmoid() * h:relu() - self.scale
      h = 2 / (h:abs() + 1) + h:exp():clamp(0, 3) + (h * h + 1):sqrt():log() + (-h):leaky_relu(0.2) - h:gelu()
      if self.training then h = h * 0 end -- plain Lua state: fixed in the plan as traced (eval here)
      return self.head(h:view(2, 8)):softmax(2)
    end
    local m = Net()
    local plan = check(m, lt.randn(2, 6))
    assert.is_true(#plan._steps > 20)
    -- a forward set on one instance of a library class is traced too
    local lin = nn.Linear(3, 3)
    lin.forward = function(self, x) return x + lt.linear(x, self.weight, self.bias) * 0.5 end
    check(lin, lt.randn(1, 3))
    lin.forward = function(_, x) return lt.exp(x) end
    assert.matches("its forward failed while traced", error_of(lt.infer.compile, lin, lt.randn(1, 3)), 1, true)
    local outer = nn.Linear(3, 3)
    local wrap = nn.Sequential { outer }
    outer.forward = function(_, x) return (x * 2):tanh() end
    check(wrap, lt.randn(1, 3))
  end)

  it("steps LSTM, GRU and RNN one time step per call, every layer's state carried", function()
    for _, make in ipairs { function() return nn.LSTM(5, 6, { num_layers = 2 }) end,
      function() return nn.GRU(5, 6, { num_layers = 2, batch_first = true }) end,
      function() return nn.RNN(5, 6) end } do
      local rnn = make()
      rnn:eval()
      local xs = {}
      for t = 1, 4 do xs[t] = rnn.batch_first and lt.randn(3, 1, 5) or lt.randn(1, 3, 5) end
      local plan = lt.infer.compile(rnn, xs[1])
      local state, y
      for t = 1, 4 do
        y, state = rnn(xs[t], state)
        close(plan(xs[t]), y)
      end
    end
    -- a longer example (or a bidirectional module) runs the whole sequence per call instead (infer_layers_spec)
    local seq = check(nn.LSTM(5, 6), lt.randn(4, 3, 5))
    assert.is_nil(seq._stateful)
  end)

  it("sees in-place weight changes itself; refresh() after a tensor was replaced", function()
    local m = nn.Linear(4, 3)
    local x = lt.randn(1, 4)
    local plan = lt.infer.compile(m, x)
    lt.no_grad(function() m.weight:mul_(2) end)
    close(plan(x), m(x))
    m.weight = lt.randn(3, 4)
    assert(((plan(x) - m(x)):abs():max():item()) > 1e-3)
    plan:refresh()
    close(plan(x), m(x))
  end)

  it("allocates nothing per call: no Lua bytes, no tensors from lutra's allocator", function()
    local m = nn.Sequential { nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4) }
    local x = lt.randn(1, 32)
    local plan = lt.infer.compile(m, x)
    local inp, out = flat(x), {}
    local function runs(n) for _ = 1, n do plan:run(inp, out) end end
    local function calls(n) for _ = 1, n do plan(x) end end
    -- LuaJIT's compiler allocates its traces on the Lua heap while it settles on a loop (a few hundred bytes now
    -- and then over the first thousands of calls): counted with the compiler off, what remains is the plan's own.
    -- bench/infer_frame.lua counts with the compiler on, after a warm-up.
    local jit = rawget(_G, "jit")
    if jit then jit.off() end
    runs(10)
    calls(10)
    -- A round of 1000 + 1000 calls that allocates nothing passes. An allocation per call shows in every round;
    -- one made once by something else in the state during a round (seen once in the sanitizer suite: 564
    -- bytes over a round) does not, so up to three rounds are tried.
    local grew
    for _ = 1, 3 do
      collectgarbage()
      collectgarbage("stop")
      local stats = lt.memory_stats()
      local kb = collectgarbage("count")
      runs(1000)
      calls(1000)
      local kb2 = collectgarbage("count") -- before memory_stats, whose table is an allocation
      local stats2 = lt.memory_stats()
      collectgarbage("restart")
      grew = { lua_bytes = (kb2 - kb) * 1024, allocated = stats2.total_allocated - stats.total_allocated,
        system_allocs = stats2.system_allocs - stats.system_allocs }
      if grew.lua_bytes == 0 and grew.allocated == 0 and grew.system_allocs == 0 then break end
    end
    if jit then jit.on() end
    assert.are.same({ lua_bytes = 0, allocated = 0, system_allocs = 0 }, grew)
  end)

  it("keeps plan(x)'s tensor and overwrites it on the next call", function()
    local m = nn.Linear(2, 2)
    local plan = lt.infer.compile(m, lt.randn(1, 2))
    local y1 = plan(lt.randn(1, 2))
    local y2 = plan(lt.randn(1, 2))
    assert.equal(y1, y2)
  end)

  it("refuses what it cannot run, naming the module", function()
    local Net = nn.Module:extend("Net")
    function Net:init() self.fc = nn.Linear(2, 2) end
    function Net:forward(x) if x:item() > 0 then return self.fc(x) end return x end
    assert.has_error(function() lt.infer.compile(Net(), lt.randn(1, 1)) end,
      "lt.infer.compile: model (Net): its forward reads its input's values (x:item()), which depends on the data: " ..
      "lt.infer refuses a forward that reads tensor values (a plan replays one fixed list of kernels; it is not " ..
      "traced per branch)")
    function Net:forward(x) local h = self.fc(x) if h:max():item() > 0 then return h end return x end
    assert.matches("model (Net): its forward uses x:max, which lt.infer cannot trace", error_of(lt.infer.compile, Net(),
      lt.randn(1, 2)), 1, true)
    function Net:forward(x) return lt.exp(self.fc(x)) end
    assert.matches("model (Net): its forward failed while traced: ", error_of(lt.infer.compile, Net(), lt.randn(1, 2)),
      1, true)
    function Net:forward(x) return self.fc(x) * lt.ones(3, 1, 2) end
    assert.matches("model (Net): its forward broadcasts a tensor computed from its input over a larger constant tensor",
      error_of(lt.infer.compile, Net(), lt.randn(1, 2)), 1, true)
    function Net:forward(x) local h = self.fc(x) return h + h:narrow(2, 1, 1) end
    assert.matches("model (Net): its forward broadcasts [2 x 2] with [2 x 1]; a plan repeats only a trailing block",
      error_of(lt.infer.compile, Net(), lt.randn(2, 2)), 1, true)
    function Net:forward(x) return self.fc(x), x end
    assert.has_no_error(function() lt.infer.compile(Net(), lt.randn(1, 2)) end) -- the first result is the output
    function Net:forward() return lt.zeros(1, 2) end
    assert.matches("model (Net): its forward returned a userdata that is not computed from its input",
      error_of(lt.infer.compile, Net(), lt.randn(1, 2)), 1, true)
    local err = error_of(lt.infer.compile, nn.Sequential { nn.Linear(2, 2), nn.Dropout(0.5) }, lt.randn(1, 2))
    assert.matches("model.2 (Dropout): is in training mode", err, 1, true)
    local bn = nn.Sequential { nn.Linear(2, 2), nn.BatchNorm1d(2) }
    err = error_of(lt.infer.compile, bn, lt.randn(3, 2))
    assert.matches("model.2 (BatchNorm1d): is in training mode", err, 1, true)
    err = error_of(lt.infer.compile, nn.Sequential { nn.Linear(4, 4), nn.PixelShuffle(2) }, lt.randn(1, 4))
    assert.matches("model.2 (PixelShuffle): lt.infer does not support this module;", err, 1, true)
    err = error_of(lt.infer.compile, nn.Linear(3, 2), lt.randn(1, 2))
    assert.matches("model (Linear): its forward failed on the example input", err, 1, true)
    assert.has_error(function() lt.infer.compile(nn.Linear(2, 2), lt.randn(1, 2), { batsh = 2 }) end,
      "lt.infer.compile: unknown option batsh (options: batch)")
    local plan = lt.infer.compile(nn.Linear(2, 2), lt.randn(1, 2))
    assert.has_error(function() plan(lt.randn(1, 3)) end, "plan: input [1 x 3] has 3 values, the plan was compiled for 2")
    assert.has_error(function() plan:run({ 1 }, {}) end, "plan:run: input table has 1 numbers, the plan was compiled for 2")
    assert.has_error(function() plan:run({ 1, "x" }, {}) end, "plan:run: input[2] is a string, expected a number")
    local d = nn.Linear(2, 2)
    d.weight = lt.randn(2, 2):t()
    err = error_of(lt.infer.compile, d, lt.randn(1, 2))
    assert.matches("weight [2 x 2] is not contiguous", err, 1, true)
  end)
end)

describe("lt.infer.export_lua", function()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. dir))

  local function has(exe)
    local r = os.execute("command -v " .. exe .. " >/dev/null 2>&1")
    return r == true or r == 0 -- true (Lua 5.2+) or 0 (LuaJIT, 5.1)
  end

  -- runs the exported file under exe with no lutra anywhere on its paths; returns the outputs of each input row
  local function run_under(exe, path, inputs)
    local script = dir .. "/run.lua"
    local f = assert(io.open(script, "w"))
    f:write("package.path, package.cpath = '', ''\n",
      "assert(not pcall(require, 'lutra'), 'lutra must not be loadable here')\n",
      "local policy = dofile(", string.format("%q", path), ")\n",
      "local rows = {", table.concat((function()
        local r = {}
        for i, row in ipairs(inputs) do r[i] = "{" .. table.concat(row, ",") .. "}" end
        return r
      end)(), ","), "}\n",
      "for _, row in ipairs(rows) do local y = policy(row) for i = 1, #y do io.write(string.format('%.9g ', y[i])) end",
      " io.write('\\n') end\n")
    f:close()
    local p = assert(io.popen("env -u LUA_PATH -u LUA_CPATH -u LUA_INIT " .. exe .. " " .. script .. " 2>&1"))
    local text = p:read("*a")
    p:close()
    local rows = {}
    for line in text:gmatch("[^\n]+") do
      local r = {}
      for v in line:gmatch("%S+") do r[#r + 1] = tonumber(v) or error(exe .. ": " .. text) end
      rows[#rows + 1] = r
    end
    return rows, text
  end

  local function check_export(model, xs, name)
    model:eval()
    local plan = lt.infer.compile(model, xs[1])
    local path = dir .. "/" .. name .. ".lua"
    assert.equal(path, lt.infer.export_lua(plan, path))
    local inputs, want = {}, {}
    for i, x in ipairs(xs) do
      inputs[i] = flat(x)
      want[i] = flat(lt.no_grad(function() return model(x) end))
    end
    for _, exe in ipairs { "luajit", "lua5.1", "lua5.4" } do
      assert(has(exe), exe .. " is not installed (apt-get install " .. exe .. ")")
      local rows, text = run_under(exe, path, inputs)
      assert.equal(#xs, #rows, exe .. ": " .. text)
      for i = 1, #xs do
        assert.equal(#want[i], #rows[i])
        for k = 1, #want[i] do
          assert(math.abs(rows[i][k] - want[i][k]) <= 1e-5, string.format("%s %s: output %d: %.9g vs %.9g", exe, name,
            k, rows[i][k], want[i][k]))
        end
      end
    end
  end

  it("writes the MLP as plain Lua equal to model(x) under luajit, lua5.1 and lua5.4", function()
    lt.manual_seed(3)
    local m = nn.Sequential { nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 4),
      nn.Softmax(2) }
    check_export(m, { lt.randn(1, 32), lt.randn(1, 32), lt.randn(1, 32) }, "mlp")
  end)

  it("writes every supported step kind", function()
    lt.manual_seed(4)
    local bn = nn.BatchNorm1d(6)
    bn.running_mean:copy_(lt.randn(6))
    local acts = nn.Sequential { nn.GELU(), nn.LeakyReLU(0.1), nn.SiLU(), nn.ELU(), nn.Softplus(), nn.Hardtanh(),
      nn.PReLU(), nn.Sigmoid(), nn.GELU { approximate = "tanh" } }
    check_export(nn.Sequential { nn.Linear(5, 6), nn.LayerNorm(6), bn, acts, nn.LogSoftmax(2) },
      { lt.randn(2, 5) * 2 }, "acts")
    check_export(nn.Sequential { nn.Conv2d(2, 3, 3, { padding = 1, stride = 2 }), nn.MaxPool2d(2, 1),
      nn.AvgPool2d(2, 1, { padding = 1, count_include_pad = false }), nn.Flatten(), nn.Linear(27, 2) },
      { lt.randn(1, 2, 6, 6) }, "conv")
    check_export(nn.Sequential { nn.Conv1d(2, 3, 3, { groups = 1, dilation = 2 }), nn.AvgPool1d(2) },
      { lt.randn(1, 2, 12) }, "conv1d")
    check_export(nn.Sequential { nn.Embedding(7, 3), nn.Flatten(), nn.Linear(6, 2) },
      { lt.tensor({ { 1, 7 } }):long(), lt.tensor({ { 4, 2 } }):long() }, "embedding")
  end)

  it("writes a traced forward (residuals, constants, numbers)", function()
    lt.manual_seed(6)
    local Net = nn.Module:extend("Net")
    function Net:init()
      self.a, self.b, self.shift = nn.Linear(4, 5), nn.Linear(5, 5), lt.randn(5)
    end
    function Net:forward(x)
      local h = self.a(x):relu()
      h = h + self.b(h) * self.shift - 0.25
      return (2 / (h:abs() + 1) + (1 - h:exp():clamp(0, 2)) + (h * h + 1):sqrt():log()):log_softmax(2)
    end
    check_export(Net(), { lt.randn(1, 4), lt.randn(1, 4) }, "traced")
  end)

  it("carries a recurrent cell's state between calls, as the plan does", function()
    lt.manual_seed(5)
    local cell = nn.LSTMCell(3, 4)
    local xs = { lt.randn(1, 3), lt.randn(1, 3), lt.randn(1, 3) }
    local plan = lt.infer.compile(cell, xs[1])
    local path = dir .. "/lstm.lua"
    lt.infer.export_lua(plan, path)
    local inputs = {}
    for i, x in ipairs(xs) do inputs[i] = flat(x) end
    local rows = run_under("lua5.4", path, inputs)
    for i, x in ipairs(xs) do
      local y = flat(plan(x))
      for k = 1, 4 do assert(math.abs(rows[i][k] - y[k]) <= 1e-5) end
    end
    local f = dofile(path)
    f(inputs[1])
    f("reset")
    local y1 = f(inputs[1])
    plan:reset_state()
    local want = flat(plan(xs[1]))
    for k = 1, 4 do assert(math.abs(y1[k] - want[k]) <= 1e-5) end
  end)

  it("exports a module given with an example input, and says what it needs", function()
    local m = nn.Linear(3, 2)
    local path = dir .. "/lin.lua"
    lt.infer.export_lua(m, path, lt.randn(1, 3))
    local y = dofile(path)({ 1, 2, 3 })
    local want = flat(m(lt.tensor({ { 1, 2, 3 } })))
    assert(math.abs(y[1] - want[1]) < 1e-5 and math.abs(y[2] - want[2]) < 1e-5)
    assert.has_error(function() lt.infer.export_lua(m, path) end,
      "lt.infer.export_lua: exporting a module needs an example input tensor as argument #3")
    assert.has_error(function() dofile(path)({ 1, 2 }) end)
    local err = error_of(lt.infer.export_lua, m, dir .. "/no/such/dir/x.lua", lt.randn(1, 3))
    assert.matches("write: " .. dir .. "/no/such/dir/x.lua", err, 1, true)
  end)
end)

describe("lt.infer in examples/love", function()
  it("ships the trained policy as plain Lua inside a .love zip that plays where lutra cannot be loaded", function()
    if not rawget(_G, "jit") then return pending("LÖVE is a LuaJIT host (the LuaJIT run of this spec covers it)") end
    local function ran(r) return r == true or r == 0 end -- os.execute: true (Lua 5.2+) or 0 (LuaJIT, 5.1)
    local function have(cmd) return ran(os.execute("command -v " .. cmd .. " >/dev/null 2>&1")) end
    if not (have("love") and have("xvfb-run") and have("zip")) then return pending("love, xvfb-run or zip is missing") end
    local function sh(cmd)
      local p = assert(io.popen("(unset LUTRA_QUIET; " .. cmd .. ") 2>&1"))
      local o = p:read("*a")
      p:close()
      return o
    end
    local root = assert(io.popen("pwd")):read("*l")
    local config = os.getenv("LUTRA_CONFIG") or "release"
    local env = "LUA_PATH='" .. root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;;' LUA_CPATH='" .. root ..
      "/build/bin/" .. config .. "/?.so;;' "
    local dir = os.tmpname()
    os.remove(dir)
    assert(ran(os.execute("mkdir -p " .. dir .. "/game")))
    local o = sh(env .. "LUTRA_LOVE_FRAMES=600 timeout 300 xvfb-run -a love examples/love --export " .. dir ..
      "/game/policy.lua")
    assert.matches("^lutra%-love: frames 600 steps %d+", o)
    local src = assert(io.open(dir .. "/game/policy.lua")):read("*a")
    assert.matches("Generated by lutra's lt.infer.export_lua", src, 1, true)
    assert.is_nil(src:find("require", 1, true))
    assert(ran(os.execute("cp examples/love/main.lua examples/love/conf.lua " .. dir .. "/game/ && cd " .. dir ..
      "/game && zip -q ../game.love main.lua conf.lua policy.lua")))
    -- no lutra on any path: the game must play with policy.lua alone
    o = sh("LUA_PATH='/nonexistent/?.lua' LUA_CPATH='/nonexistent/?.so' LUTRA_LOVE_FRAMES=600 timeout 300 " ..
      "xvfb-run -a love " .. dir .. "/game.love")
    assert.matches("^lutra%-love: frames 600 policy caught %d+ missed %d+ late_catch_rate %S+\n$", o)
    os.execute("rm -rf " .. dir)
  end)
end)
