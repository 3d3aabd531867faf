-- lutra.help — lt.help(name | object): prints the reference entry of a name from docs/reference, which the build
-- embeds (core/bind/embed_lua.lua, core/bind/l_docs.c), so help works wherever lutra runs, with no docs on disk.
--
--   lt.help()                    -- what help knows: the reference's pages (topics) and how to ask
--   lt.help("nn.Linear")         -- the entry of lt.nn.Linear ("lt." may be left out)
--   lt.help(lt.nn.Linear)        -- the same from the object; a layer, optimizer, logger ... gives its class's
--   lt.help("Tensor:view")       -- a tensor method (also "x:view", "view", x.view)
--   lt.help("fit")               -- every entry whose last name part is "fit" (trainer:fit)
--   lt.help("callbacks")         -- a topic: the page's title and the names it documents
--   help, help(x)                -- the same in the REPL (core/cli/repl.c)
--
-- An entry is a run of headings that name something (### `lt.nn.ReLU()`, ### `lt.nn.GELU()`, ... as the docs
-- group them) and the text below them up to the next heading. A name with no entry prints
-- "lt.help: no entry for 'X'; did you mean 'Y'?".
local core = require "lutra.core"

local M = {}

local fmt, concat = string.format, table.concat

-- ---- the index of the reference -------------------------------------------------------------------------

local index -- { entries = {name -> {entry...}}, by_last = {last part -> {name...}}, names = sorted list,
--               pages = {{file, stem, title, names}} }

local function trim_blank(lines)
  while #lines > 0 and not lines[#lines]:match("%S") do lines[#lines] = nil end
  while #lines > 0 and not lines[1]:match("%S") do table.remove(lines, 1) end
  return lines
end

local function has_text(lines)
  for _, l in ipairs(lines) do if l:match("%S") then return true end end
  return false
end

