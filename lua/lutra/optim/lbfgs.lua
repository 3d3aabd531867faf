-- optim/lbfgs.lua — lt.optim.LBFGS(params, opts): PyTorch 1.13's L-BFGS (torch/optim/lbfgs.py) over lutra's
-- tensor ops, for full-batch problems in small tools. One param group; step(closure) is required: the
-- closure zeroes the grads, computes the loss, calls backward and returns the loss.
--
--   local opt = lt.optim.LBFGS({w}, {lr = 1, line_search_fn = "strong_wolfe"})
--   opt:step(function() opt:zero_grad(); local l = loss(w); l:backward(); return l end)
--
-- The parameters are seen as one flat vector (their grads concatenated); the directions and the history
-- of (y, s) pairs are flat float32 tensors, the scalars Lua numbers.
local lt_core = require "lutra.core"
local util = require "lutra.optim.param_groups"
local lutil = require "lutra.utils.check"

local LBFGS = {}
LBFGS.__index = LBFGS

local DEFAULTS = { lr = 1, max_iter = 20, tolerance_grad = 1e-7, tolerance_change = 1e-9, history_size = 100 }
local HPARAMS = { "lr", "max_iter", "max_eval", "tolerance_grad", "tolerance_change", "history_size", "line_search_fn" }

local function dot(a, b) return (a * b):sum():item() end
local function absmax(a) return a:abs():max():item() end
local function as_number(loss)
  if type(loss) == "number" then return loss end
  if lt_core.is_tensor(loss) and loss:numel() == 1 then return loss:item() end
  error("LBFGS: the closure must return the loss (a one-element tensor or a number), got " ..
    (lt_core.is_tensor(loss) and "a tensor of " .. loss:numel() .. " elements" or type(loss)), 0)
end

-- ---- the flat view of the parameters ---------------------------------------------------------------

function LBFGS:_gather_flat_grad()
  local views = {}
  for i, p in ipairs(self._params) do
    local g = p.grad
    views[i] = g and g:contiguous():view(-1) or lt_core.zeros(p:numel())
  end
  return lt_core.cat(views, 1)
end

function LBFGS:_add_grad(step_size, update)
  local offset = 0
  for _, p in ipairs(self._params) do
    local n = p:numel()
    p:add_(update:narrow(1, offset + 1, n):view(p:shape()), step_size)
    offset = offset + n
  end
end

function LBFGS:_clone_param()
  local r = {}
  for i, p in ipairs(self._params) do r[i] = p:clone() end
  return r
end

function LBFGS:_set_param(data)
  for i, p in ipairs(self._params) do p:copy_(data[i]) end
end

-- The closure runs with grad mode on (it calls backward); the updates around it with grad mode off.
local function evaluate(closure)
  lt_core.set_grad_enabled(true)
  local ok, loss = pcall(closure)
  lt_core.set_grad_enabled(false)
  if not ok then error(loss, 0) end
  return loss
end

-- f and flat gradient at x + t*d (the parameters are restored to x afterwards)
function LBFGS:_directional_evaluate(closure, x, t, d)
  self:_add_grad(t, d)
  local loss = as_number(evaluate(closure))
  local flat_grad = self:_gather_flat_grad()
  self:_set_param(x)
  return loss, flat_grad
end

