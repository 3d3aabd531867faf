-- infer/trace.lua — a module with a forward of its own, traced op by op into plan steps.
--
-- The forward runs once with a symbolic value in place of its input tensor: a Sym holds the plan buffer of a value
-- and the real tensor computed alongside (from the example input, so shapes come from lutra's own ops). Each
-- supported operation on a Sym computes the real result and appends the kernel step that recomputes it; calls of
-- the module's sub-modules are compiled like any module (infer/steps.lua, or traced in turn). A forward can branch
-- on a tensor's data only by reading it (`item`, `totable`, a comparison, `tostring`): those raise, so a
-- data-dependent forward is refused at compile time, never traced down one branch. Branches on plain Lua state
-- (self.training, an option) are fixed in the plan as the trace took them. Any operation not supported here is
-- an error naming it.
--
-- A view that changes the order of the values (transpose, permute, narrow, chunk, expand: infer/trace_ops.lua)
-- makes no step by itself: its Sym keeps the buffer and the real view, whose strides and offset place it in the
-- buffer (`base` is the real tensor laid out as the buffer is). The first step that reads it copies it into a
-- contiguous buffer of its own with one strided copy.
local lt = require "lutra"
local core = require "lutra.core"
local S = require "lutra.infer.steps"
local compat = require "lutra._compat"
local pack, unpack = compat.pack, compat.unpack

local T = {}

local Sym = {}
local methods = {}
Sym.__index = function(self, k)
  local f = methods[k]
  if f then return f end
  local st = rawget(self, "st")
  if type(k) == "number" then
    S.fail(st, st.module, "its forward indexes its input (x[" .. k .. "]), which lt.infer cannot trace")
  end
  S.fail(st, st.module, "its forward uses x:" .. tostring(k) .. ", which lt.infer cannot trace (supported: " ..
    "+ - * / with a number or a tensor, relu, tanh, sigmoid, gelu, leaky_relu, exp, log, abs, sqrt, neg, clamp, " ..
    "softmax, log_softmax, view, reshape, flatten, squeeze, unsqueeze, contiguous, transpose, t, permute, narrow, " ..
    "select, chunk, split, unbind, expand, matmul, mean, sum, size, shape, dim, numel, lt.cat, lt.stack, " ..
    "lt.matmul, lt.linear, lt.F.scaled_dot_product_attention, and calls of its sub-modules)")
end

local function is_sym(v) return getmetatable(v) == Sym end
T.is_sym = is_sym
T.methods = methods

-- a value held in order in buffer buf (a result that is not contiguous is seen through its contiguous copy)
local function sym(st, buf, value)
  if not value:is_contiguous() then value = value:contiguous() end
  return setmetatable({ st = st, buf = buf, value = value, base = value }, Sym)
end
T.sym = sym

-- a view v of x's real value (sharing its storage): the same buffer, read through v's strides
local function view(x, v) return setmetatable({ st = x.st, buf = x.buf, value = v, base = x.base }, Sym) end
T.view = view

-- v's offset in the buffer, or nil when v is the buffer's values in order
local function offset(x)
  local off = core._infer_offset(x.value) - core._infer_offset(x.base)
  if off == 0 and x.value:is_contiguous() and x.value:numel() == x.base:numel() then return nil end
  return off
end
T.offset = offset

-- dims of size 1 dropped and neighbours that run on in both layouts merged, so most copies fit the C step's 4 dims
local function collapse(shape, sin, sout)
  local n, a, b = {}, {}, {}
  for d = 1, #shape do
    if shape[d] ~= 1 then
      local k = #n
      if k > 0 and a[k] == sin[d] * shape[d] and b[k] == sout[d] * shape[d] then
        n[k], a[k], b[k] = n[k] * shape[d], sin[d], sout[d]
      else
        n[k + 1], a[k + 1], b[k + 1] = shape[d], sin[d], sout[d]
      end
    end
  end
  if #n == 0 then n[1], a[1], b[1] = 1, 1, 1 end
  return n, a, b
end

local function contiguous_strides(shape)
  local st, s = {}, 1
  for d = #shape, 1, -1 do st[d], s = s, s * shape[d] end
  return st
end
T.contiguous_strides = contiguous_strides

--- Appends a strided copy of the Sym x's values (in x.value's order) into buffer `out` at out_off with strides
--- sout (default: a new contiguous buffer); returns the output buffer.
function T.copy(x, out, out_off, sout, out_value)
  local st = x.st
  local v = x.value
  local shape = v:shape()
  if #shape == 0 then shape = { 1 } end
  local sin = v:dim() == 0 and { 1 } or v:stride()
  sout = sout or contiguous_strides(shape)
  local n, a, b = collapse(shape, sin, sout)
  if #n > 4 then
    S.fail(st, st.module, string.format("its forward reorders a %s value in more than 4 independent dims, which " ..
      "lt.infer cannot copy (reshape it to fewer dims first)", v:shape_str()))
  end
  local geo = { #n }
  for d = 1, 4 do geo[1 + d], geo[5 + d], geo[9 + d] = n[d] or 1, a[d] or 0, b[d] or 0 end
  geo[14], geo[15] = core._infer_offset(v) - core._infer_offset(x.base), out_off or 0
  local desc = { op = "strided", geo = geo, out = out }
  st.buf, st.value = x.buf, x.base
  local saved = st.path
  S.emit(st, st.module, out_value or v:contiguous(), desc)
  st.path = saved
  return desc.out
end

-- x with its values in order in a buffer: x itself, or a copy
local function materialize(x)
  if offset(x) == nil then return x end
  return sym(x.st, T.copy(x), x.value:contiguous())
end
T.materialize = materialize

-- a step reading x's buffer as it is (x may be a view the step knows how to read) into a new buffer holding y
function T.step_from(x, y, desc)
  local st = x.st
  st.buf, st.value = x.buf, x.base
  local saved = st.path
  S.emit(st, st.module, y, desc)
  st.path = saved
  return sym(st, st.buf, y)
end

-- a step from the sym x's values (in order) into a new buffer holding y (the real result)
local function step(x, y, desc) return T.step_from(materialize(x), y, desc) end
T.step = step

local function refuse(st, what)
  S.fail(st, st.module, "its forward " .. what .. ", which depends on the data: lt.infer refuses a forward that " ..
    "reads tensor values (a plan replays one fixed list of kernels; it is not traced per branch)")
end

for _, k in ipairs { "item", "totable", "tolist", "data_ptr", "any", "all", "equal", "allclose" } do
  methods[k] = function(self) refuse(self.st, "reads its input's values (x:" .. k .. "())") end
end
Sym.__lt = function(a) refuse((is_sym(a) and a or {}).st, "compares tensors") end
Sym.__le = Sym.__lt
Sym.__eq = function() return false end -- identity only (a Sym is never equal to another value)
Sym.__tostring = function(self) refuse(self.st, "turns a tensor into a string") end
Sym.__len = function(self) return self.value:size(1) end

-- shapes are fixed in a plan: the real value answers
function methods.size(self, d) return self.value:size(d) end
function methods.shape(self) return self.value:shape() end
function methods.dim(self) return self.value:dim() end
function methods.numel(self) return self.value:numel() end
function methods.dtype(self) return self.value:dtype() end
function methods.shape_str(self) return self.value:shape_str() end

-- views: a view keeps the buffer (its strides say where its values are); reshape of a value not in order copies
local function view_of(name, reorders)
  return function(self, ...)
    if reorders then self = materialize(self) end
    return view(self, self.value[name](self.value, ...))
  end
end
for _, k in ipairs { "view", "flatten", "squeeze", "unsqueeze", "view_as" } do methods[k] = view_of(k, false) end
for _, k in ipairs { "reshape", "reshape_as" } do methods[k] = view_of(k, true) end
function methods.contiguous(self) return materialize(self) end

local function unary(name, act, a, b)
  return function(self)
    return step(self, self.value[name](self.value), { op = "act", act = act, n_in = self.value:numel(), a = a, b = b })
  end
end
methods.relu, methods.tanh, methods.sigmoid = unary("relu", "relu"), unary("tanh", "tanh"), unary("sigmoid", "sigmoid")
methods.exp, methods.log, methods.abs, methods.sqrt = unary("exp", "exp"), unary("log", "log"), unary("abs", "abs"),
  unary("sqrt", "sqrt")
methods.gelu = unary("gelu", "gelu")
function methods.neg(self)
  return step(self, -self.value, { op = "act", act = "affine", n_in = self.value:numel(), a = -1, b = 0 })
end
function methods.leaky_relu(self, slope)
  slope = slope or 0.01
  return step(self, self.value:leaky_relu(slope), { op = "act", act = "leaky_relu", n_in = self.value:numel(),
    a = slope })
end
function methods.clamp(self, lo, hi)
  if type(lo) ~= "number" and lo ~= nil or type(hi) ~= "number" and hi ~= nil then
    S.fail(self.st, self.st.module, "its forward clamps with tensor bounds, which lt.infer cannot trace")
  end
  return step(self, self.value:clamp(lo, hi), { op = "act", act = "hardtanh", n_in = self.value:numel(),
    a = lo or -math.huge, b = hi or math.huge })
end
methods.clip = methods.clamp

local function softmax(name, log)
  return function(self, dim)
    local shape = self.value:shape()
    local d = dim < 0 and #shape + dim + 1 or dim
    return step(self, self.value[name](self.value, dim), { op = "softmax", rows = S.prod(shape, 1, d - 1),
      n_in = shape[d], geo = { S.prod(shape, d + 1) }, a = log and 1 or 0 })
  end
end
methods.softmax, methods.log_softmax = softmax("softmax", false), softmax("log_softmax", true)

-- a op b with a Sym on either side, a number, or a tensor (a constant the plan shares, as it shares weights).
-- The smaller operand must repeat along the larger one (its shape a suffix of the other's, after leading 1s).
local OPS = { add = function(a, b) return a + b end, sub = function(a, b) return a - b end,
  mul = function(a, b) return a * b end, div = function(a, b) return a / b end }

local function suffix_of(small, big)
  local i, j = #small, #big
  while i >= 1 and small[i] == big[j] do i, j = i - 1, j - 1 end
  for k = 1, i do if small[k] ~= 1 then return false end end
  return true
end

local function size_of(v) return is_sym(v) and v.value:numel() or (lt.is_tensor(v) and v:numel()) or 0 end

local function binary(op)
  return function(a, b)
    local av, bv = is_sym(a) and a.value or a, is_sym(b) and b.value or b
    local st = (is_sym(a) and a or b).st
    -- x: the Sym the result is shaped like; other: the operand that repeats along it (or a number)
    local x, other, swapped
    if is_sym(a) and size_of(a) >= size_of(b) then
      x, other, swapped = a, b, false
    elseif is_sym(b) and size_of(b) >= size_of(a) then
      x, other, swapped = b, a, true
    else
      S.fail(st, st.module, "its forward broadcasts a tensor computed from its input over a larger constant tensor, " ..
        "which lt.infer cannot trace")
    end
    if is_sym(other) then other = materialize(other) end
    if type(other) ~= "number" and not is_sym(other) and not lt.is_tensor(other) then
      S.fail(st, st.module, "its forward applies " .. op .. " to a " .. type(other) .. ", which lt.infer cannot trace")
    end
    local y = OPS[op](av, bv)
    if type(other) == "number" then
      local A, B
      if op == "add" then
        A, B = 1, other
      elseif op == "mul" then
        A, B = other, 0
      elseif op == "sub" then
        A, B = swapped and -1 or 1, swapped and other or -other
      elseif not swapped then
        A, B = 1 / other, 0
      else
        return step(x, y, { op = "act", act = "rdiv", n_in = y:numel(), a = other })
      end
      return step(x, y, { op = "act", act = "affine", n_in = y:numel(), a = A, b = B })
    end
    local ov = is_sym(other) and other.value or other
    if not is_sym(other) and not ov:requires_grad() and y:numel() == x.value:numel() and
      not suffix_of(ov:shape(), x.value:shape()) then
      ov = ov:expand(x.value:shape()):contiguous() -- a mask: a constant of the plan, expanded once
    end
    if not suffix_of(ov:shape(), x.value:shape()) or y:numel() ~= x.value:numel() then
      S.fail(st, st.module, string.format("its forward broadcasts %s with %s; a plan repeats only a trailing block " ..
        "(such as a bias row)", (is_sym(a) and a.value or a):shape_str(), (is_sym(b) and b.value or b):shape_str()))
    end
    if not is_sym(other) and (ov:dtype() ~= "float32" or not ov:is_contiguous()) then
      S.fail(st, st.module, "its forward uses a constant tensor " .. ov:shape_str() .. " that is not a contiguous " ..
        "float32 tensor (the plan shares it, as it shares weights)")
    end
    return step(x, y, { op = "binary", act = op, n_in = y:numel(), n_out = ov:numel(), b = swapped and 1 or 0,
      geo = { is_sym(other) and other.buf or -1 }, t = { not is_sym(other) and ov or false } })
  end
end
Sym.__add, Sym.__sub, Sym.__mul, Sym.__div = binary "add", binary "sub", binary "mul", binary "div"
methods.add, methods.sub, methods.mul, methods.div = Sym.__add, Sym.__sub, Sym.__mul, Sym.__div
Sym.__unm = methods.neg

-- Library modules whose forward is made of traceable operations and sub-module calls: traced like a user's.
T.TRACED = { MultiheadAttention = true, TransformerEncoderLayer = true, TransformerDecoderLayer = true,
  TransformerEncoder = true, TransformerDecoder = true }

-- the arguments a module compiled on its own gets from the plan's one input
local OWN_ARGS = { MultiheadAttention = function(x) return x, x, x end } -- self-attention

-- lt.* functions that answer Syms while a forward is traced (infer/trace_ops.lua fills it: {table, key, wrap})
T.GLOBALS = {}

local function patch_globals()
  local saved = {}
  for i, g in ipairs(T.GLOBALS) do
    saved[i] = rawget(g[1], g[2])
    rawset(g[1], g[2], g[3](saved[i]))
  end
  return function() for i, g in ipairs(T.GLOBALS) do rawset(g[1], g[2], saved[i]) end end
end

-- the stand-in forward of a sub-module while its parent is traced: compiles the sub-module at the point it is called
local function stand_in(st, m, walk, path, names)
  return function(self, x, ...)
    if not is_sym(x) then
      S.fail(st, m, "its forward calls a sub-module (" .. self.__name .. ") with a " .. type(x) ..
        " instead of its input's value, which lt.infer cannot trace")
    end
    st.path = path .. "." .. (names[self] or self.__name)
    local more = pack(...)
    while more.n > 0 and more[more.n] == nil do more.n = more.n - 1 end -- f(mha(...)): mha's nil weights
    if more.n > 0 then
      local r = pack(walk(self, st, x, unpack(more, 1, more.n)))
      st.path = path
      return unpack(r, 1, r.n)
    end
    x = materialize(x)
    st.buf, st.value = x.buf, x.value
    walk(self, st)
    st.path = path
    return sym(st, st.buf, st.value)
  end
end

--- Runs m:forward on a Sym of the walk state's current value (or on the given arguments, Syms among them), with
--- every sub-module of m answering Syms by compiling itself (walk); leaves the first result's buffer and value in
--- the state and returns the results.
function T.trace(m, st, walk, ...)
  local own = st.patched[m] -- m itself answering Syms for its parent's trace: its own forward is the saved one
  local forward = own == nil and m.forward or (own == true and getmetatable(m).forward or own)
  local subs, names = {}, {}
  for k, c in pairs(m) do if type(c) == "table" and lt.nn.is_module(c) then names[c] = tostring(k) end end
  for _, c in ipairs(require("lutra.nn.module").modules(m)) do
    if c ~= m and not st.patched[c] then subs[#subs + 1] = c end
  end
  if T.TRACED[rawget(getmetatable(m), "__name") or false] and m.training then
    S.fail(st, m, "is in training mode (its dropout would draw at random); call model:eval() before compiling")
  end
  local path = st.path
  local linear_relu = {}
  for _, c in ipairs(subs) do
    st.patched[c] = rawget(c, "forward") or true
    rawset(c, "forward", stand_in(st, m, walk, path, names))
    if getmetatable(c) == lt.nn.Linear then -- Linear:forward_relu (the transformer's feed-forward) is two steps
      linear_relu[#linear_relu + 1] = c
      rawset(c, "forward_relu", function(self, x) return c.forward(self, x):relu() end)
    end
  end
  local args = { n = select("#", ...), ... }
  if args.n == 0 then
    local x = sym(st, st.buf, st.value)
    local cls = getmetatable(m)
    local f = type(cls) == "table" and OWN_ARGS[rawget(cls, "__name") or false]
    if f and lt.nn[rawget(cls, "__name")] == cls then args = { n = 3, f(x) } else args = { n = 1, x } end
  end
  local outer = st.module
  st.module = m
  local restore = st.depth == nil and patch_globals()
  st.depth = (st.depth or 0) + 1
  local res = pack(pcall(forward, m, unpack(args, 1, args.n)))
  st.depth = st.depth - 1
  if st.depth == 0 then st.depth = nil end
  if restore then restore() end
  st.module = outer
  for _, c in ipairs(subs) do
    local f = st.patched[c]
    rawset(c, "forward", f ~= true and f or nil)
    st.patched[c] = nil
  end
  for _, c in ipairs(linear_relu) do rawset(c, "forward_relu", nil) end
  st.path = path
  local ok, y = res[1], res[2]
  if not ok then
    y = tostring(y)
    if not y:find("^lt%.infer") then
      S.fail(st, m, "its forward failed while traced: " .. y .. " (lt.infer traces the methods and operators of " ..
        "its input, the lt.* functions it names among the supported ones, and calls of its sub-modules)")
    end
    error(y, 0)
  end
  if not is_sym(y) then
    S.fail(st, m, "its forward returned a " .. type(y) .. " that is not computed from its input (a plan returns one " ..
      "tensor computed from its input)")
  end
  y = materialize(y)
  st.buf, st.value = y.buf, y.value
  res[2] = y
  return unpack(res, 2, res.n)
end

require("lutra.infer.trace_ops")(T, S)

return T
