-- tests/hosts_spec.lua — lutra inside other programs (docs/guide-hosts.md): the quiet rule (outside the
-- `lutra` binary and a plain lua/luajit running a script on a terminal, lutra writes nothing it was not asked for;
-- lt.set_interactive and LUTRA_QUIET decide explicitly). Each case runs in a child process.
local BIN = os.getenv("LUTRA_BIN") or "build/bin/release/cli/lutra"
local CONFIG = os.getenv("LUTRA_CONFIG") or "release"
-- the interpreter running the specs runs the child scripts too, with the module built for it
-- (tests/run --lua 5.4: lua5.4 and build-lua5.4/); the lutra binary and the LuaJIT hosts need LuaJIT
local puc = require "helpers.puc"
local LUA = puc.lua_exe
local BUILD = puc.build_dir
local NO_BINARY = puc.needs_luajit("the lutra binary embeds LuaJIT")
local LUA_ENV = puc.module_env(CONFIG)

local fs = require "helpers.fs"
local q, write = fs.q, fs.spit
local function slurp(path) return fs.slurp(path) or "" end

-- runs a shell command line; returns its stdout, stderr and exit status. LUTRA_QUIET unset: the quiet rule is
-- tested here, which tests/run's LUTRA_QUIET=0 would decide for every child.
local function sh(cmdline)
  local out, err = os.tmpname(), os.tmpname()
  local p = io.popen("(unset LUTRA_QUIET; " .. cmdline .. ") </dev/null >" .. q(out) .. " 2>" .. q(err) .. "; echo $?")
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
    if NO_BINARY then return pending(NO_BINARY) end
    assert_loud(fit("", q(BIN) .. " " .. q(script)))
  end)

  it("LUTRA_QUIET=1 makes even the binary quiet", function()
    if NO_BINARY then return pending(NO_BINARY) end
    assert_quiet(fit("LUTRA_QUIET=1 ", q(BIN) .. " " .. q(script)))
  end)

  -- the same under a terminal (script(1) gives the command a pty): stdout and stderr both arrive on it
  local function fit_on_terminal(prefix, how)
    local o, e, said = fit("", "script -qec " .. q(prefix .. "HOSTS_OUT=" .. q(answer) .. " " .. how) .. " /dev/null")
    return o .. e, said
  end

  it("plain " .. LUA .. " running a script with a terminal on stdout is interactive; LUTRA_QUIET=1 quiets it", function()
    local out, said = fit_on_terminal(LUA_ENV, LUA .. " " .. q(script))
    assert.are.equal("true", said)
    assert.is_truthy(out:find("Total params", 1, true), "the model summary: " .. out)
    assert.is_truthy(out:find("is deprecated", 1, true), "the deprecation warning: " .. out)
    out, said = fit_on_terminal(LUA_ENV .. "LUTRA_QUIET=1 ", LUA .. " " .. q(script))
    assert.are.equal("false", said)
    assert.are.equal("", out)
  end)

  it("plain " .. LUA .. " running a script with stdout to a file or pipe is quiet (luajit game.lua >log)", function()
    assert_quiet(fit(LUA_ENV, LUA .. " " .. q(script)))
    assert_quiet(fit(LUA_ENV, LUA .. " " .. q(script) .. " | cat"))
    assert_loud(fit(LUA_ENV .. "LUTRA_QUIET=0 ", LUA .. " " .. q(script))) -- asked for: output even into a file
  end)

  it("a program that loads lutra without running a script is quiet (" .. LUA .. " -e, as a host's require)", function()
    assert_quiet(fit(LUA_ENV, LUA .. " -e " .. q("dofile(" .. string.format("%q", script) .. ")")))
  end)

  it("lt.set_interactive(true) in such a program brings the output back; LUTRA_QUIET=0 too", function()
    assert_loud(fit(LUA_ENV, LUA .. " -e " .. q("require('lutra').set_interactive(true) dofile(" ..
      string.format("%q", script) .. ")")))
    assert_loud(fit(LUA_ENV .. "LUTRA_QUIET=0 ", LUA .. " -e " .. q("dofile(" .. string.format("%q", script) .. ")")))
  end)

  it("lt.set_interactive(false) quiets a plain script, and beats LUTRA_QUIET=0", function()
    local quiet_script = os.tmpname()
    write(quiet_script, "require('lutra').set_interactive(false)\n" .. FIT)
    local o, e, said = fit(LUA_ENV .. "LUTRA_QUIET=0 ", LUA .. " " .. q(quiet_script))
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

-- The host's floating-point mode is the host's: lutra flushes denormals (FTZ/DAZ) in its own work only.
local FP = [[
local TINY = tonumber("2.2250738585072014e-308") -- read at run time: the parser cannot fold the division
local function host_denormal() return TINY / 4 end -- 5.56e-309 unless the thread flushes denormals
-- Interpreted only: LuaJIT's trace compiler treats TINY (an upvalue never assigned) as a constant and folds
-- TINY / 4 into the trace at compile time, in the mode the compiling thread had then, so a compiled
-- host_denormal answers 5.56e-309 whatever the thread's mode is later. It starts a trace after a few calls when
-- its hot counter shares a slot with a loop of the fit's (the slots are hashed by bytecode address, which ASLR
-- moves: about one run in twenty).
if rawget(_G, "jit") then jit.off(host_denormal) end
local out = { host_denormal() }
local lt = require "lutra"
out[#out + 1] = host_denormal() -- after require
if os.getenv("NOFTZ") then lt.set_flush_denormal(false) end
-- a fit whose SGD momentum buffer decays from 1e-37 into float32's denormal range (below 1.18e-38)
local p = lt.param(lt.zeros(4))
local model = { p = p }
local in_hook, keys_distinct -- what the hook's Lua code sees: the host's mode, not lutra's
function model:training_step(_, i)
  if i == 0 then
    in_hook = host_denormal()
    local t = { [TINY / 4] = "a", [TINY / 8] = "b" } -- LuaJIT's jit.profile keys its registry by such numbers
    keys_distinct = t[TINY / 4] == "a" and t[TINY / 8] == "b"
  end
  return (self.p * lt.full({ 4 }, i == 0 and 1e-37 or 0)):sum()
end
function model:configure_optimizers() return lt.optim.SGD({ self.p }, { lr = 0.1, momentum = 0.9 }) end
local ds = lt.data.TensorDataset(lt.zeros(60, 1))
local t = lt.Trainer { max_epochs = 1, logger = false, enable_checkpointing = false, enable_progress_bar = false,
  enable_model_summary = false }
t:fit(model, lt.data.DataLoader(ds, { batch_size = 1 }))
out[#out + 1] = host_denormal() -- after a fit
out[#out + 1] = t.optimizers[1]:state_dict().state[1].momentum_buffer:totable()[1]
lt.set_flush_denormal(true) -- everywhere: the user asked
out[#out + 1] = host_denormal()
out[#out + 1] = in_hook
out[#out + 1] = keys_distinct and 1 or 0
for i = 1, #out do out[i] = string.format("%.6g", out[i]) end
io.write(table.concat(out, " "))
]]

describe("hosts: the floating-point mode", function()
  local function run(env)
    local script = os.tmpname()
    write(script, FP)
    local o, e, status = sh(LUA_ENV .. env .. LUA .. " " .. q(script))
    os.remove(script)
    assert.are.equal(0, status, e)
    local v = {}
    for w in o:gmatch("%S+") do v[#v + 1] = tonumber(w) end
    return v
  end

  it("a host's denormal survives require and a fit; lutra's optimizer state is flushed", function()
    local v = run("")
    assert.are.same({ 5.56268e-309, 5.56268e-309, 5.56268e-309 }, { v[1], v[2], v[3] })
    assert.are.equal(0, v[4]) -- 1e-37 * 0.9^59 is denormal in float32: flushed while lutra stepped
    assert.are.equal(0, v[5]) -- lt.set_flush_denormal(true) flushes on the host's thread as well
  end)

  it("the hooks' Lua code runs in the host's mode while lutra flushes in its own work", function()
    local v = run("")
    assert.are.equal(0, v[4]) -- the same fit flushed the optimizer's state
    assert.are.equal(5.56268e-309, v[6]) -- training_step's own double arithmetic was not flushed
    assert.are.equal(1, v[7]) -- two denormal table keys stayed two keys (under DAZ both compare equal to 0)
  end)

  it("lt.set_flush_denormal(false) keeps denormals in lutra's work too", function()
    local v = run("NOFTZ=1 ")
    assert.are.equal(5.56268e-309, v[3])
    assert.is_true(v[4] > 0 and v[4] < 1.18e-38, "momentum buffer " .. tostring(v[4]))
  end)
end)

-- MPI is lutra/mpi.so, loaded on first use: nothing else links libmpi, and require "lutra" does not map it.
describe("hosts: MPI only on first use", function()
  local DIR = BUILD .. "/bin/" .. CONFIG

  it("core.so, the binary and liblutra.a do not link libmpi (nor liblutra.so: they carry the core)", function()
    local linked = { DIR .. "/lutra/core.so" }
    if not NO_BINARY then linked[2] = DIR .. "/cli/lutra" end
    for _, f in ipairs(linked) do
      local o, _, status = sh("readelf -d " .. q(f))
      assert.are.equal(0, status)
      assert.is_truthy(o:find("NEEDED", 1, true), f)
      assert.is_nil(o:find("libmpi", 1, true), f .. " needs libmpi")
      assert.is_nil(o:find("liblutra", 1, true), f .. " needs liblutra.so")
    end
    local o, _, status = sh("nm -u " .. q(DIR .. "/liblutra.a"))
    assert.are.equal(0, status)
    assert.is_truthy(o:find("cblas_sgemm", 1, true) or o:find("dlopen", 1, true), "nm listed undefined symbols")
    assert.is_nil(o:find("MPI_", 1, true), "liblutra.a refers to MPI")
  end)

  it("require and a fit leave MPI unloaded; lt.distributed.available() loads it", function()
    local script = os.tmpname()
    write(script, [[
local function mapped()
  local f = assert(io.open("/proc/self/maps"))
  local s = f:read("*a")
  f:close()
  return s:find("libmpi", 1, true) ~= nil
end
local lt = require "lutra"
local m = { lin = lt.nn.Linear(2, 1) }
function m:training_step(b) return lt.F.mse_loss(self.lin(b[1]), b[2]) end
function m:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), { lr = 0.01 }) end
lt.Trainer({ max_epochs = 1, logger = false, enable_checkpointing = false, enable_progress_bar = false,
  enable_model_summary = false }):fit(m, lt.data.DataLoader(lt.data.TensorDataset(lt.randn(4, 2), lt.randn(4, 1))))
local before = mapped()
local avail = lt.distributed.available()
io.write(tostring(before), " ", tostring(avail), " ", tostring(mapped()))
]])
    local o, e, status = sh(LUA_ENV .. LUA .. " " .. q(script))
    os.remove(script)
    assert.are.equal(0, status, e)
    local before, avail, after = o:match("^(%S+) (%S+) (%S+)$")
    assert.are.equal("false", before)
    local so = io.open(DIR .. "/lutra/mpi.so")
    local built = so ~= nil
    if so then so:close() end
    assert.are.equal(tostring(built), avail)
    assert.are.equal(tostring(built), after)
  end)

  it("a module that cannot load is an error that says why, not a crash", function()
    local o, e, status = sh(LUA_ENV .. "LUTRA_MPI_MODULE=/nonexistent/mpi.so " .. LUA .. " -e " .. q([[
local D = require("lutra").distributed
io.write(tostring(D.available()), "\n", select(2, pcall(D.init)))]]))
    assert.are.equal(0, status, e)
    assert.is_truthy(o:find("^false\n"), o)
    assert.is_truthy(o:find("distributed.init: MPI is not available (/nonexistent/mpi.so", 1, true), o)
    assert.is_truthy(o:find("apt-get install openmpi-bin", 1, true), o)
  end)
end)

-- ./lutra install: the layout, a C host built from the installed prefix only (pkg-config, shared and
-- --static) that runs without LD_LIBRARY_PATH (lutra.pc's rpath), the installed binary and Lua module.
describe("hosts: ./lutra install and lutra.pc", function()
  local T
  setup(function()
    T = os.tmpname()
    os.remove(T)
    assert(os.execute("mkdir -p " .. q(T)) == 0)
  end)
  teardown(function() os.execute("rm -rf " .. q(T)) end)

  local FILES = { "include/lutra.h", "lib/liblutra.a", "lib/liblutra.so", "lib/pkgconfig/lutra.pc", "bin/lutra",
    "share/lua/5.1/lutra/init.lua", "share/lua/5.1/lutra/trainer/init.lua", "lib/lua/5.1/lutra/core.so" }
  local function exists(p)
    local f = io.open(p)
    if f then f:close() end
    return f ~= nil
  end

  it("installs every piece under --prefix, and under --destdir with lutra.pc still naming the prefix", function()
    if NO_BINARY then return pending(NO_BINARY .. " (./lutra install installs the LuaJIT build)") end
    local _, e, status = sh("./lutra install --prefix " .. q(T .. "/p"))
    assert.are.equal(0, status, e)
    for _, f in ipairs(FILES) do assert.is_true(exists(T .. "/p/" .. f), f) end
    _, e, status = sh("./lutra install --prefix /opt/lutra-test --destdir " .. q(T .. "/d"))
    assert.are.equal(0, status, e)
    for _, f in ipairs(FILES) do assert.is_true(exists(T .. "/d/opt/lutra-test/" .. f), f) end
    assert.is_truthy(slurp(T .. "/d/opt/lutra-test/lib/pkgconfig/lutra.pc"):find("prefix=/opt/lutra-test\n", 1, true))
  end)

  it("rejects a missing or relative prefix and unknown arguments, by name", function()
    local _, e, status = sh("./lutra install")
    assert.are_not.equal(0, status)
    assert.is_truthy(e:find("lutra install: --prefix P is required", 1, true), e)
    _, e = sh("./lutra install --prefix relative/dir")
    assert.is_truthy(e:find("lutra install: --prefix must be an absolute path, got 'relative/dir'", 1, true), e)
    _, e = sh("./lutra install --prefix /tmp/x --bogus")
    assert.is_truthy(e:find("lutra install: unknown argument '--bogus'", 1, true), e)
  end)

  local function build_and_run(prefix, static, exe) -- returns what ldd says of it
    local pc = "PKG_CONFIG_PATH=" .. q(prefix .. "/lib/pkgconfig") .. " pkg-config --cflags --libs " ..
      (static and "--static " or "") .. "lutra"
    -- under the sanitizer build the installed archive is instrumented: its host links the sanitizers' runtimes
    local san = os.getenv("LUTRA_SANITIZER") and " -fsanitize=address,undefined,float-cast-overflow" or ""
    local _, e, status = sh("cc -o " .. q(exe) .. " examples/embed/host.c $(" .. pc .. ") -lm" .. san)
    assert.are.equal(0, status, "cc: " .. e)
    local o
    -- a prefix outside the loader's paths, and no LD_LIBRARY_PATH: lutra.pc's rpath finds liblutra.so
    o, e, status = sh("env -u LD_LIBRARY_PATH " .. q(exe) .. " --frames 120 --every 60 --script examples/embed/world.lua")
    assert.are.equal(0, status, e)
    assert.is_truthy(o:find("training steps %d+"), o)
    return (sh("env -u LD_LIBRARY_PATH ldd " .. q(exe)))
  end

  it("a C host builds from the installed prefix with pkg-config alone, and runs", function()
    if NO_BINARY then return pending(NO_BINARY .. " (./lutra install installs the LuaJIT build)") end
    sh("./lutra install --prefix " .. q(T .. "/p"))
    local libs = select(1, sh("PKG_CONFIG_PATH=" .. q(T .. "/p/lib/pkgconfig") .. " pkg-config --libs lutra"))
    assert.is_truthy(libs:find("-L" .. T .. "/p/lib", 1, true), libs)
    assert.is_truthy(libs:find("-Wl,-rpath," .. T .. "/p/lib", 1, true), libs)
    local ldd = build_and_run(T .. "/p", false, T .. "/host_shared")
    assert.is_truthy(ldd:find("liblutra.so => " .. T .. "/p/lib/liblutra.so", 1, true), ldd)
    assert.is_truthy(select(1, sh("readelf -d " .. q(T .. "/host_shared"))):find("[" .. T .. "/p/lib]", 1, true))
    assert.is_nil(ldd:find("libmpi", 1, true), ldd)
  end)

  it("pkg-config --static gives what liblutra.a needs", function()
    if NO_BINARY then return pending(NO_BINARY .. " (./lutra install installs the LuaJIT build)") end
    sh("./lutra install --prefix " .. q(T .. "/s"))
    os.remove(T .. "/s/lib/liblutra.so") -- only the archive left to link
    local static_libs = select(1, sh("PKG_CONFIG_PATH=" .. q(T .. "/s/lib/pkgconfig") .. " pkg-config --static --libs lutra"))
    assert.is_truthy(static_libs:find("-lpng", 1, true), static_libs) -- lt.utils.save_image (core/src/image_png.c)
    assert.is_truthy(static_libs:find("-ljpeg", 1, true), static_libs) -- lt.vision.io.read_image (core/src/vision_decode.c)
    local ldd = build_and_run(T .. "/s", true, T .. "/host_static")
    assert.is_nil(ldd:find("liblutra", 1, true), ldd)
    assert.is_nil(ldd:find("libmpi", 1, true), ldd)
  end)

  it("the installed binary runs a script; luajit loads the installed module (and finds its MPI module)", function()
    if NO_BINARY then return pending(NO_BINARY .. " (./lutra install installs the LuaJIT build)") end
    sh("./lutra install --prefix " .. q(T .. "/p"))
    local script = T .. "/v.lua"
    write(script, 'local lt = require "lutra"\nio.write(lt.version, " ", tostring(lt.distributed.available()))\n')
    local o, e, status = sh(q(T .. "/p/bin/lutra") .. " " .. q(script))
    assert.are.equal(0, status, e)
    assert.is_truthy(o:find("^0%.%d+%.%d+ "), o)
    local env = "LUA_PATH=" .. q(T .. "/p/share/lua/5.1/?.lua;" .. T .. "/p/share/lua/5.1/?/init.lua") ..
      " LUA_CPATH=" .. q(T .. "/p/lib/lua/5.1/?.so") .. " "
    local o2
    o2, e, status = sh(env .. "luajit " .. q(script))
    assert.are.equal(0, status, e)
    assert.are.equal(o, o2)
    local mpi = exists("build/bin/" .. CONFIG .. "/lutra/mpi.so")
    assert.is_truthy(o:find(tostring(mpi) .. "$"), o)
  end)
end)

describe("hosts: luarocks make", function()
  -- the build matching the Lua luarocks targets (core/luarocks.mk asks the interpreter): LuaJIT, named with
  -- LUA= on the command line, gets LuaJIT's build in Lua 5.1's tree; lua5.1, 5.3 and 5.4 their PUC build
  local version = rawget(_G, "jit") and "5.1" or _VERSION:match("%d+%.%d+")
  local luajit = select(1, sh("command -v luajit")):gsub("%s+$", "")
  local flag = "--lua-version=" .. version .. " "
  local vars = rawget(_G, "jit") and (" LUA=" .. q(luajit) .. " LUA_INCDIR=/usr/include/luajit-2.1") or ""
  it("installs lutra into a tree that " .. LUA .. " then loads it from, with that tree's paths only", function()
    local so = io.open(BUILD .. "/bin/release/lutra/core.so")
    if so then so:close() else
      pending("the rockspec installs the release build: " ..
        (rawget(_G, "jit") and "" or "LUTRA_LUA=" .. version .. " ") .. "./lutra --build-only first")
      return
    end
    local T = os.tmpname()
    os.remove(T)
    local _, e, status = sh("luarocks " .. flag .. "--tree " .. q(T) .. " make lutra-dev-1.rockspec" .. vars)
    assert.are.equal(0, status, e)
    local o
    o, e, status = sh("eval \"$(luarocks " .. flag .. "--tree " .. q(T) .. " path)\" && cd / && " .. LUA .. " -e " ..
      q([[
local lt = require "lutra"
local function searchpath(name) -- package.searchpath, which Lua 5.1 lacks
  for template in package.cpath:gmatch("[^;]+") do
    local path = template:gsub("%?", (name:gsub("%.", "/")))
    local f = io.open(path)
    if f then f:close() return path end
  end
end
io.write(searchpath("lutra.core"), " ", (lt.ones(2, 3) * 2):sum():item())]]))
    os.execute("rm -rf " .. q(T))
    assert.are.equal(0, status, e)
    assert.are.equal(T .. "/lib/lua/" .. version .. "/lutra/core.so 12", (o:gsub("12%.0$", "12")))
  end)

  -- what core/luarocks.mk builds for each interpreter: stand-ins that answer as LuaJIT, Lua 5.1 or 5.2 would
  -- (the real lua5.1 is not on every machine; the --lua 5.1 run of this spec installs with it)
  local function fake_lua(answer)
    local path = os.tmpname()
    write(path, "#!/bin/sh\nprintf '%s' " .. q(answer) .. "\n")
    os.execute("chmod +x " .. q(path))
    return path
  end
  local function rockspec_make(lua)
    return sh("make -n -f core/luarocks.mk all LUA=" .. q(lua))
  end

  it("builds for the interpreter luarocks targets, asked what it is: PUC Lua 5.1 gets the 5.1 build", function()
    local o, e, status = rockspec_make(luajit)
    assert.are.equal(0, status, e)
    assert.are.equal("LUTRA_LUA=luajit ./lutra --build-only\n", o)
    for answer, build in pairs({ ["5.1"] = "5.1", ["5.4"] = "5.4", ["luajit"] = "luajit" }) do
      local lua = fake_lua(answer)
      o, e, status = rockspec_make(lua)
      os.remove(lua)
      assert.are.equal(0, status, e)
      assert.are.equal("LUTRA_LUA=" .. build .. " ./lutra --build-only\n", o)
    end
  end)

  it("refuses Lua 5.2, or an interpreter that does not run, saying what to run instead", function()
    local lua = fake_lua("5.2")
    local _, e, status = sh("make -f core/luarocks.mk all LUA=" .. q(lua))
    assert.are_not.equal(0, status)
    assert.is_truthy(e:find("lutra: luarocks targets " .. lua .. " (Lua 5.2); lutra builds for LuaJIT and PUC Lua " ..
      "5.1, 5.3 and 5.4: run luarocks --lua-version=5.4 make (or 5.3, 5.1), or for LuaJIT luarocks " ..
      "--lua-version=5.1 make LUA=/usr/bin/luajit LUA_INCDIR=/usr/include/luajit-2.1", 1, true), e)
    _, e, status = sh("make -f core/luarocks.mk install LUA=" .. q(lua) .. " LUADIR=/nonexistent LIBDIR=/nonexistent")
    os.remove(lua)
    assert.are_not.equal(0, status)
    assert.is_truthy(e:find("(Lua 5.2); lutra builds for", 1, true), e)
    _, e, status = sh("make -f core/luarocks.mk all LUA=/nonexistent/lua")
    assert.are_not.equal(0, status)
    assert.is_truthy(e:find("lutra: luarocks targets /nonexistent/lua (which does not run)", 1, true), e)
  end)
end)

-- The two real hosts of examples/ (LÖVE and Neovim both run LuaJIT and load lutra/core.so), headless.
local function have(cmd) return select(3, sh("command -v " .. cmd)) == 0 end
local ABS_ENV = (function()
  local root = assert(io.popen("pwd")):read("*l")
  return "LUA_PATH=" .. q(root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;;") ..
    " LUA_CPATH=" .. q(root .. "/build/bin/" .. CONFIG .. "/?.so;;") .. " "
end)()

describe("hosts: examples/love", function()
  it("learns online with advance{seconds=} each frame, quits at its frame limit, prints only its result", function()
    local skip = puc.needs_luajit("LÖVE and Neovim are LuaJIT hosts (the LuaJIT run of this spec covers them)")
    if skip then return pending(skip) end
    if not (have("love") and have("xvfb-run")) then
      pending("love or xvfb-run is not installed")
      return
    end
    local o, e, status = sh(ABS_ENV .. "LUTRA_LOVE_FRAMES=900 timeout 300 xvfb-run -a love examples/love")
    assert.are.equal(0, status, e)
    local frames, steps, first, last = o:match("^lutra%-love: frames (%d+) steps (%d+) first_loss (%S+) " ..
      "last_loss (%S+) caught %d+ missed %d+ late_catch_rate %S+\n$")
    assert.is_truthy(frames, "stdout: " .. o)
    assert.are.equal(900, tonumber(frames))
    assert.is_true(tonumber(steps) >= 100, "steps " .. steps)
    assert.is_true(tonumber(last) < tonumber(first) / 10, "loss from " .. first .. " to " .. last)
  end)
end)

describe("hosts: examples/nvim", function()
  it("trains on a libuv timer between other events and suggests the buffer's continuation", function()
    local skip = puc.needs_luajit("LÖVE and Neovim are LuaJIT hosts (the LuaJIT run of this spec covers them)")
    if skip then return pending(skip) end
    if not have("nvim") then
      pending("nvim is not installed")
      return
    end
    local script, out = os.tmpname(), os.tmpname()
    write(script, [[
local buf = vim.api.nvim_get_current_buf()
local line = "the quick brown fox jumps over the lazy dog. "
local lines = {}
for i = 1, 30 do lines[i] = line .. line end
vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
vim.cmd("runtime plugin/lutra_suggest.lua")
local s = require "lutra_suggest"
-- another timer, as the editor's other work: it must keep firing while training goes on
local others = 0
local t = vim.loop.new_timer()
t:start(0, 5, vim.schedule_wrap(function() others = others + 1 end))
s.start(0, { budget = 0.004, interval = 10 })
vim.wait(60000, function() return s.stats().steps >= 1500 end, 10)
s.stop()
t:stop()
t:close()
local st = s.stats()
local f = assert(io.open(os.getenv("NVIM_OUT"), "w"))
f:write(string.format("ticks %d steps %d others %d suggest [%s] commands %d", st.ticks, st.steps, others,
  s.suggest("the quick brown ", 12), vim.fn.exists(":LutraSuggest")))
f:close()
vim.cmd("qa!")
]])
    local o, e, status = sh(ABS_ENV .. "NVIM_OUT=" .. q(out) .. " timeout 300 nvim --headless -u NONE -i NONE " ..
      "--cmd 'set rtp+=examples/nvim' -c " .. q("luafile " .. script))
    local res = slurp(out)
    os.remove(script)
    os.remove(out)
    assert.are.equal(0, status, e)
    assert.are.equal("", o) -- lutra wrote nothing on the editor's terminal
    local ticks, steps, others, suggestion, commands =
      res:match("^ticks (%d+) steps (%d+) others (%d+) suggest %[(.*)%] commands (%d+)$")
    assert.is_truthy(ticks, res)
    assert.is_true(tonumber(steps) >= 1500, res)
    -- many slices, each one advance{seconds=} within a tick, and the other timer served in between
    assert.is_true(tonumber(ticks) >= 10, res)
    assert.is_true(tonumber(others) >= tonumber(ticks) / 2, res)
    assert.are.equal("fox jumps ov", suggestion)
    assert.are.equal(2, tonumber(commands))
  end)
end)
