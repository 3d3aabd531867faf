-- tests/build_progress_spec.lua — the build shows how far it is (./lutra, core/build_progress.lua): the steps
-- counted from make's dry run, a line per quarter when stderr is not a terminal (one line rewritten in place
-- on a terminal), and the time the build took.
local fs = require "helpers.fs"
local puc = require "helpers.puc"
local q = fs.q

local function sh(cmdline) -- stdout, stderr, exit status
  local out, err = os.tmpname(), os.tmpname()
  local p = io.popen("(" .. cmdline .. ") </dev/null >" .. q(out) .. " 2>" .. q(err) .. "; echo $?")
  local status = tonumber(p:read("*a"))
  p:close()
  local o, e = fs.slurp(out) or "", fs.slurp(err) or ""
  os.remove(out)
  os.remove(err)
  return o, e, status
end

local function lines_of(s)
  local t = {}
  for l in s:gmatch("[^\n]+") do t[#t + 1] = l end
  return t
end

-- runs core/build_progress.lua with `input` on stdin
local function progress(args, input)
  local f = fs.spit(os.tmpname(), input)
  local o, e, status = sh("luajit core/build_progress.lua " .. args .. " <" .. q(f))
  os.remove(f)
  return o, e, status
end

-- make's output as premake's makefiles print it under `make -s`
local MAKE_OUT = table.concat({ "==== Building lutra_static (release) ====", "Running pre-build commands", "a.c", "b.c",
  "tensor.c: In function 'f':", "tensor.c:3:5: warning: unused variable 'x' [-Wunused-variable]", "c.c", "d.c",
  "Linking lutra_static", "==== Building lutra (release) ====", "main.c", "repl.c", "Linking lutra",
  "make: exit status 0" }, "\n") .. "\n"

describe("build progress: core/build_progress.lua show", function()
  it("writes a line per quarter when not on a terminal, without the file names or make's own output", function()
    local o, e, status = progress("show 8 release lines", MAKE_OUT)
    assert.are.equal(0, status, e)
    assert.are.same({
      "lutra: building (release) [2/8]  25%",
      "lutra: building (release) [4/8]  50%",
      "lutra: building (release) [6/8]  75%",
      "lutra: building (release) [8/8] 100%",
    }, lines_of(o))
  end)

  it("rewrites one line in place on a terminal, naming the step, and ends it with a newline", function()
    local o, e, status = progress("show 8 debug tty", MAKE_OUT)
    assert.are.equal(0, status, e)
    assert.is_truthy(o:find("\rlutra: building (debug) [1/8]  12% a.c\27[K", 1, true), o)
    assert.is_truthy(o:find("\rlutra: building (debug) [5/8]  62% Linking lutra_static\27[K", 1, true), o)
    local tail = "\rlutra: building (debug) [8/8] 100%\27[K\n"
    assert.are.equal(tail, o:sub(-#tail))
    assert.are.equal(1, select(2, o:gsub("\n", "\n")), "one line: " .. o)
    assert.is_nil(o:find("warning", 1, true), o)
  end)

  it("ends at [n/n] 100% when the count was too high or too low", function()
    local o = progress("show 20 release lines", MAKE_OUT) -- 8 steps of 20 foreseen
    assert.are.same({ "lutra: building (release) [5/20]  25%", "lutra: building (release) [8/8] 100%" }, lines_of(o))
    o = progress("show 4 release lines", MAKE_OUT) -- 8 of 4: the count grows with the steps
    local l = lines_of(o)
    assert.are.equal("lutra: building (release) [1/4]  25%", l[1])
    assert.are.equal("lutra: building (release) [8/8] 100%", l[#l])
    for _, line in ipairs(l) do
      local n, of = line:match("%[(%d+)/(%d+)%]")
      assert.is_true(tonumber(n) <= tonumber(of), line)
    end
  end)

  it("stays where make stopped when it failed", function()
    local failed = MAKE_OUT:gsub("make: exit status 0", "make: exit status 2")
    local o = progress("show 8 release lines", failed)
    assert.are.same({ "lutra: building (release) [2/8]  25%", "lutra: building (release) [4/8]  50%",
      "lutra: building (release) [6/8]  75%", "lutra: building (release) [8/8] 100%" }, lines_of(o))
    local stopped = "a.c\nb.c\nc.c\nx.c:1:1: error: expected ';'\nmake: exit status 2\n"
    assert.are.same({ "lutra: building (release) [2/8]  25%" }, lines_of((progress("show 8 release lines", stopped))))
    o = progress("show 8 release tty", stopped)
    local tail = "\rlutra: building (release) [3/8]  37% c.c\27[K\n"
    assert.are.equal(tail, o:sub(-#tail))
  end)

  it("prints nothing when make had nothing to do, and rejects bad arguments with its usage", function()
    assert.are.equal("", (progress("show 0 release lines", "make: Nothing to be done for 'all'.\n")))
    local _, e, status = progress("show x release lines", "")
    assert.are.equal(2, status)
    assert.is_truthy(e:find("usage: luajit core/build_progress.lua count BUILD CONFIG", 1, true), e)
    _, e, status = progress("show 3 release colour", "")
    assert.are.equal(2, status)
    assert.is_truthy(e:find("show TOTAL LABEL tty|lines", 1, true), e)
  end)
end)

describe("build progress: core/build_progress.lua count", function()
  -- a solution makefile as premake writes it, whose recipes print what premake's print (make -n shows them)
  local SOLUTION = [[
all: core app test_a other

core:
	@echo "==== Building core ($(config)) ===="
	@echo x.c
	@echo y.c
	@echo Linking core
app: core
	@echo "==== Building app ($(config)) ===="
test_a: app
	@echo "==== Building test_a ($(config)) ===="
other:
	@echo "==== Building other ($(config)) ===="
clean:
	@echo Cleaning
]]
  local dir
  before_each(function() dir = fs.tmpdir() end)
  after_each(function() fs.rmrf(dir) end)
  local function count(makefile)
    fs.spit(dir .. "/Makefile", makefile)
    return progress("count " .. q(dir) .. " release", "")
  end

  it("counts the dry run's compiles and links, and the links of what depends on a relinked library", function()
    -- core compiles two files and relinks: app (depends on core) and test_a (on app) relink; other does not
    assert.are.equal("5\n", (count(SOLUTION)))
    -- only other's own source
    assert.are.equal("2\n", (count("all: core other\ncore:\nother:\n\t@echo z.c\n\t@echo Linking other\n")))
    assert.are.equal("0\n", (count("all:\n")))
  end)

  it("goes on past a link whose library a fresh tree does not have yet (make -n -k)", function()
    local o = count("all: core other\ncore: lib/missing.a\n\t@echo Linking core\nother:\n\t@echo z.c\n")
    assert.are.equal("1\n", o) -- other's compile; core's link cannot be listed
  end)

  it("counts the whole build in a fresh tree of lutra's own makefiles: every compile and every link", function()
    local skip = puc.needs_luajit("counts the LuaJIT build's tree")
    if skip then return pending(skip) end
    -- premake's makefiles of ./build, without any object or target: a first build (a folder at the top
    -- level, as the makefiles name the sources ../core/...)
    local fresh = "build-progress-spec-" .. tostring(os.time()) .. tostring(math.random(1e6))
    assert.are.equal(0, select(3, sh("mkdir " .. fresh .. " && cp build/Makefile build/*.make " .. fresh ..
      "/ && cp -R build/gen " .. fresh .. "/gen")))
    local o, e = progress("count " .. fresh .. " release", "")
    -- expected, from the makefiles themselves: each object has one rule "$(OBJDIR)/x.o: source", each
    -- project one "@echo Linking"
    local rules, linkers = 0, 0
    for mk in io.popen("ls " .. fresh .. "/*.make"):lines() do
      local text = fs.slurp(mk)
      rules = rules + select(2, text:gsub("\n%$%(OBJDIR%)/[%w_.+-]+%.o:", ""))
      linkers = linkers + select(2, text:gsub("\n%s+@echo Linking ", ""))
    end
    fs.rmrf(fresh)
    assert.is_true(rules > 50 and linkers > 5, rules .. " objects, " .. linkers .. " links")
    assert.are.equal((rules + linkers) .. "\n", o, e)
  end)

  it("says which build folder it cannot read", function()
    local _, e, status = progress("count /nonexistent release", "")
    assert.are.equal(1, status)
    assert.is_truthy(e:find("build_progress.lua: cannot read /nonexistent/Makefile", 1, true), e)
  end)
end)

describe("build progress: ./lutra", function()
  it("shows the steps of a small rebuild, a line per quarter, and the time it took", function()
    local skip = puc.needs_luajit("the C tests are built by the LuaJIT build only")
    if skip then return pending(skip) end
    -- one C test's source changed: one compile, one link
    assert.are.equal(0, select(3, sh("touch tests/c/test_idx.c")))
    local _, e, status = sh("./lutra --build-only")
    assert.are.equal(0, status, e)
    local config = os.getenv("LUTRA_CONFIG") or "release"
    local l = lines_of(e)
    assert.is_truthy(l[1]:find("^lutra: building %(" .. config .. "%): 2 steps on %d+ cores %(log: build/make%.log%) %.%.%.$"),
      e)
    assert.are.equal("lutra: building (" .. config .. ") [1/2]  50%", l[2])
    assert.are.equal("lutra: building (" .. config .. ") [2/2] 100%", l[3])
    assert.is_truthy(l[4]:find("^lutra: built %(" .. config .. "%) in %d+ s$") or
      l[4]:find("^lutra: built %(" .. config .. "%) in %d+ min %d%d s$"), e)
    assert.are.equal(4, #l, e)
  end)
end)
