-- lutra: a deep-learning training framework with a C core. `local lt = require "lutra"`.
-- The C core (tensors, autograd, kernels, loops) is lutra.core; submodules load on first use so that
-- `require "lutra"` stays fast.
local lt = require "lutra.core"
local compat = require "lutra._compat"
local pack, unpack = compat.pack, compat.unpack
local util = require "lutra.utils.check"

require "lutra.tensor" -- printing and Lua-side tensor helpers
require "lutra.tensor.linalg" -- addmm, baddbmm, einsum
require "lutra.tensor.products" -- mm, bmm, mv, dot, outer, kron, tensordot, cross, diagonal, diag, ...

local submodules = {
  nn = "lutra.nn", F = "lutra.F", optim = "lutra.optim", data = "lutra.data", callbacks = "lutra.callbacks",
  loggers = "lutra.loggers", Trainer = "lutra.trainer", Loop = "lutra.trainer.custom_loop", plot = "lutra.plot",
  distributed = "lutra.distributed",
  metrics = "lutra.metrics", -- metrics
  -- lightning: DataModule (lua/lutra/data/datamodule.lua)
  DataModule = "lutra.data.datamodule",
  profilers = "lutra.trainer.profilers", -- [tools: profiler]
  thread = "lutra.thread", -- workers in Lua states of their own (lua/lutra/thread.lua)
  infer = "lutra.infer", -- compiled inference plans, pure-Lua export (lua/lutra/infer/)
}
submodules.utils = "lutra.utils" -- modules area: save_image, make_grid
submodules.vision = "lutra.vision" -- images as data: io, transforms, datasets (lua/lutra/vision/)
submodules.linalg = "lutra.linalg" -- torch.linalg: multi_dot, vector_norm, matrix_norm, norm, cross
submodules.background = { "lutra.background", "background" } -- a fit in a state of its own (lua/lutra/background.lua)
submodules.help = { "lutra.help", "help" } -- lt.help(name_or_object): the reference entry (lua/lutra/help.lua)

-- a missing name is an error naming it (lua/lutra/names.lua); submodules load on first use
local names = require "lutra.names"
names.strict(lt, "lt", submodules)
local require_module = names.require_module

--- lt.save(path, model_or_state_dict) / lt.load(path[, model]), lt.save_bytes(model_or_state_dict) /
--- lt.load_bytes(s[, model]): weights alone, in the checkpoint format (lua/lutra/checkpoint/init.lua).
function lt.save(...) return require_module("lutra.checkpoint").save(...) end
function lt.load(...) return require_module("lutra.checkpoint").load(...) end
function lt.save_bytes(...) return require_module("lutra.checkpoint").save_bytes(...) end
function lt.load_bytes(...) return require_module("lutra.checkpoint").load_bytes(...) end

--- Writes a line on stderr unless lutra is quiet (lt.is_interactive() false: inside a host, or LUTRA_QUIET=1;
--- docs/guide-hosts.md). Every message nobody asked for goes through here; lt._warn prefixes "lutra: warning: ".
function lt._note(line)
  if lt.is_interactive() then io.stderr:write(line, "\n") end
end
function lt._warn(msg) lt._note("lutra: warning: " .. msg) end

--- lt.seed_everything([n]): seeds everything lutra draws from (weights, dropout, shuffling, lutra's RNG) and Lua's
--- math.random, as Lightning's seed_everything; call it before building the model. Without n: the seed in
--- LUTRA_GLOBAL_SEED, else one drawn from the clock. Returns the seed.
function lt.seed_everything(n)
  if n == nil then n = tonumber(os.getenv("LUTRA_GLOBAL_SEED") or "") or (os.time() % 2147483647) end
  if type(n) ~= "number" or n ~= math.floor(n) or n < 0 or n > 2 ^ 53 then
    error("seed_everything: the seed must be an integer >= 0, got " .. tostring(n), 2)
  end
  lt.manual_seed(n)
  math.randomseed(n)
  return n
end

--- Runs fn(...) with gradient recording off; returns what fn returns.
function lt.no_grad(fn, ...)
  util.check_arg("no_grad", 1, fn, "function")
  local was = lt.set_grad_enabled(false)
  local res = pack(pcall(fn, ...))
  lt.set_grad_enabled(was)
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, res.n)
end

--- lt.autocast("bfloat16", fn, ...): fn(...) with bfloat16 mixed precision in the GEMM-based ops
--- (lua/lutra/autocast.lua); lt.is_autocast_enabled() says whether it is on.
function lt.autocast(...) return require_module("lutra.autocast").autocast(lt, ...) end
function lt.is_autocast_enabled() return lt._autocast_get() end

function lt.enable_grad(fn, ...)
  util.check_arg("enable_grad", 1, fn, "function")
  local was = lt.set_grad_enabled(true)
  local res = pack(pcall(fn, ...))
  lt.set_grad_enabled(was)
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, res.n)
end

return lt
