-- lutra.cli.repl_complete — tab completion for the lutra REPL (core/cli/repl.c calls M.complete).
--
--   M.complete("string.fo")  --> { "string.format(" }
--   M.complete("x:sh")       --> { "x:shape(" }      (methods: functions only)
--   M.complete("pr")         --> { "print(" }        (globals and keywords)
--
-- Fields are collected from the value itself when it is a table, then along the metatable chain:
-- an `__index` table is walked (recursively); an `__index` function is never called, but the
-- metatable's `methods` or `__methods` table is used when present (lutra's tensor userdata).
-- Functions get "(" appended. Candidates are sorted and unique.

local M = {}

local KEYWORDS = {
  "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if", "in",
  "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
}

local getmetatable = debug and debug.getmetatable or getmetatable
local MAX_DEPTH = 8

local function is_name(k)
  return type(k) == "string" and k:match("^[%a_][%w_]*$") ~= nil
end

-- Adds to `out` (name -> value) the names of `t`'s fields that start with `prefix`.
local function add_table(out, t, prefix)
  for k, v in pairs(t) do
    if is_name(k) and out[k] == nil and k:sub(1, #prefix) == prefix then out[k] = v end
  end
end

local function add_fields(out, v, prefix, depth, seen)
  if depth > MAX_DEPTH or seen[v] then return end
  seen[v] = true
  if type(v) == "table" then add_table(out, v, prefix) end
  local ok, mt = pcall(getmetatable, v)
  if not ok or type(mt) ~= "table" then return end
  local index = rawget(mt, "__index")
  if type(index) == "table" then
    add_fields(out, index, prefix, depth + 1, seen)
  elseif type(index) == "function" then
    for _, name in ipairs({ "methods", "__methods" }) do
      local m = rawget(mt, name)
      if type(m) == "table" then add_fields(out, m, prefix, depth + 1, seen) end
    end
  end
end

-- Evaluates a path of names ("a.b.c") from _G with ordinary indexing (a lazy global such as the REPL's
-- `lt` loads on first use); nil when any step fails.
local function resolve(path)
  local v = _G
  for name in path:gmatch("[^.:]+") do
    if not is_name(name) then return nil end
    local ok, r = pcall(function() return v[name] end)
    if not ok or r == nil then return nil end
    v = r
  end
  return v
end

local function sorted(out, head, methods_only)
  local list = {}
  for k, v in pairs(out) do
    local f = type(v) == "function"
    if not methods_only or f then
      list[#list + 1] = head .. k .. (f and "(" or "")
    end
  end
  table.sort(list)
  return list
end

-- Returns the list of completions of `text` (each one replaces `text` whole).
function M.complete(text)
  text = text or ""
  local head, sep, prefix = text:match("^(.-)([.:])([%w_]*)$")
  if head == nil then
    if not text:match("^[%a_]?[%w_]*$") then return {} end
    local out = {}
    add_table(out, _G, text)
    local mt = getmetatable(_G)
    if type(mt) == "table" and type(rawget(mt, "__lazy")) == "table" then
      for k in pairs(mt.__lazy) do
        if out[k] == nil and k:sub(1, #text) == text then out[k] = true end
      end
    end
    local list = sorted(out, "", false)
    for _, kw in ipairs(KEYWORDS) do
      if kw:sub(1, #text) == text and out[kw] == nil then list[#list + 1] = kw end
    end
    table.sort(list)
    return list
  end
  if head == "" or head:find(":", 1, true) then return {} end -- "a:b.c" is not a value path
  local v = resolve(head)
  if v == nil then return {} end
  local out = {}
  add_fields(out, v, prefix, 0, {})
  return sorted(out, head .. sep, sep == ":")
end

return M
