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
local lt = require "lutra"
local S = require "lutra.infer.steps"

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
    "softmax, log_softmax, view, reshape, flatten, squeeze, unsqueeze, contiguous, size, shape, dim, numel, " ..
    "and calls of its sub-modules)")
end

local function is_sym(v) return getmetatable(v) == Sym end
T.is_sym = is_sym

local function sym(st, buf, value) return setmetatable({ st = st, buf = buf, value = value }, Sym) end

-- a step from the sym x's buffer into a new buffer holding y (the real result)
local function step(x, y, desc)
  local st = x.st
  st.buf, st.value = x.buf, x.value
  local saved = st.path
  S.emit(st, st.module, y, desc)
  st.path = saved
  return sym(st, st.buf, y)
end

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

-- views of a contiguous buffer: the same data in the same order
local function view_of(name)
  return function(self, ...)
    local y = self.value[name](self.value, ...)
    return sym(self.st, self.buf, y:contiguous())
  end
end
for _, k in ipairs { "view", "reshape", "flatten", "squeeze", "unsqueeze", "view_as", "reshape_as" } do
  methods[k] = view_of(k)
end
function methods.contiguous(self) return self end

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

--- Runs m:forward on a Sym of the walk state's current value, with every sub-module of m answering Syms by
--- compiling itself (walk); leaves the result's buffer and value in the state.
function T.trace(m, st, walk)
  local own = st.patched[m] -- m itself answering Syms for its parent's trace: its own forward is the saved one
  local forward = own == nil and m.forward or (own == true and getmetatable(m).forward or own)
  local subs, names = {}, {}
  for k, c in pairs(m) do if type(c) == "table" and lt.nn.is_module(c) then names[c] = tostring(k) end end
  for _, c in ipairs(require("lutra.nn.module").modules(m)) do
    if c ~= m and not st.patched[c] then subs[#subs + 1] = c end
  end
  local path = st.path
  for _, c in ipairs(subs) do
    st.patched[c] = rawget(c, "forward") or true
    rawset(c, "forward", function(self, x, ...)
      if not is_sym(x) then
        S.fail(st, m, "its forward calls a sub-module (" .. self.__name .. ") with a " .. type(x) ..
          " instead of its input's value, which lt.infer cannot trace")
      end
      if select("#", ...) > 0 then S.fail(st, m, "its forward calls " .. self.__name .. " with several arguments") end
      st.buf, st.value = x.buf, x.value
      st.path = path .. "." .. (names[self] or self.__name)
      walk(self, st)
      st.path = path
      return sym(st, st.buf, st.value)
    end)
  end
  local outer = st.module
  st.module = m
  local ok, y = pcall(forward, m, sym(st, st.buf, st.value))
  st.module = outer
  for _, c in ipairs(subs) do
    local f = st.patched[c]
    rawset(c, "forward", f ~= true and f or nil)
    st.patched[c] = nil
  end
  st.path = path
  if not ok then
    y = tostring(y)
    if not y:find("^lt%.infer") then
      S.fail(st, m, "its forward failed while traced: " .. y .. " (lt.infer traces the methods and operators of " ..
        "its input and calls of its sub-modules, not lt.* or lt.F functions)")
    end
    error(y, 0)
  end
  if not is_sym(y) then
    S.fail(st, m, "its forward returned a " .. type(y) .. " that is not computed from its input (a plan returns one " ..
      "tensor computed from its input)")
  end
  st.buf, st.value = y.buf, y.value
end

return T
