-- bench/train_lutra.lua — lutra's side of the training workloads of bench/run (PyTorch's side:
-- bench/train_torch.py, the same recipes line for line). Plain hand-written loops over preloaded tensors.
--   lutra bench/train_lutra.lua model=mlp|lenet|tiny batch=64 steps=400 [warmup=50] [ftz=1|0] [threads=2]
--                               [data=fashion|random] [mode=speed|memory|dump|perf] [epochs=10]
--                               [out=FILE] [perf=SECONDS] [seed=0] [loop=plain|trainer]
-- Prints one line "RESULT key=value ...": step_us (median-free: total time / steps), samples_per_s,
-- loss (the last step's), peak_rss_kb (VmHWM), rss_kb (VmRSS now), system_allocs during the timed steps.
--   mode=memory: whole epochs over the data set; rss_epoch<i>_kb after each epoch.
--   mode=dump:   trains `steps` steps from seed `seed`, writes the parameters (float32, in order) to out=FILE.
--   mode=perf:   after warm-up, runs `perf record` on this process for `perf` seconds while training.
--   mode=serve:  after warm-up prints READY, then runs blocks of steps on request ("run N" on stdin ->
--                "DONE seconds system_allocs"), until stdin ends or says "quit"; bench/run alternates the
--                lutra and PyTorch processes block by block. With loop=trainer the blocks run inside one
--                lt.Trainer fit (a callback answers at the end of each block and reads the next request).
local lt = require "lutra"
local ffi = require "ffi"
ffi.cdef [[
  typedef struct { long tv_sec; long tv_nsec; } bench_ts;
  int clock_gettime(int, bench_ts *);
  int getpid(void);
]]
local ts = ffi.new("bench_ts")
local function now() ffi.C.clock_gettime(1, ts); return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9 end

local o = { model = "mlp", batch = "64", steps = "400", warmup = "50", ftz = "1", threads = "2", data = "fashion",
  mode = "speed", epochs = "10", seed = "0", perf = "3", loop = "plain" }
for _, a in ipairs(arg) do
  local k, v = a:match("^([%w_]+)=(.*)$")
  if not k or o[k] == nil and k ~= "out" then error("train_lutra: bad argument '" .. a .. "'") end
  o[k] = v
end
local B, steps, warmup = tonumber(o.batch), tonumber(o.steps), tonumber(o.warmup)

local function status(field)
  local f = io.open("/proc/self/status")
  local s = f:read("*a")
  f:close()
  return tonumber(s:match(field .. ":%s*(%d+)"))
end

lt.set_num_threads(tonumber(o.threads))
if o.ftz == "0" then lt.set_flush_denormal(false) else lt.set_flush_denormal(true) end
lt.manual_seed(tonumber(o.seed))
local nn, F = lt.nn, lt.F

-- data: Fashion-MNIST train set (60000 x 1 x 28 x 28 in [0, 1], labels 1..10), or random of the same shapes
local X, Y, N
if o.model == "tiny" then
  N = 1024
  -- a learnable target with noise (pure-noise targets make batch-1 SGD with momentum diverge on both sides)
  X = lt.randn(N, 10)
  Y = X:sum(2, true) * 0.1 + lt.randn(N, 1) * 0.1
elseif o.data == "fashion" then
  local ds = lt.data.FashionMNIST { train = true }
  X, Y = ds.data, ds.targets
  N = X:size(1)
else
  N = 60000
  X, Y = lt.rand(N, 1, 28, 28), (lt.rand(N) * 10):long() + 1
end

local net
if o.model == "mlp" then
  X = X:view(N, 784)
  net = nn.Sequential { nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10) }
elseif o.model == "lenet" then
  net = nn.Sequential { nn.Conv2d(1, 6, 5, { padding = 2 }), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
    nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10) }
elseif o.model == "tiny" then
  net = nn.Sequential { nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 1) }
else
  error("train_lutra: unknown model " .. o.model)
end
local params = net:parameters()
local opt = lt.optim.SGD(params, { lr = 0.01, momentum = 0.9 })
local loss_fn = o.model == "tiny" and F.mse_loss or F.cross_entropy

-- batches: a fresh permutation per epoch, rows gathered with index_select (tiny: contiguous slices)
local perm, pos = nil, N
local function next_batch()
  if o.model == "tiny" then
    if pos + B > N then pos = 0 end
    local s = pos
    pos = pos + B
    return X:narrow(1, s + 1, B), Y:narrow(1, s + 1, B)
  end
  if pos + B > N then perm, pos = lt.randperm(N), 0 end
  local idx = perm:narrow(1, pos + 1, B)
  pos = pos + B
  return X:index_select(1, idx), Y:index_select(1, idx)
end

local last_loss
local function step()
  local xb, yb = next_batch()
  opt:zero_grad(true)
  local loss = loss_fn(net(xb), yb)
  loss:backward()
  opt:step()
  last_loss = loss
end

local function result(t)
  t.peak_rss_kb = status("VmHWM")
  t.rss_kb = status("VmRSS")
  if last_loss then t.loss = string.format("%.5f", last_loss:item()) end
  t.coretype = lt.blas_info().coretype
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. tostring(t[k]) end
  print("RESULT " .. table.concat(parts, " "))
