-- infer/steps.lua — how each supported module becomes plan steps (lt.infer.compile walks the model with these).
-- A handler gets the module and the walk's state {plan, buf, value, path, steps}: `value` is the tensor the
-- module receives (the example input carried through the model, under no_grad), `buf` the plan buffer holding
-- it. The handler runs the module's own forward on `value` (so shapes and options come from the module itself),
-- appends its steps, and leaves the output's tensor and buffer in the state. Each step is also kept as a plain
-- description in state.steps, which lt.infer.export_lua turns into Lua code.
local S = {}

local function prod(shape, i, j)
  local n = 1
  for k = i or 1, j or #shape do n = n * shape[k] end
  return n
end
S.prod = prod

local function fail(st, m, msg) error(string.format("lt.infer.compile: %s (%s): %s", st.path, m.__name, msg), 0) end
S.fail = fail

-- a new buffer for the module's output y (or the buffer step.out, which it fills in part), and the step that fills it
local function emit(st, m, y, step)
  local out = step.out or st.plan:buffer(y:numel())
  step.in_, step.out = st.buf, out
  local c = {}
  for k, v in pairs(step) do c[k] = v end
  c["in"], c.in_ = step.in_, nil
  local ok, err = pcall(st.plan.add, st.plan, c)
  if not ok then fail(st, m, tostring(err)) end
  step.module, step.path, step.in_shape, step.out_shape = m, st.path, st.value:shape(), y:shape()
  st.steps[#st.steps + 1] = step
  st.buf, st.value = out, y
end
S.emit = emit

-- the class's forward (a library module being traced inside a parent's forward answers with another one)
local function forward(st, m, ...)
  local ok, y = pcall(getmetatable(m).forward, m, st.value, ...)
  if not ok then fail(st, m, "its forward failed on the example input: " .. tostring(y)) end
  return y
end
S.forward = forward

-- modules that change only the shape: the data stays in its buffer, in the same order
local function reshape(m, st) st.value = forward(st, m) end
S.Identity, S.Flatten, S.Unflatten = reshape, reshape, reshape

local function dropout(m, st)
  if m.training and m.p > 0 then
    fail(st, m, "is in training mode (it would drop values at random); call model:eval() before compiling")
  end
  reshape(m, st)
end
S.Dropout, S.Dropout2d = dropout, dropout

function S.Linear(m, st)
  local y = forward(st, m)
  emit(st, m, y, { op = "linear", rows = y:numel() / m.out_features, n_in = m.in_features, n_out = m.out_features,
    t = { m.weight, m.bias or false } })
end

local function act(name, a, b)
  return function(m, st)
    local y = forward(st, m)
    emit(st, m, y, { op = "act", act = name, n_in = y:numel(), a = a and a(m), b = b and b(m) })
  end
end
S.ReLU, S.Tanh, S.Sigmoid, S.SiLU = act "relu", act "tanh", act "sigmoid", act "silu"
S.LeakyReLU = act("leaky_relu", function(m) return m.negative_slope end)
S.ELU = act("elu", function(m) return m.alpha end)
S.Softplus = act("softplus", function(m) return m.beta end, function(m) return m.threshold end)
S.Hardtanh = act("hardtanh", function(m) return m.min_val end, function(m) return m.max_val end)
function S.GELU(m, st) act(m.approximate == "tanh" and "gelu_tanh" or "gelu")(m, st) end

function S.PReLU(m, st)
  local shape = st.value:shape()
  local y = forward(st, m)
  local C = #shape >= 2 and shape[2] or 1 -- the channel dim is the second one (the only one of a 1-d input)
  local inner = #shape >= 2 and prod(shape, 3) or 1
  if #shape == 1 then C, inner = 1, shape[1] end
  emit(st, m, y, { op = "act", act = "prelu", n_in = y:numel(), t = { m.weight }, geo = { C, inner } })
end

local function softmax(log)
  return function(m, st)
    local shape = st.value:shape()
    local d = m.dim < 0 and #shape + m.dim + 1 or m.dim
    local y = forward(st, m)
    emit(st, m, y, { op = "softmax", rows = prod(shape, 1, d - 1), n_in = shape[d], geo = { prod(shape, d + 1) },
      a = log and 1 or 0 })
  end
end
S.Softmax, S.LogSoftmax = softmax(false), softmax(true)

function S.LayerNorm(m, st)
  local y = forward(st, m)
  local K = prod(m.normalized_shape)
  emit(st, m, y, { op = "layernorm", rows = y:numel() / K, n_in = K, a = m.eps,
    t = { m.weight or false, m.bias or false } })
end

local function batch_norm(m, st)
  if m.training then fail(st, m, "is in training mode (it would use the batch's statistics); call model:eval()") end
  if not m.running_mean then fail(st, m, "has no running statistics (track_running_stats = false)") end
  local shape = st.value:shape()
  local y = forward(st, m)
  local N, C = shape[1], shape[2]
  if #shape == 1 then fail(st, m, "needs a batch dim") end
  emit(st, m, y, { op = "batchnorm", rows = N, n_in = C, geo = { prod(shape, 3) }, a = m.eps,
    t = { m.running_mean, m.running_var, m.weight or false, m.bias or false } })
end
S.BatchNorm1d, S.BatchNorm2d = batch_norm, batch_norm

