-- infer/export.lua — lt.infer.export_lua: a compiled plan written as one self-contained Lua file (weights inline,
-- plain arithmetic, no lutra, no ffi, no C) that returns function(inputs[, outputs]) -> outputs, for hosts that
-- cannot load C modules (a LÖVE game shipped as a .love zip, a sandbox). Correct under LuaJIT and PUC Lua 5.1-5.4:
-- only the math library's exp, log, sqrt, floor are used (tanh and erf are written out: Lua 5.3+ has no
-- math.tanh, no Lua has erf). The file is written atomically (lt._io.write_atomic).
local lt = require "lutra"
local prod = require("lutra.infer.steps").prod

local M = {}

-- The kernels, as Lua source, over flat 1-based arrays; only the ones a plan uses go into its file.
local K = {}
K.tanh = [[
local function tanh(x)
  if x > 20 then return 1 elseif x < -20 then return -1 end
  local e = exp(2 * x)
  return (e - 1) / (e + 1)
end]]
K.sigmoid = [[
local function sigmoid(x) return 1 / (1 + exp(-x)) end]]
-- erf through Numerical Recipes' erfc (Chebyshev fit, fractional error < 1.2e-7 everywhere)
K.erf = [[
local function erf(x)
  local z = x < 0 and -x or x
  local t = 1 / (1 + 0.5 * z)
  local r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 +
    t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))))
  return x < 0 and r - 1 or 1 - r
end]]
K.linear = [[
local function linear(x, y, W, b, R, I, O)
  for r = 0, R - 1 do
    local xo, yo = r * I, r * O
    for o = 1, O do
      local s, wo = b and b[o] or 0, (o - 1) * I
      for i = 1, I do s = s + W[wo + i] * x[xo + i] end
      y[yo + o] = s
    end
  end
end]]
K.act = [[
local acts = {
  relu = function(v) return v > 0 and v or 0 end,
  leaky_relu = function(v, a) return v > 0 and v or a * v end,
  tanh = function(v) return tanh(v) end,
  sigmoid = function(v) return sigmoid(v) end,
  gelu = function(v) return 0.5 * v * (1 + erf(v * 0.70710678118654752)) end,
  gelu_tanh = function(v) return 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))) end,
  silu = function(v) return v * sigmoid(v) end,
  elu = function(v, a) return v > 0 and v or a * (exp(v) - 1) end,
  softplus = function(v, a, b) if v * a > b then return v end return log(1 + exp(a * v)) / a end,
  hardtanh = function(v, a, b) if v < a then return a elseif v > b then return b end return v end,
  affine = function(v, a, b) return a * v + b end,
  rdiv = function(v, a) return a / v end,
  exp = function(v) return exp(v) end,
  log = function(v) return log(v) end,
  abs = function(v) return v < 0 and -v or v end,
  sqrt = function(v) return sqrt(v) end,
  mish = function(v) return v * tanh(v > 20 and v or log(1 + exp(v))) end,
  hardswish = function(v) local r = v + 3; r = r < 0 and 0 or (r > 6 and 6 or r); return v * r / 6 end,
  hardsigmoid = function(v) local r = v + 3; r = r < 0 and 0 or (r > 6 and 6 or r); return r / 6 end,
}
local function act(x, y, n, kind, a, b)
  local f = acts[kind]
  for i = 1, n do y[i] = f(x[i], a, b) end
end
local function prelu(x, y, n, w, C, inner)
  for i = 1, n do
    local v = x[i]
    local s = #w == 1 and w[1] or w[floor((i - 1) / inner) % C + 1]
    y[i] = v > 0 and v or s * v
  end
