-- lutra.plot — learning curves from a CSVLogger's metrics.csv, drawn as a self-contained SVG file.
--
--   local plot = require "lutra.plot"
--   plot.svg("lutra_logs/version_0/metrics.csv")                -- writes lutra_logs/version_0/curves.svg
--   plot.svg("metrics.csv", "out.svg")                          -- returns the path written
--   $ lutra plot lutra_logs/version_0/metrics.csv [-o out.svg]  -- the same from the shell
--
-- The CSV has a header row; `epoch` and `step` columns; every other column holding at least one number
-- is a metric (`train_loss_step`, `val_loss`, `val_acc`, ...). Rows log only some metrics, so many cells
-- are empty: each metric's curve joins the rows where it has a value, in file order. x is `step` for
-- every metric (`epoch` when there is no step column, else the row number).
--
-- The drawing: one panel per metric in a grid, y scaled to the data with ticks at 1/2/5 x 10^k, axis
-- titles, a title per panel (with the last value), one <path> per metric, a dot per point when a
-- metric has fewer than 30 points, and a legend of the metrics' colours. Plain SVG text, no dependency.
--
-- Errors name the file: a missing or unreadable file, no header row, no numeric metric column.

local M = {}

local floor, ceil, abs, max = math.floor, math.ceil, math.abs, math.max
local log10 = math.log10 or function(x) return math.log(x, 10) end
local fmt, concat = string.format, table.concat

local PREFIX = "lutra.plot: "
local COLORS = {
  "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
  "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
}
local PANEL_W, PANEL_H = 440, 300
local PAD_L, PAD_R, PAD_T, PAD_B = 70, 18, 40, 48 -- plot area inside a panel
local MARGIN = 16
local DOTS_BELOW = 30

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