function S.Embedding(m, st)
  if m.max_norm then fail(st, m, "max_norm renormalises the weight during forward; not supported") end
  local y = forward(st, m)
  emit(st, m, y, { op = "embedding", rows = st.value:numel(), n_out = m.embedding_dim, geo = { m.num_embeddings },
    t = { m.weight } })
end

-- Conv1d runs as a 2-d convolution of height 1
local function conv(nsp)
  return function(m, st)
    if m.padding_mode ~= "zeros" then fail(st, m, 'padding_mode "' .. m.padding_mode .. '" is not supported (only "zeros")') end
    local shape = st.value:shape()
    local y = forward(st, m)
    local ys = y:shape()
    local batched = #shape == nsp + 2
    local N = batched and shape[1] or 1
    local pads, k, s, d = m._conv.pads, m.kernel_size, m.stride, m.dilation
    local H, W, OH, OW = 1, shape[#shape], 1, ys[#ys]
    local kh, kw, sh, sw, ph, pw, dh, dw = 1, k[1], 1, s[1], 0, pads[1][1], 1, d[1]
    if nsp == 2 then
      H, OH = shape[#shape - 1], ys[#ys - 1]
      kh, kw, sh, sw, ph, pw, dh, dw = k[1], k[2], s[1], s[2], pads[1][1], pads[2][1], d[1], d[2]
    end
    emit(st, m, y, { op = "conv", geo = { N, m.in_channels, H, W, m.out_channels, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw,
      m.groups }, t = { m.weight, m.bias or false }, nsp = nsp })
  end
end
S.Conv1d, S.Conv2d = conv(1), conv(2)

local function pool(nsp, kind)
  return function(m, st)
    local shape = st.value:shape()
    local y = forward(st, m)
    local ys = y:shape()
    local nd = #shape
    local N = nd == nsp + 2 and shape[1] or 1
    local C = shape[nd - nsp]
    local k, s, p, d = m.kernel_size, m.stride, m.padding, m.dilation or { 1, 1 }
    local geo
    if nsp == 1 then
      geo = { N, C, 1, shape[nd], C, 1, ys[nd], 1, k[1], 1, s[1], 0, p[1], 1, d[1], 1 }
    else
      geo = { N, C, shape[nd - 1], shape[nd], C, ys[nd - 1], ys[nd], k[1], k[2], s[1], s[2], p[1], p[2], d[1], d[2], 1 }
    end
    local a = kind == "max" and "max" or (m.count_include_pad and "avg" or "avg_exclude_pad")
    emit(st, m, y, { op = "pool", act = a, geo = geo })
  end
end
S.MaxPool1d, S.MaxPool2d, S.AvgPool1d, S.AvgPool2d = pool(1, "max"), pool(2, "max"), pool(1, "avg"), pool(2, "avg")

-- A cell steps once per call; its state (h, and c for an LSTM) stays in the plan between calls, starting at zero
-- (plan:reset_state() zeroes it again). The plan's value after the cell is the new h.
local function cell(kind, G)
  return function(m, st)
    local y = forward(st, m)
    local B = y:dim() == 2 and y:size(1) or 1
    local Hs = m.hidden_size
    local h = st.plan:buffer(B * Hs)
    local c = kind == "lstm" and st.plan:buffer(B * Hs) or h
    local gates = st.plan:buffer(2 * G * Hs)
    local a = kind == "rnn" and "rnn_" .. m.nonlinearity or kind
    emit(st, m, y, { op = "cell", act = a, rows = B, n_in = m.input_size, n_out = Hs, geo = { h, c, gates },
      t = { m.weight_ih, m.weight_hh, m.bias_ih or false, m.bias_hh or false } })
    st.stateful = true
  end
end
S.LSTMCell, S.GRUCell, S.RNNCell = cell("lstm", 4), cell("gru", 3), cell("rnn", 1)

-- RNN, GRU, LSTM with an example of one time step step once per call, each layer a cell whose state stays in the
-- plan; the plan's value after it is the last layer's h, shaped as the module's output. A longer example, a
-- bidirectional module or an LSTM with proj_size runs the whole sequence per call from a zero state instead
-- (S.sequence, infer/steps_layers.lua).
local GATES = { lstm = 4, gru = 3, rnn_tanh = 1, rnn_relu = 1 }
local function layered(m, st)
  local shape = st.value:shape()
  local T = #shape == 2 and shape[1] or (m.batch_first and shape[2] or shape[1])
  if T ~= 1 or m.bidirectional or (m.proj_size or 0) > 0 then return S.sequence(m, st) end
  local y = forward(st, m)
  local Hs, G = m.hidden_size, GATES[m.mode]
  local B = y:numel() / Hs
  local bias = function(k) return m.bias and m[k] or false end
  for l = 0, m.num_layers - 1 do
    local h = st.plan:buffer(B * Hs)
    local c = m.mode == "lstm" and st.plan:buffer(B * Hs) or h
    local gates = st.plan:buffer(2 * G * Hs)
    local sfx = "_l" .. l
    emit(st, m, y, { op = "cell", act = m.mode, rows = B, n_in = l == 0 and m.input_size or Hs, n_out = Hs,
      geo = { h, c, gates }, t = { m["weight_ih" .. sfx], m["weight_hh" .. sfx], bias("bias_ih" .. sfx),
        bias("bias_hh" .. sfx) } })
  end
  st.stateful = true
end
S.LSTM, S.GRU, S.RNN = layered, layered, layered

function S.zeros(n) return require("lutra").zeros(n) end

require("lutra.infer.steps_layers")(S)

return S
