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
-- Exit and failures: a rank that exits with status 0 finalizes MPI; a rank that fails exits without
-- MPI_Finalize, so mpirun stops the whole job at once (non-zero exit) instead of leaving the others
-- waiting. Inside a ddp fit the failing rank calls D.abort(message) itself, which prints
-- "lutra: rank R of W failed: message" on stderr and ends the job (MPI_Abort).
local core = require "lutra.core"
local C = core._dist

local D = {}

local OPS = { sum = true, mean = true, max = true, min = true }

local function check_op(fname, op)
  if op == nil then return "sum" end
  if not OPS[op] then
    error(string.format("%s: unknown op '%s' (expected sum, mean, max or min)", fname, tostring(op)), 3)
  end
  return op
end

local function need_init(fname)
  if not C.available() then
    error(fname .. ": lutra was built without MPI; install it with `apt-get install openmpi-bin libopenmpi-dev` "
      .. "(as root; ./lutra does it when run as root) and rebuild (./lutra --build-only)", 3)
  end
  if not C.is_initialized() then
    error(fname .. ": the distributed world is not initialised (call lt.distributed.init() first)", 3)
  end
end

--- true when lutra was built with MPI.
function D.available() return C.available() end

--- launched() -> bool, rank, world_size: started by mpirun (from the environment; MPI is not touched).
function D.launched() return C.launched() end

--- Initialises MPI (MPI_Init_thread, FUNNELED) once per process; later calls do nothing.
function D.init()
  if not C.available() then
    error("distributed.init: lutra was built without MPI; install it with `apt-get install openmpi-bin "
      .. "libopenmpi-dev` (as root; ./lutra does it when run as root) and rebuild (./lutra --build-only)", 2)
  end
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
  C.barrier()
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
  if core.is_tensor(x) then return C.broadcast(x, src) end
  if type(x) ~= "table" then
    error("broadcast: expected a tensor or a list of tensors, got " .. type(x), 2)
  end
  for i = 1, #x do
    if not core.is_tensor(x[i]) then
      error(string.format("broadcast: element %d of the list is a %s, expected a tensor", i, type(x[i])), 2)
    end
  end
  for i = 1, #x do C.broadcast(x[i], src) end
  return x
end

--- broadcast_string(s, src=0) -> src's string on every rank (s is ignored elsewhere and may be nil).
function D.broadcast_string(s, src)
  need_init("broadcast")
  src = check_src("broadcast", src)
  if C.rank() == src and type(s) ~= "string" then
    error("broadcast_string: the source rank must pass a string, got " .. type(s), 2)
  end
  return C.broadcast_string(type(s) == "string" and s or nil, src)
end

--- all_reduce(tensor | {tensors}, op="sum"[, {bucket_cap_mb=25}]): reduces across ranks, in place.
--- float32 tensors travel packed in buckets (one MPI_Iallreduce per bucket); int64 ones one by one.
function D.all_reduce(x, op, opts)
  need_init("all_reduce")
  op = check_op("all_reduce", op)
  local mb = opts and opts.bucket_cap_mb or 25
  if core.is_tensor(x) then
    C.all_reduce({ x }, op, mb * 2 ^ 20)
    return x
  end
  if type(x) ~= "table" then
    error("all_reduce: expected a tensor or a list of tensors, got " .. type(x), 2)
  end
  C.all_reduce(x, op, mb * 2 ^ 20)
  return x
end

--- all_reduce_number(v, op="sum") -> the reduced number; all_reduce_numbers({...}, op) -> list.
function D.all_reduce_number(v, op)
  need_init("all_reduce")
  op = check_op("all_reduce", op)
  if type(v) ~= "number" then error("all_reduce_number: expected a number, got " .. type(v), 2) end
  return C.all_reduce_numbers({ v }, op)[1]
end

function D.all_reduce_numbers(list, op)
  need_init("all_reduce")
  op = check_op("all_reduce", op)
  if type(list) ~= "table" then error("all_reduce_numbers: expected a list of numbers, got " .. type(list), 2) end
  return C.all_reduce_numbers(list, op)
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
  opts = opts or {}
  if type(opts) ~= "table" then error("DistributedSampler: options must be a table, got " .. type(opts), 2) end
  local known = { num_replicas = true, rank = true, shuffle = true, seed = true, drop_last = true }
  for k in pairs(opts) do
    if not known[k] then
      error(string.format("DistributedSampler: unknown option '%s' (known options: drop_last, num_replicas, rank, seed, shuffle)",
        tostring(k)), 2)
    end
  end
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
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= "bucket_cap_mb" and k ~= "op" then
      error(string.format("GradReducer: unknown option '%s' (known options: bucket_cap_mb, op)", tostring(k)), 2)
    end
  end
  local mb = opts.bucket_cap_mb or 25
  if type(mb) ~= "number" or not (mb > 0) then
    error("GradReducer: bucket_cap_mb must be a number > 0, got " .. tostring(mb), 2)
  end
  local op = opts.op or "mean"
  if op ~= "mean" and op ~= "sum" then
    error(string.format("GradReducer: op must be mean or sum, got %s", tostring(op)), 2)
  end
  return C.reducer(params, math.max(4, math.floor(mb * 2 ^ 20)), op, true)
end

return D