-- Reads a metrics CSV: { path, x_name, metrics = { {name, xs, ys}, ... } } (columns in header order).
function M.read(path)
  local f, err = io.open(path, "rb")
  if not f then fail("cannot open %s: %s", path, (err or "?"):gsub("^[^:]*: ", "")) end
  local text = f:read("*a")
  f:close()
  if text == nil then fail("cannot read %s", path) end
  local rows = parse_csv(text, path)
  local header = rows[1]
  if header == nil or (#header == 1 and header[1]:match("^%s*$")) then
    fail("%s: no header row (the file is empty)", path)
  end
  local col, names = {}, {}
  for j, name in ipairs(header) do
    name = name:match("^%s*(.-)%s*$")
    names[j] = name
    if col[name] == nil then col[name] = j end
  end
  local xcol, x_name = col.step, "step"
  if xcol == nil then xcol, x_name = col.epoch, "epoch" end
  if xcol == nil then x_name = "row" end
  if xcol == nil and number(header[1]) ~= nil then
    fail("%s: no header row (the first row holds numbers: %s)", path, concat(header, ","))
  end

  local metrics = {}
  for j, name in ipairs(names) do
    if name ~= "step" and name ~= "epoch" and name ~= "" and col[name] == j then
      local xs, ys = {}, {}
      for r = 2, #rows do
        local y = number(rows[r][j])
        local x
        if xcol then x = number(rows[r][xcol]) else x = r - 1 end
        if y ~= nil and x ~= nil then
          xs[#xs + 1], ys[#ys + 1] = x, y
        end
      end
      if #ys > 0 then metrics[#metrics + 1] = { name = name, xs = xs, ys = ys } end
    end
  end
  if #metrics == 0 then
    fail("%s: no numeric metric column (columns: %s; %d data row%s)", path, concat(names, ", "), #rows - 1,
      #rows == 2 and "" or "s")
  end
  return { path = path, x_name = x_name, metrics = metrics }
end

-- The nice number (1, 2 or 5 x 10^k) nearest to x.
local function nice(x)
  local e = floor(log10(x))
  local f = x / 10 ^ e
  local nf = (f < 1.5 and 1) or (f < 3 and 2) or (f < 7 and 5) or 10
  return nf * 10 ^ e
end

-- Returns lo, hi, step of an axis covering [a, b] with about `count` ticks.
local function axis(a, b, count, integer)
  if a == b then
    local d = (a == 0) and 1 or abs(a) * 0.1
    a, b = a - d, b + d
  end
  local step = nice((b - a) / (count - 1))
  if integer and step < 1 then step = 1 end
  return floor(a / step + 1e-9) * step, ceil(b / step - 1e-9) * step, step
end

local function tick_label(v, step)
  if abs(v) < step * 1e-6 then return "0" end
  if step >= 1e6 or step < 1e-4 or abs(v) >= 1e7 then return (fmt("%.4g", v)) end
  local decimals = max(0, -floor(log10(step) + 1e-9))
  return (fmt(fmt("%%.%df", decimals), v))
end

local function value_label(v)
  if v == floor(v) and abs(v) < 1e9 then return fmt("%d", v) end
  return (fmt("%.4g", v))
end

local function esc(s)
  return (tostring(s):gsub("[&<>\"']", {
    ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&apos;",
  }))
end

local function all_integers(t)
  for _, v in ipairs(t) do
    if v ~= floor(v) then return false end
  end
  return true
end

local function range(t)
  local lo, hi = math.huge, -math.huge
  for _, v in ipairs(t) do
    if v < lo then lo = v end
    if v > hi then hi = v end
  end
  return lo, hi
end

-- One panel; xaxis = {lo, hi, step} is shared by all panels so that steps line up across them.
local function panel(out, index, m, color, x_name, xaxis, ox, oy)
  local w, h = PANEL_W - PAD_L - PAD_R, PANEL_H - PAD_T - PAD_B
  local x0, y0 = ox + PAD_L, oy + PAD_T -- top-left corner of the plot area
  local xlo, xhi, xstep = xaxis[1], xaxis[2], xaxis[3]
  local ya, yb = range(m.ys)
  local ylo, yhi, ystep = axis(ya, yb, 6, false)
  local function px(x) return x0 + (x - xlo) / (xhi - xlo) * w end
  local function py(y) return y0 + h - (y - ylo) / (yhi - ylo) * h end

  out[#out + 1] = fmt('<g class="panel" id="panel-%d">', index)
  out[#out + 1] = fmt('<text x="%.2f" y="%.2f" font-size="14" font-weight="bold">%s</text>',
    x0, oy + 22, esc(m.name))
  out[#out + 1] = fmt('<text x="%.2f" y="%.2f" text-anchor="end" fill="#555">last %s (%d points)</text>',
    x0 + w, oy + 22, esc(value_label(m.ys[#m.ys])), #m.ys)
  out[#out + 1] = fmt('<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="none" stroke="#888"/>',
    x0, y0, w, h)
  local k = 0
  while true do -- y grid and labels
    local v = ylo + k * ystep
    if v > yhi + ystep * 1e-6 then break end
    local y = py(v)
    out[#out + 1] = fmt('<line x1="%.2f" y1="%.2f" x2="%.2f" y2="%.2f" stroke="#e5e5e5"/>', x0, y, x0 + w, y)
    out[#out + 1] = fmt('<text x="%.2f" y="%.2f" text-anchor="end" dominant-baseline="middle">%s</text>',
      x0 - 6, y, esc(tick_label(v, ystep)))
    k = k + 1
  end
  k = 0
  while true do -- x grid and labels
    local v = xlo + k * xstep
    if v > xhi + xstep * 1e-6 then break end
    local x = px(v)
    out[#out + 1] = fmt('<line x1="%.2f" y1="%.2f" x2="%.2f" y2="%.2f" stroke="#e5e5e5"/>', x, y0, x, y0 + h)
    out[#out + 1] = fmt('<text x="%.2f" y="%.2f" text-anchor="middle">%s</text>',
      x, y0 + h + 16, esc(tick_label(v, xstep)))
    k = k + 1
  end
  out[#out + 1] = fmt('<text x="%.2f" y="%.2f" text-anchor="middle" fill="#333">%s</text>',
    x0 + w / 2, y0 + h + 36, esc(x_name))
  out[#out + 1] = fmt('<text transform="translate(%.2f,%.2f) rotate(-90)" text-anchor="middle" fill="#333">%s</text>',
    ox + 16, y0 + h / 2, esc(m.name))

  local d = {}
  for i = 1, #m.xs do
    d[#d + 1] = fmt("%s%.2f %.2f", i == 1 and "M" or " L", px(m.xs[i]), py(m.ys[i]))
  end
  out[#out + 1] = fmt('<path d="%s" fill="none" stroke="%s" stroke-width="1.6" stroke-linejoin="round"/>',
    concat(d), color)
  if #m.xs < DOTS_BELOW then
    for i = 1, #m.xs do
      out[#out + 1] = fmt('<circle cx="%.2f" cy="%.2f" r="2.6" fill="%s"/>', px(m.xs[i]), py(m.ys[i]), color)
    end
  end
  out[#out + 1] = "</g>"
end

-- Renders what M.read returned as SVG text.
function M.render(data)
  local n = #data.metrics
  local cols = (n == 1 and 1) or (n <= 4 and 2) or 3
  local rows = ceil(n / cols)
  local width = cols * PANEL_W + 2 * MARGIN
  local per_line = max(1, floor((width - 2 * MARGIN) / 200))
  local legend_lines = ceil(n / per_line)
  local head = 40 + legend_lines * 20
  local height = head + rows * PANEL_H + MARGIN
  local title = "learning curves: " .. data.path

  local out = {
    '<?xml version="1.0" encoding="UTF-8"?>',
    fmt('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" ' ..
      'font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="11">', width, height, width, height),
    fmt("<title>%s</title>", esc(title)),
    '<rect x="0" y="0" width="100%" height="100%" fill="white"/>',
    fmt('<text x="%d" y="26" font-size="16" font-weight="bold">%s</text>', MARGIN, esc(title)),
    '<g class="legend">',
  }
  for i, m in ipairs(data.metrics) do
    local lx = MARGIN + ((i - 1) % per_line) * 200
    local ly = 40 + floor((i - 1) / per_line) * 20
    out[#out + 1] = fmt('<rect x="%d" y="%d" width="14" height="10" fill="%s"/>', lx, ly, COLORS[(i - 1) % #COLORS + 1])
    out[#out + 1] = fmt('<text x="%d" y="%d">%s</text>', lx + 20, ly + 9, esc(m.name))
  end
  out[#out + 1] = "</g>"
  local xa, xb, integer = math.huge, -math.huge, true
  for _, m in ipairs(data.metrics) do
    local a, b = range(m.xs)
    if a < xa then xa = a end
    if b > xb then xb = b end
    integer = integer and all_integers(m.xs)
  end
  local xaxis = { axis(xa, xb, 6, integer) }
  for i, m in ipairs(data.metrics) do
    local ox = MARGIN + ((i - 1) % cols) * PANEL_W
    local oy = head + floor((i - 1) / cols) * PANEL_H
    panel(out, i, m, COLORS[(i - 1) % #COLORS + 1], data.x_name, xaxis, ox, oy)
  end
  out[#out + 1] = "</svg>"
  return concat(out, "\n") .. "\n"
end

local function default_out(csv_path)
  local dir = csv_path:match("^(.*)/[^/]*$")
  if dir == nil then dir = "." elseif dir == "" then dir = "/" end
  return (dir:sub(-1) == "/" and dir or dir .. "/") .. "curves.svg"
end

-- Draws csv_path's curves into out_path (default: curves.svg next to the CSV); returns out_path and the
-- number of metrics drawn.
function M.svg(csv_path, out_path)
  if type(csv_path) ~= "string" then
    error("bad argument #1 to 'svg' (path of a metrics CSV expected, got " .. type(csv_path) .. ")", 2)
  end
  if out_path ~= nil and type(out_path) ~= "string" then
    error("bad argument #2 to 'svg' (output path expected, got " .. type(out_path) .. ")", 2)
  end
  out_path = out_path or default_out(csv_path)
  local data = M.read(csv_path)
  local text = M.render(data)
  -- atomically, as every whole file lutra writes (docs/reliability.md): never half an SVG under the name
  local ok, err = pcall(require("lutra")._io.write_atomic, out_path, text)
  if not ok then fail("cannot write %s", (tostring(err):gsub("^write: ", ""))) end
  return out_path, #data.metrics
end

local USAGE = "usage: lutra plot METRICS.csv [-o out.svg]\n"

-- `lutra plot` (core/cli/main.c calls it with the arguments after "plot"); returns the exit status.
function M.main(args)
  local csv, out
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == "-o" or a == "--output" then
      out = args[i + 1]
      if out == nil then
        io.stderr:write("lutra plot: -o needs a file name\n", USAGE)
        return 1
      end
      i = i + 1
    elseif a:match("^%-o.") then
      out = a:sub(3)
    elseif a == "-h" or a == "--help" then
      io.stdout:write(USAGE)
      return 0
    elseif a:sub(1, 1) == "-" and a ~= "-" then
      io.stderr:write("lutra plot: unknown option ", a, "\n", USAGE)
      return 1
    elseif csv == nil then
      csv = a
    else
      io.stderr:write("lutra plot: more than one CSV file given (", csv, ", ", a, ")\n", USAGE)
      return 1
    end
    i = i + 1
  end
  if csv == nil then
    io.stderr:write(USAGE)
    return 1
  end
  local ok, path, n = xpcall(function() return M.svg(csv, out) end, function(e)
    if type(e) == "string" and e:sub(1, #PREFIX) == PREFIX then return e end
    return debug.traceback(tostring(e), 2)
  end)
  if not ok then
    io.stderr:write("lutra plot: ", (tostring(path):gsub("^" .. PREFIX:gsub("%p", "%%%0"), "")), "\n")
    return 1
  end
  io.stdout:write(fmt("lutra plot: wrote %s (%d metric%s)\n", path, n, n == 1 and "" or "s"))
  return 0
end

return M
