-- lutra.plot.svg — the SVG canvas of lutra.plot: the drawing calls the figure is made of (rect, line, path,
-- circle, text, group), written as the elements of a self-contained SVG file (plain text, no dependency).
-- lua/lutra/plot/png.lua has the same calls for PNG images.
local M = {}

local fmt, concat = string.format, table.concat
local fail = require("lutra.plot.read").fail

local function esc(s)
  return (tostring(s):gsub("[&<>\"']", {
    ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&apos;",
  }))
end

local SvgCanvas = {}
SvgCanvas.__index = SvgCanvas

--- A canvas of width x height (figure units = SVG pixels); :finish() returns the text, :save(path) writes it.
function M.canvas(width, height, title)
  local c = setmetatable({ width = width, height = height, out = {
    '<?xml version="1.0" encoding="UTF-8"?>',
    fmt('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" ' ..
      'font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="11">', width, height, width, height),
    fmt("<title>%s</title>", esc(title)),
  } }, SvgCanvas)
  return c
end

function SvgCanvas:add(s) self.out[#self.out + 1] = s end
function SvgCanvas:group(class, id)
  self:add(id and fmt('<g class="%s" id="%s">', class, id) or fmt('<g class="%s">', class))
end
function SvgCanvas:group_end() self:add("</g>") end
function SvgCanvas:rect(x, y, w, h, fill, stroke)
  self:add(fmt('<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="%s"%s/>', x, y, w, h, fill or "none",
    stroke and fmt(' stroke="%s"', stroke) or ""))
end
function SvgCanvas:line(x1, y1, x2, y2, color, width, dash)
  self:add(fmt('<line x1="%.2f" y1="%.2f" x2="%.2f" y2="%.2f" stroke="%s"%s%s/>', x1, y1, x2, y2, color,
    width and fmt(' stroke-width="%g"', width) or "", dash and fmt(' stroke-dasharray="%s"', dash) or ""))
end
function SvgCanvas:path(xs, ys, color, width, dash, opacity, class)
  local d = {}
  for i = 1, #xs do d[i] = fmt("%s%.2f %.2f", i == 1 and "M" or " L", xs[i], ys[i]) end
  self:add(fmt('<path%s d="%s" fill="none" stroke="%s" stroke-width="%g" stroke-linejoin="round"%s%s/>',
    class and fmt(' class="%s"', class) or "", concat(d), color, width,
    dash and fmt(' stroke-dasharray="%s"', dash) or "", opacity and fmt(' stroke-opacity="%g"', opacity) or ""))
end
function SvgCanvas:circle(x, y, r, color, opacity)
  self:add(fmt('<circle cx="%.2f" cy="%.2f" r="%g" fill="%s"%s/>', x, y, r, color,
    opacity and fmt(' fill-opacity="%g"', opacity) or ""))
end
-- opts: anchor ("start", "middle", "end"), size, bold, color, middle (vertically centred), rotate (-90)
function SvgCanvas:text(x, y, s, opts)
  opts = opts or {}
  local attrs = {}
  if opts.anchor and opts.anchor ~= "start" then attrs[#attrs + 1] = fmt('text-anchor="%s"', opts.anchor) end
  if opts.middle then attrs[#attrs + 1] = 'dominant-baseline="middle"' end
  if opts.size then attrs[#attrs + 1] = fmt('font-size="%d"', opts.size) end
  if opts.bold then attrs[#attrs + 1] = 'font-weight="bold"' end
  if opts.color then attrs[#attrs + 1] = fmt('fill="%s"', opts.color) end
  local a = #attrs > 0 and " " .. concat(attrs, " ") or ""
  if opts.rotate then
    self:add(fmt('<text transform="translate(%.2f,%.2f) rotate(%d)"%s>%s</text>', x, y, opts.rotate, a, esc(s)))
  else
    self:add(fmt('<text x="%.2f" y="%.2f"%s>%s</text>', x, y, a, esc(s)))
  end
end
function SvgCanvas:finish()
  self:add("</svg>")
  return concat(self.out, "\n") .. "\n"
end
-- atomically, as every whole file lutra writes (docs/reliability.md): never half an SVG under the name
function SvgCanvas:save(path)
  local ok, err = pcall(require("lutra")._io.write_atomic, path, self:finish())
  if not ok then fail("cannot write %s", (tostring(err):gsub("^write: ", ""))) end
end

return M
