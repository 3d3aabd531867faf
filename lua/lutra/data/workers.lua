-- lutra.data.workers — DataLoader{num_workers = N}: batches made in N worker states (lt.thread), handed out in
-- order (docs/reference/data.md, "Worker states").
--
-- The loader's state keeps the sampler: batch k's item indices go to worker (k - 1) % N + 1, which holds a
-- carried copy of the dataset (TensorDataset and Subset cross by constructor, tensors shared; a Lua dataset
-- table is copied with its functions), calls get and the collate function, and sends back {k, batch, its RNG
-- state}. Each worker's queue is in order, so batch k is simply the next message of worker (k - 1) % N + 1: no
-- reordering. At most prefetch_factor * N batches are asked for ahead of the one being consumed.
--
-- Seeds: worker i seeds lutra's RNG and math.random with base_seed + i - 1 (PyTorch's base_seed + worker_id),
-- then calls worker_init_fn(i). base_seed is derived, never drawn: a hash of the epoch's permutation RNG state
-- (or, without shuffling, of the global RNG's state read without advancing it when the loader was made, or of
-- its seed) and the epoch number, so num_workers changes no random stream of the loader's state.
-- Resume: state_dict() keeps base_seed and, per worker, lutra's RNG state after the last batch consumed from
-- it; a loader resumed mid-epoch starts its workers from those states and batch k goes to the same worker.
local lt = require "lutra"

local M = {}

local info -- in a worker state: lt.data.get_worker_info()'s table

function M.info() return info end

-- ---- seeds ----------------------------------------------------------------------------------------

-- A seed in [0, 2^39) from a string: two polynomial hashes modulo primes (exact in doubles on every Lua). The
-- bound keeps it a loader "count" that checkpoints accept (lutra/checkpoint/validate.lua: 0 .. 2^40).
local function hash_seed(s)
  local h1, h2 = 5381, 7919
  for i = 1, #s do
    local b = s:byte(i)
    h1 = (h1 * 131 + b) % 4294967291
    h2 = (h2 * 257 + b) % 2147483647
  end
  return math.floor((h1 % 256) * 2147483648 + h2)
end

local function epoch_seed(f)
  local origin = f.shuffle and f._rng or f._seed_origin
  -- (%d: a state read back from a checkpoint on Lua 5.3+ has float numbers, and tostring(2.0) is "2.0")
  return hash_seed(string.format("%s/epoch %d", tostring(origin), f._epoch))
end

-- ---- the worker's side ----------------------------------------------------------------------------

local function failure(e)
  return { msg = tostring(e), tb = debug.traceback("", 2) }
end

