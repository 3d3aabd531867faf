-- tests/cli_spec.lua — the `lutra` binary: scripts and `arg`, -e, -l, --version, errors and exit status,
-- stdin as a script, Ctrl-C in a script, the REPL over a pipe (-i) and over a terminal (tests/repl_pty.py).
--
--   busted tests/cli_spec.lua                       # from the repository root
--   LUTRA_BIN=/path/to/lutra busted tests/cli_spec.lua
--
-- The binary is $LUTRA_BIN, else build/bin/release/cli/lutra. Tests tagged #core need the real core
-- (require "lutra" succeeds); a development build against a stub can skip them: --exclude-tags=core.

local skip = require("helpers.puc").needs_luajit("runs the lutra binary and its REPL, which embed LuaJIT")
if skip then describe("lutra binary", function() pending(skip) end) return end
local BIN = os.getenv("LUTRA_BIN") or "build/bin/release/cli/lutra"
local PYTHON = "/usr/bin/python3"

local fs = require "helpers.fs"
local q, slurp, spit, exists = fs.q, fs.slurp, fs.spit, fs.exists

-- Runs a shell command line; returns { code, out, err }.
local function sh(cmdline, stdin)
  local out, err, inp = os.tmpname(), os.tmpname(), os.tmpname()
  spit(inp, stdin or "")
  local p = io.popen("(" .. cmdline .. ") <" .. q(inp) .. " >" .. q(out) .. " 2>" .. q(err) .. "; echo $?")
  local code = tonumber(p:read("*a"):match("(%d+)%s*$"))
  p:close()
  local r = { code = code, out = slurp(out) or "", err = slurp(err) or "" }
  os.remove(out)
  os.remove(err)
  os.remove(inp)
  return r
end

