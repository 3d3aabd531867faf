-- bench/dist_bench.lua — data-parallel training over MPI on this machine (issue 9):
--   1. MLP 784-256-256-10 training (Trainer, SGD momentum, Fashion-MNIST) in samples/s:
--      1 rank x 1 thread, 1 rank x 2 threads, 2 ranks x 1 thread (strategy ddp), same global batch;
--      for ddp also the gradient all-reduce per step (time, exposed wait, bytes, buckets);
--   2. all_reduce of float32 buffers from 4 KiB to 64 MiB on 2 ranks over loopback (shared memory):
--      time per call, algorithmic bandwidth (bytes / time) and bus bandwidth (x 2(W-1)/W);
--   3. the bucket size sweep on the MLP step (bucket_cap_mb 1/16 .. 25): step time and exposed wait.
--
--   ./lutra bench/dist_bench.lua [--quick] [--rounds N] [--only 1,2,3]
-- OpenMPI parameters pass through the environment (e.g. OMPI_MCA_btl_vader_single_copy_mechanism=none).
-- The driver runs the workers with `mpirun --allow-run-as-root --oversubscribe` and the lutra binary
-- ($LUTRA_BIN, default ./$LUTRA_BUILD_DIR/bin/release/cli/lutra); each prints one line "RESULT <lua table>".
local lt = require "lutra"
local ffi = require "ffi"
ffi.cdef [[ typedef struct { long tv_sec; long tv_nsec; } lt_dbench_timespec;
            int clock_gettime(int clk, lt_dbench_timespec *ts); ]]
