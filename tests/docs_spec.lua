-- docs_spec.lua — the documentation in docs/ stays complete and true:
--  * every public name (a key not starting with `_`) of `lt` and of each of its submodules, including the
--    names they load lazily, every tensor method, and the methods of the classes users call directly
--    (lt.Trainer, lt.Loop, lt.nn.Module) has a heading in docs/**/*.md of the form
--        ### `lt.nn.Linear(in_features, out_features[, {bias=true}])`     (name: lt.nn.Linear)
--        ### `x:topk(k[, dim])`                                          (tensor method: x:topk)
--        ### `trainer:fit(model, train_loader[, val_loader])`            (Trainer method: trainer:fit)
--    (the first backticked word of the heading, up to `(` or `{`, is the name it documents);
--  * every hook of the loops' hook list (core/src/*.h, X(ID, "name")) has a `model:name` or `cb:name` heading;
--  * the ```lua code blocks of the guides (docs/*.md) run: each file's blocks, in order, as one script
--    run by the `lutra` binary in an empty directory (blocks marked ```lua norun are skipped).
local fs = require "tests.helpers.fs"

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

  -- the guides' code blocks
  local function runnable_script(path)
    local out, n, inside, run = {}, 0, false, false
    for line in io.lines(path) do
      local fence = line:match("^```(.*)$")
      if fence and not inside then
        inside, run = true, fence:match("^lua%s*$") ~= nil
        out[#out + 1] = ""
      elseif fence and inside then
        inside = false
        out[#out + 1] = ""
      elseif inside and run then
        out[#out + 1] = line
        n = n + 1
      else
        out[#out + 1] = "" -- keep line numbers equal to the .md file's
      end
    end
    return n > 0 and table.concat(out, "\n") or nil
  end

  local guides = {}
  for _, path in ipairs(list_md(DOCS)) do
    if not path:find("/reference/", 1, true) then guides[#guides + 1] = path end
  end

  local skip = require("helpers.puc").needs_luajit("the guides' code runs through the lutra binary (LuaJIT)")
  for _, path in ipairs(guides) do
    local script = runnable_script(path)
    if script and skip then
      pending("runs the ```lua blocks of " .. path .. ": " .. skip)
    elseif script then
      it("runs the ```lua blocks of " .. path, function()
        local dir = fs.tmpdir()
        local root = assert(io.popen("pwd")):read("*l")
        local file = fs.spit(dir .. "/" .. path:gsub("/", "_") .. ".lua", script)
        local bin = os.getenv("LUTRA_BIN") or (root .. "/build/bin/release/cli/lutra")
        if bin:sub(1, 1) ~= "/" then bin = root .. "/" .. bin end
        local p = io.popen("cd " .. fs.q(dir) .. " && " .. fs.q(bin) .. " " .. fs.q(file) ..
          " 2>&1; echo \"exit=$?\"")
        local output = p:read("*a")
        p:close()
        fs.rmrf(dir)
        local status = output:match("exit=(%d+)%s*$")
        assert(status == "0", path .. " (line numbers are the .md file's):\n" .. output)
      end)
    end
  end
end)
