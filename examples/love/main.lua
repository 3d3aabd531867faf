-- main.lua — a LÖVE 11.4 game whose AI learns while it plays (examples/love/README.md).
--
-- A ball bounces between the walls and falls; the paddle at the bottom must be under it when it lands.
-- The paddle's AI is a small MLP that reads the ball's state (x, y, vx, vy) and predicts where it will land.
-- Every landing labels the states the ball went through since its last landing with the x where it landed;
-- they are sent to a training job that runs in the background (lt.background: its own Lua state and thread,
-- so its garbage never meets the game's collector). The job keeps them in a replay buffer (fixed-size tensors
-- that a DataLoader samples from) and trains as fast as it can once the buffer is full; the game pulls the
-- latest weights into its own copy of the model each second of game time (job:load_into, no allocation). The
-- paddle moves towards the prediction, so it misses at first and catches more and more.
--
-- The paddle asks its copy through an lt.infer plan (no garbage per frame; the plan shares the weights that
-- load_into overwrites). `--export FILE` writes the trained policy as plain Lua when the game ends
-- (lt.infer.export_lua); a game folder or .love zip holding that file as policy.lua plays with it where lutra
-- cannot be loaded (a .love zip cannot load C modules), without training.
--
--   love examples/love [--frames N] [--export FILE]
--   (LUTRA_LOVE_FRAMES=N also sets the frame limit, LUTRA_LOVE_EXPORT=FILE the export)
--
-- With a frame limit the game quits by itself after N frames and prints one line:
--   lutra-love: frames N steps S first_loss A last_loss B caught C missed M late_catch_rate R
-- and, playing with policy.lua:
--   lutra-love: frames N policy caught C missed M late_catch_rate R
local has_lutra, lt = pcall(require, "lutra")
local policy -- the exported policy (policy.lua), when lutra is not there
if not has_lutra then
  local ok, p = pcall(require, "policy")
  if not ok then
    error("examples/love: lutra cannot be loaded (" .. tostring(lt) .. ") and there is no policy.lua to play with " ..
      "(write one with: love examples/love --frames 900 --export policy.lua)", 0)
  end
  policy, lt = p, nil
end

local W, H = 480, 360
local PADDLE_W, BALL_R = 70, 6
local BUFFER = 384             -- samples kept (the oldest are overwritten); training starts once it is full
local DT = 1 / 60              -- the simulation's fixed step: the same game on any machine

local PULL_EVERY = 60          -- frames between weight pulls: one second of game time

local opts = { frames = tonumber(os.getenv("LUTRA_LOVE_FRAMES") or ""), export = os.getenv("LUTRA_LOVE_EXPORT") }

local game = {
  frame = 0, caught = 0, missed = 0, late_caught = 0, late_missed = 0,
  ball = nil, paddle_x = W / 2, trail = {},
}

local function features(b) return { b.x / W * 2 - 1, b.y / H * 2 - 1, b.vx / 300, b.vy / 300 } end

-- the model, the same in the game and in the job
local function new_model(lutra)
  return {
    net = lutra.nn.Sequential { lutra.nn.Linear(4, 64), lutra.nn.Tanh(), lutra.nn.Linear(64, 64), lutra.nn.Tanh(),
      lutra.nn.Linear(64, 1) },
  }
end

-- The training job's setup, run in the job's own state: it waits for a full replay buffer from the game, then
-- hands lt.background the model, a trainer and a loader over the buffer. New samples arrive while it trains
-- (lt.thread.parent:receive(0) before each batch) and overwrite the oldest; the losses go back to the game.
-- (Carried into that state: it uses only its arguments, new_model and require.)
local function job_setup(buffer)
  local lutra = require "lutra"
  local parent = lutra.thread.parent
  lutra.manual_seed(1)
  local X, Y = lutra.zeros(buffer, 4), lutra.zeros(buffer, 1) -- inputs and targets normalised to about [-1, 1]
  local filled, next_slot = 0, 1
  local function take(msg) -- {x = n x 4, y = n x 1}: one landing's samples
    for i = 1, msg.x:size(1) do
      X:select(1, next_slot):copy_(msg.x:select(1, i))
      Y:select(1, next_slot):copy_(msg.y:select(1, i))
      next_slot = next_slot % buffer + 1
      filled = math.min(buffer, filled + 1)
    end
  end
  while filled < buffer do
    local msg = parent:receive()
    if msg == "quit" then error("the game ended before the replay buffer was full", 0) end
    take(msg)
  end
  local model = new_model(lutra)
  function model:on_train_batch_start()
    while true do
      local msg = parent:receive(0)
      if msg == nil then break end
      if msg ~= "quit" then take(msg) end
    end
  end
  function model:training_step(batch)
    local loss = lutra.F.mse_loss(self.net(batch[1]), batch[2])
    self.last_loss = loss:item()
    if not self.first_loss then self.first_loss = self.last_loss end
    if self.trainer.global_step % 50 == 0 then parent:send({ first = self.first_loss, last = self.last_loss }) end
    return loss
  end
  function model:configure_optimizers() return lutra.optim.Adam(lutra.nn.parameters(self), { lr = 3e-3 }) end
  local trainer = lutra.Trainer { max_epochs = -1, logger = false, enable_checkpointing = false }
  return model, trainer, lutra.data.DataLoader(lutra.data.TensorDataset(X, Y), { batch_size = 32, shuffle = true })
