-- docs_spec.lua — the documentation in docs/ stays complete and true:
--  * every public name (a key not starting with `_`) of `lt` and of each of its submodules, including the
--    names they load lazily, every tensor method, and the methods of the classes users call directly
--    (lt.Trainer, lt.Loop, lt.nn.Module) has a heading in docs/**/*.md of the form
--        ### `lt.nn.Linear(in_features, out_features[, {bias=true}])`     (name: lt.nn.Linear)
--        ### `x:topk(k[, dim])`                                          (tensor method: x:topk)
--        ### `trainer:fit(model, train_loader[, val_loader])`            (Trainer method: trainer:fit)
--    (the first backticked word of the heading, up to `(` or `{`, is the name it documents);
--  * every hook of the loops' hook list (core/src/*.h, X(ID, "name")) has a `model:name` or `cb:name` heading;
--  * the ```lua code blocks of every page run, by the `lutra` binary in an empty directory, one script a
--    page (blocks marked ```lua norun are skipped; each says why it cannot run). A guide (docs/*.md) is one
--    story: its blocks run in order at the top level, each seeing the ones before. A reference page
--    (docs/reference/*.md) is a list of entries: its first ```lua block is its one ```lua setup block, whose
--    definitions every other block of the page sees, and each other block runs in its own scope (a
--    function of its own), so an entry's example stands alone;
--  * every relative link and #anchor of docs/ and README.md resolves, and every `docs/....md` path that
--    code, comments and error messages mention exists, and every source file the docs name exists
--    (tests/helpers/md_links.lua).
local fs = require "tests.helpers.fs"
local md_links = require "tests.helpers.md_links"

local DOCS = "docs"

local function list_md(dir)
  local files = {}
  local p = io.popen("find " .. fs.q(dir) .. " -name '*.md' | sort")
  for line in p:lines() do files[#files + 1] = line end
  p:close()
  return files
end

-- the set of names documented by headings
local function documented_names()
  local names = {}
  for _, path in ipairs(list_md(DOCS)) do
    for line in io.lines(path) do
      local name = line:match("^#+%s+`([^`({%s]+)")
      if name then names[name] = path end
    end
  end
  return names
end

-- Every public name, as the docs spell it: "lt.x", "lt.nn.Linear", "x:method", "trainer:fit", ... (the walk
-- lt.help's index is checked against too: lua/lutra/help.lua, public_api), and the names that failed to load.
local function public_api()
  local names, _, errors = require("lutra.help").public_api()
  return names, errors
end

describe("docs", function()
  local lt = require "lutra"

  it("every public lazily loaded name loads (and walking lt.distributed does not initialise MPI)", function()
    local _, errors = public_api(lt)
    assert.are.same({}, errors)
    assert.is_false(lt.distributed.is_initialized())
  end)

  it("documents every public name of lt, its submodules, the tensor methods and the Trainer/Loop/Module methods",
    function()
      local names = public_api(lt)
      assert.is_true(#names > 300, "the API walk found " .. #names .. " names")
      local documented = documented_names()
      local missing = {}
      for _, n in ipairs(names) do
        if not documented[n] then missing[#missing + 1] = n end
      end
      assert(#missing == 0, #missing .. " public names have no heading in docs/**/*.md:\n  " ..
        table.concat(missing, "\n  "))
    end)

  it("finds the names the API walk must see (the walk itself works)", function()
    local set = {}
    for _, n in ipairs((public_api(lt))) do set[n] = true end
    for _, n in ipairs { "lt.zeros", "lt.nn.LSTM", "lt.nn.init.xavier_uniform_", "lt.callbacks.ModelCheckpoint",
      "lt.optim.lr_scheduler.StepLR", "x:matmul", "x:split", "trainer:fit", "lt.distributed.init" } do
      assert.is_true(set[n], n)
    end
  end)

  -- Every hook the loops dispatch (the X(ID, "name") list of core/src), documented for the model
  -- (`model:name`) or for callbacks (`cb:name`).
  it("documents every hook of the loops' hook list as model:name or cb:name", function()
    local hooks = {}
    local p = io.popen("cat core/src/*.h")
    local text = p:read("*a")
    p:close()
    for id, name in text:gmatch('X%((%u[%u_]*),%s*"([%l_]+)"%)') do
      if id:lower() == name then hooks[#hooks + 1] = name end -- (not the list's own comment)
    end
    assert.is_true(#hooks > 50, "found " .. #hooks .. " hook names in core/src/*.h")
    local documented = documented_names()
    local missing = {}
    for _, h in ipairs(hooks) do
      if not documented["model:" .. h] and not documented["cb:" .. h] then missing[#missing + 1] = h end
    end
    assert(#missing == 0, #missing .. " hooks have no model:/cb: heading in docs/**/*.md:\n  " ..
      table.concat(missing, "\n  "))
  end)

  -- A page's code blocks as one script (line numbers are the .md file's); nil when the page has none. On a
  -- reference page the first ```lua block must be its one ```lua setup block; each other block runs as a
  -- function of its own (its locals its own; a `return`, as a config file's, ends that block only).
  local OPEN, CLOSE = "do local _ = (function()", "end)() end"
  local function runnable_script(path, reference)
    local out, n, inside, run, blocks, setups, ln = {}, 0, false, false, 0, {}, 0
    for line in io.lines(path) do
      ln = ln + 1
      local fence = line:match("^```(.*)$")
      if fence and not inside then
        local info = fence:match("^%s*(.-)%s*$")
        if info:match("^lua") then blocks = blocks + 1 end
        local setup = reference and info == "lua setup"
        if setup then setups[#setups + 1] = blocks == 1 and ln or -ln end
        inside, run = true, info == "lua" or setup
        out[#out + 1] = (reference and info == "lua") and OPEN or ""
      elseif fence and inside then
        inside = false
        out[#out + 1] = out.open_do and CLOSE or ""
      elseif inside and run then
        out[#out + 1] = line
        n = n + 1
      else
        out[#out + 1] = "" -- keep line numbers equal to the .md file's
      end
      if fence then out.open_do = inside and out[#out] == OPEN end
    end
    out.open_do = nil
    if reference and n > 0 then
      local first_ok = #setups == 1 and setups[1] > 0
      assert(first_ok, path .. ": a reference page with ```lua blocks has one ```lua setup block, its first ```lua " ..
        "block (found " .. #setups .. (setups[1] and setups[1] < 0 and ", at line " .. -setups[1] .. " after " ..
        "another block" or "") .. ")")
    end
    return n > 0 and table.concat(out, "\n") or nil
  end

  -- runs a script with the lutra binary in an empty directory, finding the repository's models/ as from its root
  -- (`require "models.gpt"`): its output and exit status
  local function run_script(path, script)
    local dir = fs.tmpdir()
    local root = assert(io.popen("pwd")):read("*l")
    local file = fs.spit(dir .. "/" .. path:gsub("/", "_") .. ".lua", script)
    local bin = os.getenv("LUTRA_BIN") or (root .. "/build/bin/release/cli/lutra")
    if bin:sub(1, 1) ~= "/" then bin = root .. "/" .. bin end
    local p = io.popen("cd " .. fs.q(dir) .. " && LUA_PATH=" .. fs.q(root .. "/?.lua;;") .. " " .. fs.q(bin) .. " " ..
      fs.q(file) .. " 2>&1; echo \"exit=$?\"")
    local output = p:read("*a")
    p:close()
    fs.rmrf(dir)
    return output, output:match("exit=(%d+)%s*$")
  end

  local skip = require("helpers.puc").needs_luajit("the pages' code runs through the lutra binary (LuaJIT)")

  it("runs a reference page's blocks in their own scopes, seeing its setup block, and wants one setup block first",
    function()
      local dir = fs.tmpdir()
      local page = fs.spit(dir .. "/page.md", table.concat({ "# P", "```lua setup", "local a = 1", "```", "### `x`",
        "```lua", "local b = a + 1", "assert(b == 2)", "return b", "```", "```lua", "assert(b == nil and a == 1)", "```",
        "```lua norun", "error('not run')", "```", "```sh", "exit 1", "```" }, "\n"))
      local script = runnable_script(page, true)
      assert.are.equal(19, select(2, script:gsub("\n", "")) + 1) -- one line per line of the page
      if not skip then
        local out, status = run_script("page.md", script)
        assert.are.equal("0", status, out)
      end
      fs.spit(page, "# P\n```lua\nlocal a = 1\n```\n")
      assert.has_error(function() runnable_script(page, true) end)
      fs.spit(page, "# P\n```lua\nlocal a = 1\n```\n```lua setup\nlocal b = 1\n```\n")
      assert.has_error(function() runnable_script(page, true) end)
      fs.spit(page, "# P\n```lua setup\nlocal a = 1\n```\n```lua setup\nlocal b = 1\n```\n")
      assert.has_error(function() runnable_script(page, true) end)
      fs.rmrf(dir)
    end)

  for _, path in ipairs(list_md(DOCS)) do
    local reference = path:find("/reference/", 1, true) ~= nil
    local ok, script = pcall(runnable_script, path, reference)
    if ok and script and skip then
      pending("runs the ```lua blocks of " .. path .. ": " .. skip)
    elseif not ok or script then
      it("runs the ```lua blocks of " .. path, function()
        assert(ok, script)
        local output, status = run_script(path, script)
        assert(status == "0", path .. " (line numbers are the .md file's):\n" .. output)
      end)
    end
  end

  it("resolves every relative link and #anchor of docs/ and README.md", function()
    local files = list_md(DOCS)
    files[#files + 1] = "README.md"
    local broken = md_links.broken_links(files)
    assert(#broken == 0, #broken .. " broken links:\n  " .. table.concat(broken, "\n  "))
  end)

  it("lists every reference page in docs/reference/README.md", function()
    local index = assert(fs.slurp(DOCS .. "/reference/README.md"))
    local listed, unlisted = {}, {}
    for target in index:gmatch("%]%(([%w_%-]+%.md)%)") do listed[target] = true end
    for _, path in ipairs(list_md(DOCS .. "/reference")) do
      local name = path:match("([^/]+)$")
      if name ~= "README.md" and not listed[name] then unlisted[#unlisted + 1] = name end
    end
    assert(#unlisted == 0, "pages docs/reference/README.md does not list: " .. table.concat(unlisted, ", "))
  end)

  it("finds every docs/....md path that code, comments and messages mention", function()
    local files = {}
    local p = io.popen("git ls-files lua core examples tests models bench lutra README.md 2>/dev/null")
    for f in p:lines() do
      if not f:match("^tests/fuzz/corpus/") and not f:match("^tests/fixtures/") then files[#files + 1] = f end
    end
    p:close()
    assert.is_true(#files > 100, "git ls-files found " .. #files .. " files")
    local broken = md_links.broken_mentions(files)
    assert(#broken == 0, #broken .. " mentions of missing docs:\n  " .. table.concat(broken, "\n  "))
  end)

  -- (design-*.md plan files that do not exist yet)
  it("finds every source file the docs name (lua/lutra/..., core/src/..., tests/...)", function()
    local files = { "README.md" }
    for _, path in ipairs(list_md(DOCS)) do
      if not path:match("/design%-[^/]*$") then files[#files + 1] = path end
    end
    local broken = md_links.broken_source_mentions(files)
    assert(#broken == 0, #broken .. " source files named in the docs do not exist (moved? renamed?):\n  " ..
      table.concat(broken, "\n  "))
  end)

  it("the link checker finds a missing page, a missing #anchor and a mentioned page that does not exist", function()
    local dir = fs.tmpdir()
    fs.spit(dir .. "/a.md", "# Title\n\n## The loops (`lt.Loop`)\n\n## Twice\n\n## Twice\n\n```\n## Not a heading\n```\n")
    local page = fs.spit(dir .. "/b.md", table.concat({ "[ok](a.md)", "[ok](a.md#the-loops-ltloop)",
      "[ok](a.md#twice-1)", "[ok](#here)", "# Here", "[gone](nowhere.md)", "[bad anchor](a.md#the-loop)",
      "`[in code](nowhere.md)`", "```", "[in a block](nowhere.md)", "```", "[web](https://example.com/x.md)",
      "[in a code block](a.md#not-a-heading)" }, "\n"))
    local broken = md_links.broken_links({ page })
    assert.are.equal(3, #broken, table.concat(broken, "\n"))
    assert.matches(":6: %[gone%]%(nowhere%.md%): no file", broken[1])
    assert.matches(":7: %[bad anchor%]%(a%.md#the%-loop%): no heading", broken[2])
    assert.matches(":13: .*: no heading", broken[3])
    local missing = "docs/reference/nn_" .. "nothing.md" -- (not spelled whole: this file is checked too)
    local code = fs.spit(dir .. "/c.lua", "-- see docs/reference/nn.md and " .. missing .. "\n")
    assert.are.same({ code .. ":1: " .. missing }, md_links.broken_mentions({ code }))
    local gone = "lua/lutra/" .. "nothing.lua"
    local doc = fs.spit(dir .. "/d.md", "`lua/lutra/nn/module.lua`, core/src/*.h, lua/lutra/nn/, " .. gone .. ".\n")
    assert.are.same({ doc .. ":1: " .. gone }, md_links.broken_source_mentions({ doc }))
    fs.rmrf(dir)
  end)
end)