end]]
K.binary = [[
local binops = {
  add = function(u, v) return u + v end, sub = function(u, v) return u - v end,
  mul = function(u, v) return u * v end, div = function(u, v) return u / v end,
}
local function binary(x, y, out, n, m, kind, swapped)
  local f = binops[kind]
  for r = 0, n - 1, m do
    for i = 1, m do
      if swapped then out[r + i] = f(y[i], x[r + i]) else out[r + i] = f(x[r + i], y[i]) end
    end
  end
end]]
K.softmax = [[
local function softmax(x, y, outer, n, inner, logarithm)
  for o = 0, outer - 1 do
    for j = 1, inner do
      local base = o * n * inner + j
      local m = -huge
      for i = 0, n - 1 do local v = x[base + i * inner]; if v > m then m = v end end
      local s = 0
      for i = 0, n - 1 do s = s + exp(x[base + i * inner] - m) end
      if logarithm then
        local lse = m + log(s)
        for i = 0, n - 1 do y[base + i * inner] = x[base + i * inner] - lse end
      else
        for i = 0, n - 1 do y[base + i * inner] = exp(x[base + i * inner] - m) / s end
      end
    end
  end
end]]
K.layernorm = [[
local function layernorm(x, y, R, n, w, b, eps)
  for r = 0, R - 1 do
    local o, mean, var = r * n, 0, 0
    for i = 1, n do mean = mean + x[o + i] end
    mean = mean / n
    for i = 1, n do local d = x[o + i] - mean; var = var + d * d end
    local inv = 1 / sqrt(var / n + eps)
    for i = 1, n do
      local v = (x[o + i] - mean) * inv
      if w then v = v * w[i] end
      if b then v = v + b[i] end
      y[o + i] = v
    end
  end
end]]
K.batchnorm = [[
local function batchnorm(x, y, N, C, S, mean, var, w, b, eps)
  for n = 0, N - 1 do
    for c = 1, C do
      local scale = 1 / sqrt(var[c] + eps)
      if w then scale = scale * w[c] end
      local shift = (b and b[c] or 0) - mean[c] * scale
      local o = (n * C + c - 1) * S
      for i = 1, S do y[o + i] = x[o + i] * scale + shift end
    end
  end
end]]
K.embedding = [[
local function embedding(x, y, R, D, V, W)
  for r = 1, R do
    local k = x[r]
    if k ~= floor(k) or k < 1 or k > V then
      error(string.format("Embedding: index %s is out of range [1, %d] (input position %d)", tostring(k), V, r), 3)
    end
    local wo, yo = (k - 1) * D, (r - 1) * D
    for d = 1, D do y[yo + d] = W[wo + d] end
  end
end]]
K.conv = [[
local function conv(x, y, W, b, N, Ci, H, Wd, Co, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW, G)
  local cig, cog = Ci / G, Co / G
  for n = 0, N - 1 do
    for oc = 0, Co - 1 do
      local yo = (n * Co + oc) * OH * OW
      local bias = b and b[oc + 1] or 0
      for i = 1, OH * OW do y[yo + i] = bias end
      local ic0 = floor(oc / cog) * cig
      for ic = 0, cig - 1 do
        local xi = (n * Ci + ic0 + ic) * H * Wd
        for ki = 0, KH - 1 do
          for kj = 0, KW - 1 do
            local w = W[((oc * cig + ic) * KH + ki) * KW + kj + 1]
            for oh = 0, OH - 1 do
              local ih = oh * SH - PH + ki * DH
              if ih >= 0 and ih < H then
                local xr, yr = xi + ih * Wd + 1, yo + oh * OW + 1
                for ow = 0, OW - 1 do
                  local iw = ow * SW - PW + kj * DW
                  if iw >= 0 and iw < Wd then y[yr + ow] = y[yr + ow] + w * x[xr + iw] end
                end
              end
            end
          end
        end
      end
    end
  end
end]]
K.pool = [[
local function pool(x, y, kind, NC, H, Wd, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW)
  for nc = 0, NC - 1 do
    local xp = nc * H * Wd + 1
    for oh = 0, OH - 1 do
      for ow = 0, OW - 1 do
        local h0, w0, r = oh * SH - PH, ow * SW - PW, nil
        if kind == "adaptive_max" or kind == "adaptive_avg" then
          local hs, he = floor(oh * H / OH), floor(((oh + 1) * H + OH - 1) / OH)
          local ws, we = floor(ow * Wd / OW), floor(((ow + 1) * Wd + OW - 1) / OW)
          local s, m = 0, -huge
          for ih = hs, he - 1 do
            for iw = ws, we - 1 do
              local v = x[xp + ih * Wd + iw]
              s = s + v
              if v > m or v ~= v then m = v end
            end
          end
          r = kind == "adaptive_max" and m or s / ((he - hs) * (we - ws))
        elseif kind == "max" then
          r = -huge
          for ki = 0, KH - 1 do
            local ih = h0 + ki * DH
            if ih >= 0 and ih < H then
              for kj = 0, KW - 1 do
                local iw = w0 + kj * DW
                if iw >= 0 and iw < Wd then
                  local v = x[xp + ih * Wd + iw]
                  if v > r or v ~= v then r = v end
                end
              end
            end
          end
        else
          local h1, w1 = math.min(h0 + KH, H + PH), math.min(w0 + KW, Wd + PW)
          local size = (h1 - h0) * (w1 - w0)
          local hs, ws, he, we = math.max(h0, 0), math.max(w0, 0), math.min(h1, H), math.min(w1, Wd)
          if kind == "avg_exclude_pad" then size = (he - hs) * (we - ws) end
          local s = 0
          for ih = hs, he - 1 do for iw = ws, we - 1 do s = s + x[xp + ih * Wd + iw] end end
          r = s / size
        end
        y[(nc * OH + oh) * OW + ow + 1] = r
      end
    end
  end
end]]
K.cell = [[
local function matvec(W, x, xo, b, I, O, y)
  for o = 1, O do
    local s, wo = b and b[o] or 0, (o - 1) * I
    for i = 1, I do s = s + W[wo + i] * x[xo + i] end
    y[o] = s
  end
end
local function update(kind, gi, gh, h, ho, c, co, hout, oo, Hd)
  for j = 1, Hd do
    if kind == "lstm" then
      local i, f = sigmoid(gi[j] + gh[j]), sigmoid(gi[Hd + j] + gh[Hd + j])
      local g, o = tanh(gi[2 * Hd + j] + gh[2 * Hd + j]), sigmoid(gi[3 * Hd + j] + gh[3 * Hd + j])
      c[co + j] = f * c[co + j] + i * g
      hout[oo + j] = o * tanh(c[co + j])
    elseif kind == "gru" then
      local rr, z = sigmoid(gi[j] + gh[j]), sigmoid(gi[Hd + j] + gh[Hd + j])
      local nn = tanh(gi[2 * Hd + j] + rr * gh[2 * Hd + j])
      h[ho + j] = (1 - z) * nn + z * h[ho + j]
    elseif kind == "rnn_tanh" then
      h[ho + j] = tanh(gi[j] + gh[j])
    else
      local v = gi[j] + gh[j]
      h[ho + j] = v > 0 and v or 0
    end
  end
end
local function cell(x, y, kind, R, I, Hd, Wih, Whh, bih, bhh, h, c, gi, gh)
  local G = kind == "lstm" and 4 or kind == "gru" and 3 or 1
  for r = 0, R - 1 do
    local ho = r * Hd
    matvec(Wih, x, r * I, bih, I, G * Hd, gi)
    matvec(Whh, h, ho, bhh, Hd, G * Hd, gh)
    update(kind, gi, gh, h, ho, c, ho, h, ho, Hd)
    for j = 1, Hd do y[ho + j] = h[ho + j] end
  end
end]]

