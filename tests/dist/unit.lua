-- tests/dist/unit.lua — run under `mpirun -np 2` by tests/dist_spec.lua: the communication layer's
-- collectives. Each rank writes what it saw to <outdir>/unit_<rank>.lua (a Lua table) for the spec to check.
local lt = require "lutra"
local ser = require "helpers.ser"
local D = lt.distributed
local outdir = assert(arg[1], "usage: unit.lua OUTDIR")

local res = { launched = { D.launched() }, before_init = { D.is_initialized(), D.rank(), D.world_size() } }
D.init()
D.init() -- idempotent
local r, W = D.rank(), D.world_size()
res.rank, res.world, res.is_initialized = r, W, D.is_initialized()

local function err(f, ...)
  local ok, e = pcall(f, ...)
  return ok and "no error" or tostring(e)
end

-- all_reduce of one float32 tensor, each op
for _, op in ipairs { "sum", "mean", "max", "min" } do
  local t = lt.tensor { r + 1, 10 * (r + 1), -(r + 1) }
  local back = D.all_reduce(t, op)
  res["op_" .. op] = t:totable()
  res.returns_arg = back == t
end
-- many tensors through buckets of 40 bytes (several buckets, several tensors larger than a bucket)
local list = {}
for i = 1, 7 do list[i] = lt.full({ i, 3 }, (r + 1) * i) end
D.all_reduce(list, "mean", { bucket_cap_mb = 40 / 2 ^ 20 })
res.bucketed = {}
for i = 1, 7 do res.bucketed[i] = { list[i]:min():item(), list[i]:max():item() } end
-- int64 sum and max
local ti = lt.tensor({ r + 1, 2 ^ 40 + r }, "int64")
D.all_reduce(ti, "sum")
res.int64_sum = ti:totable()
res.int64_mean_err = err(D.all_reduce, lt.tensor({ 1 }, "int64"), "mean")
-- a view that is not contiguous
res.noncontig_err = err(D.all_reduce, lt.zeros(3, 4):t(), "sum")
res.bad_op_err = err(D.all_reduce, lt.zeros(2), "avg")
res.bad_arg_err = err(D.all_reduce, 42, "sum")
-- float64: values float32 cannot hold (1 + k * 2^-40) travel as MPI_DOUBLE, each op
local e = 2 ^ -40
for _, op in ipairs { "sum", "mean", "max", "min" } do
  local t = lt.tensor({ 1 + (r + 1) * e, -(r + 1) * e, 2 ^ 30 + r * 2 ^ -20 }, "float64")
  D.all_reduce(t, op)
  res["f64_" .. op] = t:totable()
  res.f64_dtype = t:dtype()
end
-- a list mixing float32, float64 and int64 through 24-byte buckets (a bucket never mixes dtypes)
local mixed = { lt.full({ 5 }, r + 1), lt.full({ 2, 2 }, 1 + (r + 1) * e, { dtype = "float64" }),
  lt.tensor({ 2 ^ 40 + r }, "int64"), lt.full({ 3 }, (r + 1) * e, { dtype = "float64" }), lt.full({ 7 }, 0.25 * r) }
D.all_reduce(mixed, "sum", { bucket_cap_mb = 24 / 2 ^ 20 })
res.mixed = {}
for i, t in ipairs(mixed) do res.mixed[i] = { t:dtype(), t:view(-1):totable() } end
local mixed_mean = { lt.full({ 2 }, 1 + (r + 1) * e, { dtype = "float64" }), lt.full({ 2 }, r + 1) }
D.all_reduce(mixed_mean, "mean")
res.mixed_mean = { mixed_mean[1]:totable(), mixed_mean[2]:totable() }
-- ranks that disagree on a tensor's dtype: an error on every rank, no hang (MPI_FLOAT against MPI_DOUBLE)
res.f64_mismatch_err = err(D.all_reduce, { lt.zeros(4, { dtype = r == 0 and "float32" or "float64" }) }, "sum")
-- numbers
res.number_sum = D.all_reduce_number(r + 0.5, "sum")
res.number_mean = D.all_reduce_number(r + 0.5, "mean")
res.numbers_max = D.all_reduce_numbers({ r, -r, 7 }, "max")