end

local model, plan, job
local losses = {}
if lt then
  model = new_model(lt)
  -- the paddle's questions go through a plan over the game's copy: no garbage per frame
  plan = lt.infer.compile(model.net, lt.zeros(1, 4))
end
local rng = love.math.newRandomGenerator(7)

local function new_ball()
  local speed = 160 + rng:random() * 120
  local angle = (rng:random() - 0.5) * 2.2
  return { x = 40 + rng:random() * (W - 80), y = 20, vx = math.sin(angle) * speed, vy = 60 + rng:random() * 80 }
end

local answer = {}
local function predict(b)
  if policy then return (policy(features(b), answer)[1] + 1) / 2 * W end
  if not job or not losses.first then return W / 2 end
  return (plan:run(features(b), answer)[1] + 1) / 2 * W
end

-- a landing at x labels the trail of states since the last one: sent to the job (new tensors each time, so
-- the job owns what it reads)
local function learn_landing(x)
  if not lt or #game.trail == 0 then return end
  local target = x / W * 2 - 1
  local y = {}
  for i = 1, #game.trail do y[i] = { target } end
  job:send({ x = lt.tensor(game.trail), y = lt.tensor(y) })
  game.trail = {}
end

local function step_world()
  local b = game.ball
  b.vy = b.vy + 120 * DT -- gravity
  b.x, b.y = b.x + b.vx * DT, b.y + b.vy * DT
  if b.x < BALL_R then b.x, b.vx = BALL_R, -b.vx end
  if b.x > W - BALL_R then b.x, b.vx = W - BALL_R, -b.vx end
  game.trail[#game.trail + 1] = features(b)
  -- the paddle moves towards where the model says the ball will land
  local target = predict(b)
  local dx = math.max(-6, math.min(6, target - game.paddle_x))
  game.paddle_x = math.max(PADDLE_W / 2, math.min(W - PADDLE_W / 2, game.paddle_x + dx))
  if b.y >= H - 20 then
    local hit = math.abs(b.x - game.paddle_x) <= PADDLE_W / 2 + BALL_R
    if hit then game.caught = game.caught + 1 else game.missed = game.missed + 1 end
    if opts.frames and game.frame > opts.frames * 0.75 then
      if hit then game.late_caught = game.late_caught + 1 else game.late_missed = game.late_missed + 1 end
    end
    learn_landing(b.x)
    game.ball = new_ball()
  end
end

function love.load(args)
  for i = 1, #args do
    if args[i] == "--frames" then opts.frames = tonumber(args[i + 1])
    elseif args[i] == "--export" then opts.export = args[i + 1] end
  end
  game.ball = new_ball()
  if not lt then return end
  lt.manual_seed(1)
  job = lt.background(job_setup, BUFFER)
end

-- the job's news: its losses, and its error if it failed (raised here, in the game)
local function poll_job()
  while true do
    local v = job:receive(0)
    if v == nil then break end
    losses = v
  end
  local st = job:status()
  if st.state == "error" then job:join() end
  return st
end

local function finish()
  local late = game.late_caught + game.late_missed
  local rate = late > 0 and game.late_caught / late or 0
  if policy then
    print(string.format("lutra-love: frames %d policy caught %d missed %d late_catch_rate %.2f", game.frame,
      game.caught, game.missed, rate))
  else
    job:send("quit")
    job:stop()
    local ok, st = pcall(job.join, job)
    if not ok and not tostring(st):find("before the replay buffer was full", 1, true) then error(st, 0) end
    if not ok then st = job:status() end
    poll_job()
    job:load_into(model) -- the final weights, for the export
    print(string.format("lutra-love: frames %d steps %d first_loss %.4f last_loss %.4f caught %d missed %d " ..
      "late_catch_rate %.2f", game.frame, st.global_step, losses.first or -1, losses.last or -1,
      game.caught, game.missed, rate))
    if opts.export then lt.infer.export_lua(plan, opts.export) end
  end
  io.stdout:flush()
  love.event.quit(0)
end

function love.update()
  game.frame = game.frame + 1
  step_world()
  -- the job trains on its own; the game takes its weights once a second of game time
  if job and game.frame % PULL_EVERY == 0 then
    poll_job()
    job:load_into(model)
  end
  if opts.frames and game.frame >= opts.frames then finish() end
end

-- leaving the game: the job stops at its next step and its thread ends
function love.quit()
  if job then
    job:stop()
    pcall(job.join, job)
  end
end

local status = {} -- filled by job:status each frame
function love.draw()
  love.graphics.clear(0.08, 0.09, 0.12)
  love.graphics.setColor(0.9, 0.9, 0.95)
  love.graphics.circle("fill", game.ball.x, game.ball.y, BALL_R)
  love.graphics.rectangle("fill", game.paddle_x - PADDLE_W / 2, H - 16, PADDLE_W, 8)
  love.graphics.setColor(0.6, 0.8, 1)
  if policy then
    love.graphics.print(string.format("caught %d  missed %d  (policy.lua)", game.caught, game.missed), 8, 8)
  else
    love.graphics.print(string.format("caught %d  missed %d  steps %d  loss %.4f", game.caught, game.missed,
      job:status(status).global_step, losses.last or 0), 8, 8)
  end
end
