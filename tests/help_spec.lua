-- help_spec.lua — lt.help (lua/lutra/help.lua): every public name has an entry in the reference that lutra
-- embeds, so the docs and the help stay in sync; names in their short and method forms, objects and instances,
-- topics, the overview, "no entry ...; did you mean ...", and `help` in the REPL of the lutra binary, run where
-- no docs are on disk.
local lt = require "lutra"
local help = require "lutra.help"
local fs = require "helpers.fs"

local BIN = os.getenv("LUTRA_BIN") or "build/bin/release/cli/lutra"

-- what lt.help printed
local function printed(...)
  local buf, real = {}, io.stdout
  rawset(io, "stdout", { write = function(self, ...) for _, s in ipairs { ... } do buf[#buf + 1] = s end return self end,
    flush = function() end })
  local ok, err = pcall(lt.help, ...)
  rawset(io, "stdout", real)
  assert(ok, err)
  return table.concat(buf)
end

-- whether one of the text's entries has a heading for `name`. An entry is its headings (each the name it
-- documents and its arguments), a blank line, its text, and "(docs/reference/<page>.md)"; entries are separated
-- by a blank line.
local function heads(text, name)
  local state = "heads"
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    if line:match("^%(docs/reference/[%w_]+%.md%)$") then
      state = "between"
    elseif state == "between" then
      state = line == "" and "heads" or "body"
    elseif state == "heads" then
      if line == "" then
        state = "body"
      elseif line:sub(1, #name) == name and (line:sub(#name + 1, #name + 1)):match("^[%(%{%[%s]?$") then
        return true
      end
    end
  end
  return false
end

describe("lt.help", function()
  it("has an entry for every public name of lt, its submodules, the tensor, Trainer, Loop and Module methods",
    function()
      local names, _, errors = help.public_api()
      assert.are.same({}, errors)
      assert.is_true(#names > 600, "the API walk found " .. #names .. " names")
      local missing = {}
      for _, n in ipairs(names) do
        local text = help.text(n)
        if not text or not heads(text, n) then missing[#missing + 1] = n end
      end
      assert(#missing == 0, #missing .. " public names have no entry in lt.help (a heading in docs/reference):\n  " ..
        table.concat(missing, "\n  "))
    end)

  it("embeds every page of docs/reference, as it is in the repository", function()
    local pages = require("lutra.core")._doc_pages()
    local p = io.popen("ls docs/reference/*.md")
    local n = 0
    for path in p:lines() do
      n = n + 1
      local name = path:match("([^/]+)$")
      assert.are.equal(fs.slurp(path), pages[name], name .. " is not embedded as it is (rebuild?)")
    end
    p:close()
    local m = 0
    for _ in pairs(pages) do m = m + 1 end
    assert.are.equal(n, m)
    assert.is_true(n > 30)
  end)

  it("prints an entry: its headings, its text and its page", function()
    local out = printed("nn.Linear")
    assert.matches("^lt%.nn%.Linear%(in_features, out_features%[, {bias=true}%]%)\n\n`y = x W%^T %+ b`", out)
    assert.matches("%(docs/reference/nn_linear%.md%)\n$", out)
    -- headings in a row share the text below them: GELU's entry shows the group
    local g = help.text("lt.nn.GELU")
    assert.truthy(g:find("lt.nn.ReLU()\nlt.nn.GELU()\nlt.nn.Tanh()", 1, true), g)
    assert.truthy(g:find("Elementwise activations", 1, true), g)
  end)

  it("finds names in their short and method forms", function()
    local cases = {
      ["nn.Linear"] = "lt.nn.Linear", Linear = "lt.nn.Linear", ["lr_scheduler.StepLR"] = "lt.optim.lr_scheduler.StepLR",
      Trainer = "lt.Trainer", ["Tensor:view"] = "x:view", ["Tensor.view"] = "x:view", ["x.view"] = "x:view",
      view = "x:view", ["Trainer:fit"] = "trainer:fit", fit = "trainer:fit", ["Module:forward"] = "m:forward",
      ["model:training_step"] = "model:training_step", training_step = "model:training_step",
      ["cb:on_fit_start"] = "cb:on_fit_start", ["F.relu"] = "lt.F.relu",
    }
    for q, name in pairs(cases) do
      local text = help.text(q)
      assert.truthy(text, q)
      assert.is_true(heads(text, name), q .. " -> " .. text:sub(1, 120))
    end
    -- a bare word: every entry whose last part it is
    local sum = help.text("sum")
    assert.truthy(sum:find("\nlt.sum(", 1, true) or sum:find("^lt.sum%("), sum)
    assert.truthy(sum:find("x:sum(", 1, true), sum)
  end)

  it("finds the entry of an object: a function, a class, a namespace, an instance's class", function()
    local net = lt.nn.Sequential { lt.nn.Linear(2, 3), lt.nn.ReLU() }
    local model = { net = net }
    local opt = lt.optim.SGD(net:parameters(), { lr = 0.1 })
    local x = lt.randn(2, 3)
    local My = lt.nn.Module:extend("MyNet")
    local cases = {
      { lt.nn.Linear, "lt.nn.Linear" }, { lt.nn.Linear(2, 3), "lt.nn.Linear" }, { model.net, "lt.nn.Sequential" },
      { model.net[2], "lt.nn.ReLU" }, { x.view, "x:view" }, { x, "lt.Tensor" }, { lt.F.relu, "lt.F.relu" },
      { opt, "lt.optim.SGD" }, { lt.optim.lr_scheduler.StepLR(opt, { step_size = 1 }), "lt.optim.lr_scheduler.StepLR" },
      { lt.callbacks.EarlyStopping { monitor = "val_loss" }, "lt.callbacks.EarlyStopping" },
      { lt.loggers.CSVLogger { save_dir = fs.tmpdir() }, "lt.loggers.CSVLogger" },
      { lt.data.DataLoader(lt.data.TensorDataset(x), { batch_size = 1 }), "lt.data.DataLoader" },
      { lt.Trainer { logger = false }, "lt.Trainer" }, { lt.Trainer.fit, "trainer:fit" }, { lt.optim, "lt.optim" },
      { My(), "lt.nn.Module" }, { lt, "lt" },
    }
    for i, c in ipairs(cases) do
      local text, err = help.text(c[1])
      assert.truthy(text, "case " .. i .. " (" .. c[2] .. "): " .. tostring(err))
      assert.is_true(heads(text, c[2]), "case " .. i .. ": " .. c[2] .. " -> " .. text:sub(1, 120))
    end
  end)

  it("lists a topic's names, and the topics when asked nothing", function()
    local cb = printed("callbacks")
    assert.matches("^Callbacks %(lt%.callbacks%)\n", cb)
    assert.truthy(cb:find("lt.callbacks.EarlyStopping", 1, true))
    assert.truthy(cb:find("cb:on_fit_start", 1, true))
    local all = printed()
    assert.truthy(all:find("lt.help(name_or_object)", 1, true))
    for _, page in ipairs { "callbacks", "nn", "tensor", "trainer", "hooks", "utils" } do
      assert.matches("\n  " .. page .. " +%S", all)
    end
  end)

  it("says there is no entry, and which name is nearest", function()
    assert.are.equal("lt.help: no entry for 'nn.Linaer'; did you mean 'lt.nn.Linear'?\n", printed("nn.Linaer"))
    assert.are.equal("lt.help: no entry for 'Tensor:veiw'; did you mean 'x:view'?\n", printed("Tensor:veiw"))
    assert.are.equal("lt.help: no entry for 'trainer:fitt'; did you mean 'trainer:fit'?\n", printed("trainer:fitt"))
    assert.are.equal("lt.help: no entry for 'zzqqxxyy'; lt.help() lists the topics\n", printed("zzqqxxyy"))
    assert.matches("^lt%.help: no entry for this function %(.*%): it is not one of lutra's public names", printed(print))
    assert.matches("^lt%.help: no entry for this table", printed({}))
  end)

  describe("in the lutra binary", function()
    local skip = require("helpers.puc").needs_luajit("the REPL is the lutra binary's (LuaJIT)")
    if skip then pending(skip) return end

    -- runs the binary in an empty directory (no docs on disk) with stdin; returns stdout
    local function run(args, stdin)
      local dir = fs.tmpdir()
      local root = assert(io.popen("pwd")):read("*l")
      local bin = BIN:sub(1, 1) == "/" and BIN or root .. "/" .. BIN
      local inp = fs.spit(dir .. "/stdin.txt", stdin or "")
      local p = io.popen("cd " .. fs.q(dir) .. " && env -u LUA_PATH -u LUA_CPATH " .. fs.q(bin) .. " " .. args ..
        " < " .. fs.q(inp) .. " 2>&1")
      local out = p:read("*a")
      p:close()
      fs.rmrf(dir)
      return out
    end

    it("help and help(x) in the REPL print the topics and an entry, with no docs on disk", function()
      local out = run("-i", 'help\nhelp(lt.nn.Linear)\nhelp("Tensor:veiw")\n')
      assert.truthy(out:find("Topics:\n  F ", 1, true), out)
      assert.truthy(out:find("lt.nn.Linear(in_features, out_features[, {bias=true}])", 1, true), out)
      assert.truthy(out:find("did you mean 'x:view'?", 1, true), out)
    end)

    it("lt.help in a script", function()
      local out = run("-e " .. fs.q('require("lutra").help("optim.SGD")'))
      assert.matches("^lt%.optim%.SGD%(", out)
    end)
  end)
end)