-- broadcast: from rank 0, from rank 1, of a non-contiguous view, of a list, of a string
local b = lt.full({ 2, 3 }, r + 1)
D.broadcast(b, 0)
res.bcast0 = b:totable()
local b1 = lt.tensor { { 1, 2 }, { 3, 4 } } * (r + 1)
D.broadcast(b1, 1)
res.bcast1 = b1:totable()
local base = lt.arange(1, 7):view(2, 3) * (r + 1)
local v = base:t()
D.broadcast(v, 0)
res.bcast_view = base:totable()
local l = { lt.full({ 2 }, r), lt.full({ 3 }, r + 10) }
D.broadcast(l, 1)
res.bcast_list = { l[1]:totable(), l[2]:totable() }
res.bcast_string = D.broadcast_string(r == 0 and "from rank 0" or nil, 0)
res.bcast_long_string = #D.broadcast_string(r == 1 and string.rep("x", 100000) or nil, 1)
-- a shape that differs across ranks: an error on every rank, no hang
res.bcast_mismatch_err = err(D.broadcast, lt.zeros(2 + r), 0)
res.bcast_src_err = err(D.broadcast, lt.zeros(2), 5)
-- float64 broadcast: contiguous, a strided view, and a dtype that differs across ranks
local b64 = lt.tensor({ 1 + (r + 1) * e, r }, "float64")
D.broadcast(b64, 1)
res.bcast_f64 = { b64:dtype(), b64:totable() }
local base64 = (lt.arange(1, 7):view(2, 3) * (r + 1)):double() + e
D.broadcast(base64:t(), 0)
res.bcast_f64_view = base64:totable()
res.bcast_dtype_err = err(D.broadcast, lt.zeros(2, { dtype = r == 0 and "float32" or "float64" }), 0)

-- the gradient reducer: mean of gradients, a parameter with a gradient on rank 1 only, one with none anywhere
local p1, p2, p3, p4 = lt.param(lt.zeros(3)), lt.param(lt.zeros(2, 2)), lt.param(lt.zeros(4)), lt.param(lt.zeros(1))
local red = D.GradReducer({ p1, p2, p3, p4 }, { bucket_cap_mb = 12 / 2 ^ 20 })
res.nbuckets = red:nbuckets()
for step = 1, 2 do
  p1.grad, p2.grad, p3.grad = nil, nil, nil
  local loss = (p1 * (r + 1)):sum() + (p2 * (step * (r + 1))):sum()
  if r == 1 then loss = loss + (p3 * 3):sum() end
  loss:backward()
  if step == 2 then red:ready(1) end -- early readiness of one parameter changes nothing
  red:finish()
  res["grad_step" .. step] = { p1.grad:totable(), p2.grad:totable(), p3.grad and p3.grad:totable() or "nil",
    p4.grad and p4.grad:totable() or "nil" }
end
res.reducer_stats = red:stats()
res.reducer_bad_op = err(D.GradReducer, { p1 }, { op = "max" })
res.reducer_bad_opt = err(D.GradReducer, { p1 }, { bucket_mb = 1 })
res.reducer_bad_mb = err(D.GradReducer, { p1 }, { bucket_cap_mb = 0 })
res.reducer_inf_mb = err(D.GradReducer, { p1 }, { bucket_cap_mb = math.huge })
res.reducer_int64_err = err(D.GradReducer, { p1, lt.zeros(2, { dtype = "int64" }) })

-- a reducer of float32 and float64 parameters, interleaved: one open bucket per dtype (24-byte cap: 6 floats,
-- 3 doubles), so the buckets are {q4, q2} (float64) and {q3, q1} (float32), and float64 gradients keep values
-- float32 cannot hold
do
  local q1, q2 = lt.param(lt.zeros(2)), lt.param(lt.zeros(2, { dtype = "float64" }))
  local q3, q4 = lt.param(lt.zeros(3)), lt.param(lt.zeros(1, { dtype = "float64" }))
  local mred = D.GradReducer({ q1, q2, q3, q4 }, { bucket_cap_mb = 24 / 2 ^ 20 })
  res.mixed_nbuckets = mred:nbuckets()
  local w = (r + 1) * e
  local loss = (q1 * (r + 1)):sum():double() + (q2 * (1 + w)):sum() + (q3 * 2):sum():double() + (q4 * w):sum()
  loss:backward()
  mred:finish()
  res.mixed_grads = {}
  for i, q in ipairs { q1, q2, q3, q4 } do res.mixed_grads[i] = { q.grad:dtype(), q.grad:totable() } end
  -- attached to backward, with gradients as views of the buckets on the second step: the same means
  mred:attach()
  for _ = 1, 2 do
    for _, q in ipairs { q1, q2, q3, q4 } do q.grad:zero_() end
    loss = (q1 * (r + 1)):sum():double() + (q2 * (1 + w)):sum() + (q3 * 2):sum():double() + (q4 * w):sum()
    loss:backward()
  end
  mred:detach()
  res.mixed_grads_attached = {}
  for i, q in ipairs { q1, q2, q3, q4 } do res.mixed_grads_attached[i] = { q.grad:dtype(), q.grad:totable() } end
  res.mixed_copied = mred:stats().bytes_copied
