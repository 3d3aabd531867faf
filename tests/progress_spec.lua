-- progress_spec.lua — the ProgressBar through a pseudo-terminal (in-place lines, n/N, it/s, ETA, metrics,
-- at most ~10 redraws a second, lines within the terminal's width, validation and sanity lines removed)
-- and through a pipe (no bar by default; with enable_progress_bar = true one plain line per epoch).
local LUA_EXE = require("helpers.puc").lua_exe -- luajit, or lua5.4 under tests/run --lua 5.4
local lt = require "lutra"

local PY = "/usr/bin/python3"

local fs = require "helpers.fs"
local tmpdir, rmrf = fs.tmpdir, fs.rmrf

-- The child: a fit whose training steps take `ms` milliseconds each (so the redraw rate is measurable).
local CHILD = [[
local lt = require "lutra"
local ms, nb, enable = tonumber(arg[1]), tonumber(arg[2]), arg[3]
lt.manual_seed(0)
local ds = lt.data.TensorDataset(lt.randn(nb * 2, 3), lt.randn(nb * 2, 1))
local train = lt.data.DataLoader(ds, { batch_size = 2 })
local val = lt.data.DataLoader(ds, { batch_size = 8 })
local model = { fc = lt.nn.Linear(3, 1) }
local now = lt._io.now
function model:training_step(b)
  local t0 = now()
  while now() - t0 < ms / 1000 do end
  local l = lt.F.mse_loss(self.fc(b[1]), b[2])
  self:log("train_loss", l, { prog_bar = true })
  return l
end
function model:validation_step(b)
  self:log("val_loss", lt.F.mse_loss(self.fc(b[1]), b[2]), { prog_bar = true })
end
function model:test_step(b)
  self:log("test_loss", lt.F.mse_loss(self.fc(b[1]), b[2]))
end
function model:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), { lr = 0.01 }) end
local opts = { max_epochs = 2, logger = false, enable_checkpointing = false, enable_model_summary = false }
if enable == "on" then opts.enable_progress_bar = true elseif enable == "off" then opts.enable_progress_bar = false end
local t = lt.Trainer(opts)
t:fit(model, train, val)
t:test(model, val)
io.stdout:write("DONE\n")
]]

-- Runs argv in a pty of the given width; returns the raw bytes the child wrote.
local PTY_RUNNER = [[
import os, pty, sys, subprocess, struct, fcntl, termios, select
width = int(sys.argv[1])
m, s = pty.openpty()
fcntl.ioctl(s, termios.TIOCSWINSZ, struct.pack("HHHH", 30, width, 0, 0))
p = subprocess.Popen(sys.argv[2:], stdin=s, stdout=s, stderr=subprocess.DEVNULL, close_fds=True)
os.close(s)
out = b""
while True:
    try:
        r, _, _ = select.select([m], [], [], 30)
        if not r:
            break
        chunk = os.read(m, 65536)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
p.wait()
sys.stdout.buffer.write(out)
]]

local dir, child_path, runner_path
local function child_cmd(...)
  local args = { ... }
  return string.format(LUA_EXE .. " -e %q %q %s", "package.path = [[" .. package.path .. "]] package.cpath = [[" ..
    package.cpath .. "]]", child_path, table.concat(args, " "))
end

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local function capture(cmd)
  local p = assert(io.popen(cmd, "r"))
  local out = p:read("*a")
  p:close()
  return out
end

