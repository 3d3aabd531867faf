-- ckpt_kill_test.lua — the child of the SIGKILL test in checkpoint_spec.lua: saves checkpoints to one path
-- in a loop, each one's tensors filled with its number, and appends "saved N" to a log after each save.
-- The parent kills it (SIGKILL) at many moments and checks that the file at the path always loads, whole,
-- as the last logged save or the one after it.
--   luajit tests/ckpt_kill_test.lua CKPT_PATH LOG_PATH [MEGABYTES]
local lt = require "lutra"
local path, log_path, mb = arg[1], arg[2], tonumber(arg[3] or "4")
assert(path and log_path, "usage: ckpt_kill_test.lua CKPT_PATH LOG_PATH [MEGABYTES]")
local n = math.floor(mb * 1024 * 1024 / 4)
local big = lt.zeros(n)
local small = lt.zeros(3, 5)
local log = assert(io.open(log_path, "a"))
local i = 0
while true do
  i = i + 1
  big:fill_(i)
  small:fill_(-i)
  lt.save(path, { big = big, small = small, count = lt.tensor({ i }, "int64") })
  log:write("saved ", i, "\n")
  log:flush()
end