end

-- the reducer attached to backward: every backward() reduces as gradients become final (tiny buckets:
-- several are sent during backward); the result equals reducing after backward
lt.manual_seed(1) -- the same initial weights on both ranks
local net = lt.nn.Sequential { lt.nn.Linear(4, 8), lt.nn.Tanh(), lt.nn.Linear(8, 3) }
lt.manual_seed(100 + r) -- different data per rank
local x, y = lt.randn(5, 4), lt.randn(5, 3)
local params = net:parameters()
local function grads()
  local g = {}
  for i, p in ipairs(params) do g[i] = p.grad:clone() end
  return g
end
local function zero() for _, p in ipairs(params) do p.grad = nil end end
local attached = D.GradReducer(params, { bucket_cap_mb = 64 / 2 ^ 20 })
res.attached_nbuckets = attached:nbuckets()
zero()
local xin = x:clone():requires_grad(true) -- a leaf that is not a parameter: not reduced
attached:attach()
lt.F.mse_loss(net(xin), y):backward()
attached:detach()
local g_att = grads()
res.attached_stats = attached:stats()
res.input_grad_local = xin.grad ~= nil
zero()
lt.F.mse_loss(net(x), y):backward()
local after = D.GradReducer(params, { bucket_cap_mb = 1 })
after:finish()
local g_after = grads()
local maxdiff = 0
for i = 1, #params do maxdiff = math.max(maxdiff, (g_att[i] - g_after[i]):abs():max():item()) end
res.attached_vs_after = maxdiff
-- the reduced gradient is the mean of the ranks' local gradients
zero()
lt.F.mse_loss(net(x), y):backward()
local g_local = grads()
local sum = {}
for i = 1, #params do sum[i] = g_local[i]:clone() end
D.all_reduce(sum, "sum")
maxdiff = 0
for i = 1, #params do maxdiff = math.max(maxdiff, (sum[i] / 2 - g_att[i]):abs():max():item()) end
res.attached_vs_mean = maxdiff
-- gradients become views of the buckets: with zero_grad keeping them (not set to none), later steps copy
-- nothing into the buckets, and the result is still the mean
do
  local reducer = D.GradReducer(params, { bucket_cap_mb = 64 / 2 ^ 20 })
  reducer:attach()
  local copied = {}
  for step = 1, 3 do
    for _, p in ipairs(params) do if p.grad then p.grad:zero_() end end
    lt.F.mse_loss(net(x), y):backward()
    copied[step] = reducer:stats().bytes_copied
  end
  reducer:detach()
  res.view_copied = copied
  local g_view = grads()
  reducer:free()
  zero()
  lt.F.mse_loss(net(x), y):backward()
  local after2 = D.GradReducer(params, { bucket_cap_mb = 1 })
  after2:finish()
  local md = 0
  for i, p in ipairs(params) do md = math.max(md, (p.grad - g_view[i]):abs():max():item()) end
  res.view_vs_after = md
end
-- a backward that reaches no parameter of the reducer sends nothing
attached:attach()
local lone = lt.param(lt.ones(3))
lone:sum():backward()
attached:detach()
res.attached_untouched_steps = attached:stats().steps

-- sampler
local s = D.DistributedSampler(10, { shuffle = true, seed = 3 })
s:set_epoch(1)
res.sampler = s:indices()
res.sampler_len = s:len()

D.barrier()
local f = assert(io.open(string.format("%s/unit_%d.lua", outdir, r), "w"))
f:write("return ", ser(res), "\n")
f:close()
