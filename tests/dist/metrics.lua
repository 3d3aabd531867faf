-- tests/dist/metrics.lua — run under `mpirun -np 2` by tests/dist_spec.lua: lt.metrics across ranks. Each rank
-- updates its metrics with its own data (ranks hold different numbers of rows), compute() sums the states of
-- both ranks (gathers the data of AUROC/AveragePrecision) and every rank also computes the reference over the
-- union of both ranks' data alone; then a ddp Trainer logs metrics whose epoch values must cover every rank's
-- shard. Writes <outdir>/metrics_<rank>.lua.
local lt = require "lutra"
local ser = require "helpers.ser"
local D = lt.distributed
local M = lt.metrics
local outdir = assert(arg[1], "usage: metrics.lua OUTDIR")

D.init()
local r = D.rank()

-- the data of rank k: 6 + 3k rows (different on each rank), the same on every process
local function data(k)
  lt.manual_seed(100 + k)
  local n = 6 + 3 * k
  return { scores = lt.randn(n, 3), labels = lt.randint(1, 4, { n }), p = lt.rand(n), y = lt.randint(0, 2, { n }),
    v = lt.randn(n) }
end
local mine, all = data(r), { data(0), data(1) }

-- sync: false for the reference, which holds both ranks' data itself
local function build(sync)
  local o = { sync_on_compute = sync }
  local function with(t)
    t.sync_on_compute = sync
    return t
  end
  return {
    acc = M.Accuracy(with { task = "multiclass", num_classes = 3, average = "macro" }),
    f1 = M.F1Score(with { task = "binary" }),
    cm = M.ConfusionMatrix(with { task = "multiclass", num_classes = 3 }),
    auroc = M.AUROC(with { task = "binary" }),
    auroc_binned = M.AUROC(with { task = "binary", thresholds = 11 }),
    ap = M.AveragePrecision(with { task = "multiclass", num_classes = 3 }),
    mse = M.MeanSquaredError(o),
    r2 = M.R2Score(o),
    mean = M.MeanMetric(o),
    sum = M.SumMetric(o),
    max = M.MaxMetric(o),
    min = M.MinMetric(o),
  }
end

local function feed(ms, d)
  ms.acc:update(d.scores, d.labels)
  ms.f1:update(d.p, d.y)
  ms.cm:update(d.scores, d.labels)
  ms.auroc:update(d.p, d.y)
  ms.auroc_binned:update(d.p, d.y)
  ms.ap:update(d.scores, d.labels)
  ms.mse:update(d.p, d.v)
  ms.r2:update(d.p, d.v)
  ms.mean:update(d.v)
  ms.sum:update(d.v)
  ms.max:update(d.v)
  ms.min:update(d.v)
end

-- in sorted order: compute() is a collective, so every rank must call them in the same order (LuaJIT's
-- pairs order differs between processes)
local function values(ms)
  local t, keys = {}, {}
  for k in pairs(ms) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v = ms[k]:compute()
    t[k] = lt.is_tensor(v) and v:float():reshape(-1):totable() or v
  end
  return t
end

local synced, ref = build(true), build(false)
feed(synced, mine)
for _, d in ipairs(all) do feed(ref, d) end
local res = { rank = r, synced = values(synced), ref = values(ref) }
-- compute() leaves the rank's own state: the local rows only
res.local_rows = synced.auroc:state_dict().preds:size(1)
res.local_cm_total = synced.cm:state_dict().confmat:sum():item()

-- ---- a ddp Trainer: self:log(name, metric) over every rank's shard ------------------------------------------
lt.manual_seed(7)
local N = 64
local X = lt.randn(N, 3)
local Y = lt.randint(1, 4, { N })
local W = lt.randn(3, 3)
local model = { w = lt.param(lt.zeros(1)), train_acc = M.Accuracy { task = "multiclass", num_classes = 3 },
  val_acc = M.Accuracy { task = "multiclass", num_classes = 3 }, seen = 0 }
function model:training_step(batch)
  self.train_acc:update(batch[1]:matmul(W), batch[2])
  self.seen = self.seen + batch[2]:size(1)
  self:log("train_acc", self.train_acc, { on_step = false, on_epoch = true })
  return (self.w * 0):sum()
end
function model:validation_step(batch)
  self.val_acc:update(batch[1]:matmul(W), batch[2])
  self:log("val_acc", self.val_acc)
end
function model:configure_optimizers() return lt.optim.SGD({ self.w }, { lr = 0 }) end
local ds = lt.data.TensorDataset(X, Y)
local t = lt.Trainer { max_epochs = 1, strategy = "ddp", logger = false, enable_checkpointing = false,
  enable_progress_bar = false, enable_model_summary = false, num_sanity_val_steps = 0 }
t:fit(model, lt.data.DataLoader(ds, { batch_size = 8, shuffle = true, seed = 3 }), lt.data.DataLoader(ds, { batch_size = 8 }))
res.trainer_train_acc = t.callback_metrics.train_acc
res.trainer_val_acc = t.callback_metrics.val_acc
res.trainer_seen = model.seen
res.trainer_ref = M.Accuracy({ task = "multiclass", num_classes = 3, sync_on_compute = false })(X:matmul(W), Y)

D.barrier()
local f = assert(io.open(string.format("%s/metrics_%d.lua", outdir, r), "w"))
f:write("return ", ser(res), "\n")
f:close()