-- Runs the binary with a list of arguments.
local function lutra(args, stdin, env)
  local words = {}
  for k, v in pairs(env or {}) do words[#words + 1] = k .. "=" .. q(v) end
  words[#words + 1] = q(BIN)
  for _, a in ipairs(args or {}) do words[#words + 1] = q(a) end
  return sh((env and "env " or "") .. table.concat(words, " "), stdin)
end

local function script(text)
  return spit(os.tmpname() .. ".lua", text)
end

describe("lutra binary", function()
  setup(function()
    assert(exists(BIN), "no lutra binary at " .. BIN .. " (build it, or set LUTRA_BIN)")
  end)

  describe("--version", function()
    it("prints lutra <version> (LuaJIT ...) and exits 0", function()
      local r = lutra({ "--version" })
      assert.are.equal(0, r.code)
      assert.truthy(r.out:match("^lutra %d+%.%d+%.%d+[%w%.%-]* %(LuaJIT [^)]+%)\n$"), r.out)
    end)

    it("accepts -v too", function()
      local r = lutra({ "-v" })
      assert.are.equal(0, r.code)
      assert.truthy(r.out:match("^lutra "), r.out)
    end)
  end)

  describe("scripts", function()
    it("sets arg and ... exactly as luajit does", function()
      local s = script([[
        print(arg[0])
        print(#arg, arg[1], arg[2], select("#", ...), ...)
        print(arg[-1], arg[-2] == nil)
      ]])
      local r = lutra({ s, "one", "two words" })
      assert.are.equal(0, r.code, r.err)
      local lines = {}
      for l in r.out:gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
      assert.are.equal(s, lines[1])
      assert.are.equal("2\tone\ttwo words\t2\tone\ttwo words", lines[2])
      assert.are.equal(BIN .. "\ttrue", lines[3])
      os.remove(s)
    end)

    it("puts the interpreter's options at negative indices", function()
      local s = script("print(arg[-3], arg[-2], arg[-1], arg[0], arg[1])")
      local r = lutra({ "-e", "x = 1", s, "a" })
      assert.are.equal(0, r.code, r.err)
      assert.are.equal(BIN .. "\t-e\tx = 1\t" .. s .. "\ta\n", r.out)
      os.remove(s)
    end)

    it("does not define lt as a global", function()
      local r = lutra({ "-e", "print(rawget(_G, 'lt'))" })
      assert.are.equal("nil\n", r.out)
    end)

    it("makes require 'lutra' work without a package path #core", function()
      local r = lutra({ "-e", "local lt = require 'lutra'; print(type(lt), type(lt.version))" },
        nil, { LUA_PATH = ";;", LUA_CPATH = ";;" })
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("table\tstring\n", r.out)
    end)

    it("exits with 0 after a script that ends normally", function()
      local s = script("io.write('done')")
      local r = lutra({ s })
      assert.are.equal(0, r.code)
      assert.are.equal("done", r.out)
      assert.are.equal("", r.err)
      os.remove(s)
    end)

    it("lets os.exit choose the exit status", function()
      assert.are.equal(3, lutra({ "-e", "os.exit(3)" }).code)
      assert.are.equal(0, lutra({ "-e", "os.exit(true)" }).code)
    end)

    it("runs a script named after options and stops handling options after --", function()
      local s = script("print(...)")
      local r = lutra({ "--", s, "-e", "x" })
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("-e\tx\n", r.out)
      os.remove(s)
    end)
  end)

  describe("-e", function()
    it("runs chunks in order, with -l in between", function()
      local r = lutra({ "-e", "io.write('a')", "-l", "string", "-e", "io.write('b')", "-e", "print('c')" })
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("abc\n", r.out)
    end)

    it("stops at the first failing chunk", function()
      local r = lutra({ "-e", "io.write('a')", "-e", "error('x')", "-e", "io.write('b')" })
      assert.are.equal(1, r.code)
      assert.are.equal("a", r.out)
    end)

    it("does not open the REPL afterwards", function()
      local r = lutra({ "-e", "" }, "print('from stdin')\n")
      assert.are.equal(0, r.code)
      assert.are.equal("", r.out)
    end)
  end)

  describe("errors", function()
    it("print lutra: <message> and a traceback to stderr and exit 1", function()
      local s = script("local function f() error('boom') end\nf()\n")
      local r = lutra({ s })
      assert.are.equal(1, r.code)
      assert.are.equal("", r.out)
      assert.truthy(r.err:find("lutra: " .. s .. ":1: boom\n", 1, true), r.err)
      assert.truthy(r.err:find("stack traceback:", 1, true), r.err)
      assert.truthy(r.err:find("in function 'f'", 1, true), r.err)
      assert.falsy(r.err:find("[C]: at 0x", 1, true), r.err)
      os.remove(s)
    end)

    it("print one traceback for an error inside a trainer hook, down to the script's line #core", function()
      local s = script([[
local lt = require "lutra"
local m = { net = lt.nn.Linear(2, 1) }
function m:training_step(batch) error("boom in step") end
function m:configure_optimizers() return lt.optim.SGD(self.net:parameters(), { lr = 0.1 }) end
local loader = lt.data.DataLoader(lt.data.TensorDataset(lt.randn(4, 2)), { batch_size = 2 })
lt.Trainer{ logger = false, enable_checkpointing = false, enable_progress_bar = false,
  enable_model_summary = false }:fit(m, loader)
]])
      local r = lutra({ s })
      assert.are.equal(1, r.code)
      assert.truthy(r.err:find("^lutra: training_step: " .. s:gsub("%p", "%%%0") .. ":3: boom in step\n"), r.err)
      local _, n = r.err:gsub("stack traceback:", "")
      assert.are.equal(1, n, r.err)
      assert.truthy(r.err:find(s .. ":7: in main chunk", 1, true), r.err)
      assert.falsy(r.err:find("[C]: at 0x", 1, true), r.err)
      os.remove(s)
    end)

    it("say how to iterate a DataLoader given to ipairs or pairs #core", function()
      for _, f in ipairs { "ipairs", "pairs" } do
        local s = script(([[
local lt = require "lutra"
local loader = lt.data.DataLoader(lt.data.TensorDataset(lt.randn(4, 2)), { batch_size = 2 })
for i, batch in %s(loader) do end
]]):format(f))
        local r = lutra({ s })
        assert.are.equal(1, r.code)
        assert.truthy(r.err:find(s .. ":3: bad argument #1 to '" .. f .. "' (table expected, got userdata): " ..
          "DataLoader is not a table: iterate it with loader:iter() (for batch in loader:iter() do ... end)\n",
          1, true), r.err)
        os.remove(s)
      end
      -- any other userdata: Lua's message as it is
      local r = lutra({ "-e", "ipairs(newproxy())" })
      assert.truthy(r.err:find("(table expected, got userdata)\nstack traceback:", 1, true), r.err)
    end)

    it("report -e errors with the (command line) chunk name", function()
      local r = lutra({ "-e", "error('bad thing')" })
      assert.are.equal(1, r.code)
      assert.truthy(r.err:find("^lutra: %(command line%):1: bad thing\nstack traceback:"), r.err)
    end)

    it("describe non-string error objects", function()
      local r = lutra({ "-e", "error({})" })
      assert.are.equal(1, r.code)
      assert.truthy(r.err:find("lutra: (error object is a table value)", 1, true), r.err)
      r = lutra({ "-e", "error(setmetatable({}, {__tostring = function() return 'custom' end}))" })
      assert.truthy(r.err:find("lutra: custom", 1, true), r.err)
    end)

    it("report syntax errors", function()
      local s = script("x = = 1\n")
      local r = lutra({ s })
      assert.are.equal(1, r.code)
      assert.truthy(r.err:find("^lutra: " .. s:gsub("%p", "%%%0") .. ":1: unexpected symbol"), r.err)
      os.remove(s)
    end)

    it("report a missing script", function()
      local r = lutra({ "/nonexistent/script.lua" })
      assert.are.equal(1, r.code)
      assert.truthy(r.err:find("lutra: cannot open /nonexistent/script.lua", 1, true), r.err)
    end)

    it("report a failing -l", function()
      local r = lutra({ "-l", "no_such_module_xyz" })
      assert.are.equal(1, r.code)
      assert.truthy(r.err:find("module 'no_such_module_xyz' not found", 1, true), r.err)
    end)

    it("print the usage for a bad option, exit 1", function()
      local r = lutra({ "-Z" })
      assert.are.equal(1, r.code)
      assert.truthy(r.err:find("usage: lutra", 1, true), r.err)
      r = lutra({ "-e" })
      assert.are.equal(1, r.code)
    end)

    it("print the usage for --help, exit 0", function()
      local r = lutra({ "--help" })
      assert.are.equal(0, r.code)
      assert.truthy(r.out:find("usage: lutra", 1, true))
      assert.truthy(r.out:find("lutra plot METRICS.csv", 1, true))
    end)
  end)

  -- core/cli/docall.c calls every chunk through lutra's one message handler (core/bind/l_msgh.c), as lua.c's
  -- docall does through its msghandler: the report is luajit's (less the binary's own C frame at the bottom),
  -- and what only lutra's handler does shows (a traceback kept once, a hook error's own message).
  describe("errors through the shared message handler", function()
    -- luajit's report of the same arguments, as lutra prints it
    local function as_luajit(args)
      local words = { "luajit" }
      for _, a in ipairs(args) do words[#words + 1] = q(a) end
      local r = sh(table.concat(words, " "))
      r.err = r.err:gsub("^luajit: ", "lutra: "):gsub("\n\t%[C%]: at 0x%x+\n$", "\n")
      return r
    end

    it("print the message and the traceback as luajit does, exit 1", function()
      local s = script("local function f() error('boom') end\nlocal function g() f() end\ng()\n")
      for _, args in ipairs { { s }, { "-e", "error(setmetatable({}, {__tostring = function() return 'own text' end}))" },
        { "-e", "local t = nil; return t.x" } } do
        local want, got = as_luajit(args), lutra(args)
        assert.are.equal(1, want.code)
        assert.are.equal(1, got.code)
        assert.truthy(got.err:find("\nstack traceback:\n", 1, true), got.err)
        assert.are.equal(want.err, got.err)
      end
      os.remove(s)
    end)

    it("name the type of an error object that is neither a string nor has __tostring", function()
      for _, case in ipairs { { "error({})", "table" }, { "error(true)", "boolean" }, { "error()", "nil" } } do
        local r = lutra({ "-e", case[1] })
        assert.are.equal(1, r.code)
        assert.truthy(r.err:find("^lutra: %(error object is a " .. case[2] .. " value%)\nstack traceback:\n"), r.err)
      end
    end)

    it("keep a traceback the message carries already, once, and print a hook error's own message", function()
      local r = lutra({ "-e", "error('inner\\nstack traceback:\\n\\tsomewhere', 0)" })
      assert.are.equal(1, r.code)
      assert.are.equal("lutra: inner\nstack traceback:\n\tsomewhere\n", r.err)
      r = lutra({ "-e", "error({ lutra_hook_error = true, msg = 'on_fit_start: named already' }, 0)" })
      assert.are.equal(1, r.code)
      assert.are.equal("lutra: on_fit_start: named already\n", r.err)
    end)
  end)

  describe("stdin", function()
    it("runs stdin as a script when it is not a terminal", function()
      local r = lutra({}, "print('from stdin', select('#', ...))\nprint(rawget(_G, 'lt'))\n")
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("from stdin\t0\nnil\n", r.out)
    end)

    it("runs stdin for -, with the arguments after it", function()
      local r = lutra({ "-", "x", "y" }, "print(arg[0], ...)\n")
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("-\tx\ty\n", r.out)
    end)

    it("reports errors in stdin with the stdin chunk name", function()
      local r = lutra({}, "error('oops')\n")
      assert.are.equal(1, r.code)
      assert.truthy(r.err:find("lutra: stdin:1: oops", 1, true), r.err)
    end)
  end)

  describe("Ctrl-C in a script", function()
    local function interrupt(script_text, count)
      local s = script(script_text)
      local code = [==[
import os, signal, subprocess, sys, time
p = subprocess.Popen([sys.argv[1], sys.argv[2]], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
time.sleep(0.5)
for _ in range(int(sys.argv[3])):
    p.send_signal(signal.SIGINT)
    time.sleep(0.3)
try:
    out, err = p.communicate(timeout=5)
except subprocess.TimeoutExpired:
    p.kill()
    out, err = p.communicate()
    print("TIMEOUT")
sys.stdout.write("code=%d\n" % p.returncode + err.decode())
]==]
      local r = sh(PYTHON .. " -c " .. q(code) .. " " .. q(BIN) .. " " .. q(s) .. " " .. count)
      os.remove(s)
      return r.out
    end

    it("ends a Lua loop with 'interrupted!' at the second Ctrl-C, status 1", function()
      if not exists(PYTHON) then pending("needs " .. PYTHON) return end
      local out = interrupt("local t = 0 while true do t = t + os.clock() end", 2)
      assert.truthy(out:find("code=1\n", 1, true), out)
      assert.truthy(out:find("interrupted!", 1, true), out)
    end)

    it("does not stop plain Lua code at the first Ctrl-C (it only asks a fit to stop)", function()
      if not exists(PYTHON) then pending("needs " .. PYTHON) return end
      local out = interrupt("local t0 = os.time() while os.time() - t0 < 2 do os.clock() end print('finished')", 1)
      assert.truthy(out:find("code=0\n", 1, true), out)
    end)
  end)

  describe("REPL on a pipe (-i)", function()
    it("prints expressions, runs statements, continues incomplete chunks, survives errors", function()
      local r = lutra({ "-i" }, table.concat({
        "1 + 1",
        "x = 5;",
        "x",
        "function f(a)",
        "  return a * 2",
        "end",
        "f(21)",
        "error('boom')",
        "'after', nil",
        "f(1);",
        "",
      }, "\n"))
      assert.are.equal(0, r.code)
      assert.truthy(r.out:find("^lutra %S+ %(LuaJIT"), r.out)
      assert.truthy(r.out:find("\n> 2\n> > 5\n> >> >> > 42\n> > after\tnil\n> > ", 1, true), r.out)
      assert.truthy(r.err:find("stdin:1: boom\nstack traceback:", 1, true), r.err)
    end)

    it("runs the script first with -i SCRIPT", function()
      local s = script("greeting = 'hi from script'")
      local r = lutra({ "-i", s }, "greeting\n")
      assert.are.equal(0, r.code, r.err)
      assert.truthy(r.out:find("> hi from script\n", 1, true), r.out)
      os.remove(s)
    end)

    it("defines lt lazily when require 'lutra' succeeds #core", function()
      local r = lutra({ "-i" }, "type(lt)\ntype(lt.version)\n")
      assert.truthy(r.out:find("> table\n> string\n", 1, true), r.out .. r.err)
    end)

    it("does not keep printed results alive", function()
      local r = lutra({ "-i" }, table.concat({
        "weak = setmetatable({}, {__mode = 'v'})",
        "(function() local t = {} weak[1] = t return t end)()",
        "collectgarbage(); collectgarbage()",
        "weak[1] == nil",
        "",
      }, "\n"))
      assert.truthy(r.out:find("> true\n", 1, true), r.out .. r.err)
    end)
  end)

  describe("REPL on a terminal", function()
    it("passes tests/repl_pty.py", function()
      if not exists(PYTHON) then pending("needs " .. PYTHON) return end
      local r = sh("LUTRA_BIN=" .. q(BIN) .. " " .. PYTHON .. " tests/repl_pty.py")
      local passed, failed = r.out:match("(%d+) passed, (%d+) failed%s*$")
      assert.truthy(passed, r.out .. r.err)
      assert.are.equal("0", failed, r.out)
      assert.are.equal(0, r.code, r.out .. r.err)
      assert.truthy(tonumber(passed) >= 10, r.out)
    end)
  end)
end)
