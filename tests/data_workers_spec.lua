-- tests/data_workers_spec.lua — DataLoader{num_workers = N} (lutra/data/workers.lua, docs/reference/data.md):
-- batches bitwise equal to num_workers = 0, seeds and resume-exact with random transforms, worker_init_fn and
-- get_worker_info, errors naming worker, item and batch, persistent workers, the options' errors, lutra's data
-- objects crossing to another state, a fit with workers, and no thread left behind (/proc/self/task).
local lt = require "lutra"

local function collect()
  collectgarbage()
  collectgarbage()
end

local function count_now()
  local pid = io.open("/proc/self/stat"):read("*l"):match("^(%d+)")
  local p = io.popen("ls /proc/" .. pid .. "/task | wc -l")
  local n = tonumber(p:read("*a"))
  p:close()
  return n
end

-- the process's threads, once the workers of collected iterators are stopped
local function tasks()
  collect()
  return count_now()
end

local function deep_equal(x, y)
  if type(x) ~= "table" or type(y) ~= "table" then return x == y end
  for k, v in pairs(x) do
    if not deep_equal(v, y[k]) then return false end
  end
  for k in pairs(y) do
    if x[k] == nil then return false end
  end
  return true
end

-- bitwise: the same dtype, shape and values (floats compared exactly)
local function same_tensor(a, b)
  return lt.is_tensor(a) and lt.is_tensor(b) and a:dtype() == b:dtype() and deep_equal(a:size(), b:size())
    and deep_equal(a:totable(), b:totable())
end

local function same_batch(a, b)
  if lt.is_tensor(a) then return same_tensor(a, b) end
  if type(a) ~= "table" or type(b) ~= "table" then return a == b end
  for k, v in pairs(a) do
    if not same_batch(v, b[k]) then return false end
  end
  for k in pairs(b) do
    if a[k] == nil then return false end
  end
  return true
end

