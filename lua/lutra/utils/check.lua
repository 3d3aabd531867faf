-- lutra.utils.check — small helpers lutra's Lua modules share (internal: not part of the user API).
--
--   util.check_options(what, opts, spec[, level]) -> opts (or {} for nil)   the one option checker
--   util.check_arg(what, n, v, want[, level]) -> v                           the one positional-argument checker
--   util.check_dim(what, d, ndim[, level]) -> d (1..ndim)         a 1-based dim (negative from the end), checked
--   util.tensor_function(name, method) -> f                 lt.name(x, ...) of a Lua tensor method, x checked
--   util.call_as(what, f, ...) -> f(...)          f's error named by `what` (a composite op's inner op failed)
--   util.named(what, f) -> g                       g(...) is util.call_as(what, f, ...): a composed op, named
--   util.shape_str(t) -> "[2 x 3]"                          a tensor's shape (or a list of sizes) for messages
--   util.sorted_keys(t) -> {k1, k2, ...}                                    a table's keys, sorted
--   util.closest(name, names) -> the name in names nearest to name (a typo's fix), or nil
local M = {}

local fmt = string.format
local core = require "lutra.core"

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
  if ty == "tensor" then return core.is_tensor(v) end
  return type(v) == ty
end

-- What is wrong with v against want (a spec as check_options' values): nil when v is fine; else the list of
-- types wanted and what was got (its type, or its value for a number where a number is wanted: nan, 1.5);
-- or, for a function spec, its own text as the first result.
local function mismatch(want, v, nan_ok)
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
  return list, numeric and type(v) == "number" and tostring(v) or type(v)
end

-- The value check of one option: nil when v is fine, else what is wrong ("must be ..., got ...").
local function value_error(want, v, nan_ok)
  local list, got = mismatch(want, v, nan_ok)
  if type(list) ~= "table" then return list end
  local names = {}
  for i, ty in ipairs(list) do names[i] = i == 1 and article(ty) or ty end
  return fmt("must be %s, got %s", table.concat(names, " or "), got)
end

--- Checks positional argument n of the function `what`: v must match want (a type name, alternatives
--- "tensor|number", or a function(v) returning what is wrong, as check_options' values). On a mismatch raises the
--- binding's message for the same mistake, "bad argument #1 to 'all' (tensor expected, got number)", at the
--- caller of the checking function (level as check_options'). Returns v.
function M.check_arg(what, n, v, want, level)
  local list, got = mismatch(want, v)
  if list == nil then return v end
  local msg = type(list) == "table" and fmt("%s expected, got %s", table.concat(list, " or "), got) or list
  error(fmt("bad argument #%d to '%s' (%s)", n, what, msg), (level or 2) + 1)
end

--- Checks a dim d (1-based; negative counts from the end) of a tensor with ndim dims (a 0-dim tensor has the
--- one dim 1 or -1, as the binding's l_checkdim says); returns it as 1..ndim. The same messages as the binding.
function M.check_dim(what, d, ndim, level)
  level = (level or 2) + 1
  local n = math.max(ndim, 1)
  if type(d) ~= "number" then error(fmt("%s: dim must be a number, got %s", what, type(d)), level) end
  if d ~= math.floor(d) then error(fmt("%s: dim must be an integer, got %s", what, tostring(d)), level) end
  if d >= 1 and d <= n then return d end
  if d < 0 and -d <= n then return n + d + 1 end
  if ndim == 0 then
    error(fmt("%s: dim %s out of range for a 0-dimensional tensor (expected 1 or -1)", what, tostring(d)), level)
  end
  error(fmt("%s: dim %s out of range for a %d-dimensional tensor (expected 1..%d, or -%d..-1)", what, tostring(d),
    ndim, n, n), level)
end

--- The dims a reduction over several dims is given: nil (all of x's), a number or a list; returned as a sorted
--- list of distinct 1-based dims (a dim listed twice is an error). Errors point at the caller of the function
--- that called this one, as check_dim's at its default level.
function M.dim_list(fname, x, dim)
  local ds = {}
  if dim == nil then
    for d = 1, x:dim() do ds[d] = d end
    return ds
  end
  local list = type(dim) == "table" and dim or { dim }
  local seen = {}
  for i, d in ipairs(list) do
    ds[i] = M.check_dim(fname, d, x:dim(), 4)
    if seen[ds[i]] then error(fmt("%s: dim %d is listed twice", fname, ds[i]), 3) end
    seen[ds[i]] = true
  end
  table.sort(ds)
  return ds
end

--- The lt.name(x, ...) form of a tensor method written in Lua: argument 1 is checked to be a tensor (as a
--- method's self always is, so the method itself need not check), then the method is called.
function M.tensor_function(name, method)
  return function(x, ...)
    if not core.is_tensor(x) then M.check_arg(name, 1, x, "tensor") end
    return method(x, ...)
  end
end

-- (a message that already names `what` first, "what: ..." or "bad argument #2 to 'what' (...)", is kept)
local function call_as_result(what, level, ok, ...)
  if ok then return ... end
  local msg = tostring((...)):gsub("^[^\n]-:%d+: ", "")
  if msg:sub(1, #what + 1) == what .. ":" or msg:match("^bad argument #%d+ to '(.-)'") == what then
    error(msg, level)
  end
  error(what .. ": " .. msg, level)
end

--- Calls f(...) and returns what it returns; an error it raises is raised again at the caller of call_as' caller
--- with `what` first ("tile: expand: size 1 is too large, got 1e+300"), unless it already starts so. For the
--- ops composed in Lua of other ops: the inner op's message says what is wrong, `what` says which call it was.
function M.call_as(what, f, ...) return call_as_result(what, 3, pcall(f, ...)) end

--- f as the public function `what`: every error it raises, its own or an inner op's, starts with `what`
--- (call_as). The one way the Lua-composed names (lua/lutra/tensor/products.lua, ...) are registered.
function M.named(what, f)
  return function(...) return call_as_result(what, 2, pcall(f, ...)) end
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

-- A trailing options table: a plain table (no metatable: not a module, optimizer or class) without number keys
-- ({5, 5} and {nil, 3} are tuple values; {} and {bias = false} are options).
local function is_options_table(v)
  if type(v) ~= "table" or getmetatable(v) ~= nil then return false end
  for k in pairs(v) do
    if type(k) == "number" then return false end
  end
  return true
end
M.is_options_table = is_options_table

--- PyTorch's calling convention, for every constructor: `what(a1, a2, ..., [options])`. names: PyTorch's
--- positional names in order. The leading values of ... fill names[i]; a trailing options table gives the rest
--- by name. Returns one table of everything given (a copy), unchecked: the caller checks it with check_options.
--- Errors (at level, as check_options'): more values than names, a name given both ways, a non-table in the
--- options' place.
function M.merge_positional(what, names, level, ...)
  level = (level or 2) + 1
  local n = select("#", ...)
  while n > 0 and select(n, ...) == nil do n = n - 1 end -- f(a, nil) is f(a)
  local opts = {}
  if n > 0 and is_options_table((select(n, ...))) then
    opts = select(n, ...)
    n = n - 1
  end
  if n > #names then
    local last = select(n, ...)
    if n == #names + 1 and type(last) ~= "table" then
      error(fmt("%s: options must be a table, got %s (it takes at most %d positional arguments: %s)", what,
        type(last), #names, table.concat(names, ", ")), level)
    end
    error(fmt("%s: takes at most %d positional arguments (%s), got %d", what, #names, table.concat(names, ", "), n),
      level)
  end
  local out = {}
  for k, v in pairs(opts) do out[k] = v end
  for i = 1, n do
    local v = select(i, ...)
    if v ~= nil then
      if opts[names[i]] ~= nil then
        error(fmt("%s: option '%s' given both as argument #%d and in the options table", what, names[i], i), level)
      end
      out[names[i]] = v
    end
  end
  return out
end

--- merge_positional, then check_options(spec): the one way constructors read their arguments.
function M.arguments(what, names, spec, level, ...)
  level = (level or 2) + 1
  local out = M.merge_positional(what, names, level, ...)
  return M.check_options(what, out, spec, level, true)
end

return M
