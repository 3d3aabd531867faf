-- lutra.util — small helpers lutra's Lua modules share (internal: not part of the user API).
--
--   util.check_options(what, opts, spec[, level]) -> opts (or {} for nil)   the one option checker
--   util.shape_str(t) -> "[2 x 3]"                          a tensor's shape (or a list of sizes) for messages
--   util.sorted_keys(t) -> {k1, k2, ...}                                    a table's keys, sorted
--   util.closest(name, names) -> the name in names nearest to name (a typo's fix), or nil
local M = {}

local fmt = string.format

-- (numbers first, in order; then strings, in order; other keys by their text)
function M.sorted_keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks, function(a, b)
    local ta, tb = type(a), type(b)
    if ta ~= tb then
      if ta == "number" or tb == "number" then return ta == "number" end
      return ta < tb
    end
    if ta == "number" or ta == "string" then return a < b end
    return tostring(a) < tostring(b)
  end)
  return ks
end

-- Levenshtein distance between two strings
local function edit_distance(a, b)
  local prev = {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur = { [0] = i }
    local ca = a:byte(i)
    for j = 1, #b do
      local cost = ca == b:byte(j) and 0 or 1
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
    end
    prev = cur
  end
  return prev[#b]
end

--- The name of `names` nearest to `name` by edit distance, when it is within a third of the name's length
--- (at least 2 edits), else nil: the "did you mean" of error messages.
function M.closest(name, names)
  local best, bestd = nil, math.huge
  for _, n in ipairs(names) do
    local d = edit_distance(name, n)
    if d < bestd or (d == bestd and n < best) then best, bestd = n, d end
  end
  if best and bestd <= math.max(2, math.floor(#name / 3)) and bestd < #name then return best end
  return nil
end

function M.shape_str(t)
  local s = type(t) == "table" and t or t:shape()
  local parts = {}
  for i = 1, #s do parts[i] = tostring(s[i]) end
  return "[" .. table.concat(parts, " x ") .. "]"
end

local function article(word) return word:match("^[aeiou]") and "an " .. word or "a " .. word end

local function is_type(v, ty, nan_ok)
  if ty == "any" then return true end
  if ty == "integer" then return type(v) == "number" and v == math.floor(v) end
  if ty == "number" then return type(v) == "number" and (v == v or nan_ok) end -- NaN: a mistake, unless the
                                                                                 -- caller's range check says so
  if ty == "tensor" then return require("lutra").is_tensor(v) end
  return type(v) == ty
end

-- The value check of one option: nil when v is fine, else what is wrong ("must be ..., got ...").
local function value_error(want, v, nan_ok)
  if want == true then return nil end
  if type(want) == "function" then return want(v) end
  local list = want
  if type(want) == "string" then
    list = {}
    for ty in want:gmatch("[^|]+") do list[#list + 1] = ty end
  end
  local numeric = false
  for _, ty in ipairs(list) do
    if is_type(v, ty, nan_ok) then return nil end
    numeric = numeric or ty == "number" or ty == "integer"
  end
  local names = {}
  for i, ty in ipairs(list) do names[i] = i == 1 and article(ty) or ty end
  -- a number where a number is wanted: its value is what is wrong (nan, 1.5)
  local got = numeric and type(v) == "number" and tostring(v) or type(v)
  return fmt("must be %s, got %s", table.concat(names, " or "), got)
end

--- Checks a table of named options: nil gives {}; a non-table, an unknown name or a bad value is an error
--- naming `what` and the option. spec maps each known name to what its value must be: a type name ("number",
--- "integer", "boolean", "string", "table", "function", "tensor", "any"), alternatives ("number|table" or
--- {"number", "table"}), true (anything), or a function(value) returning what is wrong (an error text
--- completing "option 'k' ...") or nil. level: as error's, counted from the caller of check_options' caller
--- (default 2: the caller of the function that checks its options). nan_ok: NaN passes as a "number" (the
--- caller's own range checks name what is wrong with it).
function M.check_options(what, opts, spec, level, nan_ok)
  level = (level or 2) + 1
  if opts == nil then return {} end
  if type(opts) ~= "table" then error(fmt("%s: options must be a table, got %s", what, type(opts)), level) end
  for k in pairs(opts) do
    if spec[k] == nil then
      error(fmt("%s: unknown option '%s' (known options: %s)", what, tostring(k),
        table.concat(M.sorted_keys(spec), ", ")), level)
    end
  end
  for k, v in pairs(opts) do
    local msg = value_error(spec[k], v, nan_ok)
    if msg then error(fmt("%s: option '%s' %s", what, k, msg), level) end
  end
  return opts
end

return M
