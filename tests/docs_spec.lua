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

-- The keys a table loads on first use: the string keys of the tables its metatable's __index function
-- closes over (lutra's lazy submodule lists). Reading them loads the submodule, as a user's access would.
local function lazy_keys(t)
  local keys = {}
  local mt = getmetatable(t)
  if type(mt) == "table" and type(mt.__index) == "function" then
    local i = 1
    while true do
      local name, v = debug.getupvalue(mt.__index, i)
      if not name then break end
      if type(v) == "table" and name ~= "_ENV" then -- 5.2+: _ENV is the globals, not a submodule list
        for k in pairs(v) do if type(k) == "string" then keys[#keys + 1] = k end end
      end
      i = i + 1
    end
  end
  return keys
end

local function public_keys(t)
  local keys = {}
  for k in pairs(t) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" then keys[k] = true end
  end
  for _, k in ipairs(lazy_keys(t)) do
    if k:sub(1, 1) ~= "_" then keys[k] = true end
  end
  local list = {}
  for k in pairs(keys) do list[#list + 1] = k end
  table.sort(list)
  return list
end

-- Every public name, as the docs spell it: "lt.x", "lt.nn.Linear", "x:method", "trainer:fit", ...
-- Submodules (tables that lutra returns as namespaces) are walked; classes are walked with their prefix.
local function public_api(lt)
  local names, errors = {}, {}
  local namespaces = { lt = true, ["lt.nn"] = true, ["lt.F"] = true, ["lt.optim"] = true,
    ["lt.optim.lr_scheduler"] = true, ["lt.data"] = true, ["lt.callbacks"] = true, ["lt.loggers"] = true,
    ["lt.nn.init"] = true, ["lt.nn.utils"] = true, ["lt.plot"] = true, ["lt.distributed"] = true,
    ["lt.metrics"] = true, ["lt.utils"] = true }
  local classes = { ["lt.Trainer"] = "trainer:", ["lt.Loop"] = "loop:", ["lt.nn.Module"] = "m:" }
  local function walk(prefix, t)
    for _, k in ipairs(public_keys(t)) do
      local full = prefix .. "." .. k
      names[#names + 1] = full
      local ok, v = pcall(function() return t[k] end)
      if not ok then
        errors[#errors + 1] = full .. " does not load: " .. tostring(v)
      elseif type(v) == "table" and namespaces[full] then
        walk(full, v)
      elseif type(v) == "table" and classes[full] then
        for _, m in ipairs(public_keys(v)) do
          if type(v[m]) == "function" then names[#names + 1] = classes[full] .. m end
        end
      end
    end
  end
  -- load the namespaces whose loaders are not table-driven (lt.optim.lr_scheduler), as a user's access does
  for full in pairs(namespaces) do
    local t = lt
    for part in full:gmatch("[^.]+") do
      if part ~= "lt" and type(t) == "table" then
        local ok, v = pcall(function() return t[part] end)
        t = ok and v or nil
      end
    end
  end
  walk("lt", lt)
  for _, m in ipairs(public_keys(lt.Tensor.methods)) do names[#names + 1] = "x:" .. m end
  table.sort(names)
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