local function now()
  local ts = ffi.new("lt_dbench_timespec")
  ffi.C.clock_gettime(1, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local ser = require "tests.helpers.ser" -- run from the repository root, as bench/run does

local function median(t)
  local c = {}
  for i, v in ipairs(t) do c[i] = v end
  table.sort(c)
  local n = #c
  if n == 0 then return 0 / 0 end
  if n % 2 == 1 then return c[(n + 1) / 2] end
  return (c[n / 2] + c[n / 2 + 1]) / 2
end

-- ---- workers (under mpirun) -------------------------------------------------------------------------------

local function load_data(n)
  local ok, ds = pcall(lt.data.FashionMNIST, { train = true })
  local x, y
  if ok then
    x, y = ds.data:narrow(1, 1, n):reshape(n, 784), ds.targets:narrow(1, 1, n)
  else -- synthetic stand-in
    lt.manual_seed(0)
    x = lt.rand(n, 784)
    local labels = {}
    for i = 1, n do labels[i] = (i * 7) % 10 + 1 end
    y = lt.tensor(labels, "int64")
  end
  return lt.data.TensorDataset(x:contiguous(), y:contiguous())
end

local function worker_train(opts)
  lt.set_num_threads(opts.threads)
  local W = tonumber(os.getenv("OMPI_COMM_WORLD_SIZE") or "1")
  local per_rank = math.floor(opts.global_batch / W)
  local steps, warm = opts.steps, opts.warmup
  local ds = load_data(per_rank * W * (steps + 1))
  lt.manual_seed(1)
  local model = { net = lt.nn.Sequential { lt.nn.Linear(784, 256), lt.nn.ReLU(), lt.nn.Linear(256, 256), lt.nn.ReLU(),
    lt.nn.Linear(256, 10) } }
  function model:training_step(batch) return lt.F.cross_entropy(self.net(batch[1]), batch[2]) end
  function model:configure_optimizers() return lt.optim.SGD(self.net:parameters(), { lr = 0.05, momentum = 0.9 }) end
  local t0, t1, stats0
  local timer = {
    on_train_batch_start = function(_, trainer, _, _, batch_idx)
      if batch_idx == warm then
        t0 = now()
        stats0 = trainer._ddp and trainer._ddp.reducer:stats() or nil
      end
    end,
    on_train_end = function() t1 = now() end,
  }
  local strategy = (W > 1 and not opts.nosync) and lt.distributed.DDPStrategy { bucket_cap_mb = opts.bucket_cap_mb or 4 }
    or "none"
  local trainer = lt.Trainer { max_steps = steps, logger = false, enable_checkpointing = false, enable_progress_bar = false,
    enable_model_summary = false, callbacks = { timer }, strategy = strategy, num_sanity_val_steps = 0 }
  local loader = lt.data.DataLoader(ds, { batch_size = per_rank, shuffle = true, seed = 3, drop_last = true })
  trainer:fit(model, loader)
  local res = { world = W, threads = opts.threads, per_rank = per_rank, steps = steps - warm, seconds = t1 - t0 }
  res.samples_per_s = res.steps * per_rank * W / res.seconds
  res.step_ms = 1e3 * res.seconds / res.steps
  if trainer._ddp then
    local s1 = trainer._ddp.reducer:stats()
    local n = s1.steps - stats0.steps
    res.comm_ms = 1e3 * (s1.total_seconds - stats0.total_seconds) / n   -- first bucket ready -> reduced
    res.wait_ms = 1e3 * (s1.wait_seconds - stats0.wait_seconds) / n     -- exposed: waiting after backward
    res.pack_ms = 1e3 * (s1.pack_seconds - stats0.pack_seconds) / n
    res.bytes = (s1.bytes - stats0.bytes) / n
    res.buckets = (s1.buckets - stats0.buckets) / n
    res.copied = (s1.bytes_copied - stats0.bytes_copied) / n -- 0: the gradients are views of the buckets
  end
  local rank = tonumber(os.getenv("OMPI_COMM_WORLD_RANK") or "0")
  if rank == 0 then print("RESULT " .. ser(res)) end
end

local function worker_allreduce(opts)
  local D = lt.distributed
  D.init()
  local W = D.world_size()
  local out = {}
  for _, bytes in ipairs(opts.sizes) do
    local n = math.floor(bytes / 4)
    local t = lt.ones(n)
    local reps = math.max(3, math.min(200, math.floor(64 * 2 ^ 20 / bytes)))
    for _ = 1, 2 do D.all_reduce(t, "sum", { bucket_cap_mb = 64 }) end -- warm up
    local times = {}
    for _ = 1, reps do
      D.barrier()
      local t0 = now()
      D.all_reduce(t, "sum", { bucket_cap_mb = 64 })
      times[#times + 1] = now() - t0
    end
    local tm = median(times)
    local tmin = math.huge
    for _, x in ipairs(times) do tmin = math.min(tmin, x) end
    out[#out + 1] = { bytes = bytes, us = tm * 1e6, us_min = tmin * 1e6, algbw = bytes / tm / 1e9,
      busbw = bytes / tm / 1e9 * 2 * (W - 1) / W }
  end
  if D.rank() == 0 then print("RESULT " .. ser({ world = W, rows = out })) end
end

if arg[1] == "--worker" then
  local opts = assert(loadstring("return " .. arg[3]))()
  if arg[2] == "train" then worker_train(opts) else worker_allreduce(opts) end
  return
end

-- ---- driver ----------------------------------------------------------------------------------------------

local quick, rounds, only = false, 3, nil
local i = 1
while arg[i] do
  if arg[i] == "--quick" then quick, rounds = true, 1
  elseif arg[i] == "--rounds" then rounds = tonumber(arg[i + 1]); i = i + 1
  elseif arg[i] == "--only" then only = {}; for k in arg[i + 1]:gmatch("%d") do only[tonumber(k)] = true end; i = i + 1 end
  i = i + 1
end
local function section(k) return only == nil or only[k] end
local BUILD = os.getenv("LUTRA_BUILD_DIR") or "build"
local BIN = os.getenv("LUTRA_BIN") or ("./" .. BUILD .. "/bin/release/cli/lutra")
local SCRIPT = debug.getinfo(1, "S").source:gsub("^@", "")

local function run(np, what, opts, bind, btl)
  local cmd = string.format("OMP_WAIT_POLICY=PASSIVE mpirun --allow-run-as-root --oversubscribe --mca btl self,%s %s "
    .. "-np %d %s %s --worker %s %q 2>&1",
    btl or "vader", bind and "" or "--bind-to none", np, BIN, SCRIPT, what, ser(opts))
  local p = io.popen(cmd)
  local text = p:read("*a")
  p:close()
  local r = text:match("RESULT (%b{})")
  if not r then error("worker failed:\n" .. cmd .. "\n" .. text) end
  return assert(loadstring("return " .. r))()
end

local load = io.open("/proc/loadavg"):read("*l")
print(string.format("lutra dist bench — %s, %d rounds, load average %s", lt.version, rounds, load))

local steps, warm = quick and 60 or 200, 20
if section(1) then
print("\n1. MLP 784-256-256-10, SGD momentum, Fashion-MNIST: samples/s (best round; median of rounds)")
print(string.format("%-8s %-30s %10s %10s %9s %9s %9s %9s %9s %8s", "global", "config", "samples/s", "(median)",
  "step ms", "comm ms", "wait ms", "pack ms", "MB/step", "buckets"))
for _, G in ipairs { 64, 256 } do
  local configs = {
    { "1 rank x 1 thread", 1, 1, false, G }, { "1 rank x 2 threads", 1, 2, false, G },
    { "2 ranks x 1 thread", 2, 1, true, G },
    { "(1 rank x 1 thread, G/2)", 1, 1, false, G / 2 }, -- one rank's share of the compute, for reference
    { "(2 ranks x 1 thread, no sync)", 2, 1, true, G, true }, -- two independent runs side by side
    { "2 ranks x 1 thread, TCP", 2, 1, true, G, false, "tcp" }, -- the network transport, over loopback
  }
  for _, c in ipairs(configs) do
    local runs = {}
    for _ = 1, rounds do
      runs[#runs + 1] = run(c[2], "train", { threads = c[3], global_batch = c[5], steps = steps, warmup = warm,
        nosync = c[6] }, c[4], c[7])
    end
    -- the best round (the machine is shared: the least disturbed run), and its numbers
    local best = runs[1]
    for _, r in ipairs(runs) do if r.samples_per_s > best.samples_per_s then best = r end end
    local med_rate = {}
    for _, r in ipairs(runs) do med_rate[#med_rate + 1] = r.samples_per_s end
    local function med(k) return best[k] end
    local function f3(k) return med(k) and string.format("%.3f", med(k)) or "-" end
    print(string.format("%-8d %-30s %10.0f %10.0f %9.2f %9s %9s %9s %9s %8s", G, c[1], med("samples_per_s"), median(med_rate),
      med("step_ms"),
      f3("comm_ms"), f3("wait_ms"), f3("pack_ms"),
      med("bytes") and string.format("%.2f", med("bytes") / 2 ^ 20) or "-",
      med("buckets") and string.format("%d", med("buckets")) or "-"))
  end
end

end

if section(2) then
local sizes = {}
for e = 12, quick and 24 or 26, 2 do sizes[#sizes + 1] = 2 ^ e end
for _, btl in ipairs { "vader", "tcp" } do
  print(string.format("\n2%s. all_reduce (sum) of float32 on 2 ranks over loopback, %s", btl == "vader" and "a" or "b",
    btl == "vader" and "shared memory (btl vader)" or "TCP (btl tcp: the network path without the wire)"))
  local ar = run(2, "allreduce", { sizes = sizes }, true, btl)
  print(string.format("%12s %12s %12s %14s %14s", "bytes", "median us", "min us", "algbw GB/s", "busbw GB/s"))
  for _, r in ipairs(ar.rows) do
    print(string.format("%12d %12.1f %12.1f %14.2f %14.2f", r.bytes, r.us, r.us_min, r.algbw, r.busbw))
  end
end

end

if section(3) then
for _, btl in ipairs { "vader", "tcp" } do
  print(string.format("\n3%s. bucket size on the MLP step (2 ranks x 1 thread, global batch 64, btl %s; best round)",
    btl == "vader" and "a" or "b", btl))
  print(string.format("%14s %9s %9s %9s %9s %8s", "bucket_cap_mb", "step ms", "comm ms", "wait ms", "pack ms", "buckets"))
  for _, mb in ipairs { 1 / 16, 1 / 4, 1, 4, 25 } do
    local runs = {}
    for _ = 1, rounds do
      runs[#runs + 1] = run(2, "train", { threads = 1, global_batch = 64, steps = steps, warmup = warm, bucket_cap_mb = mb },
        true, btl)
    end
    local best = runs[1]
    for _, r in ipairs(runs) do if r.step_ms < best.step_ms then best = r end end
    print(string.format("%14g %9.2f %9.3f %9.3f %9.3f %8d", mb, best.step_ms, best.comm_ms, best.wait_ms, best.pack_ms,
      best.buckets))
  end
end
end