end

if o.loop == "trainer" then
  -- the same recipe driven by lt.Trainer (framework overhead visible): a DataLoader over the preloaded
  -- tensors (shuffled, one C row gather per batch), training_step returning the loss, the built-in optimizer
  -- step; timed from the end of batch `warmup` to the end of the run by a callback
  local ds = lt.data.TensorDataset(X, Y)
  local loader = lt.data.DataLoader(ds, { batch_size = B, shuffle = true, seed = tonumber(o.seed), drop_last = true })
  local model = { net = net }
  function model:training_step(batch) local l = loss_fn(self.net(batch[1]), batch[2]); last_loss = l; return l end
  function model:configure_optimizers() return opt end
  local t0, a0
  local timer = {
    on_train_batch_end = function(_, trainer)
      if trainer.global_step == warmup then t0, a0 = now(), lt.memory_stats().system_allocs end
    end,
  }
  local serve = o.mode == "serve"
  if serve then
    -- blocks on request: READY after the warm-up steps, then "run N" -> N steps -> "DONE seconds allocs"
    local left = 0
    local function next_block(trainer)
      local n = tonumber((io.read("*l") or ""):match("^run (%d+)"))
      if not n then trainer.should_stop = true; left = -1; return end
      left, a0, t0 = n, lt.memory_stats().system_allocs, now()
    end
    timer.on_train_batch_end = function(_, trainer)
      if left < 0 then return end
      if trainer.global_step == warmup then
        io.write("READY\n"); io.flush(); next_block(trainer)
      elseif trainer.global_step > warmup then
        left = left - 1
        if left == 0 then
          io.write(string.format("DONE %.9f %d\n", now() - t0, lt.memory_stats().system_allocs - a0)); io.flush()
          next_block(trainer)
        end
      end
    end
  end
  local tr = lt.Trainer { max_steps = serve and -1 or warmup + steps, max_epochs = serve and -1 or nil,
    enable_progress_bar = false, logger = false, enable_checkpointing = false, enable_model_summary = false,
    num_sanity_val_steps = 0, callbacks = { timer } }
  tr:fit(model, loader)
  if serve then result {}; return end
  local dt = now() - t0
  result { step_us = string.format("%.2f", dt / steps * 1e6), samples_per_s = string.format("%.1f", steps * B / dt),
    system_allocs = lt.memory_stats().system_allocs - a0 }
  return
end

if o.mode == "serve" then
  -- driven by bench/harness.py over stdin/stdout, alternating with the other processes in small blocks
  -- (robust against the machine's speed drifting): "run N" -> "DONE seconds allocs"; "quit" -> RESULT
  for _ = 1, warmup do step() end
  io.write("READY\n")
  io.flush()
  for line in io.lines() do
    local n = tonumber(line:match("^run (%d+)"))
    if not n then break end
    local a0 = lt.memory_stats().system_allocs
    local t0 = now()
    for _ = 1, n do step() end
    io.write(string.format("DONE %.9f %d\n", now() - t0, lt.memory_stats().system_allocs - a0))
    io.flush()
  end
  result {}
  return
end

if o.mode == "speed" or o.mode == "perf" then
  for _ = 1, warmup do step() end
  local a0 = lt.memory_stats().system_allocs
  local pid = ffi.C.getpid()
  if o.mode == "perf" then
    local secs = tonumber(o.perf)
    os.execute(string.format("perf record -q ${PERF_CG:--g} -e cpu-clock -F 2000 -p %d -o %s -- sleep %g >/dev/null 2>&1 &", pid,
      o.out, secs))
    local t_end = now() + secs + 0.5
    steps = 0
    local t0 = now()
    while now() < t_end do step(); steps = steps + 1 end
    local dt = now() - t0
    os.execute("sleep 0.5")
    result { step_us = string.format("%.2f", dt / steps * 1e6), steps = steps, pid = pid }
    return
  end
  local t0 = now()
  for _ = 1, steps do step() end
  local dt = now() - t0
  result { step_us = string.format("%.2f", dt / steps * 1e6), samples_per_s = string.format("%.1f", steps * B / dt),
    system_allocs = lt.memory_stats().system_allocs - a0 }
elseif o.mode == "memory" then
  local r = {}
  local per_epoch = math.floor(N / B)
  local t0 = now()
  for e = 1, tonumber(o.epochs) do
    for _ = 1, per_epoch do step() end
    r["rss_epoch" .. e .. "_kb"] = status("VmRSS")
  end
  r.samples_per_s = string.format("%.1f", tonumber(o.epochs) * per_epoch * B / (now() - t0))
  result(r)
elseif o.mode == "dump" then
  for _ = 1, steps do step() end
  local f = assert(io.open(o.out, "wb"))
  for _, p in ipairs(params) do
    local c = p:contiguous()
    f:write(ffi.string(ffi.cast("const char *", c:data_ptr()), c:numel() * 4))
  end
  f:close()
  result { steps = steps }
else
  error("train_lutra: unknown mode " .. o.mode)
end
