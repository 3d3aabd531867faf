-- tests/hosts_spec.lua — lutra inside other programs (docs/guide-hosts.md): the quiet rule (outside the
-- `lutra` binary and a plain lua/luajit running a script, lutra writes nothing it was not asked for;
-- lt.set_interactive and LUTRA_QUIET decide explicitly). Each case runs in a child process.
local BIN = os.getenv("LUTRA_BIN") or "build/bin/release/cli/lutra"
local CONFIG = os.getenv("LUTRA_CONFIG") or "release"
local LUA_ENV = "LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' LUA_CPATH='./build/bin/" .. CONFIG .. "/?.so;;' "

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function slurp(path)
  local f = io.open(path)
  if not f then return "" end
  local s = f:read("*a")
  f:close()
  return s
end

local function write(path, s)
  local f = assert(io.open(path, "w"))
  f:write(s)
  f:close()
end

-- runs a shell command line; returns its stdout, stderr and exit status
local function sh(cmdline)
  local out, err = os.tmpname(), os.tmpname()
  local p = io.popen("(" .. cmdline .. ") </dev/null >" .. q(out) .. " 2>" .. q(err) .. "; echo $?")
  local status = tonumber(p:read("*a"))
  p:close()
  local o, e = slurp(out), slurp(err)
  os.remove(out)
  os.remove(err)
  return o, e, status
end

-- A fit that would print: the model summary (default on when interactive) and a deprecation warning
-- (on_train_epoch_end with an outputs parameter). The script reports lt.is_interactive() into $HOSTS_OUT
-- (not on stdout: stdout must stay what lutra wrote).
local FIT = [[
local lt = require "lutra"
lt.manual_seed(0)
local ds = lt.data.TensorDataset(lt.randn(8, 2), lt.randn(8, 1))
local m = { lin = lt.nn.Linear(2, 1) }
function m:training_step(b) return lt.F.mse_loss(self.lin(b[1]), b[2]) end
function m:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), { lr = 0.01 }) end
function m:on_train_epoch_end(outputs) self.n = outputs and #outputs end -- luacheck: ignore 212
local t = lt.Trainer({ max_epochs = 1, logger = false, enable_checkpointing = false })
t:fit(m, lt.data.DataLoader(ds, { batch_size = 4 }))
local f = assert(io.open(os.getenv("HOSTS_OUT"), "w"))
f:write(tostring(lt.is_interactive()))
f:close()
]]

describe("hosts: the quiet rule", function()
  local script, answer
  before_each(function()
    script, answer = os.tmpname(), os.tmpname()
    write(script, FIT)
  end)
  after_each(function()
    os.remove(script)
    os.remove(answer)
  end)

  -- runs the fit with `prefix` (environment) and `how` (the command that runs the script); returns what it
  -- wrote on stdout and stderr and what lt.is_interactive() said
  local function fit(prefix, how)
    local o, e, status = sh(prefix .. "HOSTS_OUT=" .. q(answer) .. " " .. how)
    assert.are.equal(0, status, "exit status; stderr: " .. e)
    return o, e, slurp(answer)
  end

  local function assert_loud(o, e, said)
    assert.are.equal("true", said)
    assert.is_truthy(o:find("Total params", 1, true) or o:find("params", 1, true), "the model summary: " .. o)
    assert.is_truthy(e:find("is deprecated", 1, true), "the deprecation warning: " .. e)
  end
  local function assert_quiet(o, e, said)
    assert.are.equal("false", said)
    assert.are.equal("", o)
    assert.are.equal("", e)
  end

  it("the lutra binary running a script is interactive", function()
    assert_loud(fit("", q(BIN) .. " " .. q(script)))
  end)

  it("LUTRA_QUIET=1 makes even the binary quiet", function()
    assert_quiet(fit("LUTRA_QUIET=1 ", q(BIN) .. " " .. q(script)))
  end)

  it("plain luajit running a script is interactive; with LUTRA_QUIET=1 it is quiet", function()
    assert_loud(fit(LUA_ENV, "luajit " .. q(script)))
    assert_quiet(fit(LUA_ENV .. "LUTRA_QUIET=1 ", "luajit " .. q(script)))
  end)

  it("a program that loads lutra without running a script is quiet (luajit -e, as a host's require)", function()
    assert_quiet(fit(LUA_ENV, "luajit -e " .. q("dofile(" .. string.format("%q", script) .. ")")))
  end)

  it("lt.set_interactive(true) in such a program brings the output back; LUTRA_QUIET=0 too", function()
    assert_loud(fit(LUA_ENV, "luajit -e " .. q("require('lutra').set_interactive(true) dofile(" ..
      string.format("%q", script) .. ")")))
    assert_loud(fit(LUA_ENV .. "LUTRA_QUIET=0 ", "luajit -e " .. q("dofile(" .. string.format("%q", script) .. ")")))
  end)

  it("lt.set_interactive(false) quiets a plain script, and beats LUTRA_QUIET=0", function()
    local quiet_script = os.tmpname()
    write(quiet_script, "require('lutra').set_interactive(false)\n" .. FIT)
    local o, e, said = fit(LUA_ENV .. "LUTRA_QUIET=0 ", "luajit " .. q(quiet_script))
    os.remove(quiet_script)
    assert_quiet(o, e, said)
  end)

  it("set_interactive returns the previous answer and rejects a non-boolean by name", function()
    local lt = require "lutra"
    local was = lt.set_interactive(false)
    assert.is_false(lt.is_interactive())
    assert.is_false(lt.set_interactive(was))
    assert.are.equal(was, lt.is_interactive())
    assert.has_error(function() lt.set_interactive(1) end, "set_interactive: expected a boolean, got number")
  end)
end)
