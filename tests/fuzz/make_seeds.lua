-- tests/fuzz/make_seeds.lua — writes the committed seed corpus of each fuzz target (tests/fuzz/corpus/):
-- small valid inputs of each format and a few broken ones, so the fuzzer starts from real structure.
-- Deterministic. The corpus also keeps the inputs (named by their SHA-1) that a long run found to reach new
-- code: `tests/fuzz/run 1800`, then `build/fuzz/<target> -merge=1 tests/fuzz/corpus/<target>
-- build/fuzz/corpus/<target>` (docs/reliability.md). Run from the repository root after a build:
--   LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' LUA_CPATH='./build/bin/release/?.so;;' luajit tests/fuzz/make_seeds.lua
local lt = require "lutra"
local ck = require "lutra.checkpoint"

local ROOT = "tests/fuzz/corpus/"
local function put(target, name, bytes)
  lt._io.mkdirs(ROOT .. target)
  local f = assert(io.open(ROOT .. target .. "/" .. name, "wb"))
  f:write(bytes)
  f:close()
end

-- IDX: magic 0 0, type, ndims, big-endian uint32 sizes, data
local function be32(n)
  return string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256)
end
local function idx(code, dims, data)
  local s = { "\0\0", string.char(code, #dims) }
  for _, d in ipairs(dims) do s[#s + 1] = be32(d) end
  s[#s + 1] = data
  return table.concat(s)
end
local idx_seeds = {
  u8_images = idx(0x08, { 2, 3, 3 }, string.rep("\1\2\3", 6)),
  u8_labels = idx(0x08, { 4 }, "\0\1\2\9"),
  i8 = idx(0x09, { 3 }, "\255\0\1"),
  i16 = idx(0x0B, { 2 }, "\1\0\255\255"),
  i32 = idx(0x0C, { 1, 2 }, "\0\0\0\1\128\0\0\0"),
  f32 = idx(0x0D, { 2 }, "\63\128\0\0\127\192\0\0"),
  f64 = idx(0x0E, { 1 }, "\63\240\0\0\0\0\0\0"),
  truncated = idx(0x08, { 2, 2 }, "\1\2\3"),
  trailing = idx(0x08, { 1 }, "\1\2"),
}
for name, s in pairs(idx_seeds) do
  put("fuzz_idx", name, s)
  put("fuzz_idx_gz", name, s)
end
-- a gzip stream for the raw target (gzip -n: no name or time stamp, so the bytes are the same each run)
local gz = assert(io.popen("gzip -n -c > " .. ROOT .. "fuzz_idx/u8_images.gz", "w"))
gz:write(idx_seeds.u8_images)
gz:close()

-- safetensors / lt.load_bytes / checkpoint metadata
lt.manual_seed(1)
local model = { fc = lt.nn.Linear(3, 2) }
local weights = lt.save_bytes(model)
local ints = lt.save_bytes { ids = lt.tensor({ 1, 2, 3 }, "int64"), s = lt.tensor(2.5) }
local foreign = (function()
  local hdr = '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
  while #hdr % 8 ~= 0 do hdr = hdr .. " " end
  local n = #hdr
  local len = string.char(n % 256, math.floor(n / 256) % 256, 0, 0, 0, 0, 0, 0)
  return len .. hdr .. "\0\0\128\63\0\0\0\64"
end)()
-- a trainer's checkpoint (Adam, StepLR, loops, loaders, RNG)
local ds = lt.data.TensorDataset(lt.randn(8, 3), lt.randn(8, 2))
function model:training_step(b) return lt.F.mse_loss(self.fc(b[1]), b[2]) end
function model:configure_optimizers()
  local opt = lt.optim.Adam(lt.nn.parameters(self), { lr = 0.01 })
  return { optimizer = opt, lr_scheduler = lt.optim.lr_scheduler.StepLR(opt, { step_size = 1 }) }
end
local t = lt.Trainer { max_epochs = 1, logger = false, enable_checkpointing = false, enable_progress_bar = false,
  enable_model_summary = false }
t:fit(model, lt.data.DataLoader(ds, { batch_size = 4 }))
local tmp = os.tmpname()
t:save_checkpoint(tmp)
local f = assert(io.open(tmp, "rb"))
local trainer_ckpt = f:read("*a")
f:close()
os.remove(tmp)
for _, target in ipairs { "fuzz_safetensors", "fuzz_load_bytes" } do
  put(target, "weights", weights)
  put(target, "int64_and_scalar", ints)
  put(target, "foreign", foreign)
  put(target, "trainer_checkpoint", trainer_ckpt)
  put(target, "truncated", weights:sub(1, 60))
end
local _, _, meta = lt._io.load_bytes(trainer_ckpt)
put("fuzz_ckpt_meta", "trainer", meta.lutra)
local _, _, wmeta = lt._io.load_bytes(weights)
put("fuzz_ckpt_meta", "weights", wmeta.lutra)
put("fuzz_ckpt_meta", "floats_and_keys", ck.encode { a = { 1 / 0, -1 / 0, 0 / 0 }, ["#k"] = 1, [3] = "x", s = "q\"\n" })

-- CSV
put("fuzz_csv", "header", "a,b,c\n1,2,3\n4.5,-6,7e3\n")
put("fuzz_csv", "no_header", "1;2\n3;4\n")
put("fuzz_csv", "quoted_bom_crlf", "\239\187\191\"x\",'y'\r\n\"1\",nan\r\n-inf,+inf\r\n")
put("fuzz_csv", "ragged", "a,b\n1\n")
put("fuzz_csv", "blank_lines", "\n\na\n\n1\n")
print("seeds written to " .. ROOT)