-- A minimal terminal: \r, \n, ESC[K (erase to the end of line), ESC[A (cursor up); returns the screen's
-- lines (UTF-8 code points as cells) and the longest line drawn at any moment.
local function screen(bytes)
  local lines, row, col, widest = { {} }, 1, 0, 0
  local i = 1
  while i <= #bytes do
    local c = bytes:sub(i, i)
    if c == "\r" then col = 0; i = i + 1
    elseif c == "\n" then row = row + 1; col = 0; lines[row] = lines[row] or {}; i = i + 1
    elseif c == "\27" then
      local seq = bytes:match("^\27%[[%d;]*%a", i)
      local final = seq:sub(-1)
      if final == "K" then for k = col + 1, #lines[row] do lines[row][k] = nil end
      elseif final == "A" then row = math.max(1, row - 1) end
      i = i + #seq
    else
      local ch = bytes:match("^[%z\1-\127\194-\244][\128-\191]*", i)
      col = col + 1
      lines[row][col] = ch
      if col > widest then widest = col end
      i = i + #ch
    end
  end
  local out = {}
  for r = 1, #lines do out[r] = table.concat(lines[r] or {}) end
  while #out > 0 and out[#out] == "" do out[#out] = nil end
  return out, widest
end

describe("ProgressBar", function()
  setup(function()
    dir = tmpdir()
    child_path = dir .. "/child.lua"
    runner_path = dir .. "/pty_runner.py"
    write(child_path, CHILD)
    write(runner_path, PTY_RUNNER)
  end)
  teardown(function() rmrf(dir) end)

  local function have_python()
    local f = io.open(PY, "rb")
    if f then f:close() return true end
    return false
  end

  it("on a terminal redraws one line per stage in place with n/N, it/s, ETA and the prog_bar metrics", function()
    if not have_python() then pending("no " .. PY) return end
    local width = 100
    local t0 = lt._io.now()
    local raw = capture(string.format("%s %q %d %s", PY, runner_path, width, child_cmd(20, 40, "default")))
    local secs = lt._io.now() - t0
    assert.matches("DONE", raw, 1, true)
    -- redraws: "\rEpoch 0:" and the like; each epoch trains 40 batches of 20 ms (0.8 s)
    local epoch0 = select(2, raw:gsub("\rEpoch 0: ", ""))
    assert.is_true(epoch0 >= 3, "only " .. epoch0 .. " redraws of epoch 0")
    assert.is_true(epoch0 <= 0.8 * 10 + 6, epoch0 .. " redraws of epoch 0 in 0.8 s (at most ~10 a second)")
    assert.is_true(secs < 20)
    local lines, widest = screen(raw)
    assert.is_true(widest <= width - 1, "a line of " .. widest .. " cells on a " .. width .. "-column terminal")
    -- what stays on screen: the two epochs' final lines and the test line; no validation or sanity line
    local kept = {}
    for _, l in ipairs(lines) do if l ~= "DONE" then kept[#kept + 1] = l end end
    assert.are.equal(3, #kept, table.concat(kept, "\n"))
    for e = 0, 1 do
      local l = kept[e + 1]
      assert.matches("^Epoch " .. e .. ": 100%%|.-| 40/40 %[%d%d:%d%d<00:00, [%d.]+it/s, loss=[%d.e%-]+, " ..
        "train_loss=[%d.e%-]+, val_loss=[%d.e%-]+%]$", l)
    end
    assert.matches("^Testing: 100%%|.-| 10/10 %[", kept[3])
    -- during the epoch the line showed a partial count and an ETA
    assert.matches("\rEpoch 0:%s+%d+%%|[^|]*| %d+/40 %[00:00<00:0%d, [%d.]+it/s", raw)
    assert.matches("\r%s*Validation: ", raw) -- drawn below the epoch line, then removed
    assert.matches("\rSanity Checking: ", raw)
  end)

  it("keeps lines within a narrow terminal", function()
    if not have_python() then pending("no " .. PY) return end
    local raw = capture(string.format("%s %q %d %s", PY, runner_path, 40, child_cmd(0, 10, "default")))
    local _, widest = screen(raw)
    assert.is_true(widest <= 39, "a line of " .. widest .. " cells on a 40-column terminal")
    assert.matches("\rEpoch 1: ", raw, 1, true)
  end)

  it("through a pipe: no bar by default; with enable_progress_bar = true one plain line per epoch", function()
    local out = capture(child_cmd(0, 10, "default"))
    assert.are.equal("DONE\n", out)
    out = capture(child_cmd(0, 10, "on"))
    assert.is_nil(out:find("\r", 1, true))
    assert.is_nil(out:find("\27", 1, true))
    local lines = {}
    for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.are.equal(4, #lines, out)
    for e = 0, 1 do
      assert.matches("^Epoch " .. e .. ": 10/10 batches %[%d%d:%d%d, [%d.]+it/s, loss=[%d.e%-]+, train_loss=[%d.e%-]+, " ..
        "val_loss=[%d.e%-]+%]$", lines[e + 1])
    end
    assert.matches("^Testing: 3/3 batches %[", lines[3])
    assert.are.equal("DONE", lines[4])
  end)

  it("a terminal with enable_progress_bar = false shows nothing", function()
    if not have_python() then pending("no " .. PY) return end
    local raw = capture(string.format("%s %q %d %s", PY, runner_path, 80, child_cmd(0, 5, "off")))
    assert.are.equal("DONE\r\n", raw)
  end)

  it("checks its options", function()
    local ok, err = pcall(lt.callbacks.ProgressBar, { refresh = 2 })
    assert.is_false(ok)
    assert.matches("ProgressBar: unknown option 'refresh' (known options: refresh_rate, stream, tty, width)", err, 1, true)
    ok, err = pcall(lt.callbacks.ProgressBar, { refresh_rate = 0 })
    assert.is_false(ok)
    assert.matches("ProgressBar: option 'refresh_rate' must be >= 1", err, 1, true)
  end)

  -- fits a tiny model for one epoch of n samples in batches of bs with a ProgressBar{bar} writing into a
  -- buffer; returns what it wrote
  local function fit_into_buffer(n, bs, bar)
    local buf = {}
    bar.stream = { write = function(_, ...) for _, s in ipairs { ... } do buf[#buf + 1] = s end end,
      flush = function() end }
    lt.manual_seed(0)
    local ds = lt.data.TensorDataset(lt.randn(n, 2), lt.randn(n, 1))
    local model = { fc = lt.nn.Linear(2, 1) }
    function model:training_step(b) return lt.F.mse_loss(self.fc(b[1]), b[2]) end
    function model:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), { lr = 0.1 }) end
    local t = lt.Trainer { max_epochs = 1, logger = false, enable_checkpointing = false, enable_model_summary = false,
      callbacks = { lt.callbacks.ProgressBar(bar) } }
    t:fit(model, lt.data.DataLoader(ds, { batch_size = bs }))
    return table.concat(buf)
  end

  -- Every line a terminal bar of `width` columns drew while fitting with the running loss, a long prog_bar
  -- metric and the logger's v_num: returns the lines (ESC[K and \r removed).
  local function drawn_lines(bar_class, width, extra)
    local buf = {}
    local opts = { tty = true, width = width, stream = { write = function(_, ...)
      for _, s in ipairs { ... } do buf[#buf + 1] = s end end, flush = function() end } }
    for k, v in pairs(extra or {}) do opts[k] = v end
    lt.manual_seed(0)
    local ds = lt.data.TensorDataset(lt.randn(40, 2), lt.randn(40, 1))
    local model = { fc = lt.nn.Linear(2, 1) }
    function model:training_step(b)
      local l = lt.F.mse_loss(self.fc(b[1]), b[2])
      self:log("val_accuracy", 0.87654, { prog_bar = true })
      return l
    end
    function model:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), { lr = 0.1 }) end
    local root = tmpdir()
    local t = lt.Trainer { max_epochs = 1, enable_checkpointing = false, enable_model_summary = false,
      default_root_dir = root, callbacks = { bar_class(opts) } }
    -- a clock that advances a second per reading: every batch is drawn
    local now, clock = lt._io.now, 0
    lt._io.now = function() clock = clock + 1 return clock end
    local ok, err = pcall(t.fit, t, model, lt.data.DataLoader(ds, { batch_size = 4 }))
    lt._io.now = now
    rmrf(root)
    assert(ok, err)
    local lines = {}
    for line in table.concat(buf):gsub("\27%[K", ""):gsub("\27%[%d*A", "\n"):gmatch("[^\r\n]+") do
      lines[#lines + 1] = line
    end
    return lines
  end

  local function ulen(s) return select(2, s:gsub("[^\128-\191]", "")) end
  local NAMES = { loss = true, val_accuracy = true, v_num = true }

  for _, width in ipairs { 80, 60 } do
    it("at " .. width .. " columns keeps the line within the width, every metric name whole", function()
      local lines = drawn_lines(lt.callbacks.ProgressBar, width)
      assert.is_true(#lines >= 10, #lines .. " lines")
      local shown = 0
      for _, l in ipairs(lines) do
        assert.is_true(ulen(l) <= width - 1, ulen(l) .. " cells: " .. l)
        assert.matches("^Epoch 0: +%d+%%.* %d+/10 %[%d%d:%d%d<[%d:?]+.*%]$", l) -- nothing cut at the end
        local tail = l:match("%[(.*)%]$")
        for item in tail:gmatch("[^,]+") do
          item = item:match("^%s*(.-)%s*$")
          local name = item:match("^([%w_]+)=")
          if name then
            assert.is_true(NAMES[name], "a cut name '" .. name .. "' in: " .. l)
            assert.matches("^[%w_]+=%-?[%d.]+[%de%-]*$", item)
            shown = shown + 1
          else
            item = item:gsub("^%d+/10 %[", "")
            assert.truthy(item:match("^[%d:<?]+$") or item:match("^[%d.?]+it/s$") or item == "…", item)
          end
        end
      end
      assert.is_true(shown > 0, "no metric shown at " .. width .. " columns")
      if width == 80 then -- the bar shrinks and stays (v_num and the rate give way): both metrics fit beside it
        assert.matches("^Epoch 0: 100%%|[^|]+| 10/10 %[%d%d:%d%d<00:00, loss=[%d.e%-]+, val_accuracy=0.877%]$",
          lines[#lines])
      else -- at 60 the last metrics go whole, an ellipsis in their place
        assert.matches(", …%]$", lines[#lines])
      end
    end)
  end

  it("shows numbers with 3 significant digits in the shorter of the plain and the scientific form", function()
    local num = lt.callbacks.ProgressBar._format.num
    assert.are.same({ "0.512", "3.12e-4", "1.48e-8", "1.23e+5", "0.05", "0.00123", "7", "nan" },
      { num(0.51234), num(0.00031234), num(1.4812e-8), num(123456.7), num(0.05), num(0.0012345), num(7), num(0 / 0) })
    local rate = lt.callbacks.ProgressBar._format.rate_text
    assert.are.same({ "88.1it/s", "7.25it/s", "1234it/s", "2.50s/it" },
      { rate(881, 10), rate(29, 4), rate(12340, 10), rate(2, 5) })
  end)

  it("RichProgressBar's metrics line keeps whole metrics in a narrow terminal", function()
    local lines = drawn_lines(lt.callbacks.RichProgressBar, 40, { multiline = true, color = false })
    local metric_lines = 0
    for _, l in ipairs(lines) do
      assert.is_true(ulen(l) <= 39, l)
      if l:find("^loss: ") then
        metric_lines = metric_lines + 1
        assert.matches("^loss: [%d.e%-]+  val_accuracy: 0.877  …$", l)
      end
    end
    assert.is_true(metric_lines > 0, table.concat(lines, "\n"))
  end)

  it("writes to a given stream, plain when it is not the terminal", function()
    assert.matches("^Epoch 0: 3/3 batches %[00:00, [%d.]+it/s, loss=[%d.e%-]+%]\n$", fit_into_buffer(6, 2, {}))
  end)

  it("on a terminal redraws every refresh_rate batches (and at the stage's end)", function()
    local function redraws(rate)
      -- a clock that advances a second per reading: the bar's minimum interval between redraws never holds it back
      local now, clock = lt._io.now, 0
      lt._io.now = function() clock = clock + 1 return clock end
      local ok, out = pcall(fit_into_buffer, 10, 1, { tty = true, refresh_rate = rate })
      lt._io.now = now
      assert(ok, out)
      local ns = {}
      for n in out:gmatch("\r[^\r]-(%d+)/10") do ns[#ns + 1] = tonumber(n) end
      return ns
    end
    assert.are.same({ 0, 3, 6, 9, 10, 10 }, redraws(3))
    assert.are.same({ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10 }, redraws(1))
  end)
end)
