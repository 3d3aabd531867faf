-- tests/helpers/md_links.lua — the link checker of tests/docs_spec.lua: every relative link of a Markdown file
-- ([text](path), [text](path#anchor), [text](#anchor)) names a file that exists and, for an anchor, a heading
-- of that file (GitHub's anchors: the heading's text lower-cased, punctuation dropped, spaces as '-', a
-- repeated heading getting -1, -2, ...); and every path `docs/....md` (or `reference/....md` inside docs/) that
-- code, comments and error messages mention exists; and every source file the docs name exists. Plain Lua,
-- no lutra.
local M = {}

local slurp = require("helpers.fs").slurp -- (plain Lua too: fs.lua loads lutra only for tmpdir)

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- the lines of text outside fenced code blocks, as {line number -> text}
local function prose_lines(text)
  local out, inside, n = {}, false, 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if line:match("^%s*```") then
      inside = not inside
    elseif not inside then
      out[n] = line
    end
  end
  return out
end

-- UTF-8 punctuation GitHub drops from anchors (the letters of other scripts stay)
local DROPPED = { "\226\128\148", "\226\128\147", "\226\128\156", "\226\128\157", "\226\128\152", "\226\128\153",
  "\226\128\166", "\194\183", "\226\134\146" }

--- GitHub's anchor of a heading's text (without the repeat suffix).
function M.slug(heading)
  local s = heading:gsub("%[([^%]]*)%]%([^)]*%)", "%1") -- a link in a heading: its text
  for _, p in ipairs(DROPPED) do s = s:gsub(p, "") end
  s = s:lower():gsub("[^%w%s%-_\128-\255]", ""):gsub("%s", "-")
  return s
end

--- The set of anchors of a Markdown text.
function M.anchors(text)
  local set, seen = {}, {}
  local lines = prose_lines(text)
  local numbers = {}
  for n in pairs(lines) do numbers[#numbers + 1] = n end
  table.sort(numbers)
  for _, n in ipairs(numbers) do
    local title = lines[n]:match("^#+%s+(.-)%s*#*%s*$")
    if title then
      local s = M.slug(title)
      local k = seen[s]
      set[k and (s .. "-" .. k) or s] = true
      seen[s] = (k or 0) + 1
    end
  end
  return set
end

local function dirname(path) return path:match("^(.*)/[^/]*$") or "." end

-- a/b/../c -> a/c
local function normalize(path)
  local parts = {}
  for part in path:gmatch("[^/]+") do
    if part == ".." and #parts > 0 and parts[#parts] ~= ".." then
      parts[#parts] = nil
    elseif part ~= "." then
      parts[#parts + 1] = part
    end
  end
  return (path:sub(1, 1) == "/" and "/" or "") .. table.concat(parts, "/")
end

--- The broken relative links of the Markdown files `paths` (relative to the current directory), as a list of
--- "file:line: [text](target): why".
function M.broken_links(paths)
  local problems, anchor_cache = {}, {}
  local function anchors_of(file)
    if anchor_cache[file] == nil then anchor_cache[file] = M.anchors(slurp(file) or "") end
    return anchor_cache[file]
  end
  for _, path in ipairs(paths) do
    local lines = prose_lines(assert(slurp(path), path))
    local numbers = {}
    for n in pairs(lines) do numbers[#numbers + 1] = n end
    table.sort(numbers)
    for _, n in ipairs(numbers) do
      local line = lines[n]:gsub("``[^`]*``", ""):gsub("`[^`]*`", "")
      for text, target in line:gmatch("%[([^%]]*)%]%(<?([^)%s>]+)>?[^)]*%)") do
        if not target:match("^%a[%w+.-]*:") then -- not https:, mailto:, ...
          local file, anchor = target:match("^([^#]*)#?(.*)$")
          local resolved = file == "" and path or normalize(dirname(path) .. "/" .. file)
          local why
          if not exists(resolved) then
            why = "no file " .. resolved
          elseif anchor ~= "" and resolved:match("%.md$") and not anchors_of(resolved)[anchor] then
            why = "no heading with the anchor #" .. anchor .. " in " .. resolved
          end
          if why then
            problems[#problems + 1] = string.format("%s:%d: [%s](%s): %s", path, n, text, target, why)
          end
        end
      end
    end
  end
  return problems
end

--- The mentions of documentation files that do not exist in the files `paths`: `docs/<page>.md` (from the
--- repository root) anywhere, and `reference/<page>.md` inside docs/ (from docs/), as "file:line: path".
function M.broken_mentions(paths)
  local problems = {}
  for _, path in ipairs(paths) do
    local n = 0
    for line in ((slurp(path) or "") .. "\n"):gmatch("([^\n]*)\n") do
      n = n + 1
      for mention in line:gmatch("docs/[%w_%-/]+%.md") do
        if not exists(mention) then problems[#problems + 1] = path .. ":" .. n .. ": " .. mention end
      end
      if path:match("^docs/") then
        for before, mention in line:gmatch("(.?)(reference/[%w_%-]+%.md)") do
          if before ~= "/" and not exists("docs/" .. mention) then
            problems[#problems + 1] = path .. ":" .. n .. ": " .. mention
          end
        end
      end
    end
  end
  return problems
end

-- the folders of the repository whose files the docs name
local SOURCE_DIRS = { "lua/", "core/", "tests/", "examples/", "models/", "bench/" }
local SOURCE_EXT = { lua = true, c = true, h = true, py = true, sh = true, md = true, proto = true }

--- The source files the Markdown files `paths` name (`lua/lutra/nn/module.lua`, `core/src/ops_binary.c`, ...)
--- that do not exist, as "file:line: path". A path with a wildcard (`core/src/*.h`) or without a file name
--- is not checked.
function M.broken_source_mentions(paths)
  local problems = {}
  for _, path in ipairs(paths) do
    local n = 0
    for line in ((slurp(path) or "") .. "\n"):gmatch("([^\n]*)\n") do
      n = n + 1
      for _, dir in ipairs(SOURCE_DIRS) do
        for at, mention in line:gmatch("()(" .. dir:gsub("%p", "%%%0") .. "[%w_./%-]+)") do
          mention = mention:gsub("[.]+$", "")
          local ext = mention:match("%.(%w+)$")
          local before = at > 1 and line:sub(at - 1, at - 1) or ""
          if ext and SOURCE_EXT[ext] and not before:match("[%w_./%-]") and not exists(mention) then
            problems[#problems + 1] = path .. ":" .. n .. ": " .. mention
          end
        end
      end
    end
  end
  return problems
end

return M
