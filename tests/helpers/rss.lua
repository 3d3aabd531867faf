-- tests/helpers/rss.lua — the resident set size of this process in KiB (Linux /proc), for memory checks that run
-- in a child process (`require "tests.helpers.rss"` from the repository root).
return function()
  local f = assert(io.open("/proc/self/statm"))
  local _, resident = f:read("*n", "*n")
  f:close()
  return resident * 4 -- pages of 4 KiB
end