--- The function each worker state runs (carried by name): seeds, worker_init_fn, then one batch per request
--- {k, indices} until its parent stops it.
function M._worker_main(cfg)
  local data = require "lutra.data"
  lt.manual_seed(cfg.seed)
  math.randomseed(cfg.seed % 2147483648)
  local ds = cfg.dataset
  info = { id = cfg.id, num_workers = cfg.num_workers, seed = cfg.seed, dataset = ds }
  local init_err
  if cfg.worker_init_fn then
    local ok, e = xpcall(function() cfg.worker_init_fn(cfg.id) end, failure)
    if not ok then init_err = e end
  end
  if cfg.rng then lt.set_rng_state(cfg.rng) end -- resumed: where this worker's stream was
  local tensors = cfg.fast and data._tensors_of(ds) or nil
  local C = require("lutra.core")._data
  local cur, list = {}, nil
  local function make()
    if tensors then return C.gather(tensors, lt.tensor(list, "int64"), 0, #list) end
    return data._collate_items(ds, list, 0, #list, cfg.collate_fn, cur)
  end
  local parent = lt.thread.parent
  while true do
    local req = parent:receive()
    local k
    k, list = req[1], req[2]
    if init_err then
      parent:send({ k, false, init_err.msg, init_err.tb, "worker_init_fn" })
    else
      cur.item = nil
      local ok, batch = xpcall(make, failure)
      if ok then parent:send({ k, batch, lt.get_rng_state() })
      else parent:send({ k, false, batch.msg, batch.tb, cur.item or "collate" }) end
    end
  end
end

-- ---- the loader's side ----------------------------------------------------------------------------

local function stop(pool)
  for i = 1, #pool do pool[i]:close() end
end

--- Stops the loader's workers (loader:close(), an error, a new epoch of a loader whose last iterator was left).
function M.close(f)
  if f._pool then stop(f._pool); f._pool, f._inflight = nil, nil end
  local live = f._live and f._live.pool
  if live then stop(live) end
  f._live = nil
end

--- Stops the workers of the loader's current iterator, unless they are persistent (a run that ended, by an error
--- or a limit, without exhausting it: lt.data._stop_iterators, called by the Trainer).
function M.stop_live(f)
  local live = f._live and f._live.pool
  if live then stop(live) end
  f._live = nil
end

local function start(f, base_seed, wrng)
  local pool = {}
  local cfg = {
    num_workers = f.num_workers, dataset = f.dataset, collate_fn = f.collate_fn,
    worker_init_fn = f.worker_init_fn, fast = f._fast,
  }
  for i = 1, f.num_workers do
    cfg.id, cfg.seed, cfg.rng = i, base_seed + i - 1, wrng[i] or nil
    local ok, w = pcall(lt.thread.spawn, M._worker_main, cfg)
    if not ok then -- (what cannot cross is named by the path: key 'dataset', key ...)
      stop(pool)
      error(string.format("DataLoader: cannot start worker %d (num_workers = %d): %s", i, f.num_workers,
        (tostring(w):gsub("argument #2, ", ""))), 0)
    end
    pool[i] = w
  end
  return pool
end

local function fail(f, msg)
  M.close(f)
  error(msg, 0)
end

local function worker_error(f, i, k, r)
  local where = r[5] == "worker_init_fn" and "worker_init_fn"
    or r[5] == "collate" and string.format("collate (batch %d)", k)
    or string.format("item %s (batch %d)", tostring(r[5]), k)
  local tb = (r[4] or ""):gsub("^\n?stack traceback:", "")
  fail(f, string.format("DataLoader worker %d: %s: %s\nworker traceback:%s", i, where, r[3], tb))
end

local function worker_gone(f, i, w)
  local ok, e = pcall(w.join, w)
  fail(f, ok and string.format("DataLoader worker %d stopped", i) or
    string.format("DataLoader worker %d: %s", i, tostring(e)))
end

--- The iterator of one epoch with workers (DataLoader:iter, lutra/data/init.lua): nb batches, f._pos of them
--- consumed already (a resumed epoch), batch_indices(b) the item indices of 0-based batch b.
function M.iter(f, gen, nb, batch_indices, resumed)
  local N = f.num_workers
  local ahead = f.prefetch_factor * N
  if f._live then M.close(f) end -- an earlier iterator left before its end (non-persistent workers)
  local base_seed, pool
  if resumed and f._resume_seed then base_seed = f._resume_seed
  else base_seed = epoch_seed(f) end
  f._resume_seed = nil
  local inflight
  if f.persistent_workers and f._pool then
    pool, inflight = f._pool, f._inflight
    for i = 1, N do -- batches asked for by an iterator left early: dropped
      for _ = 1, inflight[i] do
        if pool[i]:receive() == nil then M.close(f); pool = nil; break end
      end
      if not pool then break end
      inflight[i] = 0
    end
  end
  if not pool then
    if not (resumed or f.persistent_workers) then f._wrng = {} end
    f._wrng = f._wrng or {}
    f._base_seed = base_seed
    pool = start(f, base_seed, f._wrng)
    inflight = {}
    for i = 1, N do inflight[i] = 0 end
    if f.persistent_workers then f._pool, f._inflight = pool, inflight
    else f._live = setmetatable({ pool = pool }, { __mode = "v" }) end -- the iterator keeps the pool alive
  end
  local asked = f._pos -- batches asked for so far (0-based: the next to ask)
  local function ask()
    while asked < nb and asked - f._pos < ahead do
      local k = asked + 1
      local i = (k - 1) % N + 1
      pool[i]:send({ k, batch_indices(asked) })
      inflight[i] = inflight[i] + 1
      asked = k
    end
  end
  ask()
  local function finish()
    if not f.persistent_workers and f._live and f._live.pool == pool then M.close(f) end
  end
  local function next_batch()
    if f._gen ~= gen then
      error("DataLoader: this iterator is stale: iter() was called again (each iter() starts a new epoch)", 2)
    end
    local b = f._pos
    if b >= nb then finish(); return nil end
    local k = b + 1
    local i = (k - 1) % N + 1
    local r, why = pool[i]:receive(f.timeout > 0 and f.timeout or nil)
    if why == "timeout" then
      fail(f, string.format("DataLoader timed out after %g seconds waiting for batch %d from worker %d", f.timeout,
        k, i))
    end
    if r == nil then worker_gone(f, i, pool[i]) end
    inflight[i] = inflight[i] - 1
    if r[1] ~= k then fail(f, string.format("DataLoader worker %d: sent batch %s, batch %d expected", i, tostring(r[1]), k)) end
    if r[2] == false then worker_error(f, i, k, r) end
    f._wrng[i] = r[3]
    f._pos = k
    if k == nb then finish() else ask() end
    return r[2]
  end
  -- Lua 5.4: the generic for's to-be-closed value, so that `break` stops the workers at once
  local closer = setmetatable({}, { __close = finish })
  return next_batch, nil, nil, closer
end

-- ---- state_dict -----------------------------------------------------------------------------------

function M.state_dict(f, sd)
  sd.num_workers = f.num_workers
  sd.base_seed = f._base_seed or epoch_seed(f)
  local wrng = {}
  for i = 1, f.num_workers do wrng[i] = f._wrng and f._wrng[i] or false end
  sd.worker_rng = wrng
  sd.seed_origin = f._seed_origin
end

local function load_error(msg) error("DataLoader:load_state_dict: " .. msg, 4) end

function M.load_state_dict(f, sd)
  M.close(f)
  f._resume_seed, f._wrng = nil, nil
  if sd.base_seed == nil then return end -- saved without workers: fresh seeds
  if not (type(sd.base_seed) == "number" and sd.base_seed >= 0 and sd.base_seed == math.floor(sd.base_seed)) then
    load_error("field 'base_seed' must be an integer >= 0, got " .. tostring(sd.base_seed))
  end
  if sd.num_workers ~= f.num_workers then
    load_error(string.format("the state was saved with num_workers=%s, this loader has %d (the workers' random "
      .. "streams would not continue)", tostring(sd.num_workers), f.num_workers))
  end
  local wrng = {}
  if type(sd.worker_rng) ~= "table" then load_error("field 'worker_rng' must be a list, got " .. type(sd.worker_rng)) end
  for i = 1, f.num_workers do
    local s = sd.worker_rng[i]
    if s ~= false and not (type(s) == "string" and #s == 64) then
      load_error(string.format("field 'worker_rng' entry %d must be an RNG state string or false, got %s", i,
        tostring(s)))
    end
    wrng[i] = s or nil
  end
  if sd.seed_origin ~= nil then f._seed_origin = tostring(sd.seed_origin) end
  f._resume_seed, f._wrng = math.floor(sd.base_seed), wrng
end

return M
