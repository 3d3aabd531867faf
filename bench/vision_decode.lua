-- bench/vision_decode.lua DIR — lutra's side of bench/vision_decode.sh: lt.vision.io.decode_image(bytes, "rgb") of
-- each file of DIR, from bytes in memory to the [3 x H x W] float32 pixel image, and prints "name
-- milliseconds_per_image" (CPU time, median of 7 rounds), as bench/vision_decode_pil.py does for PIL.
local lt = require "lutra"
local dir = assert(arg[1], "usage: lutra bench/vision_decode.lua DIR")
local clock = os.clock -- CPU time of this process: the machine is shared, wall time would measure the others
local names = lt._io.listdir(dir)
table.sort(names)
for _, name in ipairs(names) do
  local f = assert(io.open(dir .. "/" .. name, "rb"))
  local bytes = f:read("*a")
  f:close()
  local reps, rounds = 20, {}
  for r = 1, 7 do
    local t0 = clock()
    for _ = 1, reps do lt.vision.io.decode_image(bytes, "rgb") end
    rounds[r] = (clock() - t0) / reps * 1e3
  end
  table.sort(rounds)
  print(name, string.format("%.4f", rounds[4]))
end
