-- lutra.plot.read — reading metrics files for lutra.plot: a CSVLogger's metrics.csv (RFC 4180 CSV with a header
-- row) or a JSONLinesLogger's metrics.jsonl (one JSON object a line, decoded by Jansson through lt._io), as
-- { path, x_name, metrics = { {name, xs, ys}, ... } }. Errors start with "lutra.plot: " and name the file.
local M = {}

local fmt, concat = string.format, table.concat

local PREFIX = "lutra.plot: "
M.PREFIX = PREFIX

local function fail(msg, ...)
  error(PREFIX .. fmt(msg, ...), 0)
end

-- CSV (RFC 4180: quoted fields, doubled quotes, CRLF or LF). Returns a list of rows (lists of strings).
local function parse_csv(text, path)
  local rows, row = {}, {}
  local i, n = 1, #text
  if text:sub(1, 3) == "\239\187\191" then i = 4 end -- UTF-8 byte order mark
  local function finish_row()
    if not (#row == 1 and row[1] == "") then rows[#rows + 1] = row end -- skip blank lines
    row = {}
  end
  while i <= n do
    local field
    if text:sub(i, i) == '"' then
      local parts = {}
      i = i + 1
      while true do
        local j = text:find('"', i, true)
        if not j then fail("%s: unterminated quoted field on row %d", path, #rows + 1) end
        parts[#parts + 1] = text:sub(i, j - 1)
        if text:sub(j + 1, j + 1) == '"' then
          parts[#parts + 1] = '"'
          i = j + 2
        else
          i = j + 1
          break
        end
      end
      local j = text:find("[,\r\n]", i) or n + 1 -- tolerate junk after the closing quote
      parts[#parts + 1] = text:sub(i, j - 1)
      field, i = concat(parts), j
    else
      local j = text:find("[,\r\n]", i) or n + 1
      field, i = text:sub(i, j - 1), j
    end
    row[#row + 1] = field
    local d = text:sub(i, i)
    if d == "," then
      i = i + 1
      if i > n then row[#row + 1] = "" end
    else
      if d == "\r" and text:sub(i + 1, i + 1) == "\n" then i = i + 2 else i = i + 1 end
      finish_row()
    end
  end
  if #row > 0 then finish_row() end
  return rows
end

local function number(cell)
  if cell == nil or cell == "" then return nil end
  local v = tonumber(cell)
  if v == nil or v ~= v or v == math.huge or v == -math.huge then return nil end
  return v
end

-- JSON lines: each non-blank line an object; returns the column names (in order of first appearance, a
-- line's new keys sorted) and the rows (name -> cell, numbers or strings).
local function parse_jsonl(text, path)
  local decode = require("lutra")._io.json_decode
  local names, seen, rows = {}, {}, {}
  local n = 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if line:match("%S") then
      local v, msg = decode(line)
      if type(v) ~= "table" or (v[1] ~= nil) then
        fail("%s:%d: not a JSON object (%s)", path, n, v == nil and tostring(msg) or "got " .. line:sub(1, 40))
      end
      local new = {}
      for k in pairs(v) do
        if type(k) == "string" and not seen[k] then seen[k] = true; new[#new + 1] = k end
      end
      table.sort(new)
      for _, k in ipairs(new) do names[#names + 1] = k end
      rows[#rows + 1] = v
    end
  end
  return names, rows
end

local function is_jsonl(path, text)
  if path:match("%.jsonl?$") then return true end
  if path:match("%.csv$") then return false end
  return text:match("^%s*{") ~= nil
end

-- a JSON cell: a number, or the strings JSONLinesLogger writes for NaN and infinities (skipped)
local function json_number(v)
  if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then return nil end
  return v
end

--- Reads a metrics file (CSV or JSON lines): { path, x_name, metrics = { {name, xs, ys}, ... } } (metrics in
--- column order). opts.x: "step" or "epoch" (default: step, else epoch, else the row number).
function M.read(path, opts)
  opts = opts or {}
  if opts.x ~= nil and opts.x ~= "step" and opts.x ~= "epoch" then
    fail("x must be 'step' or 'epoch', got '%s'", tostring(opts.x))
  end
  local f, err = io.open(path, "rb")
  if not f then fail("cannot open %s: %s", path, (err or "?"):gsub("^[^:]*: ", "")) end
  local text = f:read("*a")
  f:close()
  if text == nil then fail("cannot read %s", path) end
  local names, cell
  local rows = {}
  if is_jsonl(path, text) then
    names, rows = parse_jsonl(text, path)
    if #rows == 0 then fail("%s: no JSON line (the file is empty)", path) end
    cell = function(r, name) return json_number(rows[r][name]) end
  else
    local csv = parse_csv(text, path)
    local header = csv[1]
    if header == nil or (#header == 1 and header[1]:match("^%s*$")) then
      fail("%s: no header row (the file is empty)", path)
    end
    names = {}
    local col = {}
    for j, name in ipairs(header) do
      name = name:match("^%s*(.-)%s*$")
      if col[name] == nil and name ~= "" then col[name] = j; names[#names + 1] = name end
    end
    if col.step == nil and col.epoch == nil and number(header[1]) ~= nil then
      fail("%s: no header row (the first row holds numbers: %s)", path, concat(header, ","))
    end
    for r = 2, #csv do rows[r - 1] = csv[r] end
    cell = function(r, name) return number(rows[r][col[name]]) end
  end
  local has = {}
  for _, name in ipairs(names) do has[name] = true end
  local x_name = opts.x or (has.step and "step") or (has.epoch and "epoch") or "row"
  if opts.x and not has[opts.x] then
    fail("%s: no '%s' column for x (columns: %s)", path, opts.x, concat(names, ", "))
  end

  local metrics = {}
  for _, name in ipairs(names) do
    if name ~= "step" and name ~= "epoch" then
      local xs, ys, runs = {}, {}, {}
      for r = 1, #rows do
        local y = cell(r, name)
        local x
        if x_name == "row" then x = r else x = cell(r, x_name) end
        if y ~= nil and x ~= nil then
          local k = #xs
          if k > 0 and xs[k] == x then -- the same x again: the mean of the run of values
            runs[k] = runs[k] + 1
            ys[k] = ys[k] + (y - ys[k]) / runs[k]
          else
            xs[k + 1], ys[k + 1], runs[k + 1] = x, y, 1
          end
        end
      end
      if #ys > 0 then metrics[#metrics + 1] = { name = name, xs = xs, ys = ys } end
    end
  end
  if #metrics == 0 then
    fail("%s: no numeric metric column (columns: %s; %d data row%s)", path, concat(names, ", "), #rows,
      #rows == 1 and "" or "s")
  end
  return { path = path, x_name = x_name, metrics = metrics }
end

M.fail = fail

return M
