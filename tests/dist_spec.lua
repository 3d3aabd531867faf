-- tests/dist_spec.lua — data-parallel training over MPI (lt.distributed, Trainer{strategy="ddp"}).
--
-- The collectives and the Trainer run under `mpirun --allow-run-as-root --oversubscribe -np N` on the scripts
-- in tests/dist/ (with luajit and the same module paths as this busted run); each rank writes what it saw
-- to a file this spec reads. Sharding of the DataLoader and the sampler are checked in-process.
-- Without mpirun (or a build without MPI) the multi-process tests are pending with the reason.
local LUA_EXE = require("helpers.puc").lua_exe -- luajit, or lua5.4 under tests/run --lua 5.4
local lt = require "lutra"
local D = lt.distributed

local fs = require "helpers.fs"
local q, slurp = fs.q, fs.slurp

local function mpirun_path()
  local p = io.popen("command -v mpirun 2>/dev/null")
  local s = p:read("*a")
  p:close()
  s = s:gsub("%s+$", "")
  return s ~= "" and s or nil
end

local MPIRUN = mpirun_path()
local SKIP_REASON = not MPIRUN and "mpirun not found (apt-get install openmpi-bin libopenmpi-dev)"
  or not D.available() and "MPI is not available (install libopenmpi-dev and rebuild)" or nil

local function now()
  local p = io.popen("date +%s.%N")
  local t = tonumber(p:read("*a"))
  p:close()
  return t
end

