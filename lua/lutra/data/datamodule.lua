-- lutra.data.datamodule — lt.DataModule: Lightning's LightningDataModule, the data of an experiment in one object
-- (docs/reference/datamodule.md).
--
--   local Data = lt.DataModule:extend("Data")
--   function Data:init(opts) self.batch_size = opts.batch_size or 32 end
--   function Data:setup(stage) self.train_ds = ...; self.val_ds = ... end
--   function Data:train_dataloader() return lt.data.DataLoader(self.train_ds, {batch_size = self.batch_size}) end
--   trainer:fit(model, {datamodule = Data{batch_size = 64}})   -- or trainer:fit(model, dm)
--
-- The trainer calls the datamodule's hooks through the loops' one dispatcher (core/bind/l_loop.c: the
-- datamodule is the first target of prepare_data, setup and teardown, and the only source of the
-- *_dataloader hooks when a run has one). A plain table with *_dataloader methods works as well: the class
-- adds the defaults (hooks that do nothing, an empty state_dict) and `extend`.
local util = require "lutra.utils.check"

local fmt = string.format

local DataModule = { __lutra_datamodule = true, __name = "DataModule" }
DataModule.__index = DataModule

function DataModule:prepare_data() end
function DataModule:setup(_stage) end
function DataModule:teardown(_stage) end
--- What a checkpoint keeps of the datamodule (Lightning's LightningDataModule.state_dict): {} by default.
function DataModule:state_dict() return {} end
function DataModule:load_state_dict(_state) end
function DataModule:__tostring() return "DataModule(" .. tostring(rawget(getmetatable(self), "__name")) .. ")" end

local class_mt = {}
class_mt.__index = function(cls, k) local super = rawget(cls, "super"); return super and super[k] end
class_mt.__call = function(cls, ...)
  local o = setmetatable({}, cls)
  local init = cls.init
  if init then init(o, ...) end
  return o
end
class_mt.__tostring = function(cls) return "lt.DataModule " .. cls.__name .. " (class)" end

--- A new datamodule class: `local Data = lt.DataModule:extend("Data")`; Data:init(...) is the constructor.
function DataModule:extend(name)
  if type(name) ~= "string" then error("DataModule:extend: expected a class name string, got " .. type(name), 2) end
  local cls = { __name = name, super = self, __lutra_datamodule = true }
  cls.__index = cls
  cls.__tostring = rawget(self, "__tostring") or DataModule.__tostring
  return setmetatable(cls, class_mt)
end

local DATA_HOOKS = { "train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader" }

--- v is a datamodule: an lt.DataModule instance, or a table (not a loader) with a *_dataloader method.
function DataModule._is_datamodule(v)
  if type(v) ~= "table" then return false end
  local ok, it = pcall(function() return v.iter end)
  if ok and type(it) == "function" then return false end -- a loader
  local mt = getmetatable(v)
  if type(mt) == "table" and mt.__lutra_datamodule then return true end
  for _, h in ipairs(DATA_HOOKS) do
    local okh, f = pcall(function() return v[h] end)
    if okh and type(f) == "function" then return true end
  end
  return false
end

--- lt.DataModule.from_datasets{train=, val=, test=, predict=, batch_size=1, shuffle=true (train only),
--- seed=}: a datamodule whose *_dataloader hooks return DataLoaders over the given datasets (Lightning's
--- LightningDataModule.from_datasets). val/test/predict may be a dataset or a list of datasets.
local FROM_OPTS = { train = true, val = true, test = true, predict = true, batch_size = "integer",
  shuffle = "boolean", seed = "integer" }

function DataModule.from_datasets(opts)
  opts = util.check_options("DataModule.from_datasets", opts, FROM_OPTS)
  local bs = opts.batch_size or 1
  if bs < 1 then error(fmt("DataModule.from_datasets: option 'batch_size' must be >= 1, got %d", bs), 2) end
  local dm = setmetatable({ batch_size = bs }, DataModule)
  local function loaders(ds, shuffle)
    local DataLoader = require("lutra.data").DataLoader
    local function one(d) return DataLoader(d, { batch_size = bs, shuffle = shuffle, seed = opts.seed }) end
    if type(ds) == "table" and ds[1] ~= nil and getmetatable(ds) == nil then
      local list = {}
      for i, d in ipairs(ds) do list[i] = one(d) end
      return list
    end
    return one(ds)
  end
  if opts.train ~= nil then
    local shuffle = opts.shuffle ~= false
    function dm.train_dataloader() return loaders(opts.train, shuffle) end
  end
  if opts.val ~= nil then function dm.val_dataloader() return loaders(opts.val, false) end end
  if opts.test ~= nil then function dm.test_dataloader() return loaders(opts.test, false) end end
  if opts.predict ~= nil then function dm.predict_dataloader() return loaders(opts.predict, false) end end
  return dm
end

return setmetatable(DataModule, class_mt)