local function batches(loader)
  local out = {}
  for b in loader:iter() do out[#out + 1] = b end
  return out
end

local function assert_same_batches(a, b)
  assert.are.equal(#a, #b)
  for k = 1, #a do
    assert.is_true(same_batch(a[k], b[k]), "batch " .. k .. " differs")
  end
end

-- a Lua dataset without randomness: item i is {x = a 2x3 float32 tensor, y = i, name = "item i"}
local function plain_dataset(n)
  local ds = { n = n, scale = 0.5 }
  function ds:len() return self.n end
  function ds:get(i)
    local v = {}
    for j = 1, 6 do v[j] = i * self.scale + j / 7 end
    return { x = lt.tensor(v):view(2, 3), y = i, name = "item " .. i }
  end
  return ds
end

-- a Lua dataset with a random transform drawn from lutra's RNG
local function random_dataset(n)
  local ds = { n = n }
  function ds:len() return self.n end
  function ds:get(i) return { lt.full({ 3 }, i) + lt.rand(3), lt.random_integer(1000) } end
  return ds
end

describe("DataLoader{num_workers}", function()
  describe("batches bitwise equal to num_workers = 0", function()
    for _, shuffle in ipairs { false, true } do
      for _, drop_last in ipairs { false, true } do
        it(string.format("a Lua dataset, shuffle=%s, drop_last=%s", tostring(shuffle), tostring(drop_last)), function()
          local ds = plain_dataset(45)
          local opts = { batch_size = 4, shuffle = shuffle, drop_last = drop_last, seed = 11 }
          local want = batches(lt.data.DataLoader(ds, opts))
          opts.num_workers = 2
          local got = batches(lt.data.DataLoader(ds, opts))
          assert.are.equal(drop_last and 11 or 12, #got)
          assert_same_batches(want, got)
        end)
      end
    end

    it("a TensorDataset, a Subset of a Lua dataset and a collate_fn, with three workers and prefetch_factor 1", function()
      lt.manual_seed(5)
      local tds = lt.data.TensorDataset(lt.randn(37, 3), lt.randint(1, 10, { 37 }))
      local sub = lt.data.Subset(plain_dataset(30), { 3, 9, 4, 27, 1, 2, 5, 8, 13, 21, 30 })
      local function collate(samples)
        local ys = {}
        for k, s in ipairs(samples) do ys[k] = s.y * 10 end
        return { lt.tensor(ys, "int64"), #samples }
      end
      for _, case in ipairs {
        { tds, { batch_size = 5, shuffle = true, seed = 2 } },
        { sub, { batch_size = 3, shuffle = true, seed = 4 } },
        { sub, { batch_size = 2, collate_fn = collate } },
      } do
        local opts = case[2]
        local want = batches(lt.data.DataLoader(case[1], opts))
        opts.num_workers, opts.prefetch_factor = 3, 1
        assert_same_batches(want, batches(lt.data.DataLoader(case[1], opts)))
      end
    end)

    it("leaves the main state's random streams as num_workers = 0 does (seeds are derived, not drawn)", function()
      lt.manual_seed(42)
      local before = lt.get_rng_state()
      local loader = lt.data.DataLoader(random_dataset(12), { batch_size = 4, num_workers = 2 })
      batches(loader)
      assert.are.equal(before, lt.get_rng_state())
    end)
  end)

  describe("random transforms", function()
    it("give the same batches run after run, and differ from worker to worker", function()
      local function run()
        lt.manual_seed(7)
        return batches(lt.data.DataLoader(random_dataset(24), { batch_size = 3, shuffle = true, num_workers = 2 }))
      end
      local a, b = run(), run()
      assert_same_batches(a, b)
      -- item 1 of batch 1 (worker 1) and batch 2 (worker 2) are drawn from different streams
      assert.is_false(same_tensor(a[1][1][1] - a[1][1][1]:floor(), a[2][1][1] - a[2][1][1]:floor()))
    end)

    it("resume exactly mid-epoch: state_dict after batch 7 of 20, the rest equal to the uninterrupted run", function()
      local function loader()
        return lt.data.DataLoader(random_dataset(80), { batch_size = 4, shuffle = true, seed = 9, num_workers = 2 })
      end
      local l1 = loader()
      local first = batches(l1) -- epoch 1, then epoch 2 is the one interrupted
      local full = batches(l1)
      assert.are.equal(20, #full)
      local l2 = loader()
      batches(l2)
      local it2 = l2:iter()
      for k = 1, 7 do assert.is_true(same_batch(full[k], it2()), "batch " .. k) end
      local sd = l2:state_dict()
      assert.are.equal(7, sd.position)
      assert.are.equal("number", type(sd.base_seed))
      assert.are.equal(2, #sd.worker_rng)
      local l3 = loader()
      l3:load_state_dict(sd)
      local rest = batches(l3)
      assert.are.equal(13, #rest)
      for k = 1, 13 do assert.is_true(same_batch(full[7 + k], rest[k]), "batch " .. (7 + k)) end
      assert.is_false(same_batch(first[8], rest[1])) -- (the epochs' transforms differ)
      -- the next epoch as the uninterrupted run's third, and so from a state saved at an epoch's end
      local l4 = loader()
      l4:load_state_dict(l1:state_dict())
      local third = batches(l1)
      assert_same_batches(third, batches(l3))
      assert_same_batches(third, batches(l4))
    end)
  end)

  it("worker_init_fn(id) runs in each worker after seeding; get_worker_info() names the worker there", function()
    local ds = { n = 8 }
    function ds:len() return self.n end
    function ds:get(i)
      local info = require("lutra").data.get_worker_info()
      return { i, info.id, info.num_workers, info.seed, require("lutra").data.len(info.dataset), rawget(_G, "INIT_TAG") }
    end
    local loader = lt.data.DataLoader(ds, {
      batch_size = 2, num_workers = 2, seed = 1,
      worker_init_fn = function(id) INIT_TAG = "init " .. id end, -- luacheck: ignore 111
    })
    assert.is_nil(lt.data.get_worker_info())
    local got = batches(loader)
    assert.are.equal(4, #got)
    local seeds = {}
    for k, b in ipairs(got) do
      local id = (k - 1) % 2 + 1
      assert.are.same({ id, id }, b[2]:totable())
      assert.are.same({ 2, 2 }, b[3]:totable())
      assert.are.same({ 8, 8 }, b[5]:totable())
      assert.are.same({ "init " .. id, "init " .. id }, b[6])
      seeds[id] = b[4]:totable()[1]
    end
    assert.are.equal(seeds[1] + 1, seeds[2])
    assert.is_nil(rawget(_G, "INIT_TAG")) -- it ran in the workers, not here
  end)

  describe("errors", function()
    it("an error in get names the worker, the item and the batch, with the worker's traceback", function()
      local before = tasks()
      local ds = plain_dataset(20)
      local get = ds.get
      function ds:get(i)
        if i == 13 then error("bad item " .. i) end
        return get(self, i)
      end
      local loader = lt.data.DataLoader(ds, { batch_size = 2, num_workers = 2 })
      local seen = 0
      local ok, err = pcall(function()
        for _ in loader:iter() do seen = seen + 1 end
      end)
      assert.is_false(ok)
      assert.are.equal(6, seen)
      err = tostring(err)
      assert.matches("^DataLoader worker 1: item 13 %(batch 7%): .-bad item 13\nworker traceback:", err)
      assert.matches("in function", err)
      assert.are.equal(before, tasks())
    end)

    it("an error in worker_init_fn and in the collate function", function()
      local ds = plain_dataset(6)
      local l1 = lt.data.DataLoader(ds, { batch_size = 2, num_workers = 2, worker_init_fn = function(id)
        if id == 2 then error("no init for 2") end
      end })
      local it = l1:iter()
      it()
      assert.has_error(it, nil)
      local ok, err = pcall(batches, lt.data.DataLoader(ds, { batch_size = 2, num_workers = 2,
        worker_init_fn = function(id) if id == 2 then error("no init for 2") end end }))
      assert.is_false(ok)
      assert.matches("^DataLoader worker 2: worker_init_fn: .-no init for 2\nworker traceback:", tostring(err))
      ok, err = pcall(batches, lt.data.DataLoader(ds, { batch_size = 2, num_workers = 2,
        collate_fn = function() error("cannot collate") end }))
      assert.is_false(ok)
      assert.matches("^DataLoader worker 1: collate %(batch 1%): .-cannot collate", tostring(err))
    end)

    it("the options' errors, as PyTorch's", function()
      local ds = plain_dataset(4)
      assert.has_error(function() lt.data.DataLoader(ds, { prefetch_factor = 2 }) end,
        "DataLoader: option 'prefetch_factor' can only be given with worker states: set num_workers > 0 "
          .. "(num_workers = 0 loads in the calling state)")
      assert.has_error(function() lt.data.DataLoader(ds, { num_workers = 0, persistent_workers = true }) end,
        "DataLoader: option 'persistent_workers' needs num_workers > 0")
      assert.has_error(function() lt.data.DataLoader(ds, { num_workers = -1 }) end,
        "DataLoader: option 'num_workers' must be an integer >= 0, got -1")
      assert.has_error(function() lt.data.DataLoader(ds, { num_workers = 2, prefetch_factor = 0 }) end,
        "DataLoader: option 'prefetch_factor' must be a positive integer, got 0")
      assert.has_error(function() lt.data.DataLoader(ds, { num_workers = 1, worker_init_fn = 3 }) end,
        "DataLoader: option 'worker_init_fn' must be a function, got number")
      assert.has_error(function() lt.data.DataLoader(ds, { num_workers = 1, timeout = -1 }) end,
        "DataLoader: option 'timeout' must be a number of seconds >= 0, got -1")
      assert.has_error(function() lt.data.DataLoader(ds, { timeout = 5 }) end,
        "DataLoader: option 'timeout' needs num_workers > 0 (it bounds the wait for a worker's batch), got timeout = 5")
      lt.data.DataLoader(ds, { timeout = 0 }) -- (PyTorch's default, accepted without workers)
    end)

    it("timeout: a worker slower than the timeout stops the epoch with PyTorch's error, naming batch and worker",
      function()
        local before = tasks()
        local ds = plain_dataset(8)
        local get = ds.get
        function ds:get(i)
          if i == 3 then os.execute("sleep 1") end -- (batch 2: worker 2's first)
          return get(self, i)
        end
        local loader = lt.data.DataLoader(ds, { batch_size = 2, num_workers = 2, timeout = 0.2 })
        local seen = 0
        local ok, err = pcall(function()
          for _ in loader:iter() do seen = seen + 1 end
        end)
        assert.is_false(ok)
        assert.are.equal(1, seen)
        assert.are.equal("DataLoader timed out after 0.2 seconds waiting for batch 2 from worker 2", tostring(err))
        assert.are.equal(before, tasks())
        -- a timeout longer than the slowest batch changes nothing
        local slow = lt.data.DataLoader(ds, { batch_size = 2, num_workers = 2, timeout = 30 })
        assert_same_batches(batches(lt.data.DataLoader(plain_dataset(8), { batch_size = 2 })), batches(slow))
      end)

    it("a dataset that cannot cross to a worker state is named with the path to the value", function()
      local ds = plain_dataset(4)
      ds.log = io.stderr
      local before = tasks()
      assert.has_error(function() lt.data.DataLoader(ds, { batch_size = 2, num_workers = 2 }):iter() end,
        "DataLoader: cannot start worker 1 (num_workers = 2): lt.thread.spawn: cannot carry key 'dataset', key "
          .. "'log': a userdata that is not a tensor nor one of lutra's data objects cannot cross to another state")
      assert.are.equal(before, tasks())
    end)

    it("a state saved with another number of workers is refused", function()
      local sd = lt.data.DataLoader(plain_dataset(8), { batch_size = 2, num_workers = 2 }):state_dict()
      local l = lt.data.DataLoader(plain_dataset(8), { batch_size = 2, num_workers = 3 })
      assert.has_error(function() l:load_state_dict(sd) end,
        "DataLoader:load_state_dict: the state was saved with num_workers=2, this loader has 3 (the workers' "
          .. "random streams would not continue)")
    end)
  end)

  describe("lifetime: no thread outlives its loop", function()
    it("an epoch run to its end stops its workers", function()
      local before = tasks()
      local loader = lt.data.DataLoader(plain_dataset(10), { batch_size = 2, num_workers = 2 })
      local it = loader:iter()
      it()
      assert.are.equal(before + 2, tasks())
      while it() do end
      assert.are.equal(before, tasks())
    end)

    it("a loop left by break leaves no thread once the iterator is collected (at once on Lua 5.4)", function()
      local before = tasks()
      local loader = lt.data.DataLoader(plain_dataset(40), { batch_size = 2, num_workers = 2 })
      local n = 0
      for _ in loader:iter() do
        n = n + 1
        if n == 3 then break end
      end
      if _VERSION == "Lua 5.4" then assert.are.equal(before, count_now()) end
      assert.are.equal(before, tasks())
      assert.is_truthy(loader) -- the loader lives on: only the iterator was collected
    end)

    it("a new epoch stops the workers of an iterator left early; loader:close() stops them too", function()
      local before = tasks()
      local loader = lt.data.DataLoader(plain_dataset(40), { batch_size = 2, num_workers = 2 })
      local keep = loader:iter()
      keep()
      local it = loader:iter()
      assert.has_error(keep, "DataLoader: this iterator is stale: iter() was called again (each iter() starts a new epoch)")
      it()
      assert.are.equal(before + 2, tasks())
      loader:close()
      assert.are.equal(before, tasks())
    end)

    it("persistent_workers keep their states (and threads) across epochs until the loader closes", function()
      local before = tasks()
      local ds = { n = 6, calls = 0 }
      function ds:len() return self.n end
      function ds:get() self.calls = self.calls + 1; return self.calls end -- counts in the worker's copy
      local function epochs(persistent)
        local loader = lt.data.DataLoader(ds, { batch_size = 1, num_workers = 2, persistent_workers = persistent })
        local a = batches(loader)
        if persistent then assert.are.equal(before + 2, tasks()) else assert.are.equal(before, tasks()) end
        local b = batches(loader)
        loader:close()
        return a[6][1]:totable()[1], b[6][1]:totable()[1]
      end
      assert.are.same({ 3, 6 }, { epochs(true) })
      assert.are.same({ 3, 3 }, { epochs(false) })
      assert.are.equal(before, tasks())
    end)
  end)

  describe("lutra's data objects cross to another state by constructor", function()
    it("a TensorDataset (same storage), a Subset of it and a DataLoader over it", function()
      local x, y = lt.randn(10, 2), lt.arange(1, 11)
      local tds = lt.data.TensorDataset(x, y)
      local sub = lt.data.Subset(plain_dataset(9), { 2, 4 })
      local loader = lt.data.DataLoader(tds, { batch_size = 4 })
      local w = lt.thread.spawn(function(d, s, l)
        local lt2 = require "lutra"
        local n = 0
        for _ in l:iter() do n = n + 1 end
        return lt2.data.is_tensor_dataset(d), #d, tostring(d.tensors[1]:data_ptr()), s:get(2).y, lt2.data.len(s), n,
          d == l.dataset
      end, tds, sub, loader)
      assert.are.same({ true, 10, tostring(x:data_ptr()), 4, 2, 3, true }, { w:join() })
    end)

    it("other userdata are still refused, naming where they sit", function()
      local w = lt.thread.spawn(function() return lt.thread.parent:receive() end) -- luacheck: ignore 113
      assert.has_error(function() w:send({ ds = { file = io.stdout } }) end,
        "send: cannot carry argument #1, key 'ds', key 'file': a userdata that is not a tensor nor one of lutra's "
          .. "data objects cannot cross to another state")
      w:close()
    end)
  end)

  it("a fit with workers and random transforms resumes to the same bits from mid-epoch checkpoints", function()
    local dir = require("helpers.fs").tmpdir()
    local function setup(seed)
      local ds = { n = 30 }
      function ds:len() return self.n end
      function ds:get(i) return { lt.full({ 3 }, i / 30) + 0.1 * lt.randn(3), lt.rand(1) } end
      local train = lt.data.DataLoader(ds, { batch_size = 4, shuffle = true, seed = 5, num_workers = 2 })
      lt.manual_seed(seed)
      local m = { net = lt.nn.Linear(3, 1) }
      function m:training_step(b) return lt.F.mse_loss(self.net(b[1]), b[2]) end
      function m:configure_optimizers() return lt.optim.SGD(self.net:parameters(), { lr = 0.1 }) end
      return m, train
    end
    local function opts(cbs)
      return { max_epochs = 3, logger = false, enable_progress_bar = false, enable_model_summary = false,
        enable_checkpointing = cbs ~= nil, callbacks = cbs }
    end
    local m, train = setup(1)
    lt.Trainer(opts { lt.callbacks.ModelCheckpoint { dirpath = dir, save_top_k = -1, every_n_train_steps = 5 } })
      :fit(m, train)
    local want = m.net.weight:clone()
    local files = {}
    for _, n in ipairs(lt._io.listdir(dir)) do
      if n:match("%.ckpt$") then files[#files + 1] = dir .. "/" .. n end
    end
    assert.is_true(#files >= 4)
    for _, f in ipairs(files) do
      local m2, train2 = setup(99)
      lt.Trainer(opts()):fit(m2, train2, nil, { ckpt_path = f })
      assert.is_true(same_tensor(want, m2.net.weight), "resumed from " .. f)
    end
    require("helpers.fs").rmrf(dir)
  end)

  it("a fit that fails mid-epoch stops its loaders' workers at once (the Trainer closes the iterators)", function()
    local before = tasks()
    local m = { net = lt.nn.Linear(2, 1) }
    function m:training_step(b, i)
      if i == 2 then error("step 3 fails") end
      return lt.F.mse_loss(self.net(b[1]), b[2])
    end
    function m:validation_step(b) self:log("v", lt.F.mse_loss(self.net(b[1]), b[2])) end
    function m:configure_optimizers() return lt.optim.SGD(self.net:parameters(), { lr = 0.1 }) end
    local ds = { x = lt.randn(40, 2), y = lt.randn(40, 1) }
    function ds:len() return 40 end
    function ds:get(i) return { self.x[i], self.y[i] } end
    local t = lt.Trainer { max_epochs = 1, logger = false, enable_progress_bar = false, enable_model_summary = false,
      enable_checkpointing = false, num_sanity_val_steps = 1, limit_val_batches = 1 }
    local train = lt.data.DataLoader(ds, { batch_size = 2, num_workers = 2 })
    local val = lt.data.DataLoader(ds, { batch_size = 2, num_workers = 2 })
    local ok, err = pcall(t.fit, t, m, train, val)
    assert.is_false(ok)
    assert.matches("step 3 fails", tostring(err))
    assert.are.equal(before, count_now()) -- no collection needed
  end)

  it("a Trainer fit with num_workers = 2 gives the same weights as with 0", function()
    local function fit(nw)
      lt.manual_seed(3)
      local ds = { x = lt.randn(24, 2), y = lt.randn(24, 1) }
      function ds:len() return 24 end
      function ds:get(i) return { self.x[i], self.y[i] } end
      local m = { net = lt.nn.Linear(2, 1) }
      function m:training_step(b) return lt.F.mse_loss(self.net(b[1]), b[2]) end
      function m:configure_optimizers() return lt.optim.SGD(self.net:parameters(), { lr = 0.1 }) end
      local t = lt.Trainer { max_epochs = 2, logger = false, enable_progress_bar = false,
        enable_model_summary = false, enable_checkpointing = false }
      t:fit(m, lt.data.DataLoader(ds, { batch_size = 5, shuffle = true, num_workers = nw }))
      return m.net.weight:clone(), m.net.bias:clone(), t.global_step
    end
    local w0, b0, s0 = fit(0)
    local w2, b2, s2 = fit(2)
    assert.are.equal(10, s0)
    assert.are.equal(s0, s2)
    assert.is_true(same_tensor(w0, w2))
    assert.is_true(same_tensor(b0, b2))
  end)
end)
