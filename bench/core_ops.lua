-- core_ops.lua — elementwise and reduction ops on the same sizes as bench/core_ops_torch.py.
-- Prints "op size microseconds" lines (median of rounds) for bench/run to pair with PyTorch's.
local lt = require "lutra"
local clock = os.clock
local ok, ffi = pcall(require, "ffi")
if ok then
  ffi.cdef [[ typedef struct { long tv_sec; long tv_nsec; } lt_ts; int clock_gettime(int, lt_ts *); ]]
  local ts = ffi.new("lt_ts")
  clock = function() ffi.C.clock_gettime(1, ts); return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9 end
end

local function median(t) table.sort(t); return t[math.ceil(#t / 2)] end

local ops = {
  { "add", function(a, b) return a + b end },
  { "mul_scalar", function(a) return a * 2 end },
  { "relu", function(a) return a:relu() end },
  { "exp", function(a) return a:exp() end },
  { "sigmoid", function(a) return a:sigmoid() end },
  { "sum", function(a) return a:sum() end },
  { "sum_dim", function(a) return a:sum(2) end },
  { "softmax", function(a) return a:softmax(2) end },
  { "log_softmax", function(a) return a:log_softmax(2) end },
  { "tanh", function(a) return a:tanh() end },
  { "add_bias_row", function(a, _, bias) return a + bias end },
}
local sizes = { {64, 16}, {256, 512}, {1024, 1024} }
lt.manual_seed(0)
for _, sz in ipairs(sizes) do
  local a, b = lt.randn(sz[1], sz[2]), lt.randn(sz[1], sz[2])
  local bias = lt.randn(sz[2])
  for _, op in ipairs(ops) do
    local name, fn = op[1], op[2]
    local n = math.max(20, math.floor(2e7 / (sz[1] * sz[2])))
    local times = {}
    for _ = 1, 7 do
      local t0 = clock()
      for _ = 1, n do fn(a, b, bias) end
      times[#times + 1] = (clock() - t0) / n * 1e6
    end
    print(("%s %dx%d %.3f"):format(name, sz[1], sz[2], median(times)))
  end
end

-- ops that ported models lean on (attention masks, GELU, init), on [16, 4, 64, 64]
do
  local x = lt.randn(16, 4, 64, 64)
  local full_mask = lt.rand(16, 4, 64, 64):lt(0.5)
  local causal = lt.arange(1, 65):reshape(64, 1):lt(lt.arange(1, 65):reshape(1, 64)):reshape(1, 1, 64, 64)
  local y = lt.randn(16, 4, 64, 64)
  local F = lt.F
  local big = {
    { "masked_fill", function() return x:masked_fill(full_mask, -1e9) end },
    { "masked_fill_causal", function() return x:masked_fill(causal, -math.huge) end },
    { "where", function() return lt.where(full_mask, x, y) end },
    { "randn", function() return lt.randn(524288) end, "524288" },
    { "gelu", function() return x:gelu() end },
    { "gelu_tanh", function() return F.gelu(x, { approximate = "tanh" }) end },
    { "einsum_scores", function() return lt.einsum("bhqd,bhkd->bhqk", x, y) end },
  }
  for _, op in ipairs(big) do
    local times = {}
    for _ = 1, 7 do
      local t0 = clock()
      for _ = 1, 20 do op[2]() end
      times[#times + 1] = (clock() - t0) / 20 * 1e6
    end
    print(("%s %s %.3f"):format(op[1], op[3] or "16x4x64x64", median(times)))
  end
end
