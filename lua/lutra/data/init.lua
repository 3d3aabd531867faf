-- lutra.data (lt.data) — datasets and the DataLoader (docs/reference/data.md).
--
--   local ds = lt.data.FashionMNIST{train = true}          -- .data [60000 x 1 x 28 x 28], .targets 1..10
--   local loader = lt.data.DataLoader(ds, {batch_size = 64, shuffle = true, seed = 1})
--   print(#loader)                                          -- 938 batches
--   for batch in loader:iter() do local x, y = batch[1], batch[2] ... end
--
-- A dataset is a TensorDataset (batched in C: one row gather per tensor and batch, no per-sample Lua), or
-- any table with get(i) (1-based) and a length (a len() method, or __len in its metatable; note that
-- LuaJIT's `#` ignores __len on tables, so use lt.data.len(ds) to ask any dataset its length). Samples of
-- Lua datasets are collated by stacking tensors (lt.stack) and turning numbers into a tensor (int64 when all
-- are integers, float32 otherwise); a collate_fn(samples) replaces that.
--
-- Loaders and the datasets made here are userdata proxies so that `#loader` and `#ds` work under LuaJIT;
-- fields and methods read as on a table (ds.data, loader.batch_size, loader:iter()).
--
-- Epochs and resuming: each call of loader:iter() starts a new epoch, with a new permutation when
-- shuffling. The permutation comes from the loader's own RNG (seeded from `seed`, or drawn once from lutra's
-- global RNG at construction, so lt.manual_seed makes it reproducible), never from the global RNG during
-- training. loader:state_dict() is {epoch = epochs started, position = batches yielded in the current one,
-- rng = the state the current epoch's permutation was drawn from, ...}: a few numbers and a string, cheap at
-- any batch boundary. After load_state_dict(sd), the next iter() continues that epoch at `position` with the
-- same permutation (a position equal to #loader is a finished epoch: iter() then starts the next one), and
-- later epochs follow as they would have.
--
-- Sharding (data-parallel training, lt.distributed): loader:set_shard(rank, world_size) makes each epoch
-- yield only this rank's share of the epoch's order, as PyTorch's DistributedSampler: the order (the same on
-- every rank: the loader's RNG state is the same everywhere) is padded to a multiple of world_size by
-- repeating it from its start, and rank r (0-based) takes positions r+1, r+1+W, ...; #loader counts this
-- rank's batches. The state_dict records world_size, so a state saved with W ranks and loaded with another
-- number continues the epoch with the samples not yet seen (shared among the new ranks).
local lt = require "lutra"
local C = require("lutra.core")._data
local newproxy = require("lutra._compat").newproxy

local M = {}

local DATASETS_ROOT = "/usr/share/datasets/fashion-mnist"
local FASHION_PACKAGE = "dataset-fashion-mnist"

-- ---- small helpers --------------------------------------------------------------------------------

local function is_tensor(x) return lt.is_tensor(x) end

local util = require "lutra.utils.check"
local shape_str = util.shape_str
-- named options: spec maps a name to a checker(value) returning an error text or nil
local check_options = util.check_options

local function is_int(v) return type(v) == "number" and v == math.floor(v) and v > -2 ^ 53 and v < 2 ^ 53 end
local function positive_int(v) if not (is_int(v) and v >= 1) then return "must be a positive integer, got " .. tostring(v) end end
local function boolean(v) if type(v) ~= "boolean" then return "must be a boolean, got " .. type(v) end end
local function optional_int(v) if not is_int(v) then return "must be an integer, got " .. tostring(v) end end
local function func(v) if type(v) ~= "function" then return "must be a function, got " .. type(v) end end
local function str(v) if type(v) ~= "string" then return "must be a string, got " .. type(v) end end

-- Objects: a userdata proxy (so `#obj` and tostring work under LuaJIT) over a fields table whose
-- metatable reads methods from the class.
local classes = setmetatable({}, { __mode = "k" }) -- proxy -> class
local fields_of = setmetatable({}, { __mode = "k" }) -- proxy -> fields table

local function new_object(class, fields)
  setmetatable(fields, { __index = class })
  local p = newproxy(true)
  local mt = getmetatable(p)
  mt.__index = fields
  mt.__newindex = fields
  mt.__len = class.__len
  mt.__tostring = class.__tostring
  mt.__pairs, mt.__ipairs = class.__pairs, class.__ipairs -- (not_a_table below)
  mt.__lutra_carry = class.__carry -- how it crosses to another Lua state (carry below)
  classes[p] = class
  fields_of[p] = fields
  return p
end

local function is_instance(x, class) return type(x) == "userdata" and classes[x] == class end

-- ---- datasets -------------------------------------------------------------------------------------

--- lt.data.len(ds): the number of samples of any dataset (a len() method, or __len).
function M.len(ds)
  local tp = type(ds)
  if tp == "userdata" and classes[ds] then return #ds end
  if tp == "table" or tp == "userdata" then
    local f = tp == "table" and rawget(ds, "len") or nil
    if f == nil then
      local ok, v = pcall(function() return ds.len end)
      if ok then f = v end
    end
    if type(f) == "function" then return f(ds) end
    local mt = getmetatable(ds)
    if type(mt) == "table" and type(mt.__len) == "function" then return mt.__len(ds) end
  end
  return nil
end

local function dataset_len(fname, ds)
  local n = M.len(ds)
  if n == nil then
    error(string.format("%s: the dataset must be a TensorDataset or a table with get(i) and a length "
      .. "(a len() method or __len in its metatable), got a %s without a length", fname, type(ds)), 3)
  end
  if not (is_int(n) and n >= 0) then
    error(string.format("%s: the dataset's length must be an integer >= 0, got %s", fname, tostring(n)), 3)
  end
  return n
end

local TensorDataset = {}
TensorDataset.__index = TensorDataset
M.TensorDataset_class = TensorDataset

function TensorDataset.__len(self) return fields_of[self].n end
function TensorDataset.__tostring(self)
  local f = fields_of[self]
  local parts = {}
  for i, t in ipairs(f.tensors) do parts[i] = shape_str(t) .. " " .. t:dtype() end
  return string.format("%s(%d samples: %s)", f.kind or "TensorDataset", f.n, table.concat(parts, ", "))
end
function TensorDataset:len() return fields_of[self].n end

--- ds:get(i) -> {x[i], y[i], ...} (views of row i; a 1-D tensor gives 0-dim tensors).
function TensorDataset:get(i)
  local f = fields_of[self]
  if not (is_int(i) and i >= 1 and i <= f.n) then
    error(string.format("TensorDataset:get: index %s out of range 1..%d", tostring(i), f.n), 2)
  end
  local out = {}
  for k, t in ipairs(f.tensors) do out[k] = t[i] end
  return out
end

local function make_tensor_dataset(fname, tensors, extra)
  if #tensors == 0 then error(fname .. ": expected at least one tensor", 3) end
  local n
  local ts = {}
  for i, t in ipairs(tensors) do
    if not is_tensor(t) then
      error(string.format("%s: argument #%d must be a tensor, got %s", fname, i, type(t)), 3)
    end
    if t:dim() < 1 then
      error(string.format("%s: tensor %d is 0-dim; every tensor needs a first dimension of samples", fname, i), 3)
    end
    if n == nil then n = t:size(1)
    elseif t:size(1) ~= n then
      error(string.format("%s: tensor %d has %d rows (shape %s) but tensor 1 has %d (shape %s); "
        .. "first sizes must match", fname, i, t:size(1), shape_str(t), n, shape_str(tensors[1])), 3)
    end
    ts[i] = t:detach():contiguous()
  end
  local fields = extra or {}
  fields.tensors, fields.n = ts, n
  return new_object(TensorDataset, fields)
end

--- lt.data.TensorDataset(x, y, ...): sample i is {x[i], y[i], ...}; first sizes must match.
function M.TensorDataset(...)
  local tensors = { ... }
  local n = select("#", ...)
  for i = 1, n do
    if tensors[i] == nil then error(string.format("TensorDataset: argument #%d must be a tensor, got nil", i), 2) end
  end
  return make_tensor_dataset("TensorDataset", tensors)
end

function M.is_tensor_dataset(ds) return is_instance(ds, TensorDataset) end

local function to_index_list(fname, indices, n)
  local list
  if is_tensor(indices) then
    if indices:dtype() ~= "int64" or indices:dim() ~= 1 then
      error(string.format("%s: indices must be a 1-D int64 tensor or a list, got %s %s", fname,
        indices:dtype(), shape_str(indices)), 3)
    end
    list = indices:totable()
  elseif type(indices) == "table" then
    list = indices
  else
    error(string.format("%s: indices must be a 1-D int64 tensor or a list, got %s", fname, type(indices)), 3)
  end
  for k = 1, #list do
    local i = list[k]
    if not (is_int(i) and i >= 1 and i <= n) then
      error(string.format("%s: index %s (entry %d) out of range 1..%d", fname, tostring(i), k, n), 3)
    end
  end
  return list
end

local Subset = {}
Subset.__index = Subset
function Subset.__len(self) return #fields_of[self].indices end
function Subset.__tostring(self) return string.format("Subset(%d of %d samples)", #fields_of[self].indices, fields_of[self].n) end
function Subset:len() return #fields_of[self].indices end
function Subset:get(i)
  local f = fields_of[self]
  local j = f.indices[i]
  if j == nil then error(string.format("Subset:get: index %s out of range 1..%d", tostring(i), #f.indices), 2) end
  return f.dataset:get(j)
end

--- lt.data.Subset(ds, indices): the samples ds:get(indices[k]). For a TensorDataset the result is a
--- TensorDataset again (batched in C): a consecutive range shares storage, other index lists copy rows.
function M.Subset(ds, indices)
  local n = dataset_len("Subset", ds)
  local list = to_index_list("Subset", indices, n)
  if is_instance(ds, TensorDataset) then
    local f = fields_of[ds]
    local consecutive = #list > 0
    for k = 2, #list do
      if list[k] ~= list[k - 1] + 1 then consecutive = false; break end
    end
    local ts = {}
    for k, t in ipairs(f.tensors) do
      if consecutive then ts[k] = t:narrow(1, list[1], #list)
      elseif #list == 0 then ts[k] = t:narrow(1, 1, 0)
      else ts[k] = t:index_select(1, lt.tensor(list, "int64")) end
    end
    local extra = { kind = f.kind, classes = f.classes }
    local sub = make_tensor_dataset("Subset", ts, extra)
    if f.kind then rawset(fields_of[sub], "data", ts[1]); rawset(fields_of[sub], "targets", ts[2]) end
    return sub
  end
  local ok, get = pcall(function() return ds.get end) -- (a tensor raises on a missing method)
  if not ok or type(get) ~= "function" then error("Subset: the dataset has no get(i) method", 2) end
  return new_object(Subset, { dataset = ds, indices = list, n = n })
end

--- lt.data.random_split(ds, {n1, n2, ...}[, {seed=}]): disjoint random Subsets whose sizes sum to #ds.
--- The permutation comes from `seed` when given, else from lutra's global RNG (lt.manual_seed).
function M.random_split(ds, lengths, opts)
  opts = check_options("random_split", opts, { seed = optional_int })
  local n = dataset_len("random_split", ds)
  if type(lengths) ~= "table" or #lengths == 0 then error("random_split: lengths must be a list of sizes", 2) end
  local total = 0
  for k, l in ipairs(lengths) do
    if not (is_int(l) and l >= 0) then
      error(string.format("random_split: length %d must be an integer >= 0, got %s", k, tostring(l)), 2)
    end
    total = total + l
  end
  if total ~= n then
    error(string.format("random_split: the lengths sum to %d but the dataset has %d samples", total, n), 2)
  end
  local rng = opts.seed and C.rng_seed(opts.seed) or C.rng_draw()
  local perm = C.randperm(n, rng):totable()
  local out, at = {}, 0
  for k, l in ipairs(lengths) do
    local idx = {}
    for j = 1, l do idx[j] = perm[at + j] end
    at = at + l
    out[k] = M.Subset(ds, idx)
  end
  return out
end

-- ---- IDX files and the MNIST family ---------------------------------------------------------------

local function file_exists(path)
  local f = io.open(path, "rb")
  if f then f:close(); return true end
  return false
end

--- lt.data.read_idx(path[, {dtype=}]): the IDX file's values as a tensor of its shape. Integer types give
--- int64 and float types float32, values unchanged; dtype="float32" converts integers to float32.
function M.read_idx(path, opts)
  if type(path) ~= "string" then error("read_idx: path must be a string, got " .. type(path), 2) end
  opts = check_options("read_idx", opts, {
    dtype = function(v)
      if v ~= "float32" and v ~= "int64" then return "must be \"float32\" or \"int64\", got " .. tostring(v) end
    end,
  })
  local ok, t = pcall(C.read_idx, path, opts.dtype == "float32" and "float32" or "raw")
  if not ok then
    local msg = tostring(t)
    if path:find("fashion%-mnist", 1) and msg:find("cannot open", 1, true) then
      msg = msg .. " (install the Debian package: apt-get install " .. FASHION_PACKAGE .. ")"
    end
    error(msg, 2)
  end
  if opts.dtype == "int64" and t:dtype() ~= "int64" then
    error("read_idx: " .. path .. ": dtype \"int64\" asked but the file holds floating-point values", 2)
  end
  return t
end

local FASHION_CLASSES = { "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
  "Bag", "Ankle boot" }
local MNIST_CLASSES = { "0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five", "6 - six",
  "7 - seven", "8 - eight", "9 - nine" }

local function mnist_like(kind, opts, default_root, how_to_get)
  opts = check_options(kind, opts, {
    train = boolean, root = str, limit = positive_int,
  })
  local root = opts.root or default_root
  if root == nil then
    error(string.format("%s: option 'root' is required (the folder with train-images-idx3-ubyte.gz etc.); %s",
      kind, how_to_get), 3)
  end
  root = root:gsub("/+$", "")
  local train = opts.train ~= false
  local prefix = train and "train" or "t10k"
  local function locate(base)
    local gz, plain = root .. "/" .. base .. ".gz", root .. "/" .. base
    if file_exists(gz) then return gz end
    if file_exists(plain) then return plain end
    error(string.format("%s: %s: cannot open: No such file or directory (nor %s); %s", kind, gz, plain, how_to_get), 4)
  end
  local images_path = locate(prefix .. "-images-idx3-ubyte")
  local labels_path = locate(prefix .. "-labels-idx1-ubyte")
  local function load(path, mode)
    local ok, t = pcall(C.read_idx, path, mode, opts.limit)
    if not ok then
      error(string.format("%s: %s; %s", kind, tostring(t):gsub("^read_idx: ", ""), how_to_get), 4)
    end
    return t
  end
  local images = load(images_path, "images")
  local labels = load(labels_path, "labels")
  if images:size(1) ~= labels:size(1) then
    error(string.format("%s: %s has %d images but %s has %d labels; %s", kind, images_path, images:size(1),
      labels_path, labels:size(1), how_to_get), 3)
  end
  local maxl = labels:numel() > 0 and labels:max():item() or 1
  if maxl > 10 then
    error(string.format("%s: %s: label %d out of range 0..9; %s", kind, labels_path, maxl - 1, how_to_get), 3)
  end
  local names = {}
  for i, c in ipairs(kind == "FashionMNIST" and FASHION_CLASSES or MNIST_CLASSES) do names[i] = c end
  return make_tensor_dataset(kind, { images, labels }, {
    kind = kind, data = images, targets = labels, classes = names, root = root, train = train,
    images_path = images_path, labels_path = labels_path,
  })
end

--- lt.data.FashionMNIST{train=true, root=/usr/share/datasets/fashion-mnist, limit=nil}: .data float32
--- [N x 1 x 28 x 28] in [0, 1], .targets int64 [N] in 1..10, .classes names (classes[label]).
function M.FashionMNIST(opts)
  return mnist_like("FashionMNIST", opts, DATASETS_ROOT,
    "get the files with: apt-get install " .. FASHION_PACKAGE .. " (or pass root= a folder holding them)")
end

--- lt.data.MNIST{root=..., train=true, limit=nil}: as FashionMNIST; MNIST has no Debian package, so root
--- is required.
function M.MNIST(opts)
  return mnist_like("MNIST", opts, nil,
    "MNIST has no Debian package: download train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
    .. "t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz into a folder and pass it as root=")
end

-- ---- CSV ------------------------------------------------------------------------------------------

local function split_fields(line, sep)
  local out = {}
  local start = 1
  while true do
    local a, b = line:find(sep, start, true)
    if not a then out[#out + 1] = line:sub(start); break end
    out[#out + 1] = line:sub(start, a - 1)
    start = b + 1
  end
  return out
end

local function unquote(s)
  s = s:match("^%s*(.-)%s*$")
  local q = s:match('^"(.*)"$') or s:match("^'(.*)'$")
  return q or s
end

--- lt.data.read_csv(path[, {header=true, sep=",", dtype="float32"}]) -> tensor [rows x cols], names
--- A numeric table: every row has the header's number of fields; blank lines are skipped. Returns the
--- column names (a list) as a second value when header=true.
function M.read_csv(path, opts)
  if type(path) ~= "string" then error("read_csv: path must be a string, got " .. type(path), 2) end
  opts = check_options("read_csv", opts, {
    header = boolean,
    sep = function(v) if type(v) ~= "string" or #v == 0 then return "must be a non-empty string" end end,
    dtype = function(v)
      if v ~= "float32" and v ~= "int64" then return "must be \"float32\" or \"int64\", got " .. tostring(v) end
    end,
  })
  local header = opts.header ~= false
  local sep = opts.sep or ","
  local dtype = opts.dtype or "float32"
  local fh, err = io.open(path, "rb")
  if not fh then
    error(string.format("read_csv: %s: cannot open: %s", path, tostring(err):match(": ([^:]*)$") or tostring(err)), 2)
  end
  local names, ncols
  local values, nrows = {}, 0
  local lineno = 0
  for line in fh:lines() do
    lineno = lineno + 1
    line = line:gsub("\r$", "")
    if lineno == 1 then line = line:gsub("^\239\187\191", "") end -- UTF-8 byte-order mark
    if line:find("%S") then
      local fields = split_fields(line, sep)
      if header and not names then
        names = {}
        for i, s in ipairs(fields) do names[i] = unquote(s) end
        ncols = #fields
      else
        if ncols == nil then ncols = #fields end
        if #fields ~= ncols then
          fh:close()
          error(string.format("read_csv: %s:%d: expected %d fields, got %d", path, lineno, ncols, #fields), 2)
        end
        for i = 1, ncols do
          local s = unquote(fields[i])
          local v = tonumber(s)
          if v == nil then
            local low = s:lower()
            if low == "nan" then v = 0 / 0
            elseif low == "inf" or low == "+inf" then v = math.huge
            elseif low == "-inf" then v = -math.huge end
          end
          if v == nil then
            fh:close()
            local col = names and names[i] and (" ('" .. names[i] .. "')") or ""
            error(string.format("read_csv: %s:%d: field %d%s is not a number: '%s'", path, lineno, i, col, s), 2)
          end
          if dtype == "int64" and not (v == math.floor(v) and v >= -2 ^ 63 and v < 2 ^ 63) then
            fh:close()
            error(string.format("read_csv: %s:%d: field %d is not an integer: '%s' (dtype int64)", path, lineno, i, s), 2)
          end
          values[#values + 1] = v
        end
        nrows = nrows + 1
      end
    end
  end
  fh:close()
  local t
  if nrows == 0 then t = lt.zeros({ 0, ncols or 0 }, dtype)
  else t = lt.tensor(values, dtype):view(nrows, ncols) end
  if header then return t, names or {} end
  return t
end

-- ---- DataLoader -----------------------------------------------------------------------------------

local DataLoader = {}
DataLoader.__index = DataLoader

local function num_batches(n, bs, drop_last)
  if drop_last then return math.floor(n / bs) end
  return math.ceil(n / bs)
end

-- Samples this rank sees in an epoch of n (sharding: ceil(n / world_size)).
local function epoch_len(f, n)
  if f._shard then return math.ceil(n / f._shard.world_size) end
  return n
end

function DataLoader.__len(self)
  local f = fields_of[self]
  return num_batches(epoch_len(f, dataset_len("DataLoader", f.dataset)), f.batch_size, f.drop_last)
end

function DataLoader.__tostring(self)
  local f = fields_of[self]
  local n = M.len(f.dataset) or 0
  return string.format("DataLoader(%d samples, batch_size=%d, shuffle=%s, drop_last=%s: %d batches)", n,
    f.batch_size, tostring(f.shuffle), tostring(f.drop_last), num_batches(n, f.batch_size, f.drop_last))
end

function DataLoader:len() return #self end

-- Default collate: a batch is a table; tensors are stacked, numbers become a tensor, tables recurse. Samples
-- must agree: every sample has the fields of sample 1 and no others (PyTorch raises for both, "each element
-- in list of batch should be of equal size"); a sample is named by its position in the batch.
local function field_name(where, key)
  return where and (where .. "." .. tostring(key)) or ("field " .. tostring(key))
end

local function collate_column(col, where)
  local first = col[1]
  if is_tensor(first) then
    local ok, r = pcall(lt.stack, col)
    if not ok then error(string.format("default_collate: cannot stack %s of the samples: %s", where, tostring(r)), 0) end
    return r
  elseif type(first) == "number" then
    local ints = true
    for k = 1, #col do
      local v = col[k]
      if type(v) ~= "number" then
        error(string.format("default_collate: %s of sample %d is a %s, sample 1 has a number", where, k, type(v)), 0)
      end
      if ints and v ~= math.floor(v) then ints = false end
    end
    return lt.tensor(col, ints and "int64" or "float32")
  elseif type(first) == "table" then
    for k = 2, #col do
      local s = col[k]
      if type(s) ~= "table" then
        error(string.format("default_collate: %s of sample %d is a %s, sample 1 has a table", where or "sample", k,
          type(s)), 0)
      end
      for key in pairs(s) do -- a field sample 1 has not (a longer list, an extra key) would be dropped
        if first[key] == nil then
          error(string.format("default_collate: %s of sample %d is not in sample 1 (samples must have the same "
            .. "fields)", field_name(where, key), k), 0)
        end
      end
    end
    local out = {}
    for key in pairs(first) do
      local sub = {}
      for k = 1, #col do
        sub[k] = col[k][key]
        if sub[k] == nil then
          error(string.format("default_collate: %s is missing in sample %d (samples must have the same fields)",
            field_name(where, key), k), 0)
        end
      end
      out[key] = collate_column(sub, field_name(where, key))
    end
    return out
  else
    return col -- strings, booleans, ...: kept as a list
  end
end

function M.default_collate(samples)
  util.check_arg("default_collate", 1, samples, "table")
  if #samples == 0 then return {} end
  local first = samples[1]
  if type(first) == "table" then return collate_column(samples, nil) end
  return { collate_column(samples, "the sample") }
end

-- ---- used as a table -------------------------------------------------------------------------------------
-- ipairs(loader), pairs(ds) or loader[1] is a mistake (a loader is iterated with iter(), a dataset read with
-- get(i)); each says so instead of iterating nothing. Where that can be done from the object: an integer key
-- (loader[1], and PUC 5.3/5.4's ipairs, which indexes through __index) and __pairs/__ipairs (PUC 5.2+, or a
-- LuaJIT built with LUA52COMPAT). A stock LuaJIT's ipairs/pairs raise their own "table expected, got
-- userdata" before asking the object: the lutra binary's error handler (core/cli/docall.c) finds the object in
-- the failing call and appends M._not_a_table's text to that message.
local NOT_A_TABLE = {
  [DataLoader] = "DataLoader is not a table: iterate it with loader:iter() (for batch in loader:iter() do ... end)",
  [TensorDataset] = "a dataset is not a table: read sample i with ds:get(i), i = 1 .. #ds, or batch it with " ..
    "lt.data.DataLoader(ds, opts)",
}
NOT_A_TABLE[Subset] = NOT_A_TABLE[TensorDataset]
for class, text in pairs(NOT_A_TABLE) do
  local function refuse() error(text, 2) end
  class.__pairs, class.__ipairs = refuse, refuse
  setmetatable(class, { __index = function(_, k) if type(k) == "number" then error(text, 2) end end })
end

--- The text above for a lutra data object (x), nil for anything else (core/cli/docall.c's error handler).
function M._not_a_table(x)
  return type(x) == "userdata" and NOT_A_TABLE[classes[x]] or nil
end

local function nonnegative_int(v) if not (is_int(v) and v >= 0) then return "must be an integer >= 0, got " .. tostring(v) end end
local function nonnegative_seconds(v)
  if not (type(v) == "number" and v >= 0 and v < math.huge) then
    return "must be a number of seconds >= 0, got " .. tostring(v)
  end
end

--- lt.data.DataLoader(ds, {batch_size=1, shuffle=false, drop_last=false, seed=nil, collate_fn=nil,
---   num_workers=0, prefetch_factor=2, persistent_workers=false, worker_init_fn=nil, timeout=0})
function M.DataLoader(ds, opts)
  opts = check_options("DataLoader", opts, {
    batch_size = positive_int, shuffle = boolean, drop_last = boolean, seed = optional_int, collate_fn = func,
    num_workers = nonnegative_int, prefetch_factor = positive_int, persistent_workers = boolean,
    worker_init_fn = func, timeout = nonnegative_seconds,
  })
  local num_workers = opts.num_workers or 0
  if num_workers == 0 then -- PyTorch's checks (torch/utils/data/dataloader.py)
    if opts.prefetch_factor ~= nil then
      error("DataLoader: option 'prefetch_factor' can only be given with worker states: set num_workers > 0 "
        .. "(num_workers = 0 loads in the calling state)", 2)
    end
    if opts.persistent_workers then error("DataLoader: option 'persistent_workers' needs num_workers > 0", 2) end
    -- (PyTorch asserts timeout == 0 when the first batch is asked for; said here, where the option is given)
    if (opts.timeout or 0) > 0 then
      error("DataLoader: option 'timeout' needs num_workers > 0 (it bounds the wait for a worker's batch), got "
        .. "timeout = " .. tostring(opts.timeout), 2)
    end
  end
  local n = dataset_len("DataLoader", ds)
  local tensor_backed = is_instance(ds, TensorDataset)
  if not tensor_backed then
    local ok, get = pcall(function() return ds.get end)
    if not ok or type(get) ~= "function" then
      error("DataLoader: the dataset has no get(i) method (a dataset is a TensorDataset or a table with "
        .. "get(i) and a length)", 2)
    end
  end
  local shuffle = opts.shuffle == true
  local f = {
    dataset = ds, batch_size = opts.batch_size or 1, shuffle = shuffle, drop_last = opts.drop_last == true,
    seed = opts.seed, collate_fn = opts.collate_fn,
    -- state (see the header): epochs started, batches yielded in the current one, its RNG state
    _epoch = 0, _pos = 0, _n = n,
    _rng = shuffle and (opts.seed and C.rng_seed(opts.seed) or C.rng_draw()) or nil,
    _next_rng = nil, _perm = nil, _perm_list = nil, _resume = false, _gen = 0,
    _shard = nil, _skip = 0, -- sharding: {rank, world_size}; samples of the epoch's order already seen
    _fast = tensor_backed and opts.collate_fn == nil,
    -- worker states (lutra/data/workers.lua); a loader without workers never reads the global RNG's state
    num_workers = num_workers, prefetch_factor = num_workers > 0 and (opts.prefetch_factor or 2) or nil,
    persistent_workers = opts.persistent_workers == true, worker_init_fn = opts.worker_init_fn,
    timeout = opts.timeout or 0,
    _seed_origin = num_workers > 0 and not shuffle and (opts.seed and string.format("seed %d", opts.seed) or lt.get_rng_state())
      or nil,
  }
  return new_object(DataLoader, f)
end

function M.is_dataloader(x) return is_instance(x, DataLoader) end

-- Draws the current epoch's permutation from f._rng (when shuffling).
local function draw_perm(f, n)
  if f.shuffle then
    f._perm, f._next_rng = C.randperm(n, f._rng)
    f._perm_list = nil
  end
end

-- This rank's share of the epoch's order (sharding, or the rest of an epoch resumed with another number of
-- ranks): a 1-based int64 tensor (nil when empty), and its length.
local function shard_perm(f, n, perm)
  local order
  if perm then order = perm:totable()
  else
    order = {}
    for i = 1, n do order[i] = i end
  end
  if f._skip > 0 then
    local rest = {}
    for i = f._skip + 1, n do rest[#rest + 1] = order[i] end
    order = rest
  end
  local sh = f._shard or { rank = 0, world_size = 1 }
  local mine = require("lutra.distributed").shard_indices(order, sh.rank, sh.world_size)
  if #mine == 0 then return nil, 0 end
  return lt.tensor(mine, "int64"), #mine
end

--- loader:set_shard(rank, world_size): this rank's share of every epoch from now on (see the header);
--- set_shard(0, 1) turns sharding off. Iterators made before are stale.
function DataLoader:set_shard(rank, world_size)
  local f = fields_of[self]
  if not (is_int(world_size) and world_size >= 1) then
    error("DataLoader:set_shard: world_size must be an integer >= 1, got " .. tostring(world_size), 2)
  end
  if not (is_int(rank) and rank >= 0 and rank < world_size) then
    error(string.format("DataLoader:set_shard: rank must be an integer in 0..%d, got %s", world_size - 1, tostring(rank)), 2)
  end
  f._shard = world_size > 1 and { rank = rank, world_size = world_size } or nil
  f._gen = f._gen + 1
end

--- loader:shard() -> rank, world_size (0, 1 when not sharded)
function DataLoader:shard()
  local s = fields_of[self]._shard
  if s then return s.rank, s.world_size end
  return 0, 1
end

--- for batch in loader:iter() do ... end: one epoch (a new one per call, or the rest of a resumed one).
function DataLoader:iter()
  local f = fields_of[self]
  local ds = f.dataset
  local n = dataset_len("DataLoader", ds)
  local bs = f.batch_size
  local W = f._shard and f._shard.world_size or 1
  if f._resume and f._saved_world and f._saved_world ~= W and f._epoch > 0 and n == f._n then
    -- saved with another number of ranks: continue the epoch with the samples not yet seen
    local sbs = f._saved_bs or bs -- the per-rank batch size may change with the number of ranks
    local saved_nb = num_batches(math.ceil((n - f._skip) / f._saved_world), sbs, f.drop_last)
    if f._pos >= saved_nb then -- a finished epoch
      f._skip, f._pos = 0, num_batches(epoch_len(f, n), bs, f.drop_last)
    else -- global batch b of W ranks covers positions [b*bs*W, (b+1)*bs*W) of the (remaining) order
      f._skip, f._pos = math.min(n, f._skip + f._pos * sbs * f._saved_world), 0
    end
  end
  f._saved_world, f._saved_bs = nil, nil
  local nb = num_batches(epoch_len(f, n - f._skip), bs, f.drop_last)
  local resumed = f._resume and f._epoch > 0 and f._pos < nb -- (a mid-epoch resume: workers continue streams)
  if resumed then
    -- continue the restored epoch at its position, with the permutation drawn from the restored state
    if n ~= f._n then
      error(string.format("DataLoader: cannot resume: the state was saved with %d samples, the dataset now has %d", f._n, n), 2)
    end
    if not f._perm then draw_perm(f, n) end
  else
    if f._epoch > 0 and f.shuffle then
      if not f._next_rng then draw_perm(f, f._n) end -- restored state: advance past that epoch's draw
      f._rng = f._next_rng
    end
    f._epoch, f._pos, f._n, f._skip = f._epoch + 1, 0, n, 0
    f._perm, f._perm_list, f._next_rng = nil, nil, nil
    draw_perm(f, n)
    nb = num_batches(epoch_len(f, n), bs, f.drop_last)
  end
  f._resume = false
  f._gen = f._gen + 1
  local gen, perm = f._gen, f._perm
  local m = n -- samples in this epoch (on this rank)
  local shard_list -- the slow path's list of this rank's indices (sharding)
  if f._shard or f._skip > 0 then perm, m = shard_perm(f, n, perm) end
  local tensors = f._fast and fields_of[ds].tensors or nil
  if f.num_workers > 0 then
    -- the item indices of 0-based batch b, sent to a worker
    local function batch_indices(b)
      local start = b * bs
      local sharded = f._shard or f._skip > 0
      local list = sharded and shard_list or f._perm_list
      if perm and not list then
        list = perm:totable()
        if sharded then shard_list = list else f._perm_list = list end
      end
      local out = {}
      for j = 1, math.min(bs, m - start) do out[j] = list and list[start + j] or start + j end
      return out
    end
    return require("lutra.data.workers").iter(f, gen, nb, batch_indices, resumed)
  end
  return function()
    if f._gen ~= gen then
      error("DataLoader: this iterator is stale: iter() was called again (each iter() starts a new epoch)", 2)
    end
    local b = f._pos
    if b >= nb then return nil end
    local start = b * bs
    local count = math.min(bs, m - start)
    local batch
    if tensors then
      batch = C.gather(tensors, perm, start, count)
    else
      local sharded = f._shard or f._skip > 0
      local list = sharded and shard_list or f._perm_list
      if perm and not list then
        list = perm:totable()
        if sharded then shard_list = list else f._perm_list = list end
      end
      batch = M._collate_items(ds, list, start, count, f.collate_fn)
    end
    f._pos = b + 1
    return batch
  end
end

--- The batch of items list[start + 1 .. start + count] (items start + 1 .. when list is nil), collated. Shared by
--- the loader and its worker states (lutra/data/workers.lua), which pass `cur` to learn the item that failed.
function M._collate_items(ds, list, start, count, collate_fn, cur)
  local samples = {}
  for j = 1, count do
    local i = list and list[start + j] or start + j
    if cur then cur.item = i end
    local s = ds:get(i)
    if s == nil then error(string.format("DataLoader: dataset:get(%d) returned nil", i), 3) end
    samples[j] = s
  end
  if cur then cur.item = nil end
  return (collate_fn or M.default_collate)(samples)
end

--- loader:state_dict(): {epoch, position, rng, n, batch_size, shuffle, drop_last} (plain values, JSON-able).
function DataLoader:state_dict()
  local f = fields_of[self]
  local sd = {
    epoch = f._epoch, position = f._pos, rng = f._rng or false, n = f._n,
    batch_size = f.batch_size, shuffle = f.shuffle, drop_last = f.drop_last,
  }
  if f._shard or f._skip > 0 then -- sharding: the layout the position counts in
    sd.world_size = f._shard and f._shard.world_size or 1
    sd.skip = f._skip
  end
  if f.num_workers > 0 then require("lutra.data.workers").state_dict(f, sd) end
  return sd
end

--- loader:load_state_dict(sd): the next iter() continues the saved epoch at the saved position.
function DataLoader:load_state_dict(sd)
  local f = fields_of[self]
  if type(sd) ~= "table" then error("DataLoader:load_state_dict: expected a table from state_dict(), got " .. type(sd), 2) end
  for _, k in ipairs { "epoch", "position", "n" } do
    if not (is_int(sd[k]) and sd[k] >= 0) then
      error(string.format("DataLoader:load_state_dict: field '%s' must be an integer >= 0, got %s", k, tostring(sd[k])), 2)
    end
  end
  local cur_world = f._shard and f._shard.world_size or 1
  if sd.batch_size ~= nil and sd.batch_size ~= f.batch_size and (sd.world_size or 1) == cur_world then
    error(string.format("DataLoader:load_state_dict: the state was saved with batch_size=%s, this loader has %d",
      tostring(sd.batch_size), f.batch_size), 2)
  end
  if sd.shuffle ~= nil and sd.shuffle ~= f.shuffle then
    error(string.format("DataLoader:load_state_dict: the state was saved with shuffle=%s, this loader has shuffle=%s",
      tostring(sd.shuffle), tostring(f.shuffle)), 2)
  end
  if sd.drop_last ~= nil and sd.drop_last ~= f.drop_last then
    error(string.format("DataLoader:load_state_dict: the state was saved with drop_last=%s, this loader has drop_last=%s",
      tostring(sd.drop_last), tostring(f.drop_last)), 2)
  end
  local n = dataset_len("DataLoader", f.dataset)
  if sd.n ~= n and sd.epoch > 0 then
    error(string.format("DataLoader:load_state_dict: the state was saved for a dataset of %d samples, this loader's has %d",
      sd.n, n), 2)
  end
  if f.shuffle then
    if type(sd.rng) ~= "string" then
      error("DataLoader:load_state_dict: field 'rng' must be the RNG state string of a shuffling loader, got " .. type(sd.rng), 2)
    end
    C.randperm(0, sd.rng) -- validates the string
  end
  for _, k in ipairs { "world_size", "skip" } do
    if sd[k] ~= nil and not (is_int(sd[k]) and sd[k] >= (k == "skip" and 0 or 1)) then
      error(string.format("DataLoader:load_state_dict: field '%s' must be an integer >= %d, got %s", k,
        k == "skip" and 0 or 1, tostring(sd[k])), 2)
    end
  end
  f._epoch, f._pos, f._n = sd.epoch, sd.position, n
  f._skip, f._saved_world = math.min(sd.skip or 0, n), sd.world_size or 1
  f._saved_bs = is_int(sd.batch_size) and sd.batch_size >= 1 and sd.batch_size or nil
  f._rng = f.shuffle and sd.rng or nil
  f._perm, f._perm_list, f._next_rng = nil, nil, nil
  if f.num_workers > 0 then require("lutra.data.workers").load_state_dict(f, sd) end
  f._resume = true
  f._gen = f._gen + 1 -- iterators from before the load are stale
end

--- loader:close(): stops the loader's worker states now (persistent ones included; the next iter() starts
--- new ones). A loader without workers has nothing to close.
function DataLoader:close()
  local f = fields_of[self]
  if f.num_workers > 0 then require("lutra.data.workers").close(f) end
end

--- The Trainer, when a run ends (normally or by an error): stops the worker states of the loader's iterator left
--- before its end (an exception, limit_train_batches); persistent workers stay.
function M._stop_iterators(loader)
  if is_instance(loader, DataLoader) and fields_of[loader].num_workers > 0 then
    require("lutra.data.workers").stop_live(fields_of[loader])
  end
end

--- lt.data.get_worker_info(): {id, num_workers, seed, dataset} in a DataLoader's worker state, nil elsewhere.
function M.get_worker_info()
  local w = package.loaded["lutra.data.workers"]
  return w and w.info() or nil
end

-- ---- crossing to another Lua state ----------------------------------------------------------------
-- lt.thread carries these proxies by constructor (core/bind/l_carry.c): obj's __lutra_carry gives
-- M._rebuild (crosses by name) and {class name, a copy of its fields} (tensors shared, the rest copied).
-- A DataLoader's worker states and iterators stay in the state that made them.
local CARRIED = { TensorDataset = TensorDataset, Subset = Subset, DataLoader = DataLoader }
local STATE_ONLY = { _pool = true, _live = true, _inflight = true }
for name, class in pairs(CARRIED) do
  class.__carry = function(self)
    local copy = {}
    for k, v in pairs(fields_of[self]) do
      if not STATE_ONLY[k] then copy[k] = v end
    end
    return M._rebuild, { name, copy }
  end
end

--- A TensorDataset's tensors (a worker state's fast path: one row gather per tensor and batch, in C).
function M._tensors_of(ds) return fields_of[ds].tensors end

function M._rebuild(a)
  return new_object(CARRIED[a[1]], a[2])
end

return require("lutra.names").strict(M, "lt.data")
