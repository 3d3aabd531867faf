-- lutra.distributed (lt.distributed) — data-parallel training over MPI (Debian's OpenMPI).
--
--   mpirun -np 2 lutra train.lua          -- the same script on every rank
--
--   local D = lt.distributed
--   D.init()                               -- MPI_Init (once); lt.Trainer does it itself under mpirun
--   print(D.rank(), D.world_size())        -- 0-based rank, number of processes
--   D.broadcast(model:parameters(), 0)     -- every rank gets rank 0's values (in place)
--   D.all_reduce({t1, t2}, "mean")         -- in place: sum | mean | max | min
--   D.all_reduce_number(loss, "mean")      -- plain numbers
--   local s = D.DistributedSampler(60000, {shuffle = true, seed = 1})
--   s:set_epoch(e); for _, i in ipairs(s:indices()) do ... end   -- this rank's share of epoch e
--
-- Nothing here initialises MPI until asked: requiring lutra (or this module) never does. A script started
-- by mpirun is recognised from the environment (D.launched()); lt.Trainer then picks strategy "ddp" when
-- there is more than one rank. Without MPI built in, every entry point that needs it raises an error that
-- says what to install (openmpi-bin libopenmpi-dev).
--
-- lt.Trainer under ddp (strategy = "ddp", "auto" under mpirun with several ranks, or DDPStrategy{bucket_cap_mb=4}):
--   * fit broadcasts rank 0's parameters and buffers, so every replica starts the same;
--   * the training and validation loaders (lt.data.DataLoader) are sharded like PyTorch's DistributedSampler
--     (loader:set_shard): the same shuffled order on every rank, padded to equal length, rank r takes
--     positions r, r+W, ...; #loader is per rank, so with batch_size B each step sees W x B samples;
--   * the gradients of the optimizers' parameters are averaged in buckets (reverse parameter order) while
--     backward runs: the reducer is attached to lutra's autograd, a bucket goes out (MPI_Iallreduce) as soon as
--     all its gradients are final, and backward() returns with the mean on every rank; the gradients then
--     live in the buckets (no copies after the first step). on_after_backward, clipping and the optimizer
--     step see the mean. With accumulate_grad_batches = N the micro-batches that do not step keep their
--     gradients local (DDP's no_sync) and the stepping one reduces their sum: one all-reduce per step;
--   * only rank 0 prints (progress bar, summary), logs (loggers exist on rank 0 only) and writes checkpoint
--     files; after a finished fit every rank's ModelCheckpoint has rank 0's best/last paths;
--   * self:log(name, v, {sync_dist = true}) reduces at log time (every rank must log it alike): the step value
--     with reduce_fx over ranks, the epoch value over all ranks' samples. Without sync_dist a value is the
--     rank's own (validation metrics then cover that rank's shard);
--   * EarlyStopping and Timer stop every rank together (any rank's decision); code that sets
--     trainer.should_stop itself must do it on every rank, as in Lightning;
--   * validate/test/predict called on their own are not sharded: every rank runs the whole loader;
--   * trainer.world_size, trainer.global_rank, trainer.local_rank, trainer.is_global_zero, trainer.strategy.
--   * Resuming: a checkpoint written by rank 0 resumes bit for bit on the same number of ranks; on another
--     number of ranks (and per-rank batch size) the interrupted epoch continues with the samples not yet seen.
--
-- Exit and failures: a rank that exits with status 0 finalizes MPI; a rank that fails exits without
-- MPI_Finalize, so mpirun stops the whole job at once (non-zero exit) instead of leaving the others
-- waiting. Inside a ddp fit the failing rank calls D.abort(message) itself, which prints
-- "lutra: rank R of W failed: message" on stderr and ends the job (MPI_Abort).
local core = require "lutra.core"
local C = core._dist
local check_options = require("lutra.utils.check").check_options

local D = {}

local OPS = { sum = true, mean = true, max = true, min = true }

local function check_op(fname, op)
  if op == nil then return "sum" end
  if not OPS[op] then
    error(string.format("%s: unknown op '%s' (expected sum, mean, max or min)", fname, tostring(op)), 3)
  end
  return op
end

-- Calls a C function of the binding; its error is raised at the user's call site (level 3), without the
-- position inside this file.
local function call(f, ...)
  local ok, a, b = pcall(f, ...)
  if not ok then error((tostring(a):gsub("^[^\n:]*%.lua:%d+: ", "")), 3) end
  return a, b
end

-- MPI is a separate module, lutra/mpi.so, loaded on first use (loading lutra never loads it): from
-- package.cpath when it is there, else next to lutra's own library (core/src/dist.c).
local function available()
  if package.searchpath then
    local path = package.searchpath("lutra.mpi", package.cpath)
    if path then C.set_module_path(path) end
  end
  return C.available()
end

local function no_mpi(fname)
  return fname .. ": MPI is not available (" .. C.load_error() .. "); install it with `apt-get install openmpi-bin "
    .. "libopenmpi-dev` (as root; ./lutra does it when run as root) and rebuild (./lutra --build-only)"
end

-- MPI belongs to the state that loaded lutra first: a worker state (lt.thread, lt.background) trains alone
local function refuse_in_worker(level)
  if core._thread_id() then
    error("lt.distributed: not available in a worker state (lt.thread, lt.background): MPI belongs to the " ..
      "process's main state", level > 0 and level + 1 or 0)
  end
end

local function need_init(fname)
  refuse_in_worker(3)
  if not available() then error(no_mpi(fname), 3) end
  if not C.is_initialized() then
    error(fname .. ": the distributed world is not initialised (call lt.distributed.init() first)", 3)
  end
end

--- true when MPI can be used (lutra/mpi.so was built and loads; the first call loads it).
function D.available() return available() end

--- launched() -> bool, rank, world_size: started by mpirun (from the environment; MPI is not touched).
function D.launched() return C.launched() end

--- Initialises MPI (MPI_Init_thread, FUNNELED) once per process; later calls do nothing.
function D.init()
  refuse_in_worker(2)
  if not available() then error(no_mpi("distributed.init"), 2) end
  C.init()
  return D
end

function D.is_initialized() return C.is_initialized() end
--- 0-based rank of this process (0 before init).
function D.rank() return C.rank() end
--- number of processes (1 before init).
function D.world_size() return C.world_size() end
function D.is_global_zero() return C.rank() == 0 end

--- MPI_Finalize: collective, every rank must call it. Optional: a clean exit finalizes by itself.
function D.finalize() C.finalize() end

function D.barrier()
  need_init("barrier")
  call(C.barrier)
end

local function check_src(fname, src)
  src = src or 0
  if type(src) ~= "number" or src ~= math.floor(src) or src < 0 or src >= C.world_size() then
    error(string.format("%s: src must be a rank in 0..%d, got %s", fname, C.world_size() - 1, tostring(src)), 3)
  end
  return src
end

--- broadcast(tensor | {tensors}, src=0): every rank gets src's values, in place. Returns its argument.
function D.broadcast(x, src)
  need_init("broadcast")
  src = check_src("broadcast", src)
  if core.is_tensor(x) then return call(C.broadcast, x, src) end
  if type(x) ~= "table" then
    error("broadcast: expected a tensor or a list of tensors, got " .. type(x), 2)
  end
  for i = 1, #x do
    if not core.is_tensor(x[i]) then
      error(string.format("broadcast: element %d of the list is a %s, expected a tensor", i, type(x[i])), 2)
    end
  end
  for i = 1, #x do call(C.broadcast, x[i], src) end
  return x
end

--- broadcast_string(s, src=0) -> src's string on every rank (s is ignored elsewhere and may be nil).
function D.broadcast_string(s, src)
  need_init("broadcast")
  src = check_src("broadcast", src)
  if C.rank() == src and type(s) ~= "string" then
    error("broadcast_string: the source rank must pass a string, got " .. type(s), 2)
  end
  return (call(C.broadcast_string, type(s) == "string" and s or nil, src))
end

--- all_reduce(tensor | {tensors}, op="sum"[, {bucket_cap_mb=25}]): reduces across ranks, in place.
--- float32 and float64 tensors travel packed in buckets of one dtype each (one MPI_Iallreduce per bucket, as
--- MPI_FLOAT or MPI_DOUBLE); int64 ones one by one. A list may mix the three dtypes.
function D.all_reduce(x, op, opts)
  need_init("all_reduce")
  op = check_op("all_reduce", op)
  local mb = opts and opts.bucket_cap_mb or 25
  if core.is_tensor(x) then
    call(C.all_reduce, { x }, op, mb * 2 ^ 20)
    return x
  end
  if type(x) ~= "table" then
    error("all_reduce: expected a tensor or a list of tensors, got " .. type(x), 2)
  end
  call(C.all_reduce, x, op, mb * 2 ^ 20)
  return x
end

--- all_reduce_number(v, op="sum") -> the reduced number; all_reduce_numbers({...}, op) -> list.
function D.all_reduce_number(v, op)
  need_init("all_reduce")
  op = check_op("all_reduce", op)
  if type(v) ~= "number" then error("all_reduce_number: expected a number, got " .. type(v), 2) end
  return call(C.all_reduce_numbers, { v }, op)[1]
end

function D.all_reduce_numbers(list, op)
  need_init("all_reduce")
  op = check_op("all_reduce", op)
  if type(list) ~= "table" then error("all_reduce_numbers: expected a list of numbers, got " .. type(list), 2) end
  return (call(C.all_reduce_numbers, list, op))
end

--- Ends the whole job from a failed rank: prints "lutra: rank R of W failed: msg" on stderr, then
--- MPI_Abort. Without an initialised world it returns (the caller raises the error as usual).
function D.abort(msg, code)
  if not C.is_initialized() then return end
  io.stderr:write(string.format("lutra: rank %d of %d failed: %s\n", C.rank(), C.world_size(), tostring(msg)))
  io.stderr:flush()
  io.stdout:flush()
  C.abort(code or 1)
end

-- ---- sharding (PyTorch's DistributedSampler) ---------------------------------------------------------

--- shard_indices(order, rank, world_size) -> this rank's share of a list: the list is padded to a multiple
--- of world_size by repeating it from its start, and rank r (0-based) takes positions r+1, r+1+W, ...
--- Every rank gets ceil(#order / W) entries; together they cover every entry of order.
function D.shard_indices(order, rank, world_size)
  local n, W = #order, world_size
  local m = math.ceil(n / W)
  local out = {}
  if n == 0 then return out end
  for k = 0, m - 1 do
    local g = k * W + rank -- 0-based position in the padded list
    out[k + 1] = order[(g % n) + 1]
  end
  return out
end

local Sampler = {}
Sampler.__index = Sampler

--- DistributedSampler(n | dataset, {num_replicas=world_size, rank=rank, shuffle=true, seed=0, drop_last=false})
--- Indices (1-based) of this rank's share of each epoch: the epoch's order (a permutation seeded by
--- seed + epoch, identical on every rank, or 1..n) split as shard_indices does; with drop_last the tail that
--- does not divide evenly is dropped instead of padding. s:set_epoch(e) before each epoch (0-based).
function D.DistributedSampler(ds, opts)
  opts = check_options("DistributedSampler", opts,
    { num_replicas = true, rank = true, shuffle = true, seed = true, drop_last = true })
  local n = ds
  if type(ds) ~= "number" then
    local ok, len = pcall(function() return require("lutra.data").len(ds) end)
    if not ok or type(len) ~= "number" then
      error("DistributedSampler: expected a dataset or a number of samples, got " .. type(ds), 2)
    end
    n = len
  end
  if n < 0 or n ~= math.floor(n) then error("DistributedSampler: the number of samples must be an integer >= 0", 2) end
  local W = opts.num_replicas or C.world_size()
  local r = opts.rank or C.rank()
  if type(W) ~= "number" or W < 1 or W ~= math.floor(W) then
    error("DistributedSampler: num_replicas must be an integer >= 1, got " .. tostring(W), 2)
  end
  if type(r) ~= "number" or r < 0 or r >= W or r ~= math.floor(r) then
    error(string.format("DistributedSampler: rank must be an integer in 0..%d, got %s", W - 1, tostring(r)), 2)
  end
  local seed = opts.seed or 0
  if type(seed) ~= "number" or seed ~= math.floor(seed) then
    error("DistributedSampler: seed must be an integer, got " .. tostring(seed), 2)
  end
  local s = {
    n = n, num_replicas = W, rank = r, shuffle = opts.shuffle ~= false, seed = seed,
    drop_last = opts.drop_last == true, epoch = 0,
  }
  return setmetatable(s, Sampler)
end

function Sampler:set_epoch(e)
  if type(e) ~= "number" or e < 0 or e ~= math.floor(e) then
    error("DistributedSampler:set_epoch: expected an integer >= 0, got " .. tostring(e), 2)
  end
  self.epoch = e
end

--- number of indices this rank gets per epoch
function Sampler:len()
  if self.drop_last then return math.floor(self.n / self.num_replicas) end
  return math.ceil(self.n / self.num_replicas)
end
Sampler.__len = Sampler.len

--- this rank's indices (1-based) for the current epoch
function Sampler:indices()
  local order
  if self.shuffle then
    local data = core._data
    order = data.randperm(self.n, data.rng_seed(self.seed + self.epoch)):totable()
  else
    order = {}
    for i = 1, self.n do order[i] = i end
  end
  if self.drop_last then
    local m = self:len() * self.num_replicas
    for i = #order, m + 1, -1 do order[i] = nil end
  end
  return D.shard_indices(order, self.rank, self.num_replicas)
end

-- ---- the gradient reducer -----------------------------------------------------------------------------

--- GradReducer(params, {bucket_cap_mb=25, op="mean"}): averages params' gradients across ranks in buckets
--- (reverse parameter order). r:ready(i) when parameter i's gradient is final (its bucket is sent as soon as
--- it is full), r:finish() after backward (marks the rest, waits, writes back), r:stats().
function D.GradReducer(params, opts)
  need_init("GradReducer")
  opts = check_options("GradReducer", opts, { bucket_cap_mb = true, op = true })
  local mb = opts.bucket_cap_mb or 25
  if type(mb) ~= "number" or not (mb > 0) then
    error("GradReducer: bucket_cap_mb must be a number > 0, got " .. tostring(mb), 2)
  end
  if mb == math.huge then error("GradReducer: bucket_cap_mb must be finite, got inf", 2) end
  local op = opts.op or "mean"
  if op ~= "mean" and op ~= "sum" then
    error(string.format("GradReducer: op must be mean or sum, got %s", tostring(op)), 2)
  end
  return (call(C.reducer, params, math.max(4, math.floor(mb * 2 ^ 20)), op, true))
end

-- ---- broadcast of plain values --------------------------------------------------------------------------

--- broadcast_object(v, src=0) -> src's value (nil, booleans, numbers, strings and tables of them) on every rank.
function D.broadcast_object(v, src)
  need_init("broadcast")
  src = check_src("broadcast", src)
  local ck = require "lutra.checkpoint"
  local text = C.rank() == src and ck.encode({ v = v }) or nil
  return ck.decode(C.broadcast_string(text, src)).v
end

-- ---- the Trainer's data-parallel strategy (trainer._ddp) ------------------------------------------------
--
-- lt.Trainer calls these at a few marked points (lua/lutra/trainer/init.lua, "ddp:"):
--   D._trainer_init(trainer, opts)     construction: resolves strategy ("auto": ddp when mpirun started more
--                                      than one rank), initialises MPI, sets world_size / global_rank /
--                                      is_global_zero; other ranks than 0 get no logger, progress bar or summary
--   ddp:shard_loaders(trainer, train, val)   before the loaders are measured: every rank its share
--   ddp:setup_fit(trainer, model)      after configure_optimizers (and a checkpoint restore): rank 0's weights
--                                      to every rank, the gradient reducer attached to backward
--   ddp:teardown(trainer, status)      end of a run: reducer detached, loaders' sharding as it was; after a
--                                      finished fit, checkpoint callbacks take rank 0's state (best_model_path)
--   ddp:abort(err)                     a failed run: "lutra: rank R of W failed: ..." and MPI_Abort
-- Gradients: the reducer is attached to lutra's backward, so every backward() of the training step averages
-- the gradients of the optimizers' parameters across ranks, in buckets sent while backward goes on; by the
-- time on_after_backward, gradient clipping and the optimizer step run, every rank holds the same mean.

local DDP = {}
DDP.__index = DDP

D.DEFAULT_BUCKET_CAP_MB = 4

local STRATEGIES = { auto = true, ddp = true, none = true }
local StrategyMT = { __tostring = function(s) return string.format("DDPStrategy{bucket_cap_mb=%g}", s.bucket_cap_mb) end }

--- lt.distributed.DDPStrategy{bucket_cap_mb = 4}: lt.Trainer{strategy = DDPStrategy{...}} is strategy "ddp"
--- with the gradient buckets of that size (MiB).
function D.DDPStrategy(opts)
  opts = check_options("DDPStrategy", opts, { bucket_cap_mb = true })
  local mb = opts.bucket_cap_mb or D.DEFAULT_BUCKET_CAP_MB
  if type(mb) ~= "number" or not (mb > 0) then
    error("DDPStrategy: bucket_cap_mb must be a number > 0, got " .. tostring(mb), 2)
  end
  if mb == math.huge then error("DDPStrategy: bucket_cap_mb must be finite, got inf", 2) end
  return setmetatable({ name = "ddp", bucket_cap_mb = mb }, StrategyMT)
end

--- The Trainer's `strategy` option: nil | "auto" | "ddp" | "none" | DDPStrategy{...} -> an error text or nil.
function D._check_strategy(v)
  if getmetatable(v) == StrategyMT then return nil end
  if not STRATEGIES[v] then return 'must be "auto", "ddp", "none" or lt.distributed.DDPStrategy{...}' end
end

function D._trainer_init(trainer, opts)
  local strategy = opts.strategy or "auto"
  local bucket_cap_mb = D.DEFAULT_BUCKET_CAP_MB
  if getmetatable(strategy) == StrategyMT then strategy, bucket_cap_mb = "ddp", strategy.bucket_cap_mb end
  local launched, _, W = C.launched()
  local ddp = strategy == "ddp" or (strategy == "auto" and launched and W > 1 and not core._thread_id())
  if ddp then refuse_in_worker(0) end
  if not ddp then
    trainer.world_size, trainer.global_rank, trainer.local_rank, trainer.is_global_zero = 1, 0, 0, true
    trainer.strategy = "none"
    return nil
  end
  if not available() then
    error(no_mpi("Trainer: strategy \"ddp\"") .. ", then run the script with `mpirun -np N lutra script.lua`", 0)
  end
  C.init()
  local self = setmetatable({
    rank = C.rank(), world_size = C.world_size(), bucket_cap_mb = bucket_cap_mb, sharded = {},
  }, DDP)
  local lr = tonumber(os.getenv("OMPI_COMM_WORLD_LOCAL_RANK") or "") or self.rank
  trainer.world_size, trainer.global_rank, trainer.local_rank = self.world_size, self.rank, lr
  trainer.is_global_zero = self.rank == 0
  trainer.strategy = "ddp"
  trainer._ddp = self
  if self.rank ~= 0 then -- only rank 0 prints, shows progress and logs
    opts.enable_progress_bar, opts.enable_model_summary, opts.logger = false, false, false
  end
  return self
end

local function can_shard(l)
  local ok, f = pcall(function() return l.set_shard end)
  return ok and type(f) == "function"
end

-- Shards one loader (remembering how it was) and gives it rank 0's RNG state (an unseeded shuffling loader
-- drew its own on each rank).
function DDP:_shard(l, what)
  if not can_shard(l) then
    if self.rank == 0 then
      require("lutra")._warn(string.format("ddp: the %s loader has no set_shard (not an lt.data.DataLoader): "
        .. "every rank runs all of its batches", what))
    end
    return
  end
  for _, s in ipairs(self.sharded) do if s.loader == l then return end end
  self.sharded[#self.sharded + 1] = { loader = l, shard = { l:shard() } }
  l:set_shard(self.rank, self.world_size)
  local sd = D.broadcast_object(self.rank == 0 and l:state_dict() or nil, 0)
  if self.rank ~= 0 then l:load_state_dict(sd) end
end

function DDP:shard_loaders(_, train, val)
  if train ~= nil then self:_shard(train, "train") end
  if val ~= nil then
    local ok, it = pcall(function() return val.iter end)
    local list = (ok and type(it) == "function") and { val } or val
    if type(list) == "table" then
      for i, l in ipairs(list) do self:_shard(l, "val " .. i) end
    end
  end
end

local function union_params(trainer, model)
  local list, seen = {}, {}
  local function add(p)
    if core.is_tensor(p) and not seen[p] then
      seen[p] = true
      list[#list + 1] = p
    end
  end
  for _, opt in ipairs(trainer.optimizers or {}) do
    for _, g in ipairs(opt.param_groups or {}) do
      for _, p in ipairs(g.params or {}) do add(p) end
    end
  end
  return list, seen
end

-- The same number of steps on every rank, or the collectives would not match (at the fit's start, or when the
-- data hooks' training loader arrives: lua/lutra/trainer/init.lua's load_train).
function DDP:check_batches(trainer)
  local nb = trainer.num_training_batches
  local mm = C.all_reduce_numbers({ nb, -nb }, "max")
  if mm[1] ~= -mm[2] then
    error(string.format("fit (ddp): the ranks have different numbers of training batches per epoch (from %d to %d); "
      .. "use an lt.data.DataLoader (sharded for each rank) or loaders of equal length", -mm[2], mm[1]), 0)
  end
end

-- train_pending: the training loader comes later (check_batches then)
function DDP:setup_fit(trainer, model, train_pending)
  local lt = require "lutra"
  if not train_pending then self:check_batches(trainer) end
  -- rank 0's weights (parameters, buffers) everywhere
  local params, seen = union_params(trainer, model)
  local bcast = {}
  for _, p in ipairs(lt.nn.parameters(model)) do if not seen[p] then bcast[#bcast + 1] = p end end
  for _, p in ipairs(params) do bcast[#bcast + 1] = p end
  for _, b in ipairs(lt.nn.buffers(model)) do bcast[#bcast + 1] = b end
  lt.no_grad(function() for _, t in ipairs(bcast) do C.broadcast(t, 0) end end)
  -- the gradient reducer on backward
  if self.reducer then self.reducer:detach() end
  self.reducer = C.reducer(params, math.max(4, math.floor(self.bucket_cap_mb * 2 ^ 20)), "mean", true)
  self.reducer:attach()
end

function DDP:teardown(trainer, status)
  if self.reducer then self.reducer:detach() end
  for _, s in ipairs(self.sharded) do s.loader:set_shard(s.shard[1], s.shard[2]) end
  self.sharded = {}
  -- a fit that finished on every rank: the checkpoint callbacks take rank 0's state (best_model_path,
  -- last_model_path, scores: the files rank 0 wrote). Never on a failure: no collective on that path.
  if status == "finished" and trainer.state and trainer.state.fn == "fit" then
    for _, cb in ipairs(trainer.checkpoint_callbacks or {}) do
      if type(cb.state_dict) == "function" and type(cb.load_state_dict) == "function" then
        local sd = D.broadcast_object(self.rank == 0 and cb:state_dict() or nil, 0)
        if self.rank ~= 0 then
          if sd.dirpath ~= nil then cb.dirpath = sd.dirpath end
          cb:load_state_dict(sd)
        end
      end
    end
  end
end

--- any rank's true makes it true on every rank (EarlyStopping, Timer: every rank must stop together)
function DDP:reduce_boolean(b)
  return C.all_reduce_numbers({ b and 1 or 0 }, "max")[1] > 0
end

--- self:log(..., {sync_dist=true}): the step value reduced across ranks and the epoch contribution
--- (sum, weight) summed, in one collective. Returns step_value, sum, weight.
function DDP:reduce_log(v, weight, reduce)
  if reduce == "mean" then
    local r = C.all_reduce_numbers({ v, v * weight, weight }, "sum")
    return r[1] / self.world_size, r[2], r[3]
  end
  local r = C.all_reduce_numbers({ v }, reduce)[1]
  return r, r, weight
end

function DDP:abort(err)
  local msg = type(err) == "table" and (err.msg or tostring(err)) or tostring(err)
  D.abort(msg, 1)
end

return D
