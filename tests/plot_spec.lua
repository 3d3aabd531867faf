-- tests/plot_spec.lua — lutra.plot: learning curves from CSVLogger and JSONLinesLogger files as SVG (and PNG),
-- through the Lua API (require "lutra.plot", from lua/) and through `lutra plot` ($LUTRA_BIN, else
-- build/bin/release/cli/lutra).
--
--   busted tests/plot_spec.lua        # from the repository root

package.path = "lua/?.lua;lua/?/init.lua;" .. package.path

local plot = require "lutra.plot"

local BIN = os.getenv("LUTRA_BIN") or "build/bin/release/cli/lutra"
local PYTHON = "/usr/bin/python3"

local fs = require "helpers.fs"
local q, slurp, spit, exists = fs.q, fs.slurp, fs.spit, fs.exists

local function sh(cmdline)
  local out, err = os.tmpname(), os.tmpname()
  local p = io.popen("(" .. cmdline .. ") </dev/null >" .. q(out) .. " 2>" .. q(err) .. "; echo $?")
  local code = tonumber(p:read("*a"):match("(%d+)%s*$"))
  p:close()
  local r = { code = code, out = slurp(out) or "", err = slurp(err) or "" }
  os.remove(out)
  os.remove(err)
  return r
end

local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(sh("mkdir -p " .. q(d)).code == 0)
  return d
end

local function count(s, pattern)
  local n = 0
  for _ in s:gmatch(pattern) do n = n + 1 end
  return n
end