-- Runs `mpirun -np n luajit tests/dist/<script> outdir args...`; returns {code, out, err, seconds, dir}.
local function mpirun(n, script, args, opts)
  opts = opts or {}
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. q(dir)) == 0)
  local words = {}
  for _, a in ipairs(args or {}) do words[#words + 1] = q(a) end
  local env = string.format("LUA_PATH=%s LUA_CPATH=%s OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1",
    q(package.path), q(package.cpath))
  local cmd = string.format("env %s %s %s --allow-run-as-root --oversubscribe --mca btl self,vader -np %d "
    .. LUA_EXE .. " %s %s %s",
    env, opts.timeout and ("timeout " .. opts.timeout) or "timeout 120", MPIRUN, n, q("tests/dist/" .. script), q(dir),
    table.concat(words, " "))
  local t0 = now()
  local p = io.popen("(" .. cmd .. ") >" .. q(dir .. "/stdout") .. " 2>" .. q(dir .. "/stderr") .. "; echo $?")
  local code = tonumber(p:read("*a"):match("(%d+)%s*$"))
  p:close()
  return { code = code, out = slurp(dir .. "/stdout") or "", err = slurp(dir .. "/stderr") or "",
           seconds = now() - t0, dir = dir }
end

-- The table rank r wrote to <dir>/<name>_<r>.lua.
local function result(run, name, r)
  local path = string.format("%s/%s_%d.lua", run.dir, name, r)
  local chunk = loadfile(path)
  assert(chunk, "rank " .. r .. " wrote no " .. path .. "\nstdout:\n" .. run.out .. "\nstderr:\n" .. run.err)
  return chunk()
end


-- ---- in-process: sampler and loader sharding -----------------------------------------------------------

describe("lt.distributed.shard_indices", function()
  it("pads to a multiple of world_size by repeating from the start and deals positions r, r+W, ...", function()
    local order = { 10, 20, 30, 40, 50 }
    assert.same({ 10, 40 }, D.shard_indices(order, 0, 3))
    assert.same({ 20, 50 }, D.shard_indices(order, 1, 3))
    assert.same({ 30, 10 }, D.shard_indices(order, 2, 3)) -- padding repeats the first entry
    assert.same(order, D.shard_indices(order, 0, 1))
    assert.same({}, D.shard_indices({}, 1, 2))
  end)
end)

describe("lt.distributed.DistributedSampler", function()
  it("gives disjoint equal shares covering every index, identical on every rank, reshuffled per epoch", function()
    local n, W = 11, 3
    local all, lens = {}, {}
    local e0 = {}
    for r = 0, W - 1 do
      local s = D.DistributedSampler(n, { num_replicas = W, rank = r, seed = 7 })
      s:set_epoch(0)
      local idx = s:indices()
      lens[#lens + 1] = #idx
      assert.are.equal(4, s:len())
      for _, i in ipairs(idx) do all[#all + 1] = i end
      e0[r] = idx
      s:set_epoch(1)
      assert.are_not.same(idx, s:indices())
      local again = D.DistributedSampler(n, { num_replicas = W, rank = r, seed = 7 })
      assert.same(idx, again:indices()) -- epoch 0 again: the same order (seed + epoch)
    end
    assert.same({ 4, 4, 4 }, lens)
    -- 12 entries: every index once plus one repeated from the start of the epoch's order
    local seen = {}
    for _, i in ipairs(all) do seen[i] = (seen[i] or 0) + 1 end
    for i = 1, n do assert.truthy(seen[i] and seen[i] >= 1, "index " .. i .. " missing") end
    assert.are.equal(12, #all)
    assert.are.equal(e0[0][1], e0[2][4]) -- rank 2's last entry is the padding: the order's first
  end)

  it("without shuffle deals 1..n in order; drop_last drops the uneven tail instead of padding", function()
    local s = D.DistributedSampler(7, { num_replicas = 2, rank = 1, shuffle = false })
    assert.same({ 2, 4, 6, 1 }, s:indices())
    local d = D.DistributedSampler(7, { num_replicas = 2, rank = 1, shuffle = false, drop_last = true })
    assert.same({ 2, 4, 6 }, d:indices())
    assert.are.equal(3, d:len())
  end)

  it("rejects unknown options and bad ranks by name", function()
    local ok, e = pcall(D.DistributedSampler, 10, { num_replica = 2 })
    assert.is_false(ok)
    assert.matches("unknown option 'num_replica'", e)
    ok, e = pcall(D.DistributedSampler, 10, { num_replicas = 2, rank = 2 })
    assert.is_false(ok)
    assert.matches("rank must be an integer in 0..1, got 2", e, 1, true)
  end)
end)

describe("DataLoader:set_shard", function()
  local function ds(n) return lt.data.TensorDataset(lt.arange(1, n + 1)) end
  local function ids(batch) return batch[1]:totable() end
  local function epoch(loader)
    local out = {}
    for b in loader:iter() do for _, v in ipairs(ids(b)) do out[#out + 1] = v end end
    return out
  end

  it("gives each rank its DistributedSampler share of the loader's shuffled order; #loader counts its batches", function()
    local n, W = 10, 3
    local full = lt.data.DataLoader(ds(n), { batch_size = 2, shuffle = true, seed = 5 })
    local order = epoch(full)
    local union = {}
    for r = 0, W - 1 do
      local l = lt.data.DataLoader(ds(n), { batch_size = 2, shuffle = true, seed = 5 })
      l:set_shard(r, W)
      assert.are.equal(2, #l) -- ceil(10/3) = 4 samples in batches of 2
      assert.same({ r, W }, { l:shard() })
      local mine = epoch(l)
      assert.same(D.shard_indices(order, r, W), mine)
      for _, v in ipairs(mine) do union[#union + 1] = v end
    end
    local seen = {}
    for _, v in ipairs(union) do seen[v] = true end
    for i = 1, n do assert.truthy(seen[i], "sample " .. i .. " missing") end
  end)

  it("reshuffles every epoch with the same permutation on every rank (a Lua dataset too)", function()
    local lua_ds = { len = function() return 9 end, get = function(_, i) return { i } end }
    local a = lt.data.DataLoader(lua_ds, { batch_size = 4, shuffle = true, seed = 2 })
    local b = lt.data.DataLoader(lua_ds, { batch_size = 4, shuffle = true, seed = 2 })
    a:set_shard(0, 2)
    b:set_shard(1, 2)
    local a1, b1, a2, b2 = epoch(a), epoch(b), epoch(a), epoch(b)
    assert.are.equal(5, #a1)
    assert.are.equal(5, #b1)
    assert.are_not.same(a1, a2)
    local u1, u2 = {}, {}
    for _, v in ipairs(a1) do u1[v] = true end
    for _, v in ipairs(b1) do u1[v] = true end
    for _, v in ipairs(a2) do u2[v] = true end
    for _, v in ipairs(b2) do u2[v] = true end
    for i = 1, 9 do
      assert.truthy(u1[i], "epoch 1 misses " .. i)
      assert.truthy(u2[i], "epoch 2 misses " .. i)
    end
  end)

  it("resumes a sharded epoch exactly from its state_dict", function()
    local a = lt.data.DataLoader(ds(20), { batch_size = 3, shuffle = true, seed = 9 })
    a:set_shard(1, 2)
    local it = a:iter()
    it()
    local sd = a:state_dict()
    assert.are.equal(2, sd.world_size)
    local rest = {}
    for b in it do for _, v in ipairs(ids(b)) do rest[#rest + 1] = v end end
    local nxt = epoch(a)
    local b = lt.data.DataLoader(ds(20), { batch_size = 3, shuffle = true, seed = 1 })
    b:set_shard(1, 2)
    b:load_state_dict(sd)
    assert.same(rest, epoch(b))
    assert.same(nxt, epoch(b))
  end)

  it("continues an epoch saved with 2 ranks on 3 ranks (or 1) with exactly the samples not yet seen", function()
    local n, bs = 23, 2
    local seen = {}
    local sd
    for r = 0, 1 do
      local l = lt.data.DataLoader(ds(n), { batch_size = bs, shuffle = true, seed = 4 })
      l:set_shard(r, 2)
      local it = l:iter()
      for _ = 1, 3 do for _, v in ipairs(ids(it())) do seen[v] = true end end
      if r == 0 then sd = l:state_dict() end
    end
    local nseen = 0
    for _ in pairs(seen) do nseen = nseen + 1 end
    assert.are.equal(12, nseen)
    for _, W in ipairs { 3, 1 } do
      local rest = {}
      for r = 0, W - 1 do
        local l = lt.data.DataLoader(ds(n), { batch_size = bs, shuffle = true, seed = 4 })
        l:set_shard(r, W)
        l:load_state_dict(sd)
        for _, v in ipairs(epoch(l)) do rest[v] = (rest[v] or 0) + 1 end
      end
      for i = 1, n do
        if seen[i] then assert.is_nil(rest[i], "sample " .. i .. " seen twice with " .. W .. " ranks")
        else assert.truthy(rest[i], "sample " .. i .. " never seen with " .. W .. " ranks") end
      end
    end
  end)

  it("accepts another per-rank batch size with another number of ranks (the global batch kept)", function()
    local n = 20
    local a = lt.data.DataLoader(ds(n), { batch_size = 2, shuffle = true, seed = 6 })
    a:set_shard(0, 2)
    local it = a:iter()
    it()
    it() -- 2 global batches of 2 x 2 = 8 samples seen
    local ref = lt.data.DataLoader(ds(n), { batch_size = 4, shuffle = true, seed = 6 })
    local order = epoch(ref)
    local b = lt.data.DataLoader(ds(n), { batch_size = 4, shuffle = true, seed = 6 })
    b:load_state_dict(a:state_dict())
    local rest = {}
    for i = 9, n do rest[#rest + 1] = order[i] end
    assert.same(rest, epoch(b)) -- one process, batches of 4: exactly the global batches that were left
    local c = lt.data.DataLoader(ds(n), { batch_size = 4, shuffle = true, seed = 6 })
    c:set_shard(0, 2)
    local ok, e = pcall(c.load_state_dict, c, a:state_dict())
    assert.is_false(ok) -- the same number of ranks: the batch size must match
    assert.matches("the state was saved with batch_size=2, this loader has 4", e, 1, true)
  end)

  it("starts the next epoch after a finished one saved with another number of ranks", function()
    local a = lt.data.DataLoader(ds(10), { batch_size = 2, shuffle = true, seed = 3 })
    a:set_shard(0, 2)
    epoch(a)
    local sd = a:state_dict()
    local ref = lt.data.DataLoader(ds(10), { batch_size = 2, shuffle = true, seed = 3 })
    epoch(ref)
    local second = epoch(ref) -- epoch 2's order, unsharded
    local b = lt.data.DataLoader(ds(10), { batch_size = 2, shuffle = true, seed = 3 })
    b:load_state_dict(sd) -- one process now
    assert.same(second, epoch(b))
  end)

  it("rejects bad shard arguments", function()
    local l = lt.data.DataLoader(ds(4))
    local ok, e = pcall(l.set_shard, l, 2, 2)
    assert.is_false(ok)
    assert.matches("rank must be an integer in 0..1, got 2", e, 1, true)
    ok, e = pcall(l.set_shard, l, 0, 0)
    assert.is_false(ok)
    assert.matches("world_size must be an integer >= 1, got 0", e, 1, true)
  end)
end)

describe("lt.distributed without mpirun", function()
  it("does not initialise MPI when lutra is loaded", function()
    assert.is_false(D.is_initialized())
    assert.are.equal(0, D.rank())
    assert.are.equal(1, D.world_size())
  end)

  it("says a collective needs init() first", function()
    if not D.available() then
      local ok, e = pcall(D.init)
      assert.is_false(ok)
      assert.matches("apt-get install openmpi-bin libopenmpi-dev", e, 1, true)
      return
    end
    local ok, e = pcall(D.all_reduce, lt.zeros(2), "sum")
    assert.is_false(ok)
    assert.matches("all_reduce: the distributed world is not initialised (call lt.distributed.init() first)", e, 1, true)
  end)
end)

describe("Trainer strategy without mpirun", function()
  it("is a single process with world_size 1, global_rank 0, is_global_zero", function()
    local t = lt.Trainer { logger = false, enable_progress_bar = false }
    assert.same({ 1, 0, true, "none" }, { t.world_size, t.global_rank, t.is_global_zero, t.strategy })
    local n = lt.Trainer { strategy = "none", logger = false }
    assert.are.equal(1, n.world_size)
    assert.is_false(D.is_initialized()) -- "auto" outside mpirun never initialises MPI
  end)

  it("rejects an unknown strategy and bad DDPStrategy options by name", function()
    local ok, e = pcall(lt.Trainer, { strategy = "dp" })
    assert.is_false(ok)
    assert.matches([[option 'strategy' must be "auto", "ddp", "none" or lt.distributed.DDPStrategy{...}, got "dp" (string)]],
      e, 1, true)
    ok, e = pcall(D.DDPStrategy, { bucket_mb = 1 })
    assert.is_false(ok)
    assert.matches("DDPStrategy: unknown option 'bucket_mb' (known options: bucket_cap_mb)", e, 1, true)
    ok, e = pcall(D.DDPStrategy, { bucket_cap_mb = 0 })
    assert.is_false(ok)
    assert.matches("DDPStrategy: bucket_cap_mb must be a number > 0, got 0", e, 1, true)
    assert.are.equal("DDPStrategy{bucket_cap_mb=2}", tostring(D.DDPStrategy { bucket_cap_mb = 2 }))
  end)
end)

-- ---- under mpirun ----------------------------------------------------------------------------------------

local function mpi_describe(name, fn)
  if SKIP_REASON then
    describe(name, function() pending(SKIP_REASON) end)
  else
    describe(name, fn)
  end
end

mpi_describe("collectives on 2 ranks", function()
  local run, r0, r1
  setup(function()
    run = mpirun(2, "unit.lua")
    assert(run.code == 0, "mpirun failed (" .. tostring(run.code) .. "):\n" .. run.out .. run.err)
    r0, r1 = result(run, "unit", 0), result(run, "unit", 1)
  end)

  it("sees the launch, initialises on init() only, and gives ranks 0 and 1 of 2", function()
    assert.same({ true, 0, 2 }, r0.launched)
    assert.same({ true, 1, 2 }, r1.launched)
    assert.same({ false, 0, 1 }, r0.before_init)
    assert.are.equal(0, r0.rank)
    assert.are.equal(1, r1.rank)
    assert.are.equal(2, r1.world)
  end)

  it("all_reduce sums, averages, takes max and min, in place, on every rank", function()
    for _, r in ipairs { r0, r1 } do
      assert.same({ 3, 30, -3 }, r.op_sum)
      assert.same({ 1.5, 15, -1.5 }, r.op_mean)
      assert.same({ 2, 20, -1 }, r.op_max)
      assert.same({ 1, 10, -2 }, r.op_min)
      assert.is_true(r.returns_arg)
    end
  end)

  it("all_reduce of many tensors through small buckets gives every tensor its own mean", function()
    for _, r in ipairs { r0, r1 } do
      for i = 1, 7 do assert.same({ 1.5 * i, 1.5 * i }, r.bucketed[i]) end
    end
  end)

  it("all_reduce of int64 is exact beyond 2^32; mean of int64 and strided views are errors", function()
    assert.same({ 3, 2 ^ 41 + 1 }, r0.int64_sum)
    assert.matches("all_reduce: op 'mean' needs float32 or float64 tensors, tensor 1 is int64", r0.int64_mean_err, 1,
      true)
    assert.matches("all_reduce: tensor 1 is not contiguous", r0.noncontig_err, 1, true)
    assert.matches("all_reduce: unknown op 'avg' (expected sum, mean, max or min)", r0.bad_op_err, 1, true)
    assert.matches("all_reduce: expected a tensor or a list of tensors, got number", r0.bad_arg_err, 1, true)
  end)

  it("all_reduce of float64 keeps values float32 cannot hold (1 + 2^-40), each op", function()
    local e = 2 ^ -40
    for _, r in ipairs { r0, r1 } do
      assert.are.equal("float64", r.f64_dtype)
      assert.same({ 2 + 3 * e, -3 * e, 2 ^ 31 + 2 ^ -20 }, r.f64_sum)
      assert.same({ 1 + 1.5 * e, -1.5 * e, 2 ^ 30 + 2 ^ -21 }, r.f64_mean)
      assert.same({ 1 + 2 * e, -e, 2 ^ 30 + 2 ^ -20 }, r.f64_max)
      assert.same({ 1 + e, -2 * e, 2 ^ 30 }, r.f64_min)
    end
  end)

  it("all_reduce of a list mixing float32, float64 and int64 reduces each in its own dtype", function()
    local e = 2 ^ -40
    for _, r in ipairs { r0, r1 } do
      assert.same({ "float32", { 3, 3, 3, 3, 3 } }, r.mixed[1])
      assert.same({ "float64", { 2 + 3 * e, 2 + 3 * e, 2 + 3 * e, 2 + 3 * e } }, r.mixed[2])
      assert.same({ "int64", { 2 ^ 41 + 1 } }, r.mixed[3])
      assert.same({ "float64", { 3 * e, 3 * e, 3 * e } }, r.mixed[4])
      assert.same({ "float32", { 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25 } }, r.mixed[5])
      assert.same({ { 1 + 1.5 * e, 1 + 1.5 * e }, { 1.5, 1.5 } }, r.mixed_mean)
      assert.matches("all_reduce: the ranks disagree: rank 1 has 1 tensors of 4 elements in total (4 of them "
        .. "float64), rank 0 has 1 tensors of 4 elements in total (0 of them float64)", r.f64_mismatch_err, 1, true)
    end
  end)

  it("broadcasts float64 tensors (contiguous or not) exactly; a dtype that differs across ranks is an error", function()
    local e = 2 ^ -40
    for _, r in ipairs { r0, r1 } do
      assert.same({ "float64", { 1 + 2 * e, 1 } }, r.bcast_f64)
      assert.same({ { 1 + e, 2 + e, 3 + e }, { 4 + e, 5 + e, 6 + e } }, r.bcast_f64_view)
      assert.matches("broadcast: the ranks disagree: rank 1 has a float64 tensor of 2 elements, rank 0 has a "
        .. "float32 tensor of 2 elements", r.bcast_dtype_err, 1, true)
    end
  end)

  it("GradReducer of float32 and float64 parameters keeps one dtype per bucket and float64 means exact", function()
    local e = 2 ^ -40
    local want = { { "float32", { 1.5, 1.5 } }, { "float64", { 1 + 1.5 * e, 1 + 1.5 * e } },
      { "float32", { 2, 2, 2 } }, { "float64", { 1.5 * e } } }
    for _, r in ipairs { r0, r1 } do
      assert.are.equal(2, r.mixed_nbuckets) -- {q4, q2} float64, {q3, q1} float32
      assert.same(want, r.mixed_grads)
      assert.same(want, r.mixed_grads_attached)
      -- only the first step copies gradients into buckets (2 + 3 floats, 2 + 1 doubles), later ones are views
      assert.are.equal(5 * 4 + 3 * 8, r.mixed_copied)
      assert.matches("gradient reducer: tensor 2 is int64, expected float32 or float64", r.reducer_int64_err, 1, true)
    end
  end)

  it("reduces plain numbers", function()
    assert.are.equal(2, r1.number_sum)
    assert.are.equal(1, r1.number_mean)
    assert.same({ 1, 0, 7 }, r0.numbers_max)
  end)

  it("broadcasts tensors (contiguous or not), lists and strings from the given rank", function()
    for _, r in ipairs { r0, r1 } do
      assert.same({ { 1, 1, 1 }, { 1, 1, 1 } }, r.bcast0)
      assert.same({ { 2, 4 }, { 6, 8 } }, r.bcast1)
      assert.same({ { 1, 2, 3 }, { 4, 5, 6 } }, r.bcast_view)
      assert.same({ { 1, 1 }, { 11, 11, 11 } }, r.bcast_list)
      assert.are.equal("from rank 0", r.bcast_string)
      assert.are.equal(100000, r.bcast_long_string)
    end
  end)

  it("reports tensors that differ across ranks on every rank instead of hanging", function()
    for _, r in ipairs { r0, r1 } do
      assert.matches("broadcast: the ranks disagree: rank 1 has a float32 tensor of 3 elements, "
        .. "rank 0 has a float32 tensor of 2 elements",
        r.bcast_mismatch_err, 1, true)
      assert.matches("broadcast: src must be a rank in 0..1, got 5", r.bcast_src_err, 1, true)
    end
  end)

  it("GradReducer averages gradients in buckets; a gradient on one rank only counts as zeros elsewhere", function()
    assert.are.equal(4, r0.nbuckets) -- 12-byte buckets: p4 | p3 | p2 | p1 (reverse order)
    for _, r in ipairs { r0, r1 } do
      assert.same({ { 1.5, 1.5, 1.5 }, { { 1.5, 1.5 }, { 1.5, 1.5 } }, { 1.5, 1.5, 1.5, 1.5 }, "nil" }, r.grad_step1)
      assert.same({ { 1.5, 1.5, 1.5 }, { { 3, 3 }, { 3, 3 } }, { 1.5, 1.5, 1.5, 1.5 }, "nil" }, r.grad_step2)
      assert.are.equal(2, r.reducer_stats.steps)
      assert.are.equal(8, r.reducer_stats.buckets)
      assert.matches("GradReducer: op must be mean or sum, got max", r.reducer_bad_op, 1, true)
      assert.matches("GradReducer: unknown option 'bucket_mb'", r.reducer_bad_opt, 1, true)
      assert.matches("GradReducer: bucket_cap_mb must be a number > 0, got 0", r.reducer_bad_mb, 1, true)
      assert.matches("GradReducer: bucket_cap_mb must be finite, got inf", r.reducer_inf_mb, 1, true)
    end
  end)

  it("a reducer attached to backward averages gradients as they become final, as reducing after would", function()
    for _, r in ipairs { r0, r1 } do
      assert.are.equal(4, r.attached_nbuckets)
      assert.are.equal(4, r.attached_stats.buckets) -- every bucket sent, during one backward
      assert.are.equal(1, r.attached_stats.steps)
      assert.are.equal(0, r.attached_vs_after)
      assert.is_true(r.attached_vs_mean < 1e-7)
      assert.is_true(r.input_grad_local) -- a leaf that is not a parameter keeps its own gradient
      assert.are.equal(1, r.attached_untouched_steps) -- a backward reaching no parameter sends nothing
      -- gradients as views of the buckets: only the first step copies the 67 gradient floats (268 bytes)
      assert.same({ 268, 268, 268 }, r.view_copied)
      assert.are.equal(0, r.view_vs_after)
    end
  end)

  it("DistributedSampler defaults to the world's rank and size", function()
    assert.are.equal(5, r0.sampler_len)
    local u = {}
    for _, i in ipairs(r0.sampler) do u[i] = true end
    for _, i in ipairs(r1.sampler) do u[i] = true end
    for i = 1, 10 do assert.truthy(u[i]) end
  end)
end)

-- ---- the Trainer under mpirun -------------------------------------------------------------------------------

local function has_trainer_checkpoints()
  local ok, ck = pcall(require, "lutra.checkpoint")
  return ok and type(ck.save_trainer) == "function" and type(ck.restore_trainer) == "function"
end

local function max_weight_diff(a, b)
  local d = 0
  assert.are.equal(#a, #b)
  for i = 1, #a do
    assert.are.equal(#a[i], #b[i])
    for j = 1, #a[i] do d = math.max(d, math.abs(a[i][j] - b[i][j])) end
  end
  return d
end

-- train.lua's mode on 1 rank with batch bs_one and on 2 ranks with batch bs_two: what rank 0 of the first run and
-- ranks 0 and 1 of the second wrote
local function one_vs_two(mode, bs_one, bs_two)
  local one = mpirun(1, "train.lua", { mode, tostring(bs_one) })
  assert(one.code == 0, one.out .. one.err)
  local two = mpirun(2, "train.lua", { mode, tostring(bs_two) })
  assert(two.code == 0, two.out .. two.err)
  return result(one, mode, 0), result(two, mode, 0), result(two, mode, 1)
end

mpi_describe("Trainer{strategy='ddp'} under mpirun", function()
  it("2 ranks x batch 32 give the weights of 1 rank x batch 64 (to 1e-5), identical on both ranks", function()
    local a, b0, b1 = one_vs_two("equiv", 64, 32)
    assert.are.equal("none", a.strategy) -- mpirun -np 1: auto stays a single process
    assert.are.equal("ddp", b0.strategy) -- chosen automatically with 2 ranks
    assert.same({ 2, 0, true }, { b0.world_size, b0.global_rank, b0.is_global_zero })
    assert.same({ 2, 1, false }, { b1.world_size, b1.global_rank, b1.is_global_zero })
    assert.are.equal(8, a.global_step) -- 2 epochs of 256 samples in batches of 64
    assert.are.equal(8, b0.global_step) -- ... and in global batches of 2 x 32
    assert.are.equal(8, b1.steps_seen)
    assert.is_true(max_weight_diff(a.weights, b0.weights) < 1e-5)
    assert.are.equal(0, max_weight_diff(b0.weights, b1.weights)) -- the same update on every rank, bit for bit
  end)

  it("a float64 model on 2 ranks x batch 32 gets the weights of 1 rank x batch 64 to 1e-12", function()
    local a, b0, b1 = one_vs_two("f64", 64, 32)
    assert.are.equal("ddp", b0.strategy)
    assert.same({ "float64", "float64", "float64", "float64" }, b0.dtypes)
    assert.are.equal(8, b0.global_step)
    local d = max_weight_diff(a.weights, b0.weights)
    assert.is_true(d < 1e-12, "max difference " .. d)
    assert.are.equal(0, max_weight_diff(b0.weights, b1.weights))
    -- float32 arithmetic would be ~1e-7 away: the float64 run differs from the float32 one by more than that
    local f32 = mpirun(1, "train.lua", { "equiv", "64" })
    assert(f32.code == 0, f32.out .. f32.err)
    assert.is_true(max_weight_diff(a.weights, result(f32, "equiv", 0).weights) > 1e-9)
  end)

  it("a model mixing float32 and float64 parameters trains under ddp as on one rank", function()
    local a, b0, b1 = one_vs_two("mix", 64, 32)
    assert.same({ "float32", "float32", "float64", "float64" }, b0.dtypes)
    assert.are.equal(8, b1.global_step)
    assert.is_true(max_weight_diff(a.weights, b0.weights) < 1e-5)
    local d64 = max_weight_diff({ a.weights[3], a.weights[4] }, { b0.weights[3], b0.weights[4] })
    assert.is_true(d64 < 1e-5, "float64 layer: " .. d64)
    assert.are.equal(0, max_weight_diff(b0.weights, b1.weights))
  end)

  it("a datamodule's loaders (asked for at the loops' start) are sharded: the weights of the same loaders given",
    function()
      local given = mpirun(2, "train.lua", { "equiv", "32" })
      assert(given.code == 0, given.out .. given.err)
      local two = mpirun(2, "train.lua", { "dm", "32" })
      assert(two.code == 0, two.out .. two.err)
      local a, b0, b1 = result(given, "equiv", 0), result(two, "dm", 0), result(two, "dm", 1)
      assert.are.equal(4, b0.num_training_batches) -- 256 samples / 2 ranks / 32
      assert.are.equal(8, b1.global_step)
      assert.are.equal(2 + 2 * 2, b1.val_batches) -- sanity check and 2 epochs of 64 / 2 ranks / 16
      assert.are.equal(0, max_weight_diff(a.weights, b0.weights))
      assert.are.equal(0, max_weight_diff(b0.weights, b1.weights))
    end)

  it("accumulating gradients reduces once per optimizer step, with the weights of one rank", function()
    local a, b0, b1 = one_vs_two("accum", 32, 16)
    assert.are.equal(16, b0.steps_seen) -- 2 epochs x 8 micro-batches of 2 x 16 of the 256 samples
    assert.are.equal(8, b0.global_step)
    assert.are.equal(8, b0.reductions) -- one all-reduce per step, not per micro-batch (DDP's no_sync)
    assert.is_true(max_weight_diff(a.weights, b0.weights) < 1e-5)
    assert.are.equal(0, max_weight_diff(b0.weights, b1.weights))
  end)

  it("logs once (rank 0's logger only) and reduces sync_dist values across ranks", function()
    local run = mpirun(2, "train.lua", { "log", "32" })
    assert(run.code == 0, run.out .. run.err)
    local r0, r1 = result(run, "log", 0), result(run, "log", 1)
    assert.same({ true, 1 }, { r0.has_logger, r0.nloggers })
    assert.same({ false, 0 }, { r1.has_logger, r1.nloggers })
    -- one version directory, one header, one row per step
    local p = io.popen("ls " .. q(run.dir .. "/lutra_logs"))
    local dirs = p:read("*a")
    p:close()
    assert.are.equal("version_0\n", dirs)
    local csv = slurp(run.dir .. "/lutra_logs/version_0/metrics.csv")
    local lines = {}
    for l in csv:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.are.equal("epoch,step,plain_step,synced_step,plain_epoch,synced_epoch,synced_max", lines[1])
    assert.are.equal(1 + 4 + 1, #lines) -- header, 4 steps (256 / (2 x 32)), the epoch row
    assert.are.equal("0,0,1,1.5,,,", lines[2]) -- rank 0's own value; the mean of 1 and 2
    -- the epoch values: rank-local without sync_dist, reduced with it (mean over ranks, max over ranks)
    local m0, m1 = r0.callback_metrics, r1.callback_metrics
    assert.same({ 1, 1.5, 20 }, { m0.plain_epoch, m0.synced_epoch, m0.synced_max })
    assert.same({ 2, 1.5, 20 }, { m1.plain_epoch, m1.synced_epoch, m1.synced_max })
    -- the model summary is printed once
    local n = 0
    for _ in run.out:gmatch("Trainable params") do n = n + 1 end
    assert.are.equal(1, n)
  end)

  it("shards validation too, reduces sync_dist values, and stops every rank when EarlyStopping stops one", function()
    local run = mpirun(2, "train.lua", { "val", "32" })
    assert(run.code == 0, run.out .. run.err)
    local r0, r1 = result(run, "val", 0), result(run, "val", 1)
    -- rank 1's monitored value worsens in the third epoch (patience 1): both ranks end after it
    assert.same({ 3, 3 }, { r0.epoch, r1.epoch })
    assert.are.equal(12, r0.val_batches) -- 3 epochs x ceil(50 / 16) batches of this rank's half
    assert.are.equal(7, r0.val_len) -- after fit the loader is whole again: ceil(100 / 16)
    assert.are.equal(r0.val_loss, r1.val_loss) -- sync_dist: the same mean on both ranks
  end)

  it("only rank 0 writes checkpoints; after fit every rank's ModelCheckpoint has rank 0's best and last paths", function()
    if not has_trainer_checkpoints() then pending("lutra.checkpoint has no save_trainer yet") return end
    local run = mpirun(2, "train.lua", { "mc", "32" })
    assert(run.code == 0, run.out .. run.err)
    local r0, r1 = result(run, "mc", 0), result(run, "mc", 1)
    local dir = run.dir .. "/lutra_logs/version_0/checkpoints"
    assert.are.equal(dir, r0.dirpath)
    assert.same({ r0.best, r0.last, r0.dirpath }, { r1.best, r1.last, r1.dirpath })
    assert.is_true(r1.exists)
    local p = io.popen("cd " .. q(run.dir) .. " && find . -name '*.ckpt' | sort")
    local files = p:read("*a")
    p:close()
    -- top 2 of 3 epochs by rank 0's train_loss, and last.ckpt; nothing from rank 1 (it has no logger dir)
    local n = 0
    for line in files:gmatch("[^\n]+") do
      n = n + 1
      assert.matches("^%./lutra_logs/version_0/checkpoints/", line)
    end
    assert.are.equal(3, n)
  end)

  it("a rank that raises in on_train_batch_end ends the job at once with that rank's message", function()
    local run = mpirun(2, "train.lua", { "raise", "32" }, { timeout = 30 })
    assert.are_not.equal(0, run.code)
    assert.is_true(run.seconds < 10, "took " .. run.seconds .. " s")
    assert.matches("lutra: rank 1 of 2 failed: on_train_batch_end: tests/dist/train.lua:%d+: boom at batch 3 on rank 1", run.err)
    assert.is_nil(io.open(run.dir .. "/raise_0.lua")) -- rank 0 did not finish either
  end)

  it("a rank killed by a signal makes mpirun stop the job and exit non-zero within seconds", function()
    local run = mpirun(2, "train.lua", { "kill", "32" }, { timeout = 30 })
    assert.are_not.equal(0, run.code)
    assert.is_true(run.seconds < 10, "took " .. run.seconds .. " s")
    assert.matches("rank 1 .* exited on signal 9", run.err)
  end)
end)

mpi_describe("Trainer{strategy='ddp'} checkpoints", function()
  local uninterrupted

  -- 3 epochs of 4 global batches (2 x 32); rank 0 writes a checkpoint after step 5 (inside epoch 2)
  local function ckpt_run()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. q(dir)) == 0)
    local path = dir .. "/run.ckpt"
    local run = mpirun(2, "train.lua", { "ckpt", "32", path })
    assert(run.code == 0, run.out .. run.err)
    return run, path
  end

  it("a 2-rank checkpoint (written by rank 0 only) resumes exactly on 2 ranks", function()
    if not has_trainer_checkpoints() then pending("lutra.checkpoint has no save_trainer/restore_trainer yet") return end
    local run, path
    run, path = ckpt_run()
    uninterrupted = { run = run, path = path }
    local res = mpirun(2, "train.lua", { "resume", "32", path })
    assert(res.code == 0, res.out .. res.err)
    local a, b0, b1 = result(run, "ckpt", 0), result(res, "resume", 0), result(res, "resume", 1)
    assert.are.equal(12, b0.global_step)
    assert.are.equal(0, max_weight_diff(a.weights, b0.weights)) -- bit for bit
    assert.are.equal(0, max_weight_diff(a.weights, b1.weights))
  end)

  it("resumes on another number of ranks: 1 x 64 follows the 2 x 32 run, 3 ranks finish the epoch's unseen samples", function()
    if not has_trainer_checkpoints() then pending("lutra.checkpoint has no save_trainer/restore_trainer yet") return end
    if not uninterrupted then uninterrupted = {} uninterrupted.run, uninterrupted.path = ckpt_run() end
    local a = result(uninterrupted.run, "ckpt", 0)
    local one = mpirun(1, "train.lua", { "resume", "64", uninterrupted.path })
    assert(one.code == 0, one.out .. one.err)
    local r1 = result(one, "resume", 0)
    assert.are.equal(12, r1.global_step)
    assert.is_true(max_weight_diff(a.weights, r1.weights) < 1e-5) -- the same global batches, summed in another order
    local three = mpirun(3, "train.lua", { "resume", "32", uninterrupted.path })
    assert(three.code == 0, three.out .. three.err)
    -- epoch 2: 1 global batch before the checkpoint, then 192 samples / 3 ranks = 2 batches of 32;
    -- epoch 3: ceil(256 / 3) = 86 samples per rank = 3 batches: 5 + 2 + 3 steps
    assert.are.equal(10, result(three, "resume", 0).global_step)
    assert.are.equal(10, result(three, "resume", 2).global_step)
  end)
end)

-- ---- metrics: lt.metrics' states summed across ranks (tests/dist/metrics.lua) ----------------------------

mpi_describe("lt.metrics on 2 ranks", function()
  local r0, r1
  setup(function()
    local run = mpirun(2, "metrics.lua")
    assert(run.code == 0, "mpirun failed (" .. tostring(run.code) .. "):\n" .. run.out .. run.err)
    r0, r1 = result(run, "metrics", 0), result(run, "metrics", 1)
  end)

  local function close(a, b)
    if type(a) == "table" then
      assert.are.equal(#b, #a)
      for i = 1, #a do close(a[i], b[i]) end
      return
    end
    assert(math.abs(a - b) <= 1e-5 * math.max(1, math.abs(b)), string.format("%.9g vs %.9g", a, b))
  end

  it("compute() gives on every rank the metric over both ranks' data (states summed, curve data gathered)", function()
    for _, res in ipairs({ r0, r1 }) do
      for k, v in pairs(res.ref) do
        local ok, e = pcall(close, res.synced[k], v)
        assert(ok, k .. " on rank " .. res.rank .. ": " .. tostring(e))
      end
    end
    assert.are.equal(6, r0.local_rows) -- the rank's own state is kept after compute()
    assert.are.equal(9, r1.local_rows)
    assert.are.equal(6, r0.local_cm_total)
  end)

  it("self:log(name, metric) under ddp logs the metric over every rank's shard", function()
    assert.are.equal(32, r0.trainer_seen) -- each rank saw half the samples
    for _, res in ipairs({ r0, r1 }) do
      close(res.trainer_train_acc, res.trainer_ref)
      close(res.trainer_val_acc, res.trainer_ref)
    end
  end)
end)
