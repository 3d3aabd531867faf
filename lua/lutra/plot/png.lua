-- lutra.plot.png — the PNG canvas of lutra.plot: the same drawing calls as its SVG canvas (rect, line, path,
-- circle, text), rasterised in Lua into an RGB image written by lt.utils.save_image (libpng,
-- core/src/image_png.c). `lutra plot ... -o curves.png` and lt.plot.draw(files, {out = "x.png"}) use it.
--
-- The image is drawn at twice the figure's size (so lines and text keep the SVG's proportions at a pixel
-- density that reads well). Lines, curves and dots are anti-aliased by coverage (the distance of each pixel
-- centre to the segment); a path takes, per pixel, the largest coverage of its segments, so a faint curve is
-- not darker where its segments meet. Text uses a built-in 5 x 7 pixel font (with descenders) (ASCII; any other character is
-- drawn as '?'), scaled by a whole factor to the font size.
local M = {}

local floor, ceil, min, max, sqrt = math.floor, math.ceil, math.min, math.max, math.sqrt
local fail = require("lutra.plot.read").fail

local SCALE = 2

-- The classic 5 x 7 font: per character (from ' ' to '~'), five columns, bit 0 the top row, bit 6 the
-- baseline's row; g, j, p, q and y reach below it (bit 7).
local FONT = {
  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x5F, 0x00, 0x00, 0x00, 0x07, 0x00, 0x07, 0x00, -- ' ' ! "
  0x14, 0x7F, 0x14, 0x7F, 0x14, 0x24, 0x2A, 0x7F, 0x2A, 0x12, 0x23, 0x13, 0x08, 0x64, 0x62, -- # $ %
  0x36, 0x49, 0x55, 0x22, 0x50, 0x00, 0x05, 0x03, 0x00, 0x00, 0x00, 0x1C, 0x22, 0x41, 0x00, -- & ' (
  0x00, 0x41, 0x22, 0x1C, 0x00, 0x14, 0x08, 0x3E, 0x08, 0x14, 0x08, 0x08, 0x3E, 0x08, 0x08, -- ) * +
  0x00, 0x50, 0x30, 0x00, 0x00, 0x08, 0x08, 0x08, 0x08, 0x08, 0x00, 0x60, 0x60, 0x00, 0x00, -- , - .
  0x20, 0x10, 0x08, 0x04, 0x02, 0x3E, 0x51, 0x49, 0x45, 0x3E, 0x00, 0x42, 0x7F, 0x40, 0x00, -- / 0 1
  0x42, 0x61, 0x51, 0x49, 0x46, 0x21, 0x41, 0x45, 0x4B, 0x31, 0x18, 0x14, 0x12, 0x7F, 0x10, -- 2 3 4
  0x27, 0x45, 0x45, 0x45, 0x39, 0x3C, 0x4A, 0x49, 0x49, 0x30, 0x01, 0x71, 0x09, 0x05, 0x03, -- 5 6 7
  0x36, 0x49, 0x49, 0x49, 0x36, 0x06, 0x49, 0x49, 0x29, 0x1E, 0x00, 0x36, 0x36, 0x00, 0x00, -- 8 9 :
  0x00, 0x56, 0x36, 0x00, 0x00, 0x08, 0x14, 0x22, 0x41, 0x00, 0x14, 0x14, 0x14, 0x14, 0x14, -- ; < =
  0x00, 0x41, 0x22, 0x14, 0x08, 0x02, 0x01, 0x51, 0x09, 0x06, 0x32, 0x49, 0x79, 0x41, 0x3E, -- > ? @
  0x7E, 0x11, 0x11, 0x11, 0x7E, 0x7F, 0x49, 0x49, 0x49, 0x36, 0x3E, 0x41, 0x41, 0x41, 0x22, -- A B C
  0x7F, 0x41, 0x41, 0x22, 0x1C, 0x7F, 0x49, 0x49, 0x49, 0x41, 0x7F, 0x09, 0x09, 0x01, 0x01, -- D E F
  0x3E, 0x41, 0x41, 0x51, 0x32, 0x7F, 0x08, 0x08, 0x08, 0x7F, 0x00, 0x41, 0x7F, 0x41, 0x00, -- G H I
  0x20, 0x40, 0x41, 0x3F, 0x01, 0x7F, 0x08, 0x14, 0x22, 0x41, 0x7F, 0x40, 0x40, 0x40, 0x40, -- J K L
  0x7F, 0x02, 0x04, 0x02, 0x7F, 0x7F, 0x04, 0x08, 0x10, 0x7F, 0x3E, 0x41, 0x41, 0x41, 0x3E, -- M N O
  0x7F, 0x09, 0x09, 0x09, 0x06, 0x3E, 0x41, 0x51, 0x21, 0x5E, 0x7F, 0x09, 0x19, 0x29, 0x46, -- P Q R
  0x46, 0x49, 0x49, 0x49, 0x31, 0x01, 0x01, 0x7F, 0x01, 0x01, 0x3F, 0x40, 0x40, 0x40, 0x3F, -- S T U
  0x1F, 0x20, 0x40, 0x20, 0x1F, 0x7F, 0x20, 0x18, 0x20, 0x7F, 0x63, 0x14, 0x08, 0x14, 0x63, -- V W X
  0x03, 0x04, 0x78, 0x04, 0x03, 0x61, 0x51, 0x49, 0x45, 0x43, 0x00, 0x7F, 0x41, 0x41, 0x00, -- Y Z [
  0x02, 0x04, 0x08, 0x10, 0x20, 0x00, 0x41, 0x41, 0x7F, 0x00, 0x04, 0x02, 0x01, 0x02, 0x04, -- \ ] ^
  0x40, 0x40, 0x40, 0x40, 0x40, 0x00, 0x01, 0x02, 0x04, 0x00, 0x20, 0x54, 0x54, 0x54, 0x78, -- _ ` a
  0x7F, 0x48, 0x44, 0x44, 0x38, 0x38, 0x44, 0x44, 0x44, 0x20, 0x38, 0x44, 0x44, 0x48, 0x7F, -- b c d
  0x38, 0x54, 0x54, 0x54, 0x18, 0x08, 0x7E, 0x09, 0x01, 0x02, 0x18, 0xA4, 0xA4, 0xA4, 0x7C, -- e f g
  0x7F, 0x08, 0x04, 0x04, 0x78, 0x00, 0x44, 0x7D, 0x40, 0x00, 0x40, 0x80, 0x84, 0x7D, 0x00, -- h i j
  0x7F, 0x10, 0x28, 0x44, 0x00, 0x00, 0x41, 0x7F, 0x40, 0x00, 0x7C, 0x04, 0x18, 0x04, 0x78, -- k l m
  0x7C, 0x08, 0x04, 0x04, 0x78, 0x38, 0x44, 0x44, 0x44, 0x38, 0xFC, 0x24, 0x24, 0x24, 0x18, -- n o p
  0x18, 0x24, 0x24, 0x18, 0xFC, 0x7C, 0x08, 0x04, 0x04, 0x08, 0x48, 0x54, 0x54, 0x54, 0x20, -- q r s
  0x04, 0x3F, 0x44, 0x40, 0x20, 0x3C, 0x40, 0x40, 0x20, 0x7C, 0x1C, 0x20, 0x40, 0x20, 0x1C, -- t u v
  0x3C, 0x40, 0x30, 0x40, 0x3C, 0x44, 0x28, 0x10, 0x28, 0x44, 0x1C, 0xA0, 0xA0, 0xA0, 0x7C, -- w x y
  0x44, 0x64, 0x54, 0x4C, 0x44, 0x00, 0x08, 0x36, 0x41, 0x00, 0x00, 0x00, 0x7F, 0x00, 0x00, -- z { |
  0x00, 0x41, 0x36, 0x08, 0x00, 0x08, 0x04, 0x08, 0x10, 0x08,                               -- } ~
}

local NAMED = { white = { 1, 1, 1 }, black = { 0, 0, 0 } }

local function rgb(color)
  if color == nil or color == "none" then return nil end
  if NAMED[color] then return NAMED[color] end
  local r, g, b = color:match("^#(%x%x)(%x%x)(%x%x)$")
  if not r then -- #rgb
    r, g, b = color:match("^#(%x)(%x)(%x)$")
    if r then r, g, b = r .. r, g .. g, b .. b end
  end
  if not r then fail("the PNG canvas has no colour '%s'", tostring(color)) end
  return { tonumber(r, 16) / 255, tonumber(g, 16) / 255, tonumber(b, 16) / 255 }
end

local Canvas = {}
Canvas.__index = Canvas

--- A canvas of the figure's size (the image is SCALE times larger); :save(path) writes the PNG file.
--- Only the pixels drawn on are kept (sparse tables by pixel index); the rest are the background colour.
function M.canvas(width, height, title)
  local W, H = ceil(width * SCALE), ceil(height * SCALE)
  return setmetatable({ W = W, H = H, title = title, bg = NAMED.white, r = {}, g = {}, b = {} }, Canvas)
end

-- blends colour col into pixel (x, y) (0-based) with opacity a
function Canvas:blend(x, y, col, a)
  if x < 0 or y < 0 or x >= self.W or y >= self.H or a <= 0 then return end
  local i = y * self.W + x + 1
  local r, g, b = self.r, self.g, self.b
  if a >= 1 then
    r[i], g[i], b[i] = col[1], col[2], col[3]
  else
    local bg = self.bg
    local pr, pg, pb = r[i] or bg[1], g[i] or bg[2], b[i] or bg[3]
    r[i], g[i], b[i] = pr + (col[1] - pr) * a, pg + (col[2] - pg) * a, pb + (col[3] - pb) * a
  end
end

function Canvas:group() end
function Canvas:group_end() end

function Canvas:rect(x, y, w, h, fill, stroke)
  local f = rgb(fill)
  if f then
    local x0, y0 = max(0, floor(x * SCALE + 0.5)), max(0, floor(y * SCALE + 0.5))
    local x1, y1 = min(self.W, floor((x + w) * SCALE + 0.5)), min(self.H, floor((y + h) * SCALE + 0.5))
    if x0 == 0 and y0 == 0 and x1 == self.W and y1 == self.H then -- the whole image: its background
      self.bg, self.r, self.g, self.b = f, {}, {}, {}
    else
      for py = y0, y1 - 1 do
        for px = x0, x1 - 1 do self:blend(px, py, f, 1) end
      end
    end
  end
  if stroke then
    self:line(x, y, x + w, y, stroke)
    self:line(x + w, y, x + w, y + h, stroke)
    self:line(x + w, y + h, x, y + h, stroke)
    self:line(x, y + h, x, y, stroke)
  end
end

-- adds the coverage of a segment (image pixels) of width lw into cov (pixel index -> largest coverage)
function Canvas:segment(cov, x1, y1, x2, y2, lw)
  local hw = lw / 2
  local dx, dy = x2 - x1, y2 - y1
  local len2 = dx * dx + dy * dy
  local W = self.W
  local px0, px1 = max(0, floor(min(x1, x2) - hw - 1)), min(W - 1, ceil(max(x1, x2) + hw + 1))
  local py0, py1 = max(0, floor(min(y1, y2) - hw - 1)), min(self.H - 1, ceil(max(y1, y2) + hw + 1))
  for py = py0, py1 do
    local cy = py + 0.5
    for px = px0, px1 do
      local cx = px + 0.5
      local t = len2 > 0 and ((cx - x1) * dx + (cy - y1) * dy) / len2 or 0
      if t < 0 then t = 0 elseif t > 1 then t = 1 end
      local ex, ey = cx - (x1 + t * dx), cy - (y1 + t * dy)
      local c = hw + 0.5 - sqrt(ex * ex + ey * ey)
      if c > 0 then
        if c > 1 then c = 1 end
        local i = py * W + px + 1
        if c > (cov[i] or 0) then cov[i] = c end
      end
    end
  end
end

function Canvas:fill_coverage(cov, col, a)
  local W = self.W
  for i, c in pairs(cov) do
    local p = i - 1
    self:blend(p % W, floor(p / W), col, c * a)
  end
end

-- the on-pieces of a polyline under a dash pattern ("7 4": 7 on, 4 off, in figure units), as segments
local function dashed(xs, ys, dash)
  local pattern = {}
  for v in dash:gmatch("[%d.]+") do pattern[#pattern + 1] = tonumber(v) * SCALE end
  local out, k, left, on = {}, 1, pattern[1], true
  for i = 1, #xs - 1 do
    local x1, y1, x2, y2 = xs[i], ys[i], xs[i + 1], ys[i + 1]
    local len = sqrt((x2 - x1) ^ 2 + (y2 - y1) ^ 2)
    local pos = 0
    while pos < len do
      local step = min(left, len - pos)
      if on and step > 0 then
        local a, b = pos / len, (pos + step) / len
        out[#out + 1] = { x1 + (x2 - x1) * a, y1 + (y2 - y1) * a, x1 + (x2 - x1) * b, y1 + (y2 - y1) * b }
      end
      pos, left = pos + step, left - step
      if left <= 1e-9 then
        k = k % #pattern + 1
        left, on = pattern[k], not on
        if #pattern % 2 == 1 and k == 1 then on = true end
      end
    end
  end
  return out
end

function Canvas:path(xs, ys, color, width, dash, opacity)
  local col = rgb(color)
  local sx, sy = {}, {}
  for i = 1, #xs do sx[i], sy[i] = xs[i] * SCALE, ys[i] * SCALE end
  local cov = {}
  local lw = (width or 1) * SCALE
  if #sx == 1 then
    self:segment(cov, sx[1], sy[1], sx[1], sy[1], lw)
  elseif dash then
    for _, s in ipairs(dashed(sx, sy, dash)) do self:segment(cov, s[1], s[2], s[3], s[4], lw) end
  else
    for i = 1, #sx - 1 do self:segment(cov, sx[i], sy[i], sx[i + 1], sy[i + 1], lw) end
  end
  self:fill_coverage(cov, col, opacity or 1)
end

function Canvas:line(x1, y1, x2, y2, color, width, dash)
  self:path({ x1, x2 }, { y1, y2 }, color, width or 1, dash)
end

function Canvas:circle(x, y, r, color, opacity)
  local cov = {}
  self:segment(cov, x * SCALE, y * SCALE, x * SCALE, y * SCALE, 2 * r * SCALE)
  self:fill_coverage(cov, rgb(color), opacity or 1)
end

-- opts as the SVG canvas's: anchor, size, bold, color, middle, rotate (-90)
function Canvas:text(x, y, s, opts)
  opts = opts or {}
  local col = rgb(opts.color or "black")
  local k = max(1, floor((opts.size or 11) * SCALE * 0.72 / 7 + 0.5)) -- image pixels per font pixel
  local n = #s
  local tw = n * 6 * k - k
  local ox = (opts.anchor == "middle" and -tw / 2) or (opts.anchor == "end" and -tw) or 0
  local oy = opts.middle and -3.5 * k or -7 * k -- the glyphs' top: the baseline at y, or centred on it
  local X, Y = x * SCALE, y * SCALE
  local rot = opts.rotate == -90
  local function put(u, v) -- (u, v): a font pixel's offset along and across the text
    local px, py
    if rot then px, py = X + v, Y - u else px, py = X + u, Y + v end
    for a = 0, k - 1 do
      for b = 0, k - 1 do
        if rot then self:blend(floor(px + b), floor(py - a), col, 1)
        else self:blend(floor(px + a), floor(py + b), col, 1) end
      end
    end
  end
  for ci = 1, n do
    local code = s:byte(ci)
    if code < 32 or code > 126 then code = 63 end -- '?'
    local base = (code - 32) * 5
    for colx = 0, 4 do
      local bits = FONT[base + colx + 1]
      for row = 0, 7 do
        if floor(bits / 2 ^ row) % 2 == 1 then
          local u, v = ox + ((ci - 1) * 6 + colx) * k, oy + row * k
          put(u, v)
          if opts.bold then put(u + 1, v) end
        end
      end
    end
  end
end

--- Writes the image to path as a PNG file (atomically, as lt.utils.save_image): the background, with the
--- drawn pixels scattered into it.
function Canvas:save(path)
  local lt = require "lutra"
  local n = self.W * self.H
  local idx, r, g, b = {}, {}, {}, {}
  for i, v in pairs(self.r) do
    local k = #idx + 1
    idx[k], r[k], g[k], b[k] = i, v, self.g[i], self.b[i]
  end
  local img = lt.empty(3, n)
  for c = 1, 3 do img:narrow(1, c, 1):fill_(self.bg[c]) end
  if #idx > 0 then
    img = img:scatter(2, lt.tensor({ idx, idx, idx }, "int64"), lt.tensor { r, g, b })
  end
  lt.utils.save_image(img:view(3, self.H, self.W), path, { padding = 0 })
end

return M