-- ---- strong-Wolfe line search (PyTorch's _strong_wolfe / _cubic_interpolate) ------------------------

local function cubic_interpolate(x1, f1, g1, x2, f2, g2, lo, hi)
  local xmin_bound, xmax_bound = lo, hi
  if lo == nil then
    if x1 <= x2 then xmin_bound, xmax_bound = x1, x2 else xmin_bound, xmax_bound = x2, x1 end
  end
  local d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
  local d2_square = d1 * d1 - g1 * g2
  if d2_square >= 0 then
    local d2 = math.sqrt(d2_square)
    local min_pos
    if x1 <= x2 then
      min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else
      min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    end
    return math.min(math.max(min_pos, xmin_bound), xmax_bound)
  end
  return (xmin_bound + xmax_bound) / 2
end

local function strong_wolfe(obj_func, t, d, f, g, gtd, tolerance_change)
  local c1, c2, max_ls = 1e-4, 0.9, 25
  local d_norm = absmax(d)
  g = g:clone()
  local f_new, g_new = obj_func(t, d)
  local ls_func_evals = 1
  local gtd_new = dot(g_new, d)
  local t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
  local done = false
  local ls_iter = 0
  local bracket, bracket_f, bracket_g, bracket_gtd
  while ls_iter < max_ls do
    if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev) then
      bracket, bracket_f = { t_prev, t }, { f_prev, f_new }
      bracket_g, bracket_gtd = { g_prev, g_new:clone() }, { gtd_prev, gtd_new }
      break
    end
    if math.abs(gtd_new) <= -c2 * gtd then
      bracket, bracket_f, bracket_g = { t }, { f_new }, { g_new }
      done = true
      break
    end
    if gtd_new >= 0 then
      bracket, bracket_f = { t_prev, t }, { f_prev, f_new }
      bracket_g, bracket_gtd = { g_prev, g_new:clone() }, { gtd_prev, gtd_new }
      break
    end
    local min_step = t + 0.01 * (t - t_prev)
    local max_step = t * 10
    local tmp = t
    t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, min_step, max_step)
    t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new:clone(), gtd_new
    f_new, g_new = obj_func(t, d)
    ls_func_evals = ls_func_evals + 1
    gtd_new = dot(g_new, d)
    ls_iter = ls_iter + 1
  end
  if ls_iter == max_ls then
    bracket, bracket_f, bracket_g = { 0, t }, { f, f_new }, { g, g_new }
  end
  local insuf_progress = false
  local low, high = 1, 2
  if bracket_f[1] > bracket_f[#bracket_f] then low, high = 2, 1 end
  while not done and ls_iter < max_ls do
    if math.abs(bracket[2] - bracket[1]) * d_norm < tolerance_change then break end
    t = cubic_interpolate(bracket[1], bracket_f[1], bracket_gtd[1], bracket[2], bracket_f[2], bracket_gtd[2])
    local bmax, bmin = math.max(bracket[1], bracket[2]), math.min(bracket[1], bracket[2])
    local eps = 0.1 * (bmax - bmin)
    if math.min(bmax - t, t - bmin) < eps then
      if insuf_progress or t >= bmax or t <= bmin then
        if math.abs(t - bmax) < math.abs(t - bmin) then t = bmax - eps else t = bmin + eps end
        insuf_progress = false
      else
        insuf_progress = true
      end
    else
      insuf_progress = false
    end
    f_new, g_new = obj_func(t, d)
    ls_func_evals = ls_func_evals + 1
    gtd_new = dot(g_new, d)
    ls_iter = ls_iter + 1
    if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low] then
      bracket[high], bracket_f[high], bracket_g[high], bracket_gtd[high] = t, f_new, g_new:clone(), gtd_new
      if bracket_f[1] <= bracket_f[2] then low, high = 1, 2 else low, high = 2, 1 end
    else
      if math.abs(gtd_new) <= -c2 * gtd then
        done = true
      elseif gtd_new * (bracket[high] - bracket[low]) >= 0 then
        bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
        bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
      end
      bracket[low], bracket_f[low], bracket_g[low], bracket_gtd[low] = t, f_new, g_new:clone(), gtd_new
    end
  end
  return bracket_f[low], bracket_g[low], bracket[low], ls_func_evals
end

-- ---- step --------------------------------------------------------------------------------------------