-- Well-formed XML? Python's parser when there is one, else a small check of tags, nesting and entities.
local function check_xml(path)
  if exists(PYTHON) then
    local r = sh(PYTHON .. " -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' " .. q(path))
    return r.code == 0, r.err
  end
  local s = slurp(path):gsub("^<%?xml[^>]*%?>", "")
  local stack = {}
  for text, tag in s:gmatch("([^<]*)(<[^>]*>)") do
    if text:find("&", 1, true) and text:gsub("&[%w#]+;", ""):find("&", 1, true) then
      return false, "bad entity in " .. text
    end
    if text:find(">", 1, true) then return false, "stray > in " .. text end
    local close, name = tag:match("^<(/?)([%w:_%-]+)")
    if not name then return false, "bad tag " .. tag end
    if close == "/" then
      if table.remove(stack) ~= name then return false, "mismatched </" .. name .. ">" end
    elseif not tag:find("/>$") then
      stack[#stack + 1] = name
    end
  end
  return #stack == 0, "unclosed " .. tostring(stack[#stack])
end

-- A Lightning-like CSVLogger file: each row logs some metrics only.
local GAPPY = table.concat({
  "epoch,step,train_loss_step,val_loss,val_acc,notes",
  "0,49,2.31,,,warmup",
  "0,99,1.72,,,",
  "0,99,,1.61,0.42,",
  "1,149,1.20,,,",
  "1,199,0.93,,,",
  "1,199,,0.98,0.67,",
  "2,249,0.71,,,",
  "2,299,0.66,,,",
  "2,299,,0.74,0.75,",
  "",
}, "\n")

describe("lutra.plot", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() sh("rm -rf " .. q(dir)) end)

  describe("svg()", function()
    it("draws a CSV with gaps as well-formed SVG with one path per metric", function()
      local csv = spit(dir .. "/metrics.csv", GAPPY)
      local out, n = plot.svg(csv, dir .. "/out.svg")
      assert.are.equal(dir .. "/out.svg", out)
      assert.are.equal(3, n)
      local ok, why = check_xml(out)
      assert.is_true(ok, why)
      local svg = slurp(out)
      assert.are.equal(3, count(svg, "<path "))
      for _, name in ipairs({ "train_loss_step", "val_loss", "val_acc" }) do
        assert.truthy(svg:find(">" .. name .. "</text>", 1, true), name)
      end
      assert.falsy(svg:find(">notes</text>", 1, true)) -- a text-only column is not a metric
      assert.truthy(svg:find('<g class="legend">', 1, true))
    end)

    it("writes curves.svg next to the CSV by default", function()
      local csv = spit(dir .. "/metrics.csv", GAPPY)
      assert.are.equal(dir .. "/curves.svg", plot.svg(csv))
      assert.truthy(exists(dir .. "/curves.svg"))
    end)

    it("joins a metric's points across the rows where it is empty", function()
      local data = plot.read(spit(dir .. "/metrics.csv", GAPPY))
      assert.are.equal("step", data.x_name)
      local val = data.metrics[2]
      assert.are.equal("val_loss", val.name)
      assert.are.same({ 99, 199, 299 }, val.xs)
      assert.are.same({ 1.61, 0.98, 0.74 }, val.ys)
      assert.are.same({ 49, 99, 149, 199, 249, 299 }, data.metrics[1].xs)
    end)

    it("draws points as circles below 30 points, not above", function()
      local rows = { "step,few,many" }
      for i = 1, 40 do rows[#rows + 1] = ("%d,%s,%g"):format(i, i % 4 == 0 and tostring(i) or "", 1 / i) end
      local svg = slurp(plot.svg(spit(dir .. "/m.csv", table.concat(rows, "\n")), dir .. "/m.svg"))
      assert.are.equal(10, count(svg, "<circle "))
      assert.are.equal(2, count(svg, "<path "))
    end)

    it("falls back to epoch for x when there is no step column", function()
      local csv = spit(dir .. "/e.csv", "epoch,val_loss\n0,1.5\n1,1.0\n2,0.8\n")
      local data = plot.read(csv)
      assert.are.equal("epoch", data.x_name)
      local svg = slurp(plot.svg(csv, dir .. "/e.svg"))
      assert.truthy(svg:find(">epoch</text>", 1, true))
    end)

    it("labels ticks with nice numbers", function()
      local csv = spit(dir .. "/t.csv", "step,loss\n0,0.23\n500,2.31\n1000,1.07\n")
      local svg = slurp(plot.svg(csv, dir .. "/t.svg"))
      for _, label in ipairs({ ">0.5<", ">1.0<", ">1.5<", ">2.0<", ">2.5<", ">200<", ">1000<" }) do
        assert.truthy(svg:find(label, 1, true), label)
      end
      assert.falsy(svg:find(">0.23<", 1, true))
    end)

    it("handles a constant metric and a single point", function()
      local csv = spit(dir .. "/c.csv", "epoch,step,lr,once\n0,1,0.1,\n0,2,0.1,5\n0,3,0.1,\n")
      local out = plot.svg(csv, dir .. "/c.svg")
      local ok, why = check_xml(out)
      assert.is_true(ok, why)
      assert.are.equal(2, count(slurp(out), "<path "))
      assert.falsy(slurp(out):find("%Wnan%W"))
      assert.falsy(slurp(out):find("%Winf%W"))
    end)

    it("escapes metric names and reads quoted CSV fields", function()
      local csv = spit(dir .. "/x.csv", 'step,"a<b & ""c""",plain\r\n1,2,3\r\n2,"4",5\r\n')
      local out = plot.svg(csv, dir .. "/x.svg")
      local ok, why = check_xml(out)
      assert.is_true(ok, why)
      assert.truthy(slurp(out):find("a&lt;b &amp; &quot;c&quot;", 1, true))
      assert.are.equal(2, count(slurp(out), "<path "))
    end)

    it("skips nan and inf cells", function()
      local data = plot.read(spit(dir .. "/n.csv", "step,loss\n1,nan\n2,inf\n3,0.5\n4,-inf\n"))
      assert.are.same({ 3 }, data.metrics[1].xs)
    end)
  end)

  -- JSONLinesLogger's file: one object a line, keys sorted, NaN and infinities as strings
  local JSONL = table.concat({
    '{"epoch":0,"step":49,"train_loss_step":2.31}',
    '{"epoch":0,"step":99,"train_loss_step":1.72}',
    '{"epoch":0,"step":99,"val_acc":0.42,"val_loss":1.61}',
    '{"epoch":1,"step":149,"train_loss_step":"nan"}',
    '{"epoch":1,"step":199,"train_loss_step":0.93}',
    '{"epoch":1,"step":199,"val_acc":0.67,"val_loss":0.98}',
    "",
  }, "\n")

  -- the text of the <g class="..."> element (up to its </g>; groups inside it are not nested here)
  local function group(svg, class)
    return svg:match('<g class="' .. class:gsub("%p", "%%%0") .. '"[^>]*>(.-)</g>')
  end

  describe("JSON lines, several runs, several metrics on one axis", function()
    it("reads a JSONLinesLogger file as it reads a CSV (nan skipped)", function()
      local data = plot.read(spit(dir .. "/metrics.jsonl", JSONL))
      assert.are.equal("step", data.x_name)
      local by = {}
      for _, m in ipairs(data.metrics) do by[m.name] = m end
      assert.are.same({ 49, 99, 199 }, by.train_loss_step.xs)
      assert.are.same({ 2.31, 1.72, 0.93 }, by.train_loss_step.ys)
      assert.are.same({ 99, 199 }, by.val_loss.xs)
      assert.are.same({ 0.42, 0.67 }, by.val_acc.ys)
      local out, n = plot.draw(dir .. "/metrics.jsonl", { out = dir .. "/j.svg" })
      assert.are.equal(2, n) -- a loss panel (train_loss_step and val_loss together) and an acc panel
      local ok, why = check_xml(out)
      assert.is_true(ok, why)
      assert.are.equal(3, count(slurp(out), "<path "))
    end)

    it("groups metrics of one kind on one axis: train_loss_step and val_loss share the loss panel", function()
      assert.are.equal("loss", plot.kind("train_loss_step"))
      assert.are.equal("loss", plot.kind("val_loss"))
      assert.are.equal("acc", plot.kind("val_acc"))
      assert.are.equal("lr-SGD", plot.kind("lr-SGD"))
      local svg = slurp(plot.draw(spit(dir .. "/m.csv", GAPPY), { out = dir .. "/k.svg" }))
      local loss = svg:match('<g class="panel" id="panel%-1">(.-)<rect x="[%d.]+" y="[%d.]+" width')
      assert.truthy(loss:find(">loss</text>", 1, true), loss)
      local legend = group(svg, "panel-legend")
      assert.truthy(legend:find(">train_loss_step</text>", 1, true), legend)
      assert.truthy(legend:find(">val_loss</text>", 1, true), legend)
      assert.falsy(legend:find("val_acc", 1, true))
    end)

    it("draws two runs and two metrics on one axis: one colour per run, one dash per metric, a legend", function()
      local a = spit(dir .. "/version_0.csv", GAPPY)
      local b = spit(dir .. "/version_1.jsonl", JSONL)
      local out, n = plot.draw({ a, b }, { metrics = { { "train_loss_step", "val_loss" } }, out = dir .. "/two.svg" })
      assert.are.equal(1, n)
      local ok, why = check_xml(out)
      assert.is_true(ok, why)
      local svg = slurp(out)
      assert.are.equal(1, count(svg, '<g class="panel" '))
      -- four curves on the one axis: each run's train_loss_step and val_loss
      local paths = {}
      for attrs in svg:gmatch("<path ([^>]*)/>") do paths[#paths + 1] = attrs end
      assert.are.equal(4, #paths)
      local colors, dashes = {}, {}
      for _, p in ipairs(paths) do
        colors[p:match('stroke="(#%x+)"')] = true
        dashes[p:match('stroke%-dasharray="([^"]*)"') or "solid"] = true
      end
      local function size(t) local k = 0 for _ in pairs(t) do k = k + 1 end return k end
      assert.are.equal(2, size(colors)) -- one per run
      assert.are.equal(2, size(dashes)) -- one per metric
      -- the runs' legend names the runs by what differs in their paths, in the runs' colours
      local legend = group(svg, "legend")
      assert.truthy(legend:find(">version_0.csv</text>", 1, true), legend)
      assert.truthy(legend:find(">version_1.jsonl</text>", 1, true), legend)
      for c in pairs(colors) do assert.truthy(legend:find('fill="' .. c .. '"', 1, true), c) end
      -- the panel's legend names both metrics with their dash patterns
      local pl = group(svg, "panel-legend")
      assert.truthy(pl:find(">train_loss_step</text>", 1, true))
      assert.truthy(pl:find(">val_loss</text>", 1, true))
      assert.truthy(pl:find("stroke-dasharray", 1, true))
      -- the first run's val_loss points (x 99, 199, 299) and the second's (99, 199) are both drawn
      assert.truthy(svg:find(">train_loss_step, val_loss</text>", 1, true))
    end)

    -- a PNG's width and height (its IHDR), and, through Python's zlib, how many pixels have each colour
    local PNG_PIXELS = [[
import sys, zlib, struct
data = open(sys.argv[1], 'rb').read()
assert data[:8] == b'\x89PNG\r\n\x1a\n'
pos, idat, w, h, ctype = 8, b'', 0, 0, 0
while pos < len(data):
    n, kind = struct.unpack('>I4s', data[pos:pos + 8]); body = data[pos + 8:pos + 8 + n]; pos += 12 + n
    if kind == b'IHDR': w, h, depth, ctype = struct.unpack('>IIBB', body[:10])
    if kind == b'IDAT': idat += body
bpp = {2: 3, 6: 4}[ctype]
raw, stride, prev, out, i = zlib.decompress(idat), w * bpp, bytearray(w * bpp), {}, 0
for y in range(h):
    f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride]); i += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0; b = prev[x]; c = prev[x - bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    for x in range(0, stride, bpp):
        k = '#%02x%02x%02x' % tuple(line[x:x + 3]); out[k] = out.get(k, 0) + 1
    prev = line
print(w, h, out.get('#1f77b4', 0), out.get('#ff7f0e', 0), out.get('#ffffff', 0))
]]

    it("writes a PNG image when the output ends in .png: the figure at twice its size, the runs' colours", function()
      local a = spit(dir .. "/version_0.csv", GAPPY)
      local b = spit(dir .. "/version_1.jsonl", JSONL)
      local opts = { metrics = { { "train_loss_step", "val_loss" } } }
      opts.out = dir .. "/two.svg"
      plot.draw({ a, b }, opts)
      local svg = slurp(dir .. "/two.svg")
      local sw, shh = svg:match('<svg [^>]*width="(%d+)" height="(%d+)"')
      opts.out = dir .. "/two.png"
      local out, n = plot.draw({ a, b }, opts)
      assert.are.equal(dir .. "/two.png", out)
      assert.are.equal(1, n)
      local png = slurp(out)
      assert.are.equal("\137PNG\r\n\26\n", png:sub(1, 8))
      local function u32(s, i) local b1, b2, b3, b4 = s:byte(i, i + 3) return ((b1 * 256 + b2) * 256 + b3) * 256 + b4 end
      assert.are.equal(2 * tonumber(sw), u32(png, 17))
      assert.are.equal(2 * tonumber(shh), u32(png, 21))
      if not exists(PYTHON) then return end
      local script = spit(dir .. "/png_pixels.py", PNG_PIXELS)
      local r = sh(PYTHON .. " " .. q(script) .. " " .. q(out))
      assert.are.equal(0, r.code, r.err)
      local w, h, blue, orange, white = r.out:match("(%d+) (%d+) (%d+) (%d+) (%d+)")
      assert.are.equal(2 * tonumber(sw), tonumber(w))
      assert.are.equal(2 * tonumber(shh), tonumber(h))
      -- the two runs' curves and legend swatches are drawn in their colours (hundreds of pixels each); the
      -- background is white
      assert.is_true(tonumber(blue) > 300, "blue pixels: " .. blue)
      assert.is_true(tonumber(orange) > 300, "orange pixels: " .. orange)
      assert.is_true(tonumber(white) > tonumber(w) * tonumber(h) / 2, "white pixels: " .. white)
    end)

    it("one panel per --metrics group", function()
      local csv = spit(dir .. "/m.csv", GAPPY)
      local _, n = plot.draw(csv, { metrics = { "val_loss,val_acc", { "train_loss_step" } }, out = dir .. "/g.svg" })
      assert.are.equal(2, n)
      local svg = slurp(dir .. "/g.svg")
      assert.truthy(svg:find(">val_loss, val_acc</text>", 1, true))
      assert.are.equal(3, count(svg, "<path "))
    end)

    it("x = epoch draws one point per epoch: the mean of the epoch's values", function()
      local data = plot.read(spit(dir .. "/m.csv", GAPPY), { x = "epoch" })
      assert.are.equal("epoch", data.x_name)
      assert.are.same({ 0, 1, 2 }, data.metrics[1].xs)
      local ys = data.metrics[1].ys
      assert.is_true(math.abs(ys[1] - (2.31 + 1.72) / 2) < 1e-12 and math.abs(ys[3] - (0.71 + 0.66) / 2) < 1e-12)
    end)

    it("smooth = K draws the mean of the last K points over the faint raw curve", function()
      local rows = { "step,loss" }
      for i = 1, 6 do rows[#rows + 1] = ("%d,%d"):format(i, i % 2 == 0 and 4 or 0) end -- 0 4 0 4 0 4
      local csv = spit(dir .. "/s.csv", table.concat(rows, "\n"))
      local svg = slurp(plot.draw(csv, { smooth = 2, out = dir .. "/s.svg" }))
      assert.are.equal(1, count(svg, '<path class="raw"'))
      assert.are.equal(1, count(svg, '<path class="curve"'))
      -- y of the smoothed curve: 0 at the first point, 2 (the mean of 0 and 4) after: one flat line at 2
      local d = svg:match('<path class="curve" d="([^"]*)"')
      local ys = {}
      for y in d:gmatch("[ML][%d.]+ ([%d.]+)") do ys[#ys + 1] = y end
      assert.are.equal(6, #ys)
      for i = 3, 6 do assert.are.equal(ys[2], ys[i]) end
      assert.are_not.equal(ys[1], ys[2])
    end)
  end)

  describe("errors name the file", function()
    it("missing file", function()
      local ok, err = pcall(plot.svg, dir .. "/nope.csv")
      assert.is_false(ok)
      assert.truthy(err:find("cannot open " .. dir .. "/nope.csv", 1, true), err)
    end)

    it("empty file: no header", function()
      local ok, err = pcall(plot.svg, spit(dir .. "/empty.csv", ""))
      assert.is_false(ok)
      assert.truthy(err:find(dir .. "/empty.csv: no header row", 1, true), err)
    end)

    it("numbers in the first row: no header", function()
      local ok, err = pcall(plot.svg, spit(dir .. "/nh.csv", "1,2\n3,4\n"))
      assert.is_false(ok)
      assert.truthy(err:find("nh.csv: no header row", 1, true), err)
    end)

    it("no numeric metric columns", function()
      local ok, err = pcall(plot.svg, spit(dir .. "/none.csv", "epoch,step,name\n0,1,abc\n0,2,\n"))
      assert.is_false(ok)
      assert.truthy(err:find(dir .. "/none.csv: no numeric metric column", 1, true), err)
      ok, err = pcall(plot.svg, spit(dir .. "/hdr.csv", "epoch,step,loss\n"))
      assert.is_false(ok)
      assert.truthy(err:find("hdr.csv: no numeric metric column", 1, true), err)
    end)

    it("a line that is not a JSON object names the file and the line", function()
      local ok, err = pcall(plot.read, spit(dir .. "/bad.jsonl", '{"step":1,"loss":2}\n[1,2]\n'))
      assert.is_false(ok)
      assert.truthy(err:find(dir .. "/bad.jsonl:2: not a JSON object", 1, true), err)
      ok, err = pcall(plot.read, spit(dir .. "/bad2.jsonl", '{"step":1,"loss":2}\n{"step":\n'))
      assert.is_false(ok)
      assert.truthy(err:find("bad2.jsonl:2: not a JSON object", 1, true), err)
    end)

    it("a metric no file has, an x column the file lacks, a bad smooth", function()
      local csv = spit(dir .. "/m.csv", GAPPY)
      local ok, err = pcall(plot.draw, csv, { metrics = { "val_los" }, out = dir .. "/x.svg" })
      assert.is_false(ok)
      assert.truthy(err:find("no metric 'val_los' in " .. dir .. "/m.csv (metrics: train_loss_step, val_loss, val_acc)",
        1, true), err)
      ok, err = pcall(plot.read, spit(dir .. "/e.csv", "step,loss\n1,2\n"), { x = "epoch" })
      assert.is_false(ok)
      assert.truthy(err:find("e.csv: no 'epoch' column for x (columns: step, loss)", 1, true), err)
      ok, err = pcall(plot.draw, csv, { smooth = 0.5 })
      assert.is_false(ok)
      assert.truthy(err:find("smooth must be a whole number of points >= 1, got 0.5", 1, true), err)
      ok, err = pcall(plot.draw, csv, { smoth = 2 })
      assert.is_false(ok)
      assert.truthy(err:find("unknown option 'smoth'", 1, true), err)
    end)

    it("unwritable output", function()
      local csv = spit(dir .. "/metrics.csv", GAPPY)
      local ok, err = pcall(plot.svg, csv, dir .. "/no/such/dir/out.svg")
      assert.is_false(ok)
      assert.truthy(err:find("cannot write " .. dir .. "/no/such/dir/out.svg", 1, true), err)
    end)
  end)

  describe("lutra plot", function()
    local function need_bin()
      assert(exists(BIN), "no lutra binary at " .. BIN .. " (build it, or set LUTRA_BIN)")
    end
    local skip = require("helpers.puc").needs_luajit("`lutra plot` is the lutra binary, which embeds LuaJIT")
    if skip then pending(skip) return end

    it("writes curves.svg next to METRICS.csv", function()
      need_bin()
      local csv = spit(dir .. "/metrics.csv", GAPPY)
      local r = sh(q(BIN) .. " plot " .. q(csv))
      assert.are.equal(0, r.code, r.err)
      assert.truthy(r.out:find(dir .. "/curves.svg", 1, true), r.out)
      local ok, why = check_xml(dir .. "/curves.svg")
      assert.is_true(ok, why)
      assert.are.equal(3, count(slurp(dir .. "/curves.svg"), "<path "))
    end)

    it("writes to -o", function()
      need_bin()
      local csv = spit(dir .. "/metrics.csv", GAPPY)
      local r = sh(q(BIN) .. " plot " .. q(csv) .. " -o " .. q(dir .. "/o.svg"))
      assert.are.equal(0, r.code, r.err)
      assert.truthy(exists(dir .. "/o.svg"))
      assert.falsy(exists(dir .. "/curves.svg"))
    end)

    it("exits 1 with a message naming the file, without a traceback", function()
      need_bin()
      local r = sh(q(BIN) .. " plot " .. q(dir .. "/missing.csv"))
      assert.are.equal(1, r.code)
      assert.truthy(r.err:find("^lutra plot: cannot open " .. dir:gsub("%p", "%%%0") .. "/missing%.csv"), r.err)
      assert.falsy(r.err:find("traceback", 1, true), r.err)
      r = sh(q(BIN) .. " plot " .. q(spit(dir .. "/bad.csv", "epoch,step\n0,1\n")))
      assert.are.equal(1, r.code)
      assert.truthy(r.err:find("bad.csv: no numeric metric column", 1, true), r.err)
    end)

    it("takes several files (CSV and JSON lines), --metrics, --x and --smooth", function()
      need_bin()
      local a = spit(dir .. "/a.csv", GAPPY)
      local b = spit(dir .. "/b.jsonl", JSONL)
      local r = sh(q(BIN) .. " plot " .. q(a) .. " " .. q(b) .. " --metrics train_loss_step,val_loss --metrics val_acc" ..
        " --x epoch --smooth 2 -o " .. q(dir .. "/ab.svg"))
      assert.are.equal(0, r.code, r.err)
      assert.truthy(r.out:find("wrote " .. dir .. "/ab.svg (2 panels, 2 runs)", 1, true), r.out)
      local svg = slurp(dir .. "/ab.svg")
      assert.are.equal(6, count(svg, '<path class="curve"')) -- 2 runs x 3 metrics
      assert.truthy(svg:find(">epoch</text>", 1, true))
      r = sh(q(BIN) .. " plot " .. q(a) .. " --x time")
      assert.are.equal(1, r.code)
      assert.truthy(r.err:find("lutra plot: --x must be step or epoch, got time", 1, true), r.err)
      r = sh(q(BIN) .. " plot " .. q(a) .. " --smooth")
      assert.are.equal(1, r.code)
      assert.truthy(r.err:find("--smooth needs a whole number of points >= 1", 1, true), r.err)
    end)

    it("prints its usage without a file, exits 1", function()
      need_bin()
      local r = sh(q(BIN) .. " plot")
      assert.are.equal(1, r.code)
      assert.truthy(r.err:find("usage: lutra plot FILES... [--metrics a,b]... [--x step|epoch] [--smooth K] " ..
        "[-o out.svg|out.png]", 1, true), r.err)
    end)
  end)
end)
