-- nn/containers.lua — Identity, ModuleList, ModuleDict and Unflatten, with PyTorch's names in state_dict.
--
--   self.layers = lt.nn.ModuleList{ lt.nn.Linear(4, 8), lt.nn.Linear(8, 2) }
--   for i, layer in ipairs(self.layers) do x = layer(x) end        -- children at keys 1..n
--   self.layers:state_dict()  -- { ["0.weight"], ["0.bias"], ["1.weight"], ... }: PyTorch's 0-based names
--   self.heads = lt.nn.ModuleDict{ cls = lt.nn.Linear(8, 10) }     -- self.heads.cls(x)
local lt = require "lutra"
local MM = require "lutra.nn.module"
local H = require "lutra.nn.helpers"
local Module = MM.Module

local C = {}

local function is_module(m)
  return type(m) == "table" and (MM.is_module_instance(m) or type(m.forward) == "function")
end

-- ---- Identity ---------------------------------------------------------------------------------------

local Identity = Module:extend("Identity")
-- PyTorch's Identity accepts and ignores constructor arguments (so it can stand in for any layer)
function Identity:init() end
function Identity:forward(x) return x end
C.Identity = Identity

-- ---- ModuleList -------------------------------------------------------------------------------------

local ModuleList = Module:extend("ModuleList")
-- the state_dict names of children 1..n are PyTorch's "0".."n-1" ("layers.0.weight"; lua/lutra/nn/module.lua)
ModuleList._zero_based_names = true

local function check_child(where, m, i, level)
  if not is_module(m) then
    error(string.format("%s: element %d is a %s, expected a module (a table with forward)", where, i, type(m)), level)
  end
end

function ModuleList:init(list)
  if list ~= nil and (type(list) ~= "table" or is_module(list)) then
    error("ModuleList: expected a list of modules, ModuleList{m1, m2, ...}, got " ..
      (is_module(list) and "a module" or type(list)), 3)
  end
  for i, m in ipairs(list or {}) do
    check_child("ModuleList", m, i, 4)
    self[i] = m
  end
end

--- Appends a module; returns self.
function ModuleList:append(m)
  check_child("ModuleList:append", m, #self + 1, 3)
  self[#self + 1] = m
  return self
end

--- Appends every module of a list; returns self.
function ModuleList:extend(list)
  if type(list) ~= "table" or is_module(list) then
    error("ModuleList:extend: expected a list of modules, got " .. (is_module(list) and "a module" or type(list)), 2)
  end
  for i, m in ipairs(list) do check_child("ModuleList:extend", m, i, 3) end
  for _, m in ipairs(list) do self[#self + 1] = m end
  return self
end

--- Inserts a module before position index (1-based; #self + 1 appends); returns self.
function ModuleList:insert(index, m)
  local n = #self
  if type(index) ~= "number" or index ~= math.floor(index) or index < 1 or index > n + 1 then
    error(string.format("ModuleList:insert: index must be an integer in 1..%d, got %s", n + 1, tostring(index)), 2)
  end
  check_child("ModuleList:insert", m, index, 3)
  table.insert(self, index, m)
  return self
end

function ModuleList:forward()
  self:fail("a ModuleList has no forward: iterate over it (for i, m in ipairs(list) do x = m(x) end)")
end
C.ModuleList = ModuleList

-- ---- ModuleDict -------------------------------------------------------------------------------------

local ModuleDict = Module:extend("ModuleDict")

local function check_key(where, k, level)
  if type(k) ~= "string" or k == "" or k:find(".", 1, true) or k:sub(1, 1) == "_" then
    error(string.format("%s: keys must be non-empty strings without '.' that do not start with '_', got %s",
      where, type(k) == "string" and ("'" .. k .. "'") or type(k)), level)
  end
  if ModuleDict[k] ~= nil or k == "training" or k == "trainer" then
    error(string.format("%s: key '%s' is the name of a ModuleDict method or field", where, k), level)
  end
end

function ModuleDict:init(dict)
  if dict ~= nil and (type(dict) ~= "table" or is_module(dict)) then
    error("ModuleDict: expected a table of modules, ModuleDict{name = m, ...}, got " ..
      (is_module(dict) and "a module" or type(dict)), 3)
  end
  for k, m in pairs(dict or {}) do
    check_key("ModuleDict", k, 4)
    if not is_module(m) then error(string.format("ModuleDict: entry '%s' is a %s, expected a module", k, type(m)), 4) end
    self[k] = m
  end
end

--- The keys, sorted (the order of state_dict and children).
function ModuleDict:keys()
  local ks = {}
  for k, v in pairs(self) do
    if type(k) == "string" and is_module(v) then ks[#ks + 1] = k end
  end
  table.sort(ks)
  return ks
end

--- The modules in keys() order.
function ModuleDict:values()
  local vs = {}
  for i, k in ipairs(self:keys()) do vs[i] = self[k] end
  return vs
end

--- An iterator over (key, module) in keys() order: `for k, m in md:items() do ... end`.
function ModuleDict:items()
  local ks, i = self:keys(), 0
  return function()
    i = i + 1
    if ks[i] then return ks[i], self[ks[i]] end
  end
end

--- Sets (or, with nil, removes) the module at key; returns self.
function ModuleDict:update(k, m)
  check_key("ModuleDict:update", k, 3)
  if m ~= nil and not is_module(m) then
    error(string.format("ModuleDict:update: entry '%s' is a %s, expected a module", k, type(m)), 2)
  end
  rawset(self, k, m)
  return self
end

function ModuleDict:forward()
  self:fail("a ModuleDict has no forward: call its modules by key (dict.name(x))")
end
C.ModuleDict = ModuleDict

-- ---- Unflatten --------------------------------------------------------------------------------------

local Unflatten = H.class("Unflatten")

--- Unflatten(dim, sizes): dim (1-based, negative from the end) split into sizes (one may be -1), as x:unflatten.
function Unflatten:init(dim, sizes)
  if type(dim) == "table" and sizes == nil then dim, sizes = dim.dim, dim.unflattened_size end
  if type(dim) ~= "number" or dim ~= math.floor(dim) or dim == 0 then
    error("Unflatten: dim must be a non-zero integer (1-based; negative counts from the end), got " .. tostring(dim), 3)
  end
  if type(sizes) ~= "table" or #sizes == 0 then
    error("Unflatten: unflattened_size must be a non-empty list of sizes, got " .. type(sizes), 3)
  end
  local copy = {}
  for i, s in ipairs(sizes) do
    if type(s) ~= "number" or s ~= math.floor(s) or (s < 0 and s ~= -1) then
      error(string.format("Unflatten: size %d must be an integer >= 0 or -1, got %s", i, tostring(s)), 3)
    end
    copy[i] = s
  end
  self.dim, self.unflattened_size = dim, copy
end

function Unflatten:extra_repr()
  return "dim=" .. self.dim .. ", unflattened_size={" .. table.concat(self.unflattened_size, ", ") .. "}"
end

function Unflatten:forward(x)
  if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
  local n = x:dim()
  if self.dim > n or -self.dim > n then
    self:fail(string.format("dim %d is out of range for an input of shape %s", self.dim, x:shape_str()))
  end
  local ok, r = pcall(x.unflatten, x, self.dim, self.unflattened_size)
  if not ok then self:fail((tostring(r):gsub("^[^:]*:%d+: ", ""))) end
  return r
end
C.Unflatten = Unflatten

return C