local function step_body(self, closure)
  local group = self.param_groups[1]
  local lr, max_iter, max_eval = group.lr, group.max_iter, group.max_eval
  local tolerance_grad, tolerance_change = group.tolerance_grad, group.tolerance_change
  local line_search_fn, history_size = group.line_search_fn, group.history_size
  local state = self.state
  state.func_evals = state.func_evals or 0
  state.n_iter = state.n_iter or 0

  local orig_loss = evaluate(closure)
  local loss = as_number(orig_loss)
  local current_evals = 1
  state.func_evals = state.func_evals + 1
  local flat_grad = self:_gather_flat_grad()
  if absmax(flat_grad) <= tolerance_grad then return orig_loss end

  local d, t = state.d, state.t
  local old_dirs, old_stps, ro, H_diag = state.old_dirs, state.old_stps, state.ro, state.H_diag
  local prev_flat_grad, prev_loss = state.prev_flat_grad, state.prev_loss
  local n_iter = 0
  while n_iter < max_iter do
    n_iter = n_iter + 1
    state.n_iter = state.n_iter + 1
    if state.n_iter == 1 then
      d = -flat_grad
      old_dirs, old_stps, ro, H_diag = {}, {}, {}, 1
    else
      local y = flat_grad - prev_flat_grad
      local s = d * t
      local ys = dot(y, s)
      if ys > 1e-10 then
        if #old_dirs == history_size then
          table.remove(old_dirs, 1)
          table.remove(old_stps, 1)
          table.remove(ro, 1)
        end
        old_dirs[#old_dirs + 1] = y
        old_stps[#old_stps + 1] = s
        ro[#ro + 1] = 1 / ys
        H_diag = ys / dot(y, y)
      end
      -- two-loop recursion: d = -H * g
      local num_old = #old_dirs
      local al = {}
      local q = -flat_grad
      for i = num_old, 1, -1 do
        al[i] = dot(old_stps[i], q) * ro[i]
        q:add_(old_dirs[i], -al[i])
      end
      local r = q * H_diag
      for i = 1, num_old do
        local be_i = dot(old_dirs[i], r) * ro[i]
        r:add_(old_stps[i], al[i] - be_i)
      end
      d = r
    end
    if prev_flat_grad == nil then prev_flat_grad = flat_grad:clone() else prev_flat_grad:copy_(flat_grad) end
    prev_loss = loss
    if state.n_iter == 1 then
      t = math.min(1, 1 / flat_grad:abs():sum():item()) * lr
    else
      t = lr
    end
    local gtd = dot(flat_grad, d)
    if gtd > -tolerance_change then break end

    local ls_func_evals = 0
    local opt_cond = false
    if line_search_fn ~= nil then
      local x_init = self:_clone_param()
      local function obj_func(tt, dd) return self:_directional_evaluate(closure, x_init, tt, dd) end
      loss, flat_grad, t, ls_func_evals = strong_wolfe(obj_func, t, d, loss, flat_grad, gtd, tolerance_change)
      self:_add_grad(t, d)
      opt_cond = absmax(flat_grad) <= tolerance_grad
    else
      self:_add_grad(t, d)
      if n_iter ~= max_iter then
        loss = as_number(evaluate(closure))
        flat_grad = self:_gather_flat_grad()
        opt_cond = absmax(flat_grad) <= tolerance_grad
        ls_func_evals = 1
      end
    end
    current_evals = current_evals + ls_func_evals
    state.func_evals = state.func_evals + ls_func_evals
    if n_iter == max_iter or current_evals >= max_eval or opt_cond then break end
    if absmax(d * t) <= tolerance_change then break end
    if math.abs(loss - prev_loss) < tolerance_change then break end
  end
  state.d, state.t = d, t
  state.old_dirs, state.old_stps, state.ro, state.H_diag = old_dirs, old_stps, ro, H_diag
  state.prev_flat_grad, state.prev_loss = prev_flat_grad, prev_loss
  return orig_loss
end

--- opt:step(closure) -> the closure's first loss. Runs up to max_iter L-BFGS iterations.
function LBFGS:step(closure)
  if type(closure) ~= "function" then
    error("LBFGS: step needs a closure that re-evaluates the model and returns the loss, got " .. type(closure), 2)
  end
  local was = lt_core.is_grad_enabled()
  lt_core.set_grad_enabled(false) -- the updates are not recorded
  local ok, r = pcall(step_body, self, closure)
  lt_core.set_grad_enabled(was)
  if not ok then error(r, 0) end
  return r
end

function LBFGS:zero_grad(set_to_none)
  for _, p in ipairs(self._params) do
    if p.grad ~= nil then
      if set_to_none then p.grad = nil else p.grad:zero_() end
    end
  end
end

-- ---- state_dict -------------------------------------------------------------------------------------

local TENSOR_STATE = { d = true, prev_flat_grad = true }
local LIST_STATE = { old_dirs = true, old_stps = true }

local function copy_state(src, clone)
  local r = {}
  for k, v in pairs(src) do
    if TENSOR_STATE[k] then
      r[k] = clone(v)
    elseif LIST_STATE[k] then
      r[k] = {}
      for i, x in ipairs(v) do r[k][i] = clone(x) end
    elseif k == "ro" then
      r[k] = { unpack(v) }
    else
      r[k] = v
    end
  end
  return r
end

local function clone(t) return t:clone() end

function LBFGS:state_dict()
  local g = {}
  for _, k in ipairs(HPARAMS) do g[k] = self.param_groups[1][k] end
  g.params = {}
  for i = 1, #self._params do g.params[i] = i end
  local state = {}
  if next(self.state) ~= nil then state[1] = copy_state(self.state, clone) end
  return { state = state, param_groups = { g } }
end

function LBFGS:load_state_dict(sd)
  if type(sd) ~= "table" or type(sd.param_groups) ~= "table" or #sd.param_groups ~= 1 then
    error("LBFGS: load_state_dict expects {state = ..., param_groups = {one group}}", 2)
  end
  local g = sd.param_groups[1]
  if type(g.params) ~= "table" or #g.params ~= #self._params then
    error(string.format("LBFGS: load_state_dict: the state dict's group has %s parameters, the optimizer has %d",
      type(g.params) == "table" and tostring(#g.params) or "no", #self._params), 2)
  end
  for _, k in ipairs(HPARAMS) do self.param_groups[1][k] = g[k] end
  local st = sd.state and (sd.state[1] or sd.state["1"])
  self.state = st and copy_state(st, clone) or {}
end

-- ---- constructor --------------------------------------------------------------------------------------

local function check_number(k, v, int)
  if type(v) ~= "number" or v ~= v or (int and v ~= math.floor(v)) then
    error(string.format("LBFGS: option '%s' must be %s, got %s", k, int and "an integer" or "a number",
      type(v) == "number" and tostring(v) or type(v)), 4)
  end
end

return function(params, ...)
  local opts = util.options("LBFGS", 2, ...)
  local known = {}
  for _, k in ipairs(HPARAMS) do known[k] = true end
  lutil.check_options("LBFGS", opts, known, 2)
  local groups = util.param_groups("LBFGS", params)
  if #groups ~= 1 then error("LBFGS: doesn't support per-parameter options (parameter groups)", 2) end
  local group = { params = groups[1].params }
  for k, v in pairs(DEFAULTS) do group[k] = v end
  for k, v in pairs(opts) do group[k] = v end
  for k, v in pairs(groups[1]) do if k ~= "params" then group[k] = v end end
  for _, k in ipairs { "lr", "tolerance_grad", "tolerance_change" } do check_number(k, group[k]) end
  for _, k in ipairs { "max_iter", "history_size" } do check_number(k, group[k], true) end
  if group.max_eval == nil then group.max_eval = math.floor(group.max_iter * 5 / 4) end
  check_number("max_eval", group.max_eval, true)
  if group.line_search_fn ~= nil and group.line_search_fn ~= "strong_wolfe" then
    error("LBFGS: line_search_fn must be nil or \"strong_wolfe\", got " .. tostring(group.line_search_fn), 2)
  end
  -- one float dtype for all (the flat gradient and the directions are one tensor): float32 or float64
  local dt = group.params[1] and group.params[1]:dtype()
  for i, p in ipairs(group.params) do
    if p:dtype() ~= "float32" and p:dtype() ~= "float64" then
      error(string.format("LBFGS: parameter %d is %s, the optimizer can only optimize float32 or float64 tensors", i,
        p:dtype()), 2)
    elseif p:dtype() ~= dt then
      error(string.format("LBFGS: parameter %d is %s and parameter 1 %s: all must have one dtype", i, p:dtype(), dt), 2)
    end
  end
  return setmetatable({ param_groups = { group }, _params = group.params, state = {}, defaults = opts,
    kind = "LBFGS" }, LBFGS)
end