for k, v in pairs(require "lutra.infer.export_kernels") do K[k] = v end

local NEEDS = { act = { "tanh", "sigmoid", "erf" }, cell = { "tanh", "sigmoid" }, seq = { "tanh", "sigmoid", "cell" } }
local ORDER = { "tanh", "sigmoid", "erf", "linear", "act", "binary", "softmax", "layernorm", "batchnorm", "embedding", "conv",
  "pool", "cell", "seq", "strided", "matmul", "groupnorm", "convt" }

-- A float32 value as a Lua literal that reads back to the same float (9 significant digits).
local function num(v)
  if v ~= v then return "(0/0)" end
  if v == math.huge then return "(1/0)" end
  if v == -math.huge then return "(-1/0)" end
  return string.format("%.9g", v)
end

-- Values go into chunks of at most CHUNK literals, each in a function of its own: LuaJIT allows 65536 constants
-- per function, Lua 5.1 262144.
local CHUNK = 20000

local function param_source(out, name, t)
  local flat = t:contiguous():view(-1):float():totable()
  out[#out + 1] = name .. " = cat {"
  for c0 = 1, #flat, CHUNK do
    local parts = {}
    for i = c0, math.min(c0 + CHUNK - 1, #flat) do parts[#parts + 1] = num(flat[i]) end
    out[#out + 1] = "  function() return { " .. table.concat(parts, ", ") .. " } end,"
  end
  out[#out + 1] = "}"
end

local function lit(v)
  if v == nil or v == false then return "nil" end
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) == "boolean" then return tostring(v) end
  return num(v)
end

function M.source(plan)
  local steps = plan._steps
  local used = {}
  for _, s in ipairs(steps) do
    local k = s.op == "act" and "act" or s.op
    used[k] = true
    for _, d in ipairs(NEEDS[k] or {}) do used[d] = true end
  end
  local out = {
    "-- Generated by lutra's lt.infer.export_lua: " .. tostring(plan) .. ".",
    "-- Self-contained: plain Lua (LuaJIT, Lua 5.1-5.4), no lutra, no C. Returns function(inputs[, outputs]) ->",
    "-- outputs: inputs a flat array of " .. plan.input:numel() .. " numbers (row-major [" ..
      table.concat(plan.in_shape, " x ") .. "]), outputs a flat array of " ..
      require("lutra.infer.steps").prod(plan.out_shape) .. " numbers ([" .. table.concat(plan.out_shape, " x ") ..
      "]), written into the given table or a new one." ..
      (plan._stateful and " Recurrent state carries over between calls; f(\"reset\") zeroes it." or ""),
    "local exp, log, sqrt, floor, huge = math.exp, math.log, math.sqrt, math.floor, math.huge",
    "local function cat(chunks)",
    "  local t = {}",
    "  for _, f in ipairs(chunks) do for _, v in ipairs(f()) do t[#t + 1] = v end end",
    "  return t",
    "end",
    "local function zeros(n) local t = {} for i = 1, n do t[i] = 0 end return t end",
  }
  for _, k in ipairs(ORDER) do if used[k] then out[#out + 1] = K[k] end end
  -- buffers, parameters and states in tables (a large model has more of them than a function may have locals)
  out[#out + 1] = "local B, P, GH, ST = {}, {}, {}, {}"
  -- buffers: plan buffer k is B<k>; the sizes come from the steps that read and write them
  local sizes = { [plan._in_buf] = plan.input:numel() }
  local function buffer(k, n) if not sizes[k] or sizes[k] < n then sizes[k] = n end end
  local pn = 0
  local params = {}
  local function param(t)
    if not t then return "nil" end
    if params[t] then return params[t] end
    pn = pn + 1
    local name = "P[" .. pn .. "]"
    param_source(out, name, t)
    params[t] = name
    return name
  end
  local calls, gates = {}, {}
  for _, s in ipairs(steps) do
    local ni, no = prod(s.in_shape), prod(s.out_shape)
    buffer(s.in_, ni)
    buffer(s.out, no)
    local x, y = "B[" .. s.in_ .. "]", "B[" .. s.out .. "]"
    local t = s.t or {}
    local call
    if s.op == "linear" then
      call = string.format("linear(%s, %s, %s, %s, %d, %d, %d)", x, y, param(t[1]), param(t[2]), s.rows, s.n_in, s.n_out)
    elseif s.op == "act" and s.act == "prelu" then
      call = string.format("prelu(%s, %s, %d, %s, %d, %d)", x, y, s.n_in, param(t[1]), s.geo[1], s.geo[2])
    elseif s.op == "act" then
      call = string.format("act(%s, %s, %d, %q, %s, %s)", x, y, s.n_in, s.act, lit(s.a), lit(s.b))
    elseif s.op == "binary" then
      local other = s.geo[1] >= 0 and "B[" .. s.geo[1] .. "]" or param(t[1])
      call = string.format("binary(%s, %s, %s, %d, %d, %q, %s)", x, other, y, s.n_in, s.n_out, s.act, tostring(s.b == 1))
    elseif s.op == "softmax" then
      call = string.format("softmax(%s, %s, %d, %d, %d, %s)", x, y, s.rows, s.n_in, s.geo[1], tostring(s.a == 1))
    elseif s.op == "layernorm" then
      call = string.format("layernorm(%s, %s, %d, %d, %s, %s, %s)", x, y, s.rows, s.n_in, param(t[1]), param(t[2]),
        num(s.a))
    elseif s.op == "batchnorm" then
      call = string.format("batchnorm(%s, %s, %d, %d, %d, %s, %s, %s, %s, %s)", x, y, s.rows, s.n_in, s.geo[1],
        param(t[1]), param(t[2]), param(t[3]), param(t[4]), num(s.a))
    elseif s.op == "embedding" then
      call = string.format("embedding(%s, %s, %d, %d, %d, %s)", x, y, s.rows, s.n_out, s.geo[1], param(t[1]))
    elseif s.op == "conv" then
      call = string.format("conv(%s, %s, %s, %s, %s)", x, y, param(t[1]), param(t[2]), table.concat(s.geo, ", "))
    elseif s.op == "pool" then
      local g = s.geo
      call = string.format("pool(%s, %s, %q, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d)", x, y, s.act,
        g[1] * g[2], g[3], g[4], g[6], g[7], g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15])
    elseif s.op == "cell" then
      local G = s.act == "lstm" and 4 or s.act == "gru" and 3 or 1
      buffer(s.geo[1], s.rows * s.n_out)
      buffer(s.geo[2], s.rows * s.n_out)
      local gname = "B[" .. s.geo[3] .. "]"
      buffer(s.geo[3], 2 * G * s.n_out)
      call = string.format("cell(%s, %s, %q, %d, %d, %d, %s, %s, %s, %s, B[%d], B[%d], %s, GH[%d])", x, y, s.act, s.rows,
        s.n_in, s.n_out, param(t[1]), param(t[2]), param(t[3]), param(t[4]), s.geo[1], s.geo[2], gname, s.geo[3])
      gates[#gates + 1] = string.format("GH[%d] = zeros(%d)", s.geo[3], G * s.n_out) -- the h half of the gates
    elseif s.op == "strided" then
      local g = s.geo
      call = string.format("strided(%s, %s, %s)", x, y, table.concat(g, ", ", 2, 15))
    elseif s.op == "matmul" then
      local g = s.geo
      local other = g[1] >= 0 and "B[" .. g[1] .. "]" or param(t[1])
      call = string.format("matmul(%s, %s, %s, %s, %s)", x, other, y, table.concat(g, ", ", 2, 9), num(s.a))
    elseif s.op == "groupnorm" then
      call = string.format("groupnorm(%s, %s, %d, %d, %d, %d, %s, %s, %s)", x, y, s.rows, s.n_in, s.geo[1], s.geo[2],
        param(t[1]), param(t[2]), num(s.a))
    elseif s.op == "convt" then
      call = string.format("convt(%s, %s, %s, %s, %s)", x, y, param(t[1]), param(t[2]), table.concat(s.geo, ", "))
    elseif s.op == "seq" then
      local g = s.geo
      gates[#gates + 1] = string.format("ST[%d] = { h = {}, c = {}, gi = {}, gh = {}, hs = {}, pt = {} }", g[9])
      call = string.format("seq(%s, %s, %q, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %s, %s, %s, %s, %s, ST[%d])", x, y,
        s.act, g[1], g[2], s.n_in, s.n_out, g[3], g[4], g[5], g[6], g[7], g[8], g[10], param(t[1]), param(t[2]),
        param(t[3]), param(t[4]), param(t[5]), g[9])
    else
      error("lt.infer.export_lua: " .. s.path .. " (" .. s.module.__name .. "): no Lua form for step " .. s.op, 0)
    end
    calls[#calls + 1] = "  " .. call
  end
  local keys = {}
  for k in pairs(sizes) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do out[#out + 1] = string.format("B[%d] = zeros(%d)", k, sizes[k]) end
  for _, g in ipairs(gates) do out[#out + 1] = g end
  local nin, nout = plan.input:numel(), plan.output:numel()
  out[#out + 1] = "local N_IN, N_OUT = " .. nin .. ", " .. nout
  if plan._stateful then
    local resets = {}
    for _, s in ipairs(steps) do
      if s.op == "cell" then
        resets[#resets + 1] = string.format("  for i = 1, #B[%d] do B[%d][i] = 0 end", s.geo[1], s.geo[1])
        resets[#resets + 1] = string.format("  for i = 1, #B[%d] do B[%d][i] = 0 end", s.geo[2], s.geo[2])
      end
    end
    out[#out + 1] = "local function reset()\n" .. table.concat(resets, "\n") .. "\nend"
  end
  out[#out + 1] = "return function(inputs, outputs)"
  if plan._stateful then out[#out + 1] = "  if inputs == \"reset\" then return reset() end" end
  out[#out + 1] = "  if type(inputs) ~= \"table\" or #inputs ~= N_IN then"
  out[#out + 1] = "    error(\"policy: expected a flat array of \" .. N_IN .. \" numbers, got \" .."
  out[#out + 1] = "      (type(inputs) == \"table\" and #inputs .. \" values\" or type(inputs)), 2)"
  out[#out + 1] = "  end"
  out[#out + 1] = string.format("  for i = 1, N_IN do B[%d][i] = inputs[i] end", plan._in_buf)
  for _, c in ipairs(calls) do out[#out + 1] = c end
  out[#out + 1] = "  outputs = outputs or {}"
  out[#out + 1] = string.format("  for i = 1, N_OUT do outputs[i] = B[%d][i] end", plan._out_buf)
  out[#out + 1] = "  return outputs"
  out[#out + 1] = "end"
  return table.concat(out, "\n") .. "\n"
end

function M.write(plan, path)
  local src = M.source(plan)
  lt._io.write_atomic(path, src)
  return path
end

return M
