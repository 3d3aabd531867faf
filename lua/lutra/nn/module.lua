-- nn/module.lua — the shared base of lt.nn modules, and the walk that finds parameters, buffers and
-- sub-modules in any table (a Module, a plain model table, a list of modules).
--
--   local Net = lt.nn.Module:extend("Net")
--   function Net:init(n) self.fc = lt.nn.Linear(n, 10) end
--   function Net:forward(x) return self.fc(x) end
--   local net = Net(784)           -- construct; net(x) == net:forward(x)
--   net:named_parameters()         -- { ["fc.weight"] = ..., ["fc.bias"] = ... }, { "fc.weight", "fc.bias" }
--
-- Names are table paths from the root (Sequential children are numbered from 1: "net.1.weight"; a container
-- class with the field _zero_based_names names its children 0, 1, ... as PyTorch does: "layers.0.linear1.weight").
-- Fields are visited in a fixed order: a module's declared parameters (class field _params, e.g.
-- {"weight", "bias"}) and buffers (_buffers), then integer keys ascending, then string keys sorted.
-- A module class may declare buffers that files saved before the buffer existed lack (_optional_buffers:
-- BatchNorm's num_batches_tracked); load_state_dict then leaves them at their current value.
-- Keys starting with "_" and the key "trainer" are skipped; tables are entered when they are modules
-- (a Module, or any table with a `forward` function) or plain tables without a metatable (lists of
-- modules); each table is visited once, so cycles and shared modules are harmless. A tensor field is
-- a parameter when it is a leaf that requires grad; buffers are only the declared ones.
-- Tied weights: a tensor held by two modules (a language model's lm_head.weight = wte.weight) is one
-- parameter, named by its first path in that order (parameters and optimizers see it once); state_dict
-- lists it under every name that holds it, as PyTorch's, and load_state_dict fills it from any of them.
local lt = require "lutra"
local util = require "lutra.utils.check"
local unpack = require("lutra._compat").unpack

local Module = { __lutra_module = true }
Module.__index = Module
Module.__name = "Module"

local SKIP = { trainer = true }

-- Parameters turned off by requires_grad_(false) / freeze(): still parameters (in parameters(), state_dict()),
-- as in PyTorch, though a bare tensor field is otherwise a parameter only while it requires grad. Weak keys.
local frozen = setmetatable({}, { __mode = "k" })

local function is_module_instance(t)
  local mt = getmetatable(t)
  return type(mt) == "table" and rawget(mt, "__lutra_module") == true
end

local function get_field(t, k)
  local ok, v = pcall(function() return t[k] end)
  return ok and v or nil
end

-- a table the walk enters, and whether it is a module (gets `training`, a path)
local function classify(v)
  if type(v) ~= "table" then return false, false end
  if is_module_instance(v) then return true, true end
  local mt = getmetatable(v)
  if mt == nil then return true, type(rawget(v, "forward")) == "function" end
  if type(get_field(v, "forward")) == "function" then return true, true end
  return false, false
end

local function sorted_keys(t)
  local ints, strs = {}, {}
  for k in pairs(t) do
    local tk = type(k)
    if tk == "number" then
      if k == math.floor(k) then ints[#ints + 1] = k end
    elseif tk == "string" then
      if k:sub(1, 1) ~= "_" and not SKIP[k] then strs[#strs + 1] = k end
    end
  end
  table.sort(ints)
  table.sort(strs)
  for i = 1, #strs do ints[#ints + 1] = strs[i] end
  return ints
end

-- the name of child k of t in paths
local function child_name(t, k)
  if type(k) == "number" and get_field(t, "_zero_based_names") then return tostring(k - 1) end
  return tostring(k)
end

--- Walks root; calls on.param(name, t), on.buffer(name, t, owner, key), on.module(tbl, path, key, parent)
--- (path nil for the root), and on.tied(name, t, first) for a later name of a parameter or buffer t first
--- reported under the name `first`. Names and order are described at the top of this file.
local function walk(root, on)
  local seen = {}
  local first = {} -- tensor -> the name it was first reported under
  local function again(name, v)
    if first[v] and on.tied then on.tied(name, v, first[v]) end
  end
  -- every walk from a true root (a plain model table, or a module no parent has named) records each
  -- module's path for error messages; a walk from inside a named tree keeps the full paths
  local assign = not (is_module_instance(root) and rawget(root, "_path"))
  if assign and is_module_instance(root) then rawset(root, "_paths_assigned", true) end
  local function visit(t, path)
    seen[t] = true
    if on.module then on.module(t, path) end
    if assign and path and is_module_instance(t) then rawset(t, "_path", path) end
    local prefix = path and (path .. ".") or ""
    local declared = {}
    local params = get_field(t, "_params")
    if type(params) == "table" then
      for _, k in ipairs(params) do
        declared[k] = true
        local v = rawget(t, k)
        if lt.is_tensor(v) and not seen[v] then
          seen[v] = true
          first[v] = prefix .. k
          if on.param then on.param(prefix .. k, v) end
        elseif lt.is_tensor(v) then
          again(prefix .. k, v)
        end
      end
    end
    local buffers = get_field(t, "_buffers")
    if type(buffers) == "table" then
      for _, k in ipairs(buffers) do
        declared[k] = true
        local v = rawget(t, k)
        if lt.is_tensor(v) and not seen[v] then
          seen[v] = true
          first[v] = prefix .. k
          if on.buffer then on.buffer(prefix .. k, v, t, k) end
        elseif lt.is_tensor(v) then
          again(prefix .. k, v)
        end
      end
    end
    for _, k in ipairs(sorted_keys(t)) do
      if not declared[k] then
        local v = rawget(t, k)
        if lt.is_tensor(v) then
          if not seen[v] and ((v:requires_grad() and v:is_leaf()) or frozen[v]) then
            seen[v] = true
            first[v] = prefix .. k
            if on.param then on.param(prefix .. k, v) end
          else
            again(prefix .. k, v)
          end
        elseif type(v) == "table" and not seen[v] then
          local enter = classify(v)
          if enter then visit(v, prefix .. child_name(t, k)) end
        end
      end
    end
  end
  visit(root, nil)
end

-- ---- functions over any table (the Trainer and optimizers use these on plain model tables) --------

local M = {}

function M.named_parameters(root)
  local named, order = {}, {}
  walk(root, { param = function(name, t) named[name] = t; order[#order + 1] = name end })
  return named, order
end

function M.parameters(root)
  local list = {}
  walk(root, { param = function(_, t) list[#list + 1] = t end })
  return list
end

function M.named_buffers(root)
  local named, order = {}, {}
  walk(root, { buffer = function(name, t) named[name] = t; order[#order + 1] = name end })
  return named, order
end

function M.buffers(root)
  local list = {}
  walk(root, { buffer = function(_, t) list[#list + 1] = t end })
  return list
end

--- Every module in the tree (root first, pre-order), with their paths: list, paths.
function M.modules(root)
  local list, paths = {}, {}
  walk(root, { module = function(t, path)
    local _, is_mod = classify(t)
    if is_mod or t == root then list[#list + 1] = t; paths[#list] = path end
  end })
  return list, paths
end

--- Sets `_path` on every Module instance below root (used in error messages). Every walk from a root
--- does it; this is the walk with nothing else to do.
function M.assign_paths(root)
  walk(root, {})
end

function M.train(root, mode)
  if mode == nil then mode = true end
  for _, m in ipairs((M.modules(root))) do rawset(m, "training", mode and true or false) end
  return root
end

function M.zero_grad(root, set_to_none)
  for _, p in ipairs(M.parameters(root)) do p:zero_grad(set_to_none) end
end

-- One value, as torch's: `m:load_state_dict(other:state_dict())` must not pass a second result as options.
-- A tied tensor is listed under each name that holds it (the same storage: saving writes each name).
function M.state_dict(root)
  local sd = {}
  local function put(name, t) sd[name] = t:detach() end
  walk(root, { param = put, buffer = put, tied = put })
  return sd
end

-- The names of state_dict(root) in PyTorch's order (parameters and buffers as registered, depth first; a
-- tied tensor's later names where the walk meets them).
function M.state_dict_keys(root)
  local order = {}
  local function add(name) order[#order + 1] = name end
  walk(root, { param = add, buffer = add, tied = add })
  return order
end

local function quoted_list(names)
  table.sort(names)
  local q = {}
  for i, n in ipairs(names) do q[i] = '"' .. n .. '"' end
  return table.concat(q, ", ")
end

-- Files saved by earlier lutra versions under names that have since changed: a module class may define
-- _legacy_state_dict_keys(self, sd, prefix) -> {old local name = new local name} (or nil when sd is not in its
-- old layout). The keys are renamed all at once per module, in a copy (the caller's table stays as it was).
local function upgrade_legacy_keys(root, sd)
  local out = sd
  walk(root, { module = function(t, path)
    local f = is_module_instance(t) and get_field(t, "_legacy_state_dict_keys")
    if type(f) ~= "function" then return end
    local prefix = path and (path .. ".") or ""
    local map = f(t, out, prefix)
    if not map then return end
    if out == sd then
      out = {}
      for k, v in pairs(sd) do out[k] = v end
    end
    local moved = {}
    for old, new in pairs(map) do
      moved[prefix .. new] = out[prefix .. old]
      out[prefix .. old] = nil
    end
    for k, v in pairs(moved) do out[k] = v end
  end })
  return out
end

function M.load_state_dict(root, sd, opts)
  if type(sd) ~= "table" then error("load_state_dict: expected a table of tensors, got " .. type(sd), 2) end
  opts = require("lutra.utils.check").check_options("load_state_dict", opts, { strict = "boolean" })
  sd = upgrade_legacy_keys(root, sd)
  local strict = opts.strict ~= false
  local own, order, names_of = {}, {}, {}
  local function add(name, t)
    own[name] = t
    order[#order + 1] = name
    names_of[t] = names_of[t] or {}
    table.insert(names_of[t], name)
  end
  local optional = {} -- names of buffers an older file may lack (_optional_buffers)
  walk(root, { param = add, tied = add, buffer = function(name, t, owner, key)
    add(name, t)
    local opt = get_field(owner, "_optional_buffers")
    optional[name] = type(opt) == "table" and opt[key] == true
  end })
  -- a tied tensor is missing only when none of its names is in sd (a file written by a saver that keeps
  -- one name per storage, as safetensors' save_model, loads strict-clean and keeps the tie)
  local function found_elsewhere(t)
    for _, n in ipairs(names_of[t]) do if sd[n] ~= nil then return true end end
    return false
  end
  local missing, unexpected = {}, {}
  for _, name in ipairs(order) do
    local v = sd[name]
    if v == nil then
      if not found_elsewhere(own[name]) and not optional[name] then missing[#missing + 1] = name end
    elseif not lt.is_tensor(v) then
      error(string.format("load_state_dict: entry %s is a %s, expected a tensor", name, type(v)), 2)
    else
      local t = own[name]
      local ss, ts = v:shape(), t:shape()
      local same = #ss == #ts
      for i = 1, #ss do same = same and ss[i] == ts[i] end
      if not same then
        error(string.format("load_state_dict: size mismatch for %s: copying a tensor of shape %s from the state_dict, " ..
          "the shape in the current model is %s", name, v:shape_str(), t:shape_str()), 2)
      end
    end
  end
  for name in pairs(sd) do
    if own[name] == nil then unexpected[#unexpected + 1] = tostring(name) end
  end
  if strict and (#missing > 0 or #unexpected > 0) then
    local parts = {}
    if #missing > 0 then parts[#parts + 1] = "missing key(s) in state_dict: " .. quoted_list(missing) end
    if #unexpected > 0 then parts[#parts + 1] = "unexpected key(s) in state_dict: " .. quoted_list(unexpected) end
    error("load_state_dict: " .. table.concat(parts, "; ") .. " (pass {strict=false} to load the rest)", 2)
  end
  lt.no_grad(function()
    for _, name in ipairs(order) do
      local v = sd[name]
      if v ~= nil then own[name]:copy_(v) end
    end
  end)
  return { missing_keys = missing, unexpected_keys = unexpected }
end

--- The direct sub-modules of t, in walk order, with their keys: list, keys.
function M.children(t)
  local list, keys = {}, {}
  local seen = { [t] = true }
  local function scan(tbl, prefix)
    for _, k in ipairs(sorted_keys(tbl)) do
      local v = rawget(tbl, k)
      if type(v) == "table" and not seen[v] then
        local enter, is_mod = classify(v)
        if is_mod then
          seen[v] = true
          list[#list + 1] = v; keys[#list] = prefix .. child_name(tbl, k)
        elseif enter then
          seen[v] = true
          scan(v, prefix .. child_name(tbl, k) .. ".")
        end
      end
    end
  end
  scan(t, "")
  return list, keys
end

M.walk = walk
M.is_module_instance = is_module_instance

-- ---- the Module class ------------------------------------------------------------------------------

local function indent(s) return (s:gsub("\n", "\n  ")) end

--- One-line description: "Linear(784 -> 512)".
function Module:short_repr()
  local mt = getmetatable(self)
  local extra = self.extra_repr and self:extra_repr() or ""
  return (mt and mt.__name or "Module") .. "(" .. extra .. ")"
end

function Module:__tostring()
  local kids, keys = M.children(self)
  if #kids == 0 then return self:short_repr() end
  local mt = getmetatable(self)
  local extra = self.extra_repr and self:extra_repr() or ""
  local lines = { (mt and mt.__name or "Module") .. "(" .. extra }
  for i, k in ipairs(kids) do
    lines[#lines + 1] = "  (" .. keys[i] .. "): " .. indent(tostring(k))
  end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

--- Raises "in <path> <Module(...)>: msg", or "<Module(...)>: msg" when the module has no path.
function Module:fail(msg)
  local path = rawget(self, "_path")
  if path then error("in " .. path .. " " .. self:short_repr() .. ": " .. msg, 0) end
  error(self:short_repr() .. ": " .. msg, 0)
end

function Module:__call(...)
  if rawget(self, "_path") == nil and not rawget(self, "_paths_assigned") then M.assign_paths(self) end
  return self:forward(...)
end

function Module:forward()
  error(self:short_repr() .. ": forward is not implemented (define forward(self, input) in the module)", 2)
end

function Module:parameters() return M.parameters(self) end
function Module:named_parameters() return M.named_parameters(self) end
function Module:buffers() return M.buffers(self) end
function Module:named_buffers() return M.named_buffers(self) end
function Module:state_dict() return M.state_dict(self) end
function Module:load_state_dict(sd, opts) return M.load_state_dict(self, sd, opts) end
function Module:zero_grad(set_to_none) return M.zero_grad(self, set_to_none) end
function Module:children() return (M.children(self)) end
function Module:named_children() return M.children(self) end
function Module:modules() return (M.modules(self)) end
function Module:train(mode) return M.train(self, mode) end
function Module:eval() return M.train(self, false) end

-- every float tensor of root (parameters, buffers, any other tensor field of its modules) converted to dtype in
-- place of the old one: a parameter stays a leaf that requires grad (and frozen if it was), tied tensors stay
-- tied; int64 buffers (counters, indices) keep their dtype, as PyTorch's module.to(dtype) does
local function convert_floats(root, dtype)
  local done = {}
  walk(root, { module = function(t)
    for k, v in pairs(t) do
      if lt.is_tensor(v) and v:dtype() ~= "int64" and v:dtype() ~= dtype then
        local new = done[v]
        if not new then
          new = v:detach():type(dtype)
          if v:requires_grad() then new:requires_grad(true) end
          if frozen[v] then frozen[new] = true end
          done[v] = new
        end
        rawset(t, k, new)
      end
    end
  end })
  return root
end

--- m:to(dtype | device | {dtype = ..., device = "cpu"}): m with every float parameter and buffer converted to
--- dtype ("float32"/"float", "float64"/"double"); "cpu" is lutra's only device (a no-op). Returns m.
local FLOAT = { float32 = "float32", float = "float32", float64 = "float64", double = "float64" }
local DTYPES = { float16 = true, half = true, bfloat16 = true, int64 = true, long = true, int32 = true, int = true,
  int8 = true, uint8 = true, bool = true }
function Module:to(...)
  local n = select("#", ...)
  if n == 0 then error("Module:to: expected a dtype or a device (\"float32\", \"float64\", \"cpu\")", 2) end
  local dtype
  for i = 1, n do
    local a = select(i, ...)
    if type(a) == "table" and not lt.is_tensor(a) then
      for k in pairs(a) do
        if k ~= "dtype" and k ~= "device" then
          error("Module:to: unknown option '" .. tostring(k) .. "' (known: dtype, device)", 2)
        end
      end
      if a.device ~= nil and a.device ~= "cpu" then
        error("Module:to: device '" .. tostring(a.device) .. "' is not available: lutra runs on the CPU (\"cpu\")", 2)
      end
      a = a.dtype
      if a == nil then a = "cpu" end
    elseif lt.is_tensor(a) then
      a = a:dtype()
    end
    if type(a) ~= "string" then
      error("Module:to: expected a dtype or device name (\"float32\", \"float64\", \"cpu\"), got a " .. type(a), 2)
    elseif FLOAT[a] then
      dtype = FLOAT[a]
    elseif a ~= "cpu" then
      if DTYPES[a] then
        error("Module:to: dtype '" .. a .. "' is not supported: parameters are float32 or float64", 2)
      end
      error("Module:to: device '" .. a .. "' is not available: lutra runs on the CPU (\"cpu\")", 2)
    end
  end
  if dtype then convert_floats(self, dtype) end
  return self
end

--- m:double() / m:float(): m:to("float64") / m:to("float32")
function Module:double() return convert_floats(self, "float64") end
function Module:float() return convert_floats(self, "float32") end

-- ---- Torch7: getParameters ----------------------------------------------------------------------------------

-- whether the flat pair of an earlier call still holds every parameter of root, in order; their gradients are
-- linked to the flat grads again (zero_grad(true) drops a .grad: the next backward would make a new one)
local function flat_still_holds(flat, list)
  if not flat or #flat.views ~= #list then return false end
  for i, p in ipairs(list) do
    if flat.views[i] ~= p then return false end
  end
  lt.no_grad(function()
    for i, p in ipairs(list) do
      local g, view = p.grad, flat.grad_views[i]
      if g then view:copy_(g) else view:zero_() end
      p.grad = view
    end
  end)
  return true
end

--- m:getParameters() -> params, grads: Torch7's flat views. params is one 1-D tensor holding every parameter of m
--- (m:parameters()'s order) and grads one holding their gradients; each parameter field of m (and of its
--- sub-modules, tied fields included) becomes a view into params, its .grad a view into grads, so updating params
--- in place updates the model and backward accumulates into grads. Called again while the parameters are those
--- views, it returns the same two tensors; after the model changed (a parameter replaced or added) it flattens
--- anew, and tensors from the earlier call no longer follow the model. Call it before building an optimizer over
--- m:parameters() (the optimizer holds the tensors it was given).
function Module:getParameters()
  local list = M.parameters(self)
  local flat = rawget(self, "_flat_parameters")
  if flat_still_holds(flat, list) then return flat.params, flat.grads end
  local n = 0
  for _, p in ipairs(list) do n = n + p:numel() end
  local params, grads = lt.zeros(n), lt.zeros(n)
  local views, grad_views, new_of = {}, {}, {}
  local offset = 1
  lt.no_grad(function()
    for i, p in ipairs(list) do
      local k = p:numel()
      local v = params:narrow(1, offset, k):view(p:shape())
      v:copy_(p)
      local g = grads:narrow(1, offset, k):view(p:shape())
      if p.grad then g:copy_(p.grad) end
      views[i], grad_views[i], new_of[p] = v, g, v
      offset = offset + k
    end
  end)
  for i, p in ipairs(list) do
    local v = views[i]
    if frozen[p] then frozen[v] = true else v:requires_grad(true) end
    v.grad = grad_views[i]
  end
  -- every field that held a parameter now holds its view (the tables the walk visits: modules and plain tables)
  walk(self, { module = function(t)
    for k, x in pairs(t) do
      if lt.is_tensor(x) and new_of[x] then rawset(t, k, new_of[x]) end
    end
  end })
  rawset(self, "_flat_parameters", { params = params, grads = grads, views = views, grad_views = grad_views })
  return params, grads
end

--- Number of parameter elements.
function Module:num_parameters()
  local n = 0
  for _, p in ipairs(self:parameters()) do n = n + p:numel() end
  return n
end

-- PyTorch nn.Module's methods that lutra's modules lack: looking one up (m:cuda()) is an error naming the class,
-- as a tensor's missing method is, instead of "attempt to call method 'cuda' (a nil value)". Only these names: any
-- other missing key is nil, as module code tests fields (`if self.bias then`).
local TORCH_ONLY = {}
for name in ([[add_module bfloat16 cpu cuda double float get_buffer get_extra_state get_parameter get_submodule half
  ipu named_modules register_backward_hook register_buffer register_forward_hook register_forward_pre_hook
  register_full_backward_hook register_load_state_dict_post_hook register_module register_parameter set_extra_state
  share_memory to_empty xpu]]):gmatch("%S+") do
  TORCH_ONLY[name] = true
end

-- (a function of its own: lt.help reads the tables __index closes over as lazy names)
local function check_torch_only(cls, k)
  if TORCH_ONLY[k] then
    error(string.format("%s has no method '%s' (PyTorch's nn.Module has it; lutra's modules do not)",
      rawget(cls, "__name") or "Module", k), 3)
  end
end

local class_mt = {}
-- a class's missing key: looked up along the chain of super classes (cls is the class first asked)
class_mt.__index = function(cls, k)
  local c = rawget(cls, "super")
  while c ~= nil do
    local v = rawget(c, k)
    if v ~= nil then return v end
    if getmetatable(c) ~= class_mt then return c[k] end -- a base that is not a lutra class
    c = rawget(c, "super")
  end
  check_torch_only(cls, k)
  return nil
end
-- The arguments of a class with PyTorch's signature (cls._signature, lua/lutra/utils/signatures.lua): PyTorch's positional
-- values and the options table merged by name (util.merge_positional), then handed to init as its `pos` leading
-- arguments and an options table of the rest (which init checks). An init without options (sig.no_options)
-- gets none: what is left over is an unknown option.
local function signature_args(cls, sig, ...)
  local all = util.merge_positional(cls.__name, sig, 3, ...) -- 3: here, __call, the caller
  local args = {}
  for i = 1, sig.pos do
    args[i] = all[sig[i]]
    all[sig[i]] = nil
  end
  if sig.no_options then
    local known = {}
    for _, n in ipairs(sig) do known[n] = true end
    util.check_options(cls.__name, all, known, 3)
    return unpack(args, 1, sig.pos)
  end
  args[sig.pos + 1] = all
  return unpack(args, 1, sig.pos + 1)
end

class_mt.__call = function(cls, ...)
  local o = setmetatable({ training = true }, cls)
  local init = cls.init
  if init then
    local sig = rawget(cls, "_signature")
    if sig then init(o, signature_args(cls, sig, ...)) else init(o, ...) end
  end
  return o
end
class_mt.__tostring = function(cls) return "lt.nn." .. cls.__name .. " (class)" end

--- m:class_name(): the name of m's class ("Conv2d"; a class made by Module:extend(name) has that name).
function Module:class_name()
  local mt = getmetatable(self)
  if mt == class_mt then return self.__name end -- asked of a class
  return mt and rawget(mt, "__name") or "Module"
end

local function is_class(c) return type(c) == "table" and getmetatable(c) == class_mt end

--- isinstance(m, cls): whether m is an instance of cls or of a class derived from it (PyTorch's isinstance);
--- cls may be a list of classes (any of them).
function M.isinstance(m, cls)
  if type(cls) == "table" and not is_class(cls) then
    for i, c in ipairs(cls) do
      if not is_class(c) then
        error(string.format("isinstance: class %d of the list is a %s, expected a module class (e.g. lt.nn.Conv2d)", i,
          type(c)), 2)
      end
      if M.isinstance(m, c) then return true end
    end
    return false
  end
  if not is_class(cls) then
    error("isinstance: argument #2 must be a module class (e.g. lt.nn.Conv2d) or a list of them, got " .. type(cls), 2)
  end
  if type(m) ~= "table" then return false end
  local c = getmetatable(m)
  if not is_class(c) then return false end
  while c ~= nil do
    if c == cls then return true end
    c = rawget(c, "super")
  end
  return false
end

--- A new module class deriving from self: `local Net = lt.nn.Module:extend("Net")`; define
--- Net:init(...) (the constructor) and Net:forward(...); `Net(...)` builds an instance.
function Module:extend(name)
  if type(name) ~= "string" then error("Module:extend: expected a class name string, got " .. type(name), 2) end
  local cls = { __name = name, super = self, __lutra_module = true }
  cls.__index = cls
  -- metamethods are looked up raw on the metatable, so each class carries its own copies
  cls.__call = rawget(self, "__call") or Module.__call
  cls.__tostring = rawget(self, "__tostring") or Module.__tostring
  return setmetatable(cls, class_mt)
end

-- ---- lightning: apply, requires_grad_, freeze, unfreeze, save_hyperparameters (docs/reference/nn.md)

--- m:apply(fn): fn(module) on every sub-module, children first, then m itself (torch's post-order); returns m.
function Module:apply(fn)
  if type(fn) ~= "function" then error("Module:apply: expected a function, got " .. type(fn), 2) end
  local function visit(t)
    for _, c in ipairs((M.children(t))) do visit(c) end
    fn(t)
  end
  visit(self)
  return self
end

--- Sets requires_grad on every parameter of root (a Module or a plain model table). Off: the parameter keeps
--- its place in parameters() and state_dict(), its grad is dropped, backward gives it none and optimizers
--- (which skip parameters without a grad) leave it alone.
function M.requires_grad_(root, on)
  if on == nil then on = true end
  if type(on) ~= "boolean" then error("requires_grad_: expected a boolean, got " .. type(on), 3) end
  for _, p in ipairs(M.parameters(root)) do
    if on then
      frozen[p] = nil
    else
      frozen[p] = true
      p:zero_grad(true)
    end
    p:requires_grad(on)
  end
  return root
end

function Module:requires_grad_(on) return M.requires_grad_(self, on) end

--- m:freeze(): every parameter off (requires_grad_(false)) and eval mode, as LightningModule.freeze.
function Module:freeze()
  M.requires_grad_(self, false)
  return M.train(self, false)
end

--- m:unfreeze(): every parameter on and train mode, as LightningModule.unfreeze.
function Module:unfreeze()
  M.requires_grad_(self, true)
  return M.train(self, true)
end

M.is_frozen = function(p) return frozen[p] == true end

-- a hyper-parameter value: a number, string, boolean or a plain table of them (what hparams.yaml and a
-- checkpoint's JSON can hold)
local function hparam_copy(v, key, depth)
  local tv = type(v)
  if tv == "number" or tv == "string" or tv == "boolean" then return v end
  if tv == "table" and getmetatable(v) == nil and depth < 16 then
    local t = {}
    for k, x in pairs(v) do t[k] = hparam_copy(x, key .. "." .. tostring(k), depth + 1) end
    return t
  end
  error(string.format("save_hyperparameters: '%s' is a %s; hyper-parameters are numbers, strings, booleans " ..
    "and tables of them", key, lt.is_tensor(v) and "tensor" or tv), 4)
end

--- save_hyperparameters(model, ...): model.hparams from a table (`{lr = 0.1, hidden = 64}`) or from the
--- model's own fields named (`"lr", "hidden"`), merged into what is there; returns model.hparams. The trainer
--- writes them into checkpoints (hyper_parameters) and the loggers' hparams.yaml.
function M.save_hyperparameters(model, ...)
  local n = select("#", ...)
  local hp = rawget(model, "hparams")
  if type(hp) ~= "table" then hp = {} end
  if n == 0 then error("save_hyperparameters: give a table of hyper-parameters or the names of fields", 3) end
  for i = 1, n do
    local a = select(i, ...)
    if type(a) == "table" then
      for k, v in pairs(a) do
        if type(k) ~= "string" then error("save_hyperparameters: a table's keys must be names, got " .. type(k), 3) end
        hp[k] = hparam_copy(v, k, 0)
      end
    elseif type(a) == "string" then
      local v = model[a]
      if v == nil then error(string.format("save_hyperparameters: the model has no field '%s'", a), 3) end
      hp[a] = hparam_copy(v, a, 0)
    else
      error(string.format("save_hyperparameters: argument %d must be a table or a field name, got %s", i, type(a)), 3)
    end
  end
  rawset(model, "hparams", hp)
  return hp
end

function Module:save_hyperparameters(...) return M.save_hyperparameters(self, ...) end

--- Cls:load_from_checkpoint(path): a new Cls(hparams) built from the checkpoint's hyper_parameters (as
--- Lightning's), with the checkpoint's weights loaded; model.hparams is restored.
function Module:load_from_checkpoint(path)
  if type(path) ~= "string" then error("load_from_checkpoint: expected a file path (string), got " .. type(path), 2) end
  local ck = require("lutra.checkpoint").read(path)
  local hp = ck.hyper_parameters
  local m = self(hp)
  if type(hp) == "table" then rawset(m, "hparams", hparam_copy(hp, "hyper_parameters", 0)) end
  require("lutra.checkpoint").load(path, m)
  return m
end

setmetatable(Module, class_mt)

M.Module = Module
return M
