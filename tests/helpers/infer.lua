-- helpers/infer.lua — what the lt.infer specs share: a plan checked against model(x), the no-allocation count of
-- plan:run / plan(x), and an exported file run under luajit, lua5.1 and lua5.4 with no lutra on the paths.
-- require("helpers.infer")(assert): busted's assert, which a spec's environment has and a module's does not.
local lt = require "lutra"

return function(assert)
local H = {}

function H.flat(t) return t:contiguous():view(-1):totable() end

function H.close(a, b, tol)
  local d = (a - b):abs():max():item()
  assert(d <= (tol or 1e-5), "max difference " .. d)
end

-- the first result of ref(x) (model(x) by default) against the plan's, on the example and on a second input
function H.check(model, x, opts)
  opts = opts or {}
  model:eval()
  local plan = lt.infer.compile(model, x)
  local ref = opts.ref or function(v) return model(v) end
  for _, v in ipairs { x, opts.x2 or x } do
    local want = lt.no_grad(function() return (ref(v)) end)
    local got = plan(v)
    assert.same(want:shape(), got:shape())
    H.close(got, want, opts.tol)
  end
  return plan
end

-- the Lua bytes and lutra allocations of n calls of plan:run and plan(x), JIT off (its traces are allocations
-- of its own), collector stopped; a round that allocates nothing passes (up to three rounds, as infer_spec)
function H.allocations(plan, x)
  local inp, out = H.flat(x), {}
  local jit = rawget(_G, "jit")
  if jit then jit.off() end
  for _ = 1, 5 do plan:run(inp, out) plan(x) end
  local grew
  for _ = 1, 3 do
    collectgarbage()
    collectgarbage("stop")
    local stats = lt.memory_stats()
    local kb = collectgarbage("count")
    for _ = 1, 200 do plan:run(inp, out) plan(x) end
    local kb2 = collectgarbage("count")
    local stats2 = lt.memory_stats()
    collectgarbage("restart")
    grew = { lua_bytes = (kb2 - kb) * 1024, allocated = stats2.total_allocated - stats.total_allocated,
      system_allocs = stats2.system_allocs - stats.system_allocs }
    if grew.lua_bytes == 0 and grew.allocated == 0 and grew.system_allocs == 0 then break end
  end
  if jit then jit.on() end
  return grew
end
H.NONE = { lua_bytes = 0, allocated = 0, system_allocs = 0 }

local dir
local function tmpdir()
  if not dir then
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir))
  end
  return dir
end

local function has(exe)
  local r = os.execute("command -v " .. exe .. " >/dev/null 2>&1")
  return r == true or r == 0
end

-- the outputs of the exported file at path for each input row, under exe with no lutra on its paths
local function run_under(exe, path, inputs)
  local script = tmpdir() .. "/run.lua"
  local rows = {}
  for i, row in ipairs(inputs) do rows[i] = "{" .. table.concat(row, ",") .. "}" end
  local f = assert(io.open(script, "w"))
  f:write("package.path, package.cpath = '', ''\n",
    "assert(not pcall(require, 'lutra'), 'lutra must not be loadable here')\n",
    "local policy = dofile(", string.format("%q", path), ")\n",
    "local rows = {", table.concat(rows, ","), "}\n",
    "for _, row in ipairs(rows) do local y = policy(row) for i = 1, #y do io.write(string.format('%.9g ', y[i])) end",
    " io.write('\\n') end\n")
  f:close()
  local p = assert(io.popen("env -u LUA_PATH -u LUA_CPATH -u LUA_INIT " .. exe .. " " .. script .. " 2>&1"))
  local text = p:read("*a")
  p:close()
  local out = {}
  for line in text:gmatch("[^\n]+") do
    local r = {}
    for v in line:gmatch("%S+") do r[#r + 1] = tonumber(v) or error(exe .. ": " .. text) end
    out[#out + 1] = r
  end
  return out, text
end

-- exports model compiled on xs[1] and checks the file on every x of xs against model(x) under each Lua
function H.check_export(model, xs, name, ref)
  model:eval()
  ref = ref or function(v) return model(v) end
  local plan = lt.infer.compile(model, xs[1])
  local path = tmpdir() .. "/" .. name .. ".lua"
  assert.equal(path, lt.infer.export_lua(plan, path))
  local inputs, want = {}, {}
  for i, x in ipairs(xs) do
    inputs[i] = H.flat(x)
    want[i] = H.flat(lt.no_grad(function() return (ref(x)) end))
  end
  for _, exe in ipairs { "luajit", "lua5.1", "lua5.4" } do
    assert(has(exe), exe .. " is not installed (apt-get install " .. exe .. ")")
    local rows, text = run_under(exe, path, inputs)
    assert.equal(#xs, #rows, exe .. ": " .. text)
    for i = 1, #xs do
      assert.equal(#want[i], #rows[i])
      for k = 1, #want[i] do
        assert(math.abs(rows[i][k] - want[i][k]) <= 1e-5, string.format("%s %s: output %d: %.9g vs %.9g", exe, name, k,
          rows[i][k], want[i][k]))
      end
    end
  end
end

function H.error_of(f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error")
  return tostring(err)
end

return H
end
