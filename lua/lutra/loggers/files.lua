-- loggers/files.lua — what every file logger (CSV, JSON lines, TensorBoard) shares: the directory rule
-- <save_dir>/<name>/version_N (N the next free one, decided on first use), the options that choose it, a class
-- whose log_dir and version follow it, and metric rows and hyper-parameters as every logger takes them.
local lt = require "lutra"

local IO = lt._io
local M = {}
local fmt = string.format

-- A number that is an integer a double holds exactly (NaN, inf, fractions and |v| >= 2^53 are not).
local function is_count(v) return type(v) == "number" and v == math.floor(v) and v > -2 ^ 53 and v < 2 ^ 53 end

M.is_count = is_count

local function is_dir(path)
  local st = IO.stat(path)
  return st ~= nil and st.type == "dir"
end

--- The next free version number under root (0 when root does not exist or holds no version_N).
function M.next_version(root)
  local names = IO.listdir(root)
  if not names then return 0 end
  local best = -1
  for _, n in ipairs(names) do
    local v = n:match("^version_(%d+)$")
    if v and is_dir(root .. "/" .. n) then best = math.max(best, tonumber(v)) end
  end
  return best + 1
end

--- The options every file logger shares (CSV, JSON lines, TensorBoard): save_dir, name, version, prefix,
--- checked, with their defaults; level as error's, from the logger's constructor.
function M.dir_options(what, opts, level)
  level = (level or 2) + 1
  local save_dir = opts.save_dir or "."
  if type(save_dir) ~= "string" then error(what .. ": option 'save_dir' must be a string, got " .. type(save_dir), level) end
  local name = opts.name
  if name == nil then name = "lutra_logs" end
  if type(name) ~= "string" then error(what .. ": option 'name' must be a string, got " .. type(name), level) end
  local version = opts.version
  -- (inf is an integer to math.floor; below 2^53 a number is one exactly, and "%d" can print it)
  if version ~= nil and type(version) ~= "string" and not (is_count(version) and version >= 0) then
    error(what .. ": option 'version' must be an integer >= 0 or a string, got " .. tostring(version), level)
  end
  local prefix = opts.prefix or ""
  if type(prefix) ~= "string" then error(what .. ": option 'prefix' must be a string, got " .. type(prefix), level) end
  return save_dir, name, version, prefix
end

-- the methods _root_dir, _version and _log_dir of a file logger (the version is decided on first use)
function M.root_dir(self)
  if self.name == "" then return self.save_dir end
  return self.save_dir .. "/" .. self.name
end

function M.version(self)
  if self._resolved_version == nil then
    local v = self._version_opt
    if v == nil then v = M.next_version(self:_root_dir()) end
    rawset(self, "_resolved_version", v)
  end
  return self._resolved_version
end

function M.log_dir(self)
  local v = self:_version()
  local dir = type(v) == "string" and v or ("version_" .. fmt("%d", v))
  return self:_root_dir() .. "/" .. dir
end

--- A logger class named `name` whose log_dir, version and experiment are read through the directory rule
--- (its objects hold save_dir, name and _version_opt, as dir_options gives them).
function M.dir_class(name)
  local cls = {}
  cls.__name = name
  cls.__index = function(self, k)
    if k == "log_dir" then return self:_log_dir() end
    if k == "version" then return self:_version() end
    if k == "experiment" then return self end
    return cls[k]
  end
  cls._root_dir, cls._version, cls._log_dir = M.root_dir, M.version, M.log_dir
  function cls:_ensure_dir()
    if not self._dir_made then
      local ok, err = pcall(IO.mkdirs, self:_log_dir())
      if not ok then error(name .. ": cannot create the log directory: " .. tostring(err), 0) end
      rawset(self, "_dir_made", true)
    end
  end
  function cls:state_dict() return {} end
  function cls:load_state_dict() end
  function cls:__tostring() return fmt("%s(%s)", name, self._resolved_version and self:_log_dir() or self:_root_dir()) end
  return cls
end

-- a logged value: a tensor of one element as its number
function M.scalar(what, v)
  if lt.is_tensor(v) then
    if v:numel() ~= 1 then error(fmt("%s: a logged tensor must have one element, got shape %s", what, v:shape_str()), 4) end
    return v:item()
  end
  return v
end

-- metrics with the prefix ("<prefix>-<key>", as CSVLogger; epoch keeps its name), tensors read
function M.prefixed(what, prefix, metrics)
  if type(metrics) ~= "table" then error(fmt("%s:log_metrics: expected a table of metrics, got %s", what, type(metrics)), 3) end
  local out = {}
  for k, v in pairs(metrics) do
    local key = tostring(k)
    if prefix ~= "" and key ~= "epoch" then key = prefix .. "-" .. key end
    out[key] = M.scalar(what, v)
  end
  return out
end

function M.merge_hparams(self, what, params)
  if params == nil then return false end
  if type(params) ~= "table" then error(fmt("%s:log_hyperparams: expected a table, got %s", what, type(params)), 3) end
  for k, v in pairs(params) do self.hparams[k] = v end
  self:_ensure_dir()
  return true
end

-- hyper-parameters as JSON can hold them: tensors of one element as numbers, others as their shape text
function M.plain(v, depth)
  if lt.is_tensor(v) then return v:numel() == 1 and v:item() or ("tensor " .. v:shape_str()) end
  if type(v) == "table" and depth < 16 then
    local t = {}
    for k, x in pairs(v) do if type(x) ~= "function" then t[k] = M.plain(x, depth + 1) end end
    return t
  end
  if type(v) == "function" or type(v) == "userdata" or type(v) == "thread" then return tostring(v) end
  return v
end

return M
