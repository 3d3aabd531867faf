-- atomic_writers_spec: every file lutra writes whole goes through the one atomic writer (core/src/fileio.c):
-- the file at the path is replaced by a new one (a hard link to the old file keeps the old content, so a reader
-- of the old file never sees it half rewritten), a symbolic link at the path stays a link and its target gets
-- the content, a 0600 file stays 0600, and a directory or a FIFO at the path is refused naming it. The cases
-- at the core (planted links, devices, sockets, threads, read-only directories) are in tests/c/test_fileio.c.
local lt = require "lutra"
local plot = require "lutra.plot"
local quiet = require "helpers.quiet"
local fs = require "helpers.fs"
local q, slurp, spit = fs.q, fs.slurp, fs.spit

-- true when the shell command succeeds (LuaJIT's os.execute gives 0, Lua 5.2+ gives true)
local function sh(cmd)
  local r = os.execute(cmd)
  return r == 0 or r == true
end

-- "600", "644", ... (GNU stat)
local function mode_of(path)
  local p = assert(io.popen("stat -c %a " .. q(path)))
  local m = p:read("*l")
  p:close()
  return m
end

local function tiny_model()
  lt.manual_seed(5)
  local x = lt.randn(16, 3)
  local y = x:matmul(lt.tensor { { 1 }, { -2 }, { 0.5 } })
  local m = { net = lt.nn.Linear(3, 1), lr = 0.01 }
  function m:training_step(b) return lt.F.mse_loss(self.net(b[1]), b[2]) end
  function m:configure_optimizers() return lt.optim.SGD(self.net:parameters(), { lr = self.lr }) end
  return m, lt.data.DataLoader(lt.data.TensorDataset(x, y), { batch_size = 8 })
end

describe("whole-file writers", function()
  local dir, csv, trainer, finder
  setup(function()
    dir = fs.tmpdir()
    csv = spit(dir .. "/metrics.csv", "epoch,step,loss\n0,1,2.5\n0,2,1.5\n1,3,1.0\n")
    local m, loader = tiny_model()
    trainer = lt.Trainer(quiet { max_epochs = 1, default_root_dir = dir })
    trainer:fit(m, loader)
    local m2, loader2 = tiny_model()
    finder = lt.Trainer(quiet { max_epochs = 1, default_root_dir = dir }):lr_find(m2, loader2,
      { min_lr = 1e-3, max_lr = 1, num_training = 5, early_stop_threshold = false })
  end)
  teardown(function() fs.rmrf(dir) end)

  -- each writer writes the file at path (its content must differ from "old")
  local writers = {
    { "lt.save", function(path) lt.save(path, { w = lt.tensor { 1, 2, 3 } }) end },
    { "trainer:save_checkpoint", function(path) trainer:save_checkpoint(path) end },
    { "lt.utils.save_image", function(path) lt.utils.save_image(lt.rand(3, 4, 4), path) end },
    { "lutra.plot.svg", function(path) plot.svg(csv, path) end },
    { "LRFinder:plot", function(path) finder:plot(path) end },
    { "a profiler's report", function(path)
      -- the report goes to dirpath/fit-<filename>.txt
      local d, name = path:match("^(.*)/fit%-(.*)%.txt$")
      local m, loader = tiny_model()
      lt.Trainer(quiet { max_epochs = 1, default_root_dir = dir,
        profiler = lt.profilers.SimpleProfiler { dirpath = d, filename = name } }):fit(m, loader)
    end },
  }

  -- a new path for writer k (a profiler's report is named fit-<filename>.txt)
  local n = 0
  local function path_for(k)
    n = n + 1
    if writers[k][1] == "a profiler's report" then return dir .. "/fit-p" .. n .. ".txt" end
    return dir .. "/w" .. n .. ".out"
  end

  for k, w in ipairs(writers) do
    local name, write = w[1], w[2]
    describe(name, function()
      it("replaces the file with a new one: a hard link to the old file keeps the old content", function()
        local p = path_for(k)
        spit(p, "old")
        assert.is_true(sh("ln " .. q(p) .. " " .. q(p .. ".hardlink")))
        write(p)
        assert.are.equal("old", slurp(p .. ".hardlink"))
        assert.are_not.equal("old", slurp(p))
      end)

      it("keeps a symbolic link at the path and writes its target", function()
        local p = path_for(k)
        local target = p .. ".target"
        spit(target, "old")
        assert.is_true(sh("ln -s " .. q(target) .. " " .. q(p)))
        write(p)
        assert.is_true(sh("test -L " .. q(p)))
        assert.are_not.equal("old", slurp(target))
      end)

      it("keeps a 0600 file's mode", function()
        local p = path_for(k)
        spit(p, "old")
        assert.is_true(sh("chmod 600 " .. q(p)))
        write(p)
        assert.are.equal("600", mode_of(p))
        assert.are_not.equal("old", slurp(p))
      end)

      it("refuses a directory at the path, naming it", function()
        local p = path_for(k)
        assert.is_true(sh("mkdir " .. q(p)))
        local ok, err = pcall(write, p)
        assert.is_false(ok)
        assert.truthy(tostring(err):find(p .. ": is a directory, not a regular file; nothing was written", 1, true),
          tostring(err))
        assert.are.equal("dir", lt._io.stat(p).type)
      end)
    end)
  end

  it("LRFinder:plot names a path that is not a string", function()
    assert.has_error(function() finder:plot(42) end,
      "LRFinder:plot: path must be a string (the SVG file to write), got number")
  end)

  it("lt.save refuses a FIFO at the path without blocking, and the FIFO stays", function()
    local p = dir .. "/pipe"
    assert.is_true(sh("mkfifo " .. q(p)))
    local ok, err = pcall(lt.save, p, { w = lt.tensor { 1 } })
    assert.is_false(ok)
    assert.are.equal("lt.save: " .. p .. ": is a FIFO (named pipe), not a regular file; nothing was written",
      tostring(err))
    assert.is_true(sh("test -p " .. q(p)))
  end)
end)
