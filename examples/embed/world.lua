-- examples/embed/world.lua — the learning side of examples/embed/host.c (a game-like C host).
--
-- The host simulates a puck sliding in a bowl at 60 frames per second and, every frame, hands this script
-- one transition (state -> next state). The script keeps them in a replay buffer and trains a small MLP
-- to predict the world's dynamics, a few milliseconds per frame:
--
--   local learner = dofile("examples/embed/world.lua"){ seed = 1 }
--   learner.observe(x, y, vx, vy, nx, ny, nvx, nvy)   -- every frame
--   local loss, steps = learner.train(0.004)          -- run:advance{seconds = 0.004}
--   local px, py = learner.predict(x, y, vx, vy, 30)  -- where the model thinks the puck is 30 frames later
--
-- The training data is an endless loader (a table with iter() and no length): each batch is 64
-- transitions drawn at random from the buffer, so the Trainer's epoch never ends and the host decides
-- how long training runs. Nothing here prints: the host renders.
local lt = require "lutra"

return function(opts)
  opts = opts or {}
  local CAP = opts.capacity or 8192
  local BATCH = opts.batch_size or 64
  local DT = opts.dt or 1 / 60
  local VS, AS = 2, 10 -- velocity and acceleration scales: features and targets of order 1

  lt.manual_seed(opts.seed or 1)

  -- replay buffer: inputs and targets, one row per transition
  local X, Y = lt.zeros(CAP, 4), lt.zeros(CAP, 4)
  local count, head = 0, 0

  local function features(x, y, vx, vy) return { 2 * x - 1, 2 * y - 1, vx / VS, vy / VS } end

  -- what the model predicts: the change of the state in one frame as rates (velocity, acceleration), scaled
  local function delta(x, y, vx, vy, nx, ny, nvx, nvy)
    return { (nx - x) / DT / VS, (ny - y) / DT / VS, (nvx - vx) / DT / AS, (nvy - vy) / DT / AS }
  end

  local learner = {}

  function learner.observe(x, y, vx, vy, nx, ny, nvx, nvy)
    head = head % CAP + 1
    X[head]:copy_(lt.tensor(features(x, y, vx, vy)))
    Y[head]:copy_(lt.tensor(delta(x, y, vx, vy, nx, ny, nvx, nvy)))
    if count < CAP then count = count + 1 end
  end

  function learner.ready() return count >= BATCH end

  -- an endless loader over the buffer
  local loader = {}
  function loader:iter()
    return function()
      local idx = {}
      for i = 1, BATCH do idx[i] = lt.random_integer(count) end
      local it = lt.tensor(idx, "int64")
      return { X:index_select(1, it), Y:index_select(1, it) }
    end
  end

  local model = {
    net = lt.nn.Sequential { lt.nn.Linear(4, 64), lt.nn.Tanh(), lt.nn.Linear(64, 64), lt.nn.Tanh(), lt.nn.Linear(64, 4) },
    loss_ema = nil,
  }
  function model:forward(x) return self.net(x) end
  function model:training_step(batch)
    local loss = lt.F.mse_loss(self.net(batch[1]), batch[2])
    local v = loss:item()
    self.loss_ema = self.loss_ema and (0.98 * self.loss_ema + 0.02 * v) or v
    return loss
  end
  function model:configure_optimizers()
    return lt.optim.Adam(lt.nn.parameters(self), { lr = opts.lr or 2e-3 })
  end

  -- no files, no output: the host owns the screen and the disk
  local trainer = lt.Trainer { logger = false, enable_checkpointing = false }
  local run = nil

  function learner.train(seconds)
    run = run or trainer:fit_run(model, loader)
    run:advance { seconds = seconds }
    return model.loss_ema or 0, trainer.global_step
  end

  function learner.predict(x, y, vx, vy, n)
    return lt.no_grad(function()
      local s = { x, y, vx, vy }
      for _ = 1, n do
        local d = model.net(lt.tensor({ features(s[1], s[2], s[3], s[4]) })):totable()[1]
        s = { s[1] + d[1] * VS * DT, s[2] + d[2] * VS * DT, s[3] + d[3] * AS * DT, s[4] + d[4] * AS * DT }
      end
      return s[1], s[2]
    end)
  end

  learner.trainer, learner.model = trainer, model
  return learner
end