local function parse_page(file, text, idx)
  local page = { file = file, stem = file:gsub("%.md$", ""), names = {}, seen = {} }
  local entry, in_code = nil, false
  local function close()
    if entry then trim_blank(entry.body) end
    entry = nil
  end
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    if line:match("^```") then in_code = not in_code end
    local hashes, title = nil, nil
    if not in_code then hashes, title = line:match("^(#+)%s+(.-)%s*$") end
    if hashes then
      local name = title:match("^`([^`({%s]+)")
      if #hashes == 1 and not page.title then page.title = title:gsub("`", "") end
      if name then
        if entry == nil or has_text(entry.body) then -- (headings in a row share the text below them)
          close()
          entry = { file = file, headings = {}, body = {} }
        end
        entry.headings[#entry.headings + 1] = title:gsub("`", "")
        local list = idx.entries[name]
        if not list then
          list = {}
          idx.entries[name] = list
          local last = name:match("[.:]([^.:]+)$") or name
          idx.by_last[last] = idx.by_last[last] or {}
          local l = idx.by_last[last]
          l[#l + 1] = name
        end
        if list[#list] ~= entry then list[#list + 1] = entry end
        if not page.seen[name] then
          page.seen[name] = true
          page.names[#page.names + 1] = name
        end
      else
        close()
      end
    elseif entry then
      entry.body[#entry.body + 1] = line
    end
  end
  close()
  page.title = page.title or page.stem
  return page
end

local function build()
  if index then return index end
  local idx = { entries = {}, by_last = {}, pages = {} }
  local pages = core._doc_pages()
  local files = {}
  for file in pairs(pages) do files[#files + 1] = file end
  table.sort(files)
  for _, file in ipairs(files) do idx.pages[#idx.pages + 1] = parse_page(file, pages[file], idx) end
  idx.names = {}
  for name in pairs(idx.entries) do idx.names[#idx.names + 1] = name end
  table.sort(idx.names)
  index = idx
  return idx
end

-- ---- names of objects ------------------------------------------------------------------------------------

-- The public API as the docs spell it: "lt.zeros", "lt.nn.Linear", "x:view", "trainer:fit", "m:forward",
-- "loop:run". Namespaces are walked (their lazy names loaded, as a user's access would); the classes users
-- call methods on are walked with their prefix.
local NAMESPACES = { "lt", "lt.nn", "lt.F", "lt.optim", "lt.optim.lr_scheduler", "lt.data", "lt.callbacks",
  "lt.loggers", "lt.nn.init", "lt.nn.utils", "lt.plot", "lt.distributed", "lt.metrics", "lt.utils",
  "lt.vision", "lt.vision.io", "lt.vision.transforms", "lt.vision.transforms.F", "lt.vision.datasets" }
local CLASSES = { ["lt.Trainer"] = "trainer:", ["lt.Loop"] = "loop:", ["lt.nn.Module"] = "m:" }
M.NAMESPACES, M.CLASSES = NAMESPACES, CLASSES

-- the string keys of the tables a strict namespace's __index closes over (lutra.names' lazy lists)
local function lazy_keys(t)
  local keys = {}
  local mt = getmetatable(t)
  if type(mt) == "table" and type(rawget(mt, "__lutra_lazy")) == "table" then
    for k in pairs(mt.__lutra_lazy) do if type(k) == "string" then keys[#keys + 1] = k end end
  end
  if type(mt) == "table" and type(mt.__index) == "function" then
    local i = 1
    while true do
      local name, v = debug.getupvalue(mt.__index, i)
      if not name then break end
      if type(v) == "table" and name ~= "_ENV" then
        for k in pairs(v) do if type(k) == "string" then keys[#keys + 1] = k end end
      end
      i = i + 1
    end
  end
  return keys
end

local function public_keys(t)
  local set = {}
  for k in pairs(t) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" then set[k] = true end
  end
  for _, k in ipairs(lazy_keys(t)) do
    if k:sub(1, 1) ~= "_" then set[k] = true end
  end
  local list = {}
  for k in pairs(set) do list[#list + 1] = k end
  table.sort(list)
  return list
end

--- Every public name of lutra (sorted), a map value -> name, and the names that failed to load (with why).
function M.public_api()
  local lt = require "lutra"
  local names, value_of, errors = {}, {}, {}
  local is_ns = {}
  for _, ns in ipairs(NAMESPACES) do is_ns[ns] = true end
  -- load the namespaces whose loaders are not table-driven, as a user's access does
  for _, full in ipairs(NAMESPACES) do
    local t = lt
    for part in full:gmatch("[^.]+") do
      if part ~= "lt" and type(t) == "table" then
        local ok, v = pcall(function() return t[part] end)
        t = ok and v or nil
      end
    end
  end
  local function add(name, v)
    names[#names + 1] = name
    if v ~= nil and (type(v) == "function" or type(v) == "table") and value_of[v] == nil then value_of[v] = name end
  end
  local function walk(prefix, t)
    for _, k in ipairs(public_keys(t)) do
      local full = prefix .. "." .. k
      local ok, v = pcall(function() return t[k] end)
      if not ok then
        errors[#errors + 1] = full .. " does not load: " .. tostring(v)
        add(full, nil)
      else
        add(full, v)
        if type(v) == "table" and is_ns[full] then
          walk(full, v)
        elseif type(v) == "table" and CLASSES[full] then
          for _, m in ipairs(public_keys(v)) do
            if type(v[m]) == "function" then add(CLASSES[full] .. m, v[m]) end
          end
        end
      end
    end
  end
  value_of[lt] = "lt"
  walk("lt", lt)
  for _, m in ipairs(public_keys(lt.Tensor.methods)) do add("x:" .. m, lt.Tensor.methods[m]) end
  table.sort(names)
  return names, value_of, errors
end

local value_names -- value -> name, built on the first lookup of an object

-- The documented name of an object: a public function, class or namespace; an instance's class (through its
-- metatables, or the class name it prints as); a tensor's lt.Tensor.
local function object_name(obj)
  local lt = require "lutra"
  if lt.is_tensor(obj) then return "lt.Tensor" end
  if not value_names then value_names = select(2, M.public_api()) end
  local function documented(n) -- a class table registered as X_class: the entry of its constructor X
    local ctor = n:match("^(.-)_class$")
    if ctor and build().entries[ctor] then return ctor end
    return n
  end
  if value_names[obj] then return documented(value_names[obj]) end
  if type(obj) ~= "table" and type(obj) ~= "userdata" then return nil end
  -- the metatable chain: the class, then its parents
  local seen, t = {}, obj
  for _ = 1, 16 do
    local mt = getmetatable(t)
    if type(mt) ~= "table" or seen[mt] then break end
    seen[mt] = true
    if value_names[mt] then return documented(value_names[mt]) end
    local ix = rawget(mt, "__index")
    if type(ix) == "table" and value_names[ix] then return documented(value_names[ix]) end
    t = mt
  end
  -- the class name an instance carries or prints as: SGD, StepLR, CSVLogger(...), EarlyStopping()
  local mt = getmetatable(obj)
  local candidates = {}
  if type(mt) == "table" then
    candidates[1], candidates[2] = rawget(mt, "name"), rawget(mt, "__name")
  end
  local ok, s = pcall(tostring, obj)
  if ok and type(s) == "string" then candidates[#candidates + 1] = s:match("^([%a_][%w_]*)[%s(]") end
  local idx = build()
  for i = 1, 3 do
    local cls = candidates[i]
    if type(cls) == "string" then
      for _, n in ipairs(idx.by_last[(cls:gsub("^lutra%.", ""))] or {}) do
        if n:match("^lt%.") then return n end
      end
    end
  end
  if lt.nn.is_module(obj) then return "lt.nn.Module" end
  return nil
end

-- ---- lookup ------------------------------------------------------------------------------------------------

-- what a name may be written as, in the docs' spelling
local METHOD_PREFIX = {
  Tensor = "x:", ["lt.Tensor"] = "x:", tensor = "x:", x = "x:",
  Trainer = "trainer:", ["lt.Trainer"] = "trainer:", trainer = "trainer:",
  Module = "m:", ["nn.Module"] = "m:", ["lt.nn.Module"] = "m:", m = "m:", module = "m:",
  Loop = "loop:", ["lt.Loop"] = "loop:", loop = "loop:",
  model = "model:", LightningModule = "model:",
  cb = "cb:", Callback = "cb:", ["callbacks.Callback"] = "cb:", ["lt.callbacks.Callback"] = "cb:",
}

local function find_page(idx, q)
  local stem = q:gsub("%.md$", "")
  for _, p in ipairs(idx.pages) do
    if p.stem == stem then return p end
  end
  return nil
end

-- The names q stands for (a list, best first), or a page, or nothing.
local function resolve(q)
  local idx = build()
  if idx.entries[q] then return { q } end
  local page = find_page(idx, q)
  if page then return nil, page end
  if idx.entries["lt." .. q] then return { "lt." .. q } end
  local prefix, meth = q:match("^(.+)[:.]([%w_]+)$")
  if prefix and METHOD_PREFIX[prefix] and idx.entries[METHOD_PREFIX[prefix] .. meth] then
    return { METHOD_PREFIX[prefix] .. meth }
  end
  -- a name with its namespace shortened ("lr_scheduler.StepLR"), or a bare last part ("Linear", "fit")
  local last = q:match("[.:]([^.:]+)$") or q
  local hits = {}
  for _, n in ipairs(idx.by_last[last] or {}) do
    local tail = n:sub(-#q - 1)
    if n:sub(-#q) == q and (#n == #q or tail:sub(1, 1) == "." or tail:sub(1, 1) == ":") then hits[#hits + 1] = n end
  end
  if #hits > 0 then
    table.sort(hits, function(a, b)
      local la, lb = a:match("^lt%.") and 0 or 1, b:match("^lt%.") and 0 or 1
      if la ~= lb then return la < lb end
      return a < b
    end)
    return hits
  end
  return nil
end

-- edit distance with transpositions (optimal string alignment: "veiw" is 1 from "view"), stopping early past
-- `limit`
local function distance(a, b, limit)
  if math.abs(#a - #b) > limit then return limit + 1 end
  local before, prev = nil, {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur, best = { [0] = i }, i
    local ai = a:byte(i)
    for j = 1, #b do
      local bj = b:byte(j)
      local c = prev[j - 1] + (ai == bj and 0 or 1)
      if prev[j] + 1 < c then c = prev[j] + 1 end
      if cur[j - 1] + 1 < c then c = cur[j - 1] + 1 end
      if before and j > 1 and ai == b:byte(j - 1) and a:byte(i - 1) == bj and before[j - 2] + 1 < c then
        c = before[j - 2] + 1
      end
      cur[j] = c
      if c < best then best = c end
    end
    if best > limit then return limit + 1 end
    before, prev = prev, cur
  end
  return prev[#b]
end

--- The documented name nearest to q (compared as written, without "lt.", and by its last part), or nil.
function M.nearest(q)
  local idx = build()
  local prefix, meth = q:match("^(.+)[:.]([%w_]+)$")
  if prefix and METHOD_PREFIX[prefix] then q = METHOD_PREFIX[prefix] .. meth end -- "Tensor:veiw" -> "x:veiw"
  local limit = math.max(2, math.floor(#q / 3))
  local best, best_d = nil, limit + 1
  local ql = q:lower()
  local function try(name, form)
    local d = distance(ql, form:lower(), best_d - 1 < limit and best_d - 1 or limit)
    if d < best_d then best, best_d = name, d end
  end
  for _, name in ipairs(idx.names) do
    try(name, name)
    local short = name:gsub("^lt%.", "")
    if short ~= name then try(name, short) end
    local last = name:match("[.:]([^.:]+)$")
    if last and not q:find("[.:]") then try(name, last) end
  end
  for _, p in ipairs(idx.pages) do try(p.stem, p.stem) end
  return best
end

-- ---- text ----------------------------------------------------------------------------------------------

local function entry_text(e)
  local out = {}
  for _, h in ipairs(e.headings) do out[#out + 1] = h end
  if #e.body > 0 then
    out[#out + 1] = ""
    for _, l in ipairs(e.body) do out[#out + 1] = l end
  end
  out[#out + 1] = ""
  out[#out + 1] = "(docs/reference/" .. e.file .. ")"
  return concat(out, "\n")
end

local function page_text(p)
  local out = { p.title, "", "Entries (lt.help(name) prints one):" }
  local line = " "
  for _, n in ipairs(p.names) do
    if #line + #n + 1 > 100 then out[#out + 1] = line; line = " " end
    line = line .. " " .. n
  end
  if line ~= " " then out[#out + 1] = line end
  if #p.names == 0 then out[#out] = "(no entries: a guide page)" end
  out[#out + 1] = ""
  out[#out + 1] = "(docs/reference/" .. p.file .. ")"
  return concat(out, "\n")
end

local function overview_text()
  local idx = build()
  local out = {
    "lt.help(name_or_object) prints the reference entry of a name (docs/reference, embedded in lutra):",
    "  lt.help(\"nn.Linear\")  lt.help(lt.nn.Linear)  lt.help(model.net)  lt.help(\"Tensor:view\")",
    "  lt.help(\"fit\")  lt.help(\"Trainer\")  lt.help(\"callbacks\") (a topic: the names it documents)",
    "In the REPL: help, help(x).",
    "",
    "Topics:",
  }
  local w = 0
  for _, p in ipairs(idx.pages) do if #p.stem > w then w = #p.stem end end
  for _, p in ipairs(idx.pages) do
    local line = fmt("  %-" .. w .. "s  %s", p.stem, p.title)
    if #line > 100 then line = line:sub(1, 99):gsub("[%s,:;]*[^%s,:;]*$", "") .. " ..." end -- whole words
    out[#out + 1] = line
  end
  return concat(out, "\n")
end

--- The help text for q (a name, a topic, an object, or nil for the overview); on no entry: nil and the
--- message ("no entry for 'X'; did you mean 'Y'?").
function M.text(q)
  if q == nil then return overview_text() end
  local name
  if type(q) == "string" then
    name = q:match("^%s*(.-)%s*$")
    if name == "" then return overview_text() end
  else
    name = object_name(q)
    if name == nil then
      local lt = require "lutra"
      local what = lt.is_tensor(q) and "tensor" or type(q)
      local ok, s = pcall(tostring, q)
      return nil, fmt("no entry for this %s (%s): it is not one of lutra's public names, classes or their " ..
        "instances; lt.help() lists the topics", what, ok and tostring(s):sub(1, 60) or "?")
    end
  end
  local names, page = resolve(name)
  if page then return page_text(page) end
  if not names then
    local near = M.nearest(name)
    if near then return nil, fmt("no entry for '%s'; did you mean '%s'?", name, near) end
    return nil, fmt("no entry for '%s'; lt.help() lists the topics", name)
  end
  local idx = build()
  local out, shown = {}, {}
  for _, n in ipairs(names) do
    for _, e in ipairs(idx.entries[n]) do
      if not shown[e] then
        shown[e] = true
        out[#out + 1] = entry_text(e)
      end
    end
  end
  return concat(out, "\n\n")
end

--- lt.help(name_or_object): prints the entry (or the overview, a topic's names, or "no entry for ...").
function M.help(q)
  local text, err = M.text(q)
  io.stdout:write((text or ("lt.help: " .. err)), "\n")
  io.stdout:flush()
end

--- The REPL's `help`: prints the overview when shown as a value (`help`), the entry when called (`help(x)`).
M.repl_help = setmetatable({}, {
  __call = function(_, ...) M.help(...) end,
  __tostring = function() return overview_text() end,
})

return M
