-- core/build_progress.lua — the build's progress, for ./lutra. Two commands:
--
--   luajit core/build_progress.lua count BUILD CONFIG
--     prints the number of steps `make -C BUILD config=CONFIG` will run, from its dry run (make -n -k: -k
--     because in a fresh tree the dry run cannot go past a link whose library is not built yet): the compiles
--     it lists ("echo name.c") and the links ("echo Linking P"), plus the links a dry run cannot list: a
--     project that links a library being relinked is relinked too (BUILD/Makefile, premake's solution
--     makefile, says which project depends on which: "P: dep1 dep2").
--
--   luajit core/build_progress.lua show TOTAL LABEL tty|lines < (make's output)
--     premake's makefiles print each source's name as they compile it and "Linking P" as they link; each
--     such line is a step. LABEL is what is built ("release").
--     tty: one line on the terminal, rewritten in place at each step ("\r...\27[K"), ended by a newline.
--     lines: for a log or a pipe, a line at each quarter (25%, 50%, 75%, 100%): a few lines, never one a file.
--     The last line of the input is make's exit status, "make: exit status N" (./lutra adds it): when 0, the
--     count ends at what make did ("[n/n] 100%"), also when TOTAL was above or below it; otherwise it stays
--     where make stopped (./lutra then shows the errors). make's own output is not repeated (./lutra keeps it
--     in make.log).
local function usage()
  io.stderr:write("build_progress.lua: usage: luajit core/build_progress.lua count BUILD CONFIG\n" ..
    "       luajit core/build_progress.lua show TOTAL LABEL tty|lines\n")
  os.exit(2)
end

local SOURCE = "^[%w_.+-]+%.c$"
local SOURCE_CPP = "^[%w_.+-]+%.cpp$"

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function count(build, config)
  local makefile_path = build .. "/Makefile"
  local f = io.open(makefile_path)
  if not f then
    io.stderr:write("build_progress.lua: cannot read ", makefile_path, "\n")
    os.exit(1)
  end
  local deps = {} -- project -> the projects it depends on (the solution makefile's rules)
  for line in f:lines() do
    local target, list = line:match("^([%w_.+-]+):%s*(.*)$")
    if target and target ~= "all" and target ~= "clean" and target ~= "help" then
      deps[target] = {}
      for d in list:gmatch("%S+") do deps[target][#deps[target] + 1] = d end
    end
  end
  f:close()
  local compiles, links = 0, {}
  local dry = assert(io.popen("make -n -k -C " .. q(build) .. " config=" .. q(config) .. " 2>/dev/null"))
  for line in dry:lines() do
    local cmd = line:match("^echo (.*)$")
    if cmd then
      if cmd:match(SOURCE) or cmd:match(SOURCE_CPP) then compiles = compiles + 1 end
      local p = cmd:match("^Linking (%S+)$")
      if p then links[p] = true end
    end
  end
  dry:close()
  -- a project relinks when one it depends on relinks (to a fixed point: the chains are short)
  local changed = true
  while changed do
    changed = false
    for p, ds in pairs(deps) do
      if not links[p] then
        for _, d in ipairs(ds) do
          if links[d] then
            links[p], changed = true, true
            break
          end
        end
      end
    end
  end
  local n = compiles
  for _ in pairs(links) do n = n + 1 end
  io.write(n, "\n")
end

local function show(total, label, mode)
  local done, quarter, last = 0, 0, nil
  local function head(n, of)
    return string.format("lutra: building (%s) [%d/%d] %3d%%", label, n, of, math.floor(100 * n / of))
  end
  local make_status
  for line in io.lines() do
    make_status = tonumber(line:match("^make: exit status (%d+)$")) or make_status
    local step = line:match(SOURCE) or line:match(SOURCE_CPP) or line:match("^Linking %S+$")
    if step then
      done = done + 1
      if done > total then total = done end -- a step the count did not foresee: never above 100%
      if mode == "tty" then
        io.write("\r", head(done, total), " ", step, "\27[K")
        io.flush()
      elseif math.floor(4 * done / total) > quarter then
        quarter = math.floor(4 * done / total)
        last = head(done, total)
        io.write(last, "\n")
        io.flush()
      end
    end
  end
  if done == 0 then return end
  if make_status ~= 0 then -- failed (or stopped): the line stays where make stopped
    if mode == "tty" then io.write("\n") end
  elseif mode == "tty" then -- every step make had is done
    io.write("\r", head(done, done), "\27[K\n")
  elseif last ~= head(done, done) then
    io.write(head(done, done), "\n")
  end
end

if arg[1] == "count" and arg[2] and arg[3] then
  count(arg[2], arg[3])
elseif arg[1] == "show" then
  local total = tonumber(arg[2])
  if not total or total < 0 or not arg[3] or (arg[4] ~= "tty" and arg[4] ~= "lines") then usage() end
  show(total, arg[3], arg[4])
else
  usage()
end
