-- F/vision.lua — lt.F's convolution, pooling and normalisation functions for images and sequences
-- (PyTorch's torch.nn.functional names): conv1d, conv2d, conv_transpose2d, max_pool1d/2d, avg_pool1d/2d,
-- adaptive_avg_pool1d/2d, adaptive_max_pool1d/2d, group_norm, instance_norm, dropout2d, dropout3d.
-- The kernels are C (core/src/nn_conv.c, nn_conv_general.c, nn_pool.c, nn_pool_adaptive.c, nn_group_norm.c);
-- 1-d forms run as 2-d ones on a height of 1.
--
--   local y = lt.F.conv2d(x, w, b, {stride = 2, padding = "same", dilation = 2, groups = 4})
--   local p = lt.F.max_pool2d(x, 3, {stride = 2, ceil_mode = true})
--   local u = lt.F.conv_transpose2d(x, w, b, {stride = 2, padding = 1, output_padding = 1})
local lt = require "lutra"
local core = require "lutra.core"
local H = require "lutra.nn.helpers"
local FA = require "lutra.F.args"
local pack, unpack = require("lutra._compat").pack, require("lutra._compat").unpack
local C, V = core._nn, core._vision

local M = {}

local function check_tensor(fn, x, what)
  if not lt.is_tensor(x) then error(string.format("%s: expected a tensor %s, got %s", fn, what, type(x)), 3) end
end

--- n integers from a number or a list of n (kernel sizes, strides ...), each >= min
local function tuple(fn, what, v, n, min)
  if type(v) == "table" then
    if #v ~= n then
      error(string.format("%s: %s must be a number or a list of %d numbers, got a list of %d", fn, what, n, #v), 4)
    end
    local t = {}
    for i = 1, n do t[i] = H.check_int(fn, what, v[i], min, 3) end
    return t
  end
  H.check_int(fn, what, v, min, 3)
  local t = {}
  for i = 1, n do t[i] = v end
  return t
end
M._tuple = tuple

-- ---- convolution ----------------------------------------------------------------------------------------

-- 1-based source indices of a circularly padded dim of size n
local function circular_index(n, before, after)
  local idx = {}
  for i = 1 - before, n + after do idx[#idx + 1] = (i - 1) % n + 1 end
  return lt.tensor(idx, "int64")
end

--- x padded by pads = {{before, after} per spatial dim, first spatial dim first} in mode "zeros", "reflect",
--- "replicate" or "circular"
local function pad_input(fn, x, pads, mode)
  if mode == "circular" then
    local y = x
    for k, p in ipairs(pads) do
      local d = x:dim() - #pads + k
      if p[1] > y:size(d) or p[2] > y:size(d) then
        error(string.format("%s: circular padding (%d, %d) is larger than the size %d of dim %d (input %s)", fn, p[1],
          p[2], y:size(d), d, x:shape_str()), 4)
      end
      if p[1] > 0 or p[2] > 0 then y = y:index_select(d, circular_index(y:size(d), p[1], p[2])) end
    end
    return y
  end
  local flat = {}
  for k = #pads, 1, -1 do flat[#flat + 1] = pads[k][1]; flat[#flat + 1] = pads[k][2] end
  return lt.F.pad(x, flat, mode ~= "zeros" and { mode = mode } or nil)
end

--- The convolution options of fn for nsp spatial dims: {stride, padding (pairs {before, after}), dilation, groups}.
--- padding is a number, a list, "valid" or "same" (stride 1 only; PyTorch puts the odd extra cell after).
local function conv_options(fn, nsp, k, opts)
  local o = H.check_opts(fn, opts, { stride = "number|table", padding = "number|table|string", dilation = "number|table",
    groups = "number" }, 3)
  local r = { stride = tuple(fn, "stride", o.stride or 1, nsp, 1), dilation = tuple(fn, "dilation", o.dilation or 1, nsp, 1),
    groups = H.check_int(fn, "groups", o.groups or 1, 1, 3), pads = {} }
  local p = o.padding or 0
  if type(p) == "string" then
    if p ~= "same" and p ~= "valid" then
      error(string.format('%s: padding must be a number, a list, "same" or "valid", got "%s"', fn, p), 3)
    end
    for i = 1, nsp do
      if p == "same" and r.stride[i] ~= 1 then
        error(string.format('%s: padding="same" is not supported for strided convolutions (stride %s)', fn,
          H.shape_str(r.stride)), 3)
      end
      local total = p == "same" and r.dilation[i] * (k[i] - 1) or 0
      r.pads[i] = { math.floor(total / 2), total - math.floor(total / 2) }
    end
  else
    for i, v in ipairs(tuple(fn, "padding", p, nsp, 0)) do r.pads[i] = { v, v } end
  end
  return r
end
M._conv_options = conv_options

--- conv2d on 4-D x with resolved options (o of conv_options) and padding_mode; the tuned kernel when it applies
local function conv2d_run(fn, x, w, b, o, mode, act)
  local sym = true
  for _, p in ipairs(o.pads) do sym = sym and p[1] == p[2] end
  local ph, pw = o.pads[1][1], o.pads[2][1]
  if (mode or "zeros") ~= "zeros" or not sym then
    local any = false
    for _, p in ipairs(o.pads) do any = any or p[1] > 0 or p[2] > 0 end
    if any then x = pad_input(fn, x, o.pads, mode or "zeros") end
    ph, pw = 0, 0
  end
  local s, d = o.stride, o.dilation
  if d[1] == 1 and d[2] == 1 and o.groups == 1 then return C.conv2d(x, w, b, s[1], s[2], ph, pw, act) end
  local y = V.conv2d(x, w, b, s[1], s[2], ph, pw, d[1], d[2], o.groups)
  if act then return y:relu() end
  return y
end
M._conv2d_run = conv2d_run

-- PyTorch 1.13's unbatched inputs of the convolutions and pools: an input of nsp spatial dims and no batch dim
-- ([C, L] / [C, H, W]) runs as a batch of one (unbatched, below). is_unbatched checks x's dims (dims_text: the
-- batched form) at the caller of fn and says whether x has no batch dim.
local DIMS_1D, DIMS_2D = "[batch x channels x length]", "[batch x channels x height x width]"
local function is_unbatched(fn, x, nsp, dims_text)
  check_tensor(fn, x, "input")
  local d = x:dim()
  if d == nsp + 1 then return true end
  if d ~= nsp + 2 then
    error(string.format("%s: input must be %d-D %s or unbatched %d-D, got %s", fn, nsp + 2, dims_text, nsp + 1,
      x:shape_str()), 3)
  end
  return false
end

-- f(x as a batch of one, ...) with the batch dim dropped from its tensor results; an error is raised as the
-- batched call raises its kernels' (the message, no position)
local function unbatched(f, x, ...)
  local r = pack(pcall(f, x:unsqueeze(1), ...))
  if not r[1] then error((tostring(r[2]):gsub("^[^\n]-%.lua:%d+: ", "")), 0) end
  for i = 2, r.n do
    if lt.is_tensor(r[i]) then r[i] = r[i]:squeeze(1) end
  end
  return unpack(r, 2, r.n)
end

-- PyTorch's positional form (x, w, b, stride, padding, dilation, groups) or (x, w, b, opts)
local function conv_call_opts(stride, padding, dilation, groups)
  if type(stride) == "table" and stride[1] == nil and padding == nil then return stride end
  return { stride = stride, padding = padding, dilation = dilation, groups = groups }
end

--- conv2d(x [N x C x H x W] or [C x H x W], w [O x C/groups x kh x kw][, b [O]][, {stride=1, padding=0,
--- dilation=1, groups=1}])
function M.conv2d(x, w, b, stride, padding, dilation, groups)
  if is_unbatched("conv2d", x, 2, DIMS_2D) then
    return unbatched(M.conv2d, x, w, b, stride, padding, dilation, groups)
  end
  check_tensor("conv2d", w, "weight")
  if w:dim() ~= 4 then error("conv2d: weight must be 4-D [out_channels x in_channels/groups x kh x kw], got " ..
    w:shape_str(), 2) end
  local o = conv_options("conv2d", 2, { w:size(3), w:size(4) }, conv_call_opts(stride, padding, dilation, groups))
  return conv2d_run("conv2d", x, w, b, o)
end

--- conv1d(x [N x C x L] or [C x L], w [O x C/groups x k][, b [O]][, {stride=1, padding=0, dilation=1, groups=1}])
function M.conv1d(x, w, b, stride, padding, dilation, groups)
  if is_unbatched("conv1d", x, 1, DIMS_1D) then
    return unbatched(M.conv1d, x, w, b, stride, padding, dilation, groups)
  end
  check_tensor("conv1d", w, "weight")
  if w:dim() ~= 3 then error("conv1d: weight must be 3-D [out_channels x in_channels/groups x k], got " ..
    w:shape_str(), 2) end
  local o1 = conv_options("conv1d", 1, { w:size(3) }, conv_call_opts(stride, padding, dilation, groups))
  local o = { stride = { 1, o1.stride[1] }, dilation = { 1, o1.dilation[1] }, groups = o1.groups,
    pads = { { 0, 0 }, o1.pads[1] } }
  return conv2d_run("conv1d", x:unsqueeze(3), w:unsqueeze(3), b, o):squeeze(3)
end

--- conv_transpose2d(x [N x Cin x H x W] or [Cin x H x W], w [Cin x Cout/groups x kh x kw][, b [Cout]][, {stride=1,
--- padding=0, output_padding=0, groups=1, dilation=1}])
function M.conv_transpose2d(x, w, b, opts)
  local fn = "conv_transpose2d"
  if is_unbatched(fn, x, 2, DIMS_2D) then return unbatched(M.conv_transpose2d, x, w, b, opts) end
  check_tensor(fn, w, "weight")
  local o = H.check_opts(fn, opts, { stride = "number|table", padding = "number|table", output_padding = "number|table",
    groups = "number", dilation = "number|table" }, 2)
  local s, p = tuple(fn, "stride", o.stride or 1, 2, 1), tuple(fn, "padding", o.padding or 0, 2, 0)
  local op, d = tuple(fn, "output_padding", o.output_padding or 0, 2, 0), tuple(fn, "dilation", o.dilation or 1, 2, 1)
  return V.conv_transpose2d(x, w, b, s[1], s[2], p[1], p[2], op[1], op[2], d[1], d[2],
    H.check_int(fn, "groups", o.groups or 1, 1, 2))
end

-- ---- pooling --------------------------------------------------------------------------------------------

--- (k, stride | opts, padding) -> kernel, stride, padding (nsp each) and the options table
local function pool_args(fn, nsp, k, stride, padding, extra)
  local opts = {}
  if type(stride) == "table" and padding == nil and stride[1] == nil then
    local spec = { stride = "number|table", padding = "number|table", ceil_mode = "boolean" }
    for name, ty in pairs(extra) do spec[name] = ty end
    opts = H.check_opts(fn, stride, spec, 3)
    stride, padding = opts.stride, opts.padding
  end
  local kk = tuple(fn, "kernel_size", k, nsp, 1)
  local ss = stride ~= nil and tuple(fn, "stride", stride, nsp, 1) or kk
  return kk, ss, tuple(fn, "padding", padding or 0, nsp, 0), opts
end
M._pool_args = pool_args

--- max_pool2d(x [N x C x H x W] or [C x H x W], k[, stride = k[, padding = 0]]) or max_pool2d(x, k, {stride,
--- padding, dilation=1, ceil_mode=false})
function M.max_pool2d(x, k, stride, padding)
  if is_unbatched("max_pool2d", x, 2, DIMS_2D) then return unbatched(M.max_pool2d, x, k, stride, padding) end
  local kk, s, p, o = pool_args("max_pool2d", 2, k, stride, padding, { dilation = "number|table" })
  local d = tuple("max_pool2d", "dilation", o.dilation or 1, 2, 1)
  return C.max_pool2d(x, kk[1], kk[2], s[1], s[2], p[1], p[2], o.ceil_mode == true, d[1], d[2])
end

--- avg_pool2d(x [N x C x H x W] or [C x H x W], k[, stride = k[, padding = 0]]) or avg_pool2d(x, k, {stride,
--- padding, ceil_mode=false, count_include_pad=true})
function M.avg_pool2d(x, k, stride, padding)
  if is_unbatched("avg_pool2d", x, 2, DIMS_2D) then return unbatched(M.avg_pool2d, x, k, stride, padding) end
  local kk, s, p, o = pool_args("avg_pool2d", 2, k, stride, padding, { count_include_pad = "boolean" })
  return C.avg_pool2d(x, kk[1], kk[2], s[1], s[2], p[1], p[2], o.count_include_pad ~= false, o.ceil_mode == true)
end

--- max_pool1d(x [N x C x L] or [C x L], k[, stride = k[, padding = 0]]) or max_pool1d(x, k, {stride, padding,
--- dilation, ceil_mode})
function M.max_pool1d(x, k, stride, padding)
  if is_unbatched("max_pool1d", x, 1, DIMS_1D) then return unbatched(M.max_pool1d, x, k, stride, padding) end
  local kk, s, p, o = pool_args("max_pool1d", 1, k, stride, padding, { dilation = "number|table" })
  local d = tuple("max_pool1d", "dilation", o.dilation or 1, 1, 1)
  return C.max_pool2d(x:unsqueeze(3), 1, kk[1], 1, s[1], 0, p[1], o.ceil_mode == true, 1, d[1]):squeeze(3)
end

--- avg_pool1d(x [N x C x L] or [C x L], k[, stride = k[, padding = 0]]) or avg_pool1d(x, k, {stride, padding,
--- ceil_mode, count_include_pad=true})
function M.avg_pool1d(x, k, stride, padding)
  if is_unbatched("avg_pool1d", x, 1, DIMS_1D) then return unbatched(M.avg_pool1d, x, k, stride, padding) end
  local kk, s, p, o = pool_args("avg_pool1d", 1, k, stride, padding, { count_include_pad = "boolean" })
  return C.avg_pool2d(x:unsqueeze(3), 1, kk[1], 1, s[1], 0, p[1], o.count_include_pad ~= false,
    o.ceil_mode == true):squeeze(3)
end

--- A 2-d adaptive pool's output size: a number, or {h, w} where a nil or false entry keeps that dim of the input
--- (PyTorch's None: {nil, 7}; a kept last dim is written false, {7, false}, as {7, nil} is the list {7}). Without x
--- the checked list, false where kept; with x [.. x H x W] the sizes.
local function adaptive_size2(fn, v, x)
  if type(v) ~= "table" then return tuple(fn, "output_size", v, 2, 1) end
  local n = 0
  for k in pairs(v) do
    if type(k) ~= "number" or k ~= 1 and k ~= 2 then n = 3; break end
    n = math.max(n, k)
  end
  if n ~= 2 then
    error(string.format("%s: output_size must be a number or a list of 2 (nil or false keeps the input's size: "
      .. "{nil, 7}, {7, false}), got %s", fn, n == 3 and "other keys" or "a list of " .. n), 4)
  end
  local t = {}
  for i = 1, 2 do
    if v[i] == nil or v[i] == false then t[i] = x and x:size(x:dim() - 2 + i) or false
    else t[i] = H.check_int(fn, "output_size", v[i], 1, 3) end
  end
  return t
end
M._adaptive_size2 = adaptive_size2

--- adaptive_avg_pool2d(x [N x C x H x W], output_size (number or {h, w}; nil/false entries keep that dim))
function M.adaptive_avg_pool2d(x, size)
  check_tensor("adaptive_avg_pool2d", x, "input")
  if x:dim() < 2 then error("adaptive_avg_pool2d: input must be [batch x channels x height x width], got " ..
    x:shape_str(), 2) end
  local o = adaptive_size2("adaptive_avg_pool2d", size, x)
  return V.adaptive_avg_pool2d(x, o[1], o[2])
end

--- adaptive_max_pool2d(x, output_size[, return_indices=false]): with return_indices also the 1-based flat
--- positions of the maxima within each [H x W] plane (int64)
function M.adaptive_max_pool2d(x, size, return_indices)
  check_tensor("adaptive_max_pool2d", x, "input")
  if x:dim() < 2 then error("adaptive_max_pool2d: input must be [batch x channels x height x width], got " ..
    x:shape_str(), 2) end
  local o = adaptive_size2("adaptive_max_pool2d", size, x)
  local y, idx = V.adaptive_max_pool2d(x, o[1], o[2])
  if return_indices then return y, idx + 1 end
  return y
end

--- adaptive_avg_pool1d(x [N x C x L] or [C x L], output_size)
function M.adaptive_avg_pool1d(x, size)
  if is_unbatched("adaptive_avg_pool1d", x, 1, DIMS_1D) then return unbatched(M.adaptive_avg_pool1d, x, size) end
  local o = tuple("adaptive_avg_pool1d", "output_size", size, 1, 1)
  return V.adaptive_avg_pool2d(x:unsqueeze(3), 1, o[1]):squeeze(3)
end

--- adaptive_max_pool1d(x [N x C x L] or [C x L], output_size[, return_indices=false])
function M.adaptive_max_pool1d(x, size, return_indices)
  if is_unbatched("adaptive_max_pool1d", x, 1, DIMS_1D) then
    return unbatched(M.adaptive_max_pool1d, x, size, return_indices)
  end
  local o = tuple("adaptive_max_pool1d", "output_size", size, 1, 1)
  local y, idx = V.adaptive_max_pool2d(x:unsqueeze(3), 1, o[1])
  if return_indices then return y:squeeze(3), idx:squeeze(3) + 1 end
  return y:squeeze(3)
end

-- ---- normalisation and dropout --------------------------------------------------------------------------

--- group_norm(x [N x C x ...], num_groups[, weight [C][, bias [C][, eps=1e-5]]])
function M.group_norm(x, num_groups, weight, bias, eps)
  check_tensor("group_norm", x, "input")
  return V.group_norm(x, num_groups, weight, bias, eps or 1e-5)
end

--- instance_norm(x [N x C x ...][, {running_mean, running_var, weight, bias, use_input_stats=true, momentum=0.1,
--- eps=1e-5}]): each (item, channel) normalised by its own statistics; with use_input_stats=false by the running
--- ones; running stats given with use_input_stats are updated in place (batch average, unbiased variance)
function M.instance_norm(x, opts)
  check_tensor("instance_norm", x, "input")
  local o = H.check_opts("instance_norm", opts, { running_mean = "tensor", running_var = "tensor", weight = "tensor",
    bias = "tensor", use_input_stats = "boolean", momentum = "number", eps = "number" }, 2)
  local eps, momentum = o.eps or 1e-5, o.momentum or 0.1
  if o.use_input_stats == false then
    if not (o.running_mean and o.running_var) then
      error("instance_norm: use_input_stats=false needs running_mean and running_var", 2)
    end
    return C.batch_norm(x, o.running_mean, o.running_var, o.weight, o.bias, false, momentum, eps)
  end
  if x:dim() < 2 then error("instance_norm: input must be [batch x channels x ...], got " .. x:shape_str(), 2) end
  return V.group_norm(x, x:size(2), o.weight, o.bias, eps, o.running_mean, o.running_var, momentum)
end

-- PyTorch 1.13 warns, once here, about the inputs its channel dropouts take but deprecate
local warned = {}
local function warn_once(key, msg)
  if warned[key] then return end
  warned[key] = true
  lt._warn(msg)
end

-- PyTorch's feature dropout: one draw per item and channel (dims 1 and 2), shared by the rest of the dims; a 2-D
-- input [N, C] gets one draw per element
local function feature_dropout(x, p, training)
  if training == false or p == 0 then return x end
  local shape = x:shape()
  for d = 3, #shape do shape[d] = 1 end
  return x * C.dropout(lt.ones(shape), p, true)
end

local function check_p(fn, p)
  if type(p) ~= "number" or not (p >= 0 and p <= 1) then
    error(fn .. ": p must be a probability between 0 and 1, got " .. tostring(p), 3)
  end
end

-- dropout2d/3d's arguments after x: positional or one options table (lua/lutra/F/args.lua)
local DROPOUT_ARGS = { { "p", "probability", 0.5 }, { "training", "boolean", true }, { "inplace", "boolean", false } }

--- dropout2d(x [N x C x H x W] (or [N x C x L])[, p = 0.5[, training = true[, inplace = false]]]): zeroes whole
--- channels (one draw per item and channel from lt's RNG) and scales the rest by 1/(1-p). As PyTorch 1.13: a 3-D
--- input is [N, C, L] and any other input of 2 dims or more is taken as [N, C, ...] with a warning (a 2-D input
--- drops single elements).
function M.dropout2d(x, ...)
  check_tensor("dropout2d", x, "input")
  local p, training, inplace = FA.args("dropout2d", DROPOUT_ARGS, ...)
  check_p("dropout2d", p)
  local n = x:dim()
  if n < 2 then
    error("dropout2d: input must have at least 2 dimensions ([N x C x H x W]), got " .. x:shape_str(), 2)
  end
  if n == 3 then
    warn_once("dropout2d3", "dropout2d: a 3-D input is taken as [N, C, L] (channel-wise 1-D dropout), as PyTorch "
      .. "1.13 does; PyTorch's later releases read it as [C, H, W]")
  elseif n ~= 4 then
    warn_once("dropout2d" .. n, string.format("dropout2d: a %d-D input is deprecated (PyTorch 1.13): it is taken as "
      .. "[N, C, ...]%s; dropout2d is for 3-D or 4-D inputs, use dropout for element-wise dropout", n,
      n == 2 and ", which drops single elements" or ""))
  end
  return FA.result(inplace, x, feature_dropout(x, p, training), "dropout2d")
end

--- dropout3d(x [N x C x D x H x W] (or [C x D x H x W])[, p = 0.5[, training = true[, inplace = false]]]): zeroes
--- whole channels, as dropout2d. As PyTorch 1.13: an input that is not 5-D is taken as one item without the batch
--- dimension ([C, ...]), with a warning unless it is 4-D.
function M.dropout3d(x, ...)
  check_tensor("dropout3d", x, "input")
  local p, training, inplace = FA.args("dropout3d", DROPOUT_ARGS, ...)
  check_p("dropout3d", p)
  local n = x:dim()
  if n < 1 then error("dropout3d: input must have at least 1 dimension ([N x C x D x H x W]), got a scalar", 2) end
  if n ~= 4 and n ~= 5 then
    warn_once("dropout3d" .. n, string.format("dropout3d: a %d-D input is deprecated (PyTorch 1.13): it is taken as "
      .. "one item [C, ...]; dropout3d is for 4-D or 5-D inputs, use dropout for element-wise dropout", n))
  end
  if n == 5 then return FA.result(inplace, x, feature_dropout(x, p, training), "dropout3d") end
  return FA.result(inplace, x, feature_dropout(x:unsqueeze(1), p, training):squeeze(1), "dropout3d")
end

return M
