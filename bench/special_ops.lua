-- bench/special_ops.lua — a workload of the special functions' kernels (core/src/ops_special.c and
-- ops_special_binary.c) for callgrind's instruction counts, which do not move with the machine's load: float32
-- and float64, forward and backward, strided views, a broadcast number, int64. One thread, 5 rounds of 64K
-- elements an op. Compare two builds by their totals ("I refs"):
--   valgrind --tool=callgrind --callgrind-out-file=/dev/null ./build/bin/release/cli/lutra bench/special_ops.lua [unary|binary]
local lt = require "lutra"
lt.set_num_threads(1)
lt.manual_seed(1)
local which = arg and arg[1] or "all"
local n = 65536
local x = lt.rand(n):mul(0.8):add(0.1)
local xd = x:double()
local y = lt.rand(n):add(0.5)
local s = lt.rand(256, 512):add(0.1)
local xi = lt.randint(1, 100, { n })
local yi = lt.randint(1, 7, { n })
for _ = 1, 5 do
  if which == "all" or which == "unary" then
    x:tan(); x:digamma(); x:asin(); xd:tan(); s:t():log2()
    local xg = x:clone():requires_grad(true)
    xg:atan():sum():backward()
  end
  if which == "all" or which == "binary" then
    lt.atan2(x, y); lt.fmod(x, y); lt.remainder(x, 0.3); lt.fmax(xd, y:double()); lt.fmod(s:t(), s:t():contiguous())
    lt.fmod(xi, yi); lt.floor_divide(xi, 3)
    local xg = x:clone():requires_grad(true)
    lt.atan2(xg, y):sum():backward()
  end
end
