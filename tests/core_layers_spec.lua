-- core_layers_spec: the files of core/src and core/bind call one another in one direction only (no file calls a file that
-- calls it back, directly or around a loop), as docs/architecture.md draws them. Read from the objects of
-- liblutra.a with nm: a member that uses a symbol another member defines calls that member.
local CONFIG = os.getenv("LUTRA_CONFIG") or "release"
local ARCHIVE = require("helpers.puc").build_dir .. "/bin/" .. CONFIG .. "/liblutra.a"

-- The files checked: core/src's and the binding's (core/bind); the generated sources, the embedded Lua files
-- and protoc-c's output, are not the core's.
local function outside_src(member)
  for _, dir in ipairs({ "core/src/", "core/bind/" }) do
    local f = io.open(dir .. member:gsub("%.o$", ".c"), "r")
    if f then
      f:close()
      return false
    end
  end
  return true
end

-- { [member] = { [other member] = { symbol, ... } } }: who calls whom, with the symbols.
local function call_graph(archive)
  local defined, used = {}, {}
  local p = assert(io.popen("nm -A " .. archive .. " 2>&1"))
  for line in p:lines() do
    -- "liblutra.a:tensor.o:0000000000000120 T lt_tensor_new" or "liblutra.a:tensor.o:                 U lt_alloc"
    local member, kind, sym = line:match("^[^:]+:([^:]+):%s*%x*%s+(%a)%s+([%w_.]+)$")
    if member and not outside_src(member) then
      if kind == "U" then
        used[member] = used[member] or {}
        used[member][#used[member] + 1] = sym
      elseif kind:match("[TDBRC]") then
        defined[sym] = defined[sym] or member
      end
    end
  end
  assert(p:close(), "nm failed on " .. archive)
  local graph = {}
  for member, syms in pairs(used) do
    graph[member] = graph[member] or {}
    for _, sym in ipairs(syms) do
      local to = defined[sym]
      if to and to ~= member then
        graph[member][to] = graph[member][to] or {}
        table.insert(graph[member][to], sym)
      end
    end
  end
  return graph
end

-- Tarjan's strongly connected components with more than one file: the loops.
local function loops(graph)
  local index, low, on, stack, out, n = {}, {}, {}, {}, {}, 0
  local function visit(v)
    n = n + 1
    index[v], low[v] = n, n
    stack[#stack + 1], on[v] = v, true
    for w in pairs(graph[v] or {}) do
      if not index[w] then
        visit(w)
        low[v] = math.min(low[v], low[w])
      elseif on[w] then
        low[v] = math.min(low[v], index[w])
      end
    end
    if low[v] == index[v] then
      local comp = {}
      repeat
        local w = table.remove(stack)
        on[w] = nil
        comp[#comp + 1] = w
      until w == v
      if #comp > 1 then table.sort(comp); out[#out + 1] = comp end
    end
  end
  for v in pairs(graph) do if not index[v] then visit(v) end end
  return out
end

local function describe_loop(graph, comp)
  local inside, lines = {}, { table.concat(comp, ", ") }
  for _, f in ipairs(comp) do inside[f] = true end
  for _, f in ipairs(comp) do
    for to, syms in pairs(graph[f] or {}) do
      if inside[to] then lines[#lines + 1] = ("  %s -> %s: %s"):format(f, to, table.concat(syms, ", ")) end
    end
  end
  return table.concat(lines, "\n")
end

describe("core layers", function()
  it("no two files of core/src or core/bind call each other, directly or around a loop", function()
    local graph = call_graph(ARCHIVE)
    assert.is_not_nil(graph["autograd.o"], "liblutra.a has no autograd.o: is " .. ARCHIVE .. " built?")
    local found = loops(graph)
    local text = {}
    for i, comp in ipairs(found) do text[i] = describe_loop(graph, comp) end
    assert.equals("", table.concat(text, "\n"))
  end)

  it("autograd calls no op: it accumulates with accumulate.c and checks with ops_check.c", function()
    local graph = call_graph(ARCHIVE)
    for to, syms in pairs(graph["autograd.o"]) do
      local an_op = to:match("^ops_") ~= nil and to ~= "ops_check.o"
      assert.is_false(an_op, "autograd.o calls " .. to .. ": " .. table.concat(syms, ", "))
    end
  end)

  it("finds a loop where there is one (the reading of nm's output works)", function()
    local graph = { ["a.o"] = { ["b.o"] = { "f" } }, ["b.o"] = { ["c.o"] = { "g" } }, ["c.o"] = { ["a.o"] = { "h" } },
      ["d.o"] = { ["a.o"] = { "f" } } }
    local found = loops(graph)
    assert.same({ { "a.o", "b.o", "c.o" } }, found)
    local real = call_graph(ARCHIVE)
    assert.is_not_nil(real["autograd.o"]["tensor.o"], "autograd.o uses tensor.o's functions")
  end)
end)
