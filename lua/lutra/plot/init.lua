-- lutra.plot — learning curves from CSVLogger (metrics.csv) and JSONLinesLogger (metrics.jsonl) files, drawn as
-- a self-contained SVG file or a PNG image (lt.utils.save_image's libpng writer, lua/lutra/plot/png.lua).
--
--   local plot = require "lutra.plot"
--   plot.draw({"runs/a/metrics.csv", "runs/b/metrics.jsonl"}, {metrics = {{"train_loss", "val_loss"}},
--     x = "step", smooth = 5, out = "curves.png"})
--   plot.svg("lutra_logs/version_0/metrics.csv")                -- writes lutra_logs/version_0/curves.svg
--   $ lutra plot runs/*/metrics.csv --metrics train_loss,val_loss --metrics val_acc --smooth 5 -o curves.svg
--
-- Files: a CSV with a header row, or JSON lines (one object a line, as {"step": 9, "val_loss": 0.5}); `epoch`
-- and `step` are the x columns, every other column holding at least one number is a metric. Rows log only
-- some metrics: each metric's curve joins the rows where it has a value, in file order. x is `step` (else
-- `epoch`, else the row number) or the column asked for; values of one metric on consecutive rows with the
-- same x are drawn as their mean (`x = "epoch"`: one point per epoch).
--
-- Reading the files: lua/lutra/plot/read.lua; the SVG and PNG canvases: lua/lutra/plot/svg.lua, plot/png.lua.
--
-- The drawing: one panel (one y axis) per group of metrics. By default metrics of one kind share a panel:
-- the kind is the name without a train/val/valid/validation/test prefix and a _step/_epoch suffix, so
-- `train_loss_step` and `val_loss` go together ("loss"), `val_acc` apart ("acc"); `metrics` = a list of
-- groups chooses the panels. Several files are several runs drawn side by side on the same axes: one colour
-- per run (the runs' legend above the panels), one dash pattern per metric (each panel's legend); one file:
-- one colour per metric. Smoothing (`smooth = K`): the mean of the last K points (a trailing moving window),
-- drawn over the raw curve, which stays faint behind it. y is scaled to the data with ticks at 1/2/5 x 10^k,
-- a dot per point when a curve has fewer than 30 points.
--
-- Errors name the file: a missing or unreadable file, no header row, a line that is not a JSON object, no
-- numeric metric column, a metric or an x column that no file has.

local M = {}

local floor, ceil, abs, max = math.floor, math.ceil, math.abs, math.max
local log10 = math.log10 or function(x) return math.log(x, 10) end
local fmt, concat = string.format, table.concat

local R = require "lutra.plot.read"
local svg_canvas = require("lutra.plot.svg").canvas
local PREFIX, fail = R.PREFIX, R.fail

local COLORS = {
  "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
  "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
}
local PANEL_W, PANEL_H = 440, 300
local PAD_L, PAD_R, PAD_T, PAD_B = 70, 18, 40, 48 -- plot area inside a panel
local MARGIN = 16
local DOTS_BELOW = 30

--- Reads a metrics file (CSV or JSON lines): { path, x_name, metrics = { {name, xs, ys}, ... } }; opts.x: "step"
--- or "epoch" (lua/lutra/plot/read.lua).
M.read = R.read

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


-- ---- grouping --------------------------------------------------------------------------------------------

local STAGES = { "train", "training", "val", "valid", "validation", "test" }

--- The kind of a metric, which decides the panel it shares by default: the name without a stage prefix
--- (train_, val_, valid_, validation_, test_, or with "/") and a _step/_epoch suffix ("val_loss" -> "loss").
function M.kind(name)
  local k = name
  for _, p in ipairs(STAGES) do
    local rest = k:match("^" .. p .. "[_/](.+)$")
    if rest then k = rest break end
  end
  k = k:gsub("_step$", ""):gsub("_epoch$", "")
  if k == "" then return name end
  return k
end

-- Short names for the runs: the parts of their paths that differ ("version_0", "version_1" for two
-- lutra_logs/version_N/metrics.csv); one run: its path.
local function run_labels(runs)
  if #runs == 1 then return { runs[1].path } end
  local split = {}
  for i, r in ipairs(runs) do
    local parts = {}
    for part in r.path:gmatch("[^/]+") do parts[#parts + 1] = part end
    split[i] = parts
  end
  local function common(from_end)
    local n = 0
    while true do
      local v
      for _, parts in ipairs(split) do
        local i = from_end and #parts - n or n + 1
        local p = parts[i]
        if p == nil or (v ~= nil and p ~= v) or #parts <= n + 1 then return n end
        v = p
      end
      n = n + 1
    end
  end
  local head, tail = common(false), common(true)
  local labels, seen = {}, {}
  for i, parts in ipairs(split) do
    local l = concat(parts, "/", head + 1, #parts - tail)
    if l == "" or seen[l] then l = runs[i].path end
    seen[l] = true
    labels[i] = l
  end
  return labels
end

-- The panels: { {title, names = {metric, ...}} } from groups (lists of names) or by kind.
local function make_panels(runs, groups)
  local order, known = {}, {}
  for _, r in ipairs(runs) do
    for _, m in ipairs(r.metrics) do
      if not known[m.name] then known[m.name] = true; order[#order + 1] = m.name end
    end
  end
  local panels = {}
  if groups then
    for _, g in ipairs(groups) do
      for _, name in ipairs(g) do
        if not known[name] then
          fail("no metric '%s' in %s (metrics: %s)", name, #runs == 1 and runs[1].path or "the files",
            concat(order, ", "))
        end
      end
      panels[#panels + 1] = { title = #g == 1 and g[1] or concat(g, ", "), names = g }
    end
    return panels, order
  end
  local by_kind = {}
  for _, name in ipairs(order) do
    local k = M.kind(name)
    if not by_kind[k] then
      by_kind[k] = { title = k, names = {} }
      panels[#panels + 1] = by_kind[k]
    end
    local p = by_kind[k].names
    p[#p + 1] = name
  end
  for _, p in ipairs(panels) do
    if #p.names == 1 then p.title = p.names[1] end
  end
  return panels, order
end

-- the trailing moving mean of k points
local function smooth(ys, k)
  local out, sum = {}, 0
  for i, y in ipairs(ys) do
    sum = sum + y
    if i > k then sum = sum - ys[i - k] end
    out[i] = sum / math.min(i, k)
  end
  return out
end

-- ---- drawing -------------------------------------------------------------------------------------------
-- The figure is drawn through a small canvas (rect, line, path, circle, text, group); the SVG canvas below
-- writes elements, lua/lutra/plot/png.lua's rasterises them.

local DASHES = { nil, "7 4", "2 3", "9 3 2 3", "4 4" }

-- rough width of a label in pixels at font size 11 (DejaVu Sans averages ~0.6 em a character)
local function text_w(s) return #s * 6.6 end

local LEGEND_ITEM_H = 16

-- lays out legend items (label widths) in rows of at most `width` pixels; returns {x, row} per item and rows
local function legend_layout(labels, width, sample)
  local pos, x, row = {}, 0, 0
  for i, l in ipairs(labels) do
    local w = sample + 6 + text_w(l) + 18
    if x > 0 and x + w > width then x, row = 0, row + 1 end
    pos[i] = { x, row }
    x = x + w
  end
  return pos, (#labels > 0) and row + 1 or 0
end

local function draw_panel(cv, index, p, runs, style, x_name, xaxis, ox, oy, head_h, smooth_k)
  local w, h = PANEL_W - PAD_L - PAD_R, PANEL_H - PAD_B
  local x0, y0 = ox + PAD_L, oy + head_h -- top-left corner of the plot area
  local xlo, xhi, xstep = xaxis[1], xaxis[2], xaxis[3]
  local ya, yb = math.huge, -math.huge
  for _, c in ipairs(p.curves) do
    local a, b = range(c.m.ys)
    if a < ya then ya = a end
    if b > yb then yb = b end
  end
  local ylo, yhi, ystep = axis(ya, yb, 6, false)
  local function px(x) return x0 + (x - xlo) / (xhi - xlo) * w end
  local function py(y) return y0 + h - (y - ylo) / (yhi - ylo) * h end

  cv:group("panel", "panel-" .. index)
  cv:text(x0, oy + 22, p.title, { size = 14, bold = true })
  if #p.curves == 1 then
    local m = p.curves[1].m
    cv:text(x0 + w, oy + 22, fmt("last %s (%d points)", value_label(m.ys[#m.ys]), #m.ys),
      { anchor = "end", color = "#555" })
  end
  if #p.names > 1 then -- the panel's legend: each metric's line (its colour, or its dash with several runs)
    cv:group("panel-legend")
    for i, name in ipairs(p.names) do
      local lx, ly = x0 + p.legend[i][1], oy + 32 + p.legend[i][2] * LEGEND_ITEM_H
      local color, dash = style.legend(name)
      cv:line(lx, ly + 5, lx + 24, ly + 5, color, 2, dash)
      cv:text(lx + 30, ly + 9, name)
    end
    cv:group_end()
  end
  cv:rect(x0, y0, w, h, nil, "#888")
  local k = 0
  while true do -- y grid and labels
    local v = ylo + k * ystep
    if v > yhi + ystep * 1e-6 then break end
    local y = py(v)
    cv:line(x0, y, x0 + w, y, "#e5e5e5")
    cv:text(x0 - 6, y, tick_label(v, ystep), { anchor = "end", middle = true })
    k = k + 1
  end
  k = 0
  while true do -- x grid and labels
    local v = xlo + k * xstep
    if v > xhi + xstep * 1e-6 then break end
    local x = px(v)
    cv:line(x, y0, x, y0 + h, "#e5e5e5")
    cv:text(x, y0 + h + 16, tick_label(v, xstep), { anchor = "middle" })
    k = k + 1
  end
  cv:text(x0 + w / 2, y0 + h + 36, x_name, { anchor = "middle", color = "#333" })
  cv:text(ox + 16, y0 + h / 2, p.title, { anchor = "middle", color = "#333", rotate = -90 })

  for _, c in ipairs(p.curves) do
    local m = c.m
    local color, dash = style.curve(c.run, m.name)
    local xs, ys = {}, {}
    for i = 1, #m.xs do xs[i], ys[i] = px(m.xs[i]), py(m.ys[i]) end
    if smooth_k and smooth_k > 1 then
      cv:path(xs, ys, color, 1.2, dash, 0.25, "raw")
      local s = smooth(m.ys, smooth_k)
      for i = 1, #s do ys[i] = py(s[i]) end
      cv:path(xs, ys, color, 1.8, dash, nil, "curve")
    else
      cv:path(xs, ys, color, 1.6, dash, nil, "curve")
    end
    if #m.xs < DOTS_BELOW then -- the data's points (faint, as the raw curve, when the curve is smoothed)
      for i = 1, #m.xs do cv:circle(xs[i], py(m.ys[i]), 2.6, color, smooth_k and smooth_k > 1 and 0.35 or nil) end
    end
  end
  cv:group_end()
end

-- The figure on a canvas: make(width, height, title) returns the canvas (lutra.plot.svg's or lutra.plot.png's); returns
-- the canvas, drawn, and the number of panels.
local function draw(runs, opts, make)
  opts = opts or {}
  local panels, order = make_panels(runs, opts.groups)
  local labels = run_labels(runs)
  local multi = #runs > 1
  local color_of = {}
  for i, name in ipairs(order) do color_of[name] = COLORS[(i - 1) % #COLORS + 1] end
  local style = {}
  if multi then -- one colour per run, one dash pattern per metric of a panel
    local dash_of = {}
    for _, p in ipairs(panels) do
      for i, name in ipairs(p.names) do dash_of[name] = dash_of[name] or DASHES[(i - 1) % #DASHES + 1] end
    end
    style.curve = function(run, name) return COLORS[(run - 1) % #COLORS + 1], dash_of[name] end
    style.legend = function(name) return "#333", dash_of[name] end
  else
    style.curve = function(_, name) return color_of[name] end
    style.legend = function(name) return color_of[name] end
  end
  local x_name = runs[1].x_name
  for _, r in ipairs(runs) do
    if r.x_name ~= x_name then
      fail("%s has x = %s but %s has x = %s (choose one with --x)", runs[1].path, x_name, r.path, r.x_name)
    end
  end

  local legend_rows = 0
  local xa, xb, integer = math.huge, -math.huge, true
  for _, p in ipairs(panels) do
    p.curves = {}
    for ri, r in ipairs(runs) do
      for _, m in ipairs(r.metrics) do
        for _, name in ipairs(p.names) do
          if m.name == name then
            p.curves[#p.curves + 1] = { run = ri, m = m }
            local a, b = range(m.xs)
            if a < xa then xa = a end
            if b > xb then xb = b end
            integer = integer and all_integers(m.xs)
          end
        end
      end
    end
    if #p.names > 1 then
      local rows
      p.legend, rows = legend_layout(p.names, PANEL_W - PAD_L - PAD_R, 24)
      if rows > legend_rows then legend_rows = rows end
    end
  end
  local xaxis = { axis(xa, xb, 6, integer) }
  local n = #panels
  local cols = (n == 1 and 1) or (n <= 4 and 2) or 3
  local grid_rows = ceil(n / cols)
  local width = cols * PANEL_W + 2 * MARGIN
  local top = multi and labels or order -- the figure's legend: the runs, or the one run's metrics
  local top_pos, top_rows = legend_layout(top, width - 2 * MARGIN, 14)
  local head = 40 + top_rows * 20
  local panel_head = PAD_T + legend_rows * LEGEND_ITEM_H
  local panel_h = panel_head + PANEL_H
  local height = head + grid_rows * panel_h + MARGIN
  local title = opts.title
  if not title then -- several runs: the legend names them
    title = multi and fmt("learning curves of %d runs", #runs) or "learning curves: " .. runs[1].path
  end
  local room = floor((width - 2 * MARGIN) / 9.6) -- characters of the 16-pixel title that fit
  if #title > room then title = title:sub(1, 18) .. "..." .. title:sub(#title - room + 22) end

  local cv = make(width, height, title)
  cv:rect(0, 0, width, height, "white")
  cv:text(MARGIN, 26, title, { size = 16, bold = true })
  cv:group("legend")
  for i, label in ipairs(top) do
    local lx, ly = MARGIN + top_pos[i][1], 40 + top_pos[i][2] * 20
    cv:rect(lx, ly, 14, 10, multi and COLORS[(i - 1) % #COLORS + 1] or color_of[label])
    cv:text(lx + 20, ly + 9, label)
  end
  cv:group_end()
  for i, p in ipairs(panels) do
    local ox = MARGIN + ((i - 1) % cols) * PANEL_W
    local oy = head + floor((i - 1) / cols) * panel_h
    draw_panel(cv, i, p, runs, style, x_name, xaxis, ox, oy, panel_head, opts.smooth)
  end
  return cv, #panels
end

local function as_runs(data)
  if type(data) ~= "table" then
    error("bad argument #1 to 'render' (what read returned, or a list of them, expected, got " .. type(data) .. ")", 3)
  end
  if data.metrics then return { data } end
  return data
end

--- What read returned (one run, or a list of runs), as SVG text. opts: groups ({{"a", "b"}, {"c"}}), smooth
--- (K points), title.
function M.render(data, opts)
  return (draw(as_runs(data), opts, svg_canvas)):finish()
end

local function default_out(path)
  local dir = path:match("^(.*)/[^/]*$")
  if dir == nil then dir = "." elseif dir == "" then dir = "/" end
  return (dir:sub(-1) == "/" and dir or dir .. "/") .. "curves.svg"
end

-- the metrics option: a list of groups, each a list of names or a string "a,b"; or one string "a,b"
local function parse_groups(metrics)
  if metrics == nil then return nil end
  if type(metrics) == "string" then metrics = { metrics } end
  if type(metrics) ~= "table" or #metrics == 0 then
    fail("option 'metrics' must be a list of groups ({{\"train_loss\", \"val_loss\"}}) or \"a,b\"")
  end
  local groups = {}
  for _, g in ipairs(metrics) do
    local list = {}
    if type(g) == "string" then
      for name in g:gmatch("[^,]+") do
        name = name:match("^%s*(.-)%s*$")
        if name ~= "" then list[#list + 1] = name end
      end
    elseif type(g) == "table" then
      for _, name in ipairs(g) do list[#list + 1] = tostring(name) end
    end
    if #list == 0 then fail("option 'metrics': an empty group") end
    groups[#groups + 1] = list
  end
  return groups
end

local DRAW_OPTIONS = { metrics = true, x = true, smooth = true, out = true, title = true }

--- Draws the files (one path or a list: one run each) into opts.out (default: curves.svg next to the first
--- file); a name ending in .png writes a PNG image, any other SVG. opts: metrics (the panels: {{"train_loss",
--- "val_loss"}, {"val_acc"}}, {"train_loss,val_loss", "val_acc"} or one "a,b"), x ("step" | "epoch"), smooth
--- (K >= 1 points), out,
--- title. Returns the path written and the number of panels.
function M.draw(paths, opts)
  if type(paths) == "string" then paths = { paths } end
  if type(paths) ~= "table" or #paths == 0 then
    error("bad argument #1 to 'draw' (a path or a list of paths expected, got " .. type(paths) .. ")", 2)
  end
  opts = opts or {}
  if type(opts) ~= "table" then error("bad argument #2 to 'draw' (options table expected, got " .. type(opts) .. ")", 2) end
  for k in pairs(opts) do
    if not DRAW_OPTIONS[k] then fail("unknown option '%s' (known: metrics, out, smooth, title, x)", tostring(k)) end
  end
  local k = opts.smooth
  if k ~= nil and (type(k) ~= "number" or k < 1 or k ~= floor(k)) then
    fail("smooth must be a whole number of points >= 1, got %s", tostring(k))
  end
  local runs = {}
  for i, p in ipairs(paths) do runs[i] = M.read(p, { x = opts.x }) end
  local out = opts.out or default_out(paths[1])
  local dopts = { groups = parse_groups(opts.metrics), smooth = k, title = opts.title }
  local png = out:lower():match("%.png$")
  local cv, n = draw(runs, dopts, png and require("lutra.plot.png").canvas or svg_canvas)
  cv:save(out)
  return out, n
end

--- Draws one metrics file as SVG into out_path (default: curves.svg next to it); returns out_path and the
--- number of metrics drawn.
function M.svg(csv_path, out_path)
  if type(csv_path) ~= "string" then
    error("bad argument #1 to 'svg' (path of a metrics CSV expected, got " .. type(csv_path) .. ")", 2)
  end
  if out_path ~= nil and type(out_path) ~= "string" then
    error("bad argument #2 to 'svg' (output path expected, got " .. type(out_path) .. ")", 2)
  end
  out_path = out_path or default_out(csv_path)
  if out_path:lower():match("%.png$") then fail("svg writes SVG: use lt.plot.draw for %s", out_path) end
  local data = M.read(csv_path)
  M.draw(csv_path, { out = out_path })
  return out_path, #data.metrics
end

local USAGE = "usage: lutra plot FILES... [--metrics a,b]... [--x step|epoch] [--smooth K] [-o out.svg|out.png]\n" ..
  "  FILES: metrics.csv (CSVLogger) or metrics.jsonl (JSONLinesLogger); several files: several runs\n" ..
  "  --metrics a,b   a panel with these metrics on one axis (repeat for more panels; default: by kind)\n" ..
  "  --x step|epoch  the x axis (default: step)\n" ..
  "  --smooth K      draw the mean of the last K points over the raw curve\n" ..
  "  -o FILE         the output, .svg or .png (default: curves.svg next to the first file)\n"

-- `lutra plot` (core/cli/main.c calls it with the arguments after "plot"); returns the exit status.
function M.main(args)
  local files, opts, groups = {}, {}, {}
  local function usage_error(msg)
    io.stderr:write("lutra plot: ", msg, "\n", USAGE)
    return 1
  end
  local i = 1
  while i <= #args do
    local a = args[i]
    local name, inline = a:match("^(%-%-[%w_]+)=(.*)$")
    if name then a = name end
    local function value()
      if inline then return inline end
      i = i + 1
      return args[i]
    end
    if a == "-o" or a == "--output" then
      opts.out = value()
      if opts.out == nil then return usage_error("-o needs a file name") end
    elseif a:match("^%-o.") then
      opts.out = a:sub(3)
    elseif a == "--metrics" then
      local v = value()
      if v == nil then return usage_error("--metrics needs a list of metrics (--metrics train_loss,val_loss)") end
      groups[#groups + 1] = v
    elseif a == "--x" then
      opts.x = value()
      if opts.x ~= "step" and opts.x ~= "epoch" then
        return usage_error("--x must be step or epoch, got " .. tostring(opts.x))
      end
    elseif a == "--smooth" then
      local v = value()
      opts.smooth = tonumber(v)
      if opts.smooth == nil or opts.smooth < 1 or opts.smooth ~= floor(opts.smooth) then
        return usage_error("--smooth needs a whole number of points >= 1, got " .. tostring(v))
      end
    elseif a == "-h" or a == "--help" then
      io.stdout:write(USAGE)
      return 0
    elseif a:sub(1, 1) == "-" and a ~= "-" then
      return usage_error("unknown option " .. a)
    else
      files[#files + 1] = a
    end
    i = i + 1
  end
  if #files == 0 then
    io.stderr:write(USAGE)
    return 1
  end
  if #groups > 0 then opts.metrics = groups end
  local ok, path, n = xpcall(function() return M.draw(files, opts) end, function(e)
    if type(e) == "string" and e:sub(1, #PREFIX) == PREFIX then return e end
    return debug.traceback(tostring(e), 2)
  end)
  if not ok then
    io.stderr:write("lutra plot: ", (tostring(path):gsub("^" .. PREFIX:gsub("%p", "%%%0"), "")), "\n")
    return 1
  end
  io.stdout:write(fmt("lutra plot: wrote %s (%d panel%s, %d run%s)\n", path, n, n == 1 and "" or "s", #files,
    #files == 1 and "" or "s"))
  return 0
end

return M
