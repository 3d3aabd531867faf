-- infer/init.lua — lt.infer: a model compiled into a fixed list of C kernel calls for fast, allocation-free
-- inference on inputs of one shape (docs/reference/infer.md), and its export as plain Lua (infer/export.lua).
--
--   local plan = lt.infer.compile(model, lt.zeros(1, 32))
--   local y = plan(x)              -- a tensor owned by the plan: the next call overwrites it
--   plan:run(inputs, outputs)      -- Lua numbers in, Lua numbers out: no allocation per call
--
-- Compiling walks the module tree (Sequential and ModuleList in order) and turns each module lutra knows into
-- steps (infer/steps.lua). A module with a forward of its own (a user's class, or a forward set on an instance)
-- is traced op by op (infer/trace.lua); a forward that reads its tensors' values (and so may branch on the data)
-- is refused: a plan replays one fixed list of kernels.
local lt = require "lutra"
local core = require "lutra.core"
local S = require "lutra.infer.steps"
local T = require "lutra.infer.trace"

local M = {}

local Plan = {}
Plan.__index = Plan

local function class_of(m)
  local cls = getmetatable(m)
  return type(cls) == "table" and rawget(cls, "__name") or nil
end

local SUPPORTED = "Sequential, ModuleList, Linear, ReLU, Tanh, Sigmoid, GELU, LeakyReLU, SiLU, ELU, Softplus, " ..
  "Hardtanh, PReLU, Mish, Hardswish, Hardsigmoid, Softmax, LogSoftmax, LayerNorm, GroupNorm, InstanceNorm1d/2d, " ..
  "BatchNorm1d/2d (eval), Embedding, Conv1d/2d, ConvTranspose2d, MaxPool1d/2d, AvgPool1d/2d, " ..
  "AdaptiveAvgPool1d/2d, AdaptiveMaxPool1d/2d, Dropout (eval), Flatten, Unflatten, Identity, LSTMCell, GRUCell, " ..
  "RNNCell, LSTM, GRU, RNN (stepwise, or a whole sequence per call), MultiheadAttention, " ..
  "TransformerEncoderLayer, TransformerDecoderLayer, TransformerEncoder, TransformerDecoder"

local function walk(m, st, ...)
  local name = class_of(m)
  if type(m) ~= "table" or not lt.nn.is_module(m) then
    error(string.format("lt.infer.compile: %s is a %s, expected a module", st.path, type(m)), 0)
  end
  local ok, lib = pcall(function() return lt.nn[name] end)
  local library = ok and lib == getmetatable(m)
  -- a forward of its own (a user's class, or one set on an instance) is traced op by op (infer/trace.lua)
  local own = st.patched[m] -- while a parent is traced, its sub-modules' forwards are stand-ins; the saved one counts
  if own == nil then own = rawget(m, "forward") elseif own == true then own = nil end
  if not library or own ~= nil or T.TRACED[name] then return T.trace(m, st, walk, ...) end
  if select("#", ...) > 0 then S.fail(st, m, "is called with several arguments, which lt.infer cannot compile") end
  if not (name == "Sequential" or name == "ModuleList" or S[name]) then
    S.fail(st, m, "lt.infer does not support this module; supported: " .. SUPPORTED)
  end
  if name == "Sequential" or name == "ModuleList" then
    local path = st.path
    for i = 1, #m do
      st.path = path .. "." .. i
      walk(m[i], st)
    end
    st.path = path
    return
  end
  S[name](m, st)
end

local OPTS = { batch = "number" }

local function build(self)
  local x = self._example
  local c = core._infer_new()
  local st = { plan = c, buf = c:buffer(x:numel()), value = x, path = "model", steps = {}, patched = {} }
  self._in_buf = st.buf
  lt.no_grad(walk, self._model, st)
  self._c, self._steps, self._stateful = c, st.steps, st.stateful
  self._out_buf = st.buf
  self.in_shape, self.out_shape = x:shape(), st.value:shape()
  self.input = c:view(self._in_buf, self.in_shape)
  self.output = c:view(self._out_buf, self.out_shape)
end

--- lt.infer.compile(model, example_input[, {batch = n}]) -> plan, for inputs of example_input's shape (with its
--- first dim set to n when batch is given).
function M.compile(model, example, opts)
  if type(model) ~= "table" or not lt.nn.is_module(model) then
    error("lt.infer.compile: argument #1 must be a module, got " .. type(model), 2)
  end
  if not lt.is_tensor(example) then
    error("lt.infer.compile: argument #2 must be an example input tensor, got " .. type(example), 2)
  end
  opts = opts or {}
  if type(opts) ~= "table" then error("lt.infer.compile: argument #3 must be an options table, got " .. type(opts), 2) end
  for k, v in pairs(opts) do
    if not OPTS[k] then error("lt.infer.compile: unknown option " .. tostring(k) .. " (options: batch)", 2) end
    if type(v) ~= OPTS[k] then error("lt.infer.compile: option " .. k .. " must be a " .. OPTS[k], 2) end
  end
  if example:dtype() ~= "float32" and example:dtype() ~= "int64" then
    error("lt.infer.compile: the example input is " .. example:dtype() .. ", expected float32 (or int64 indices)", 2)
  end
  example = example:detach():contiguous()
  if opts.batch then
    local b = opts.batch
    if b < 1 or b ~= math.floor(b) then error("lt.infer.compile: option batch must be an integer >= 1, got " .. b, 2) end
    if example:dim() == 0 then error("lt.infer.compile: option batch needs an example with a batch dim", 2) end
    local shape = example:shape()
    shape[1] = b
    example = example:narrow(1, 1, 1):expand(shape):contiguous()
  end
  local self = setmetatable({ _model = model, _example = example:clone() }, Plan)
  build(self)
  return self
end

--- plan(x) -> y: runs the plan on tensor x (the compiled shape's number of values, float32 or int64); y is the
--- plan's output tensor, overwritten by the next call (clone it to keep it).
function Plan:__call(x)
  self._c:run_tensor(x, self._in_buf)
  return self.output
end

--- plan:run(inputs, outputs) -> outputs: inputs a Lua array of numbers (row-major, the compiled shape's count) or a
--- tensor; writes the outputs as Lua numbers into outputs[1..n]. Allocates nothing once outputs has its n slots.
function Plan:run(inputs, outputs)
  self._c:run_table(inputs, outputs, self._in_buf, self._out_buf)
  return outputs
end

--- plan:refresh(): rebuilds the plan from the model's current modules. Needed only after a module's tensor was
--- replaced by another one (m.weight = t, m:double(), a structural change); in-place changes of the weights
--- (optimizer steps, loads) are seen by the plan without it, as it shares the model's tensors.
function Plan:refresh()
  self._c:free()
  build(self)
end

--- plan:reset_state(): zeroes the recurrent state (h, c) that LSTMCell/GRUCell/RNNCell steps carry between calls.
function Plan:reset_state() self._c:reset_state() end

function Plan:__tostring()
  return string.format("lt.infer plan: %d steps, [%s] -> [%s]", #self._steps, table.concat(self.in_shape, " x "),
    table.concat(self.out_shape, " x "))
end

--- lt.infer.export_lua(plan_or_model, path[, example_input]): writes a self-contained Lua file (infer/export.lua).
function M.export_lua(p, path, example)
  if getmetatable(p) ~= Plan then
    if type(p) ~= "table" or not lt.nn.is_module(p) then
      error("lt.infer.export_lua: argument #1 must be a plan or a module, got " .. type(p), 2)
    end
    if not lt.is_tensor(example) then
      error("lt.infer.export_lua: exporting a module needs an example input tensor as argument #3", 2)
    end
    p = M.compile(p, example)
  end
  if type(path) ~= "string" then error("lt.infer.export_lua: argument #2 must be a path string, got " .. type(path), 2) end
  return require("lutra.infer.export").write(p, path)
end

M._Plan = Plan
return require("lutra.names").strict(M, "lt.infer")
