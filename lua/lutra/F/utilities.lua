-- F/utilities.lua — lt.F's tensor utilities (PyTorch's torch.nn.functional names): one_hot, pad, normalize,
-- cosine_similarity, interpolate, pixel_shuffle, pixel_unshuffle. Composed of the core's differentiable ops (cat,
-- index_select, matmul, sum, clamp, reshape, permute), so each has a backward. Dims are 1-based (PyTorch's default
-- dim=1 is 2 here); classes are 1-based.
--
--   local y = lt.F.one_hot(targets, 10)                                  -- [N] int64 1..10 -> [N x 10] int64
--   local p = lt.F.pad(x, {1, 1, 2, 0}, {mode = "reflect"})             -- last dim by 1+1, the one before by 2+0
--   local u = lt.F.interpolate(x, {scale_factor = 2, mode = "bilinear", align_corners = false})
local lt = require "lutra"
local H = require "lutra.nn.helpers"

local M = {}

local function check_tensor(fname, x, what)
  if not lt.is_tensor(x) then error(string.format("%s: %s must be a tensor, got %s", fname, what, type(x)), 3) end
end

local function dim_of(fname, x, dim)
  local n = x:dim()
  if type(dim) ~= "number" or dim ~= math.floor(dim) or dim == 0 or dim > n or dim < -n then
    error(string.format("%s: dim %s is out of range for a %d-dim tensor", fname, tostring(dim), n), 3)
  end
  return dim < 0 and dim + n + 1 or dim
end

local function one_hot_of(t, C) return t:unsqueeze(-1):eq(lt.arange(1, C + 1, 1, "int64")):long() end

--- one_hot(t int64 1..C[, num_classes = max(t)]) -> int64 [..., C]
function M.one_hot(t, num_classes)
  check_tensor("one_hot", t, "input")
  if t:dtype() ~= "int64" then error("one_hot: classes must be int64 (1-based), got " .. t:dtype(), 2) end
  local C = num_classes
  if C == nil or C == -1 then
    if t:numel() == 0 then error("one_hot: cannot infer num_classes of an empty tensor", 2) end
    C = t:max():item()
  end
  if type(C) ~= "number" or C < 1 or C ~= math.floor(C) or C == math.huge then
    error("one_hot: num_classes must be a positive integer, got " .. tostring(C), 2)
  end
  if t:numel() > 0 then
    local lo, hi = t:min():item(), t:max():item()
    if lo < 1 or hi > C then
      error(string.format("one_hot: class %d is out of range 1..%d (classes are 1-based)", lo < 1 and lo or hi, C), 2)
    end
  end
  -- a num_classes too large to allocate fails in arange or eq: that error is one_hot's
  return require("lutra.utils.check").call_as("one_hot", one_hot_of, t, C)
end

-- 1-based source indices of a padded dim of size n: before, the body, after.
local function pad_index(mode, n, before, after)
  local idx = {}
  for i = 1 - before, n + after do
    local j
    if mode == "replicate" then j = math.min(math.max(i, 1), n)
    else -- reflect: mirror about the first and last elements (which are not repeated)
      j = i
      if j < 1 then j = 2 - j end
      if j > n then j = 2 * n - j end
    end
    idx[#idx + 1] = j
  end
  return lt.tensor(idx, "int64")
end

--- pad(x, {left, right[, top, bottom[, front, back]]}[, {mode = "constant", value = 0}]), or PyTorch's positional
--- pad(x, pad, mode[, value]): the pairs pad the last dim, then the one before, ... (PyTorch's order); negative
--- amounts crop (constant mode). The padding has x's dtype.
function M.pad(x, pad, opts, pos_value)
  check_tensor("pad", x, "input")
  if type(opts) == "string" or (opts == nil and pos_value ~= nil) then
    opts = { mode = opts, value = pos_value }
  elseif pos_value ~= nil then
    error("pad: the value comes after the mode (pad(x, pad, mode, value)) or in the options table", 2)
  end
  local o = H.check_opts("pad", opts, { mode = "string", value = "number" })
  local mode, value = o.mode or "constant", o.value or 0
  if mode ~= "constant" and mode ~= "reflect" and mode ~= "replicate" then
    error(string.format('pad: mode must be "constant", "reflect" or "replicate", got "%s"', mode), 2)
  end
  if mode ~= "constant" and o.value ~= nil then error("pad: value is only for mode \"constant\"", 2) end
  if type(pad) ~= "table" or #pad % 2 ~= 0 or #pad == 0 then
    error("pad: the padding must be a list of an even number of sizes {left, right, ...}", 2)
  end
  if #pad / 2 > x:dim() then
    error(string.format("pad: %d pairs of padding for a %d-dim input %s", #pad / 2, x:dim(), x:shape_str()), 2)
  end
  for i, p in ipairs(pad) do
    if type(p) ~= "number" or p ~= math.floor(p) then
      error(string.format("pad: padding %d must be an integer, got %s", i, tostring(p)), 2)
    end
  end
  local y = x
  for k = 1, #pad / 2 do
    local d, before, after = x:dim() - k + 1, pad[2 * k - 1], pad[2 * k]
    local n = y:size(d)
    if mode == "constant" then
      if before < 0 then y = y:narrow(d, 1 - before, n + before); n = n + before; before = 0 end
      if after < 0 then y = y:narrow(d, 1, n + after); after = 0 end
      local parts = {}
      local shape = y:shape()
      if before > 0 then shape[d] = before; parts[#parts + 1] = lt.full(shape, value, x:dtype()) end
      parts[#parts + 1] = y
      if after > 0 then shape = y:shape(); shape[d] = after; parts[#parts + 1] = lt.full(shape, value, x:dtype()) end
      if #parts > 1 then y = lt.cat(parts, d) end
    else
      if before < 0 or after < 0 then error("pad: negative padding is only for mode \"constant\"", 2) end
      if mode == "reflect" and (before >= n or after >= n) then
        error(string.format("pad: reflect padding (%d, %d) must be smaller than the size %d of dim %d", before, after,
          n, d), 2)
      end
      if before > 0 or after > 0 then y = y:index_select(d, pad_index(mode, n, before, after)) end
    end
  end
  return y
end

-- max(||x||_p, eps) along dim (kept), computed so that a zero row has a zero gradient rather than NaN
local function clamped_norm(x, p, dim, eps)
  if p == math.huge then return x:abs():max(dim, true):clamp(eps, math.huge) end
  if p == 2 then return x:square():sum(dim, true):clamp(eps * eps, math.huge):sqrt() end
  if p == 1 then return x:abs():sum(dim, true):clamp(eps, math.huge) end
  return (x:abs() ^ p):sum(dim, true):clamp(eps ^ p, math.huge) ^ (1 / p)
end

--- normalize(x[, {p = 2, dim = 2, eps = 1e-12}]): x / max(||x||_p, eps) along dim.
function M.normalize(x, opts)
  check_tensor("normalize", x, "input")
  local o = H.check_opts("normalize", opts, { p = "number", dim = "number", eps = "number" })
  local p, eps = o.p or 2, o.eps or 1e-12
  if p ~= p or p <= 0 then error("normalize: p must be > 0, got " .. tostring(p), 2) end
  local dim = dim_of("normalize", x, o.dim or 2)
  return x / clamped_norm(x, p, dim, eps)
end

--- cosine_similarity(a, b[, {dim = 2, eps = 1e-8}]): sum(a * b) / (max(||a||, eps) * max(||b||, eps)) along dim
--- (a and b broadcast), the dim removed.
function M.cosine_similarity(a, b, opts)
  check_tensor("cosine_similarity", a, "x1")
  check_tensor("cosine_similarity", b, "x2")
  local o = H.check_opts("cosine_similarity", opts, { dim = "number", eps = "number" })
  local ok, prod = pcall(function() return a * b end)
  if not ok then
    error(string.format("cosine_similarity: shapes %s and %s cannot be broadcast", a:shape_str(), b:shape_str()), 2)
  end
  local dim = dim_of("cosine_similarity", prod, o.dim or 2)
  local eps = o.eps or 1e-8
  local na, nb = clamped_norm(a, 2, dim, eps), clamped_norm(b, 2, dim, eps)
  return (prod:sum(dim, true) / (na * nb)):squeeze(dim)
end

-- The [out x in] matrix that maps a dim of size n_in to n_out: rows of 0/1 (nearest) or of two weights
-- (linear), with PyTorch's source coordinates. scale is the user's scale_factor (nil when size was given).
local function interp_matrix(mode, n_in, n_out, align_corners, scale, dtype)
  local w = {}
  local ratio = scale and 1 / scale or n_in / n_out
  for i = 0, n_out - 1 do
    local row = {}
    for j = 1, n_in do row[j] = 0 end
    if mode == "nearest" then
      row[math.min(math.floor(i * ratio), n_in - 1) + 1] = 1
    else
      local src
      if align_corners then src = n_out > 1 and i * (n_in - 1) / (n_out - 1) or 0
      else src = math.max((i + 0.5) * ratio - 0.5, 0) end
      local j0 = math.min(math.floor(src), n_in - 1)
      local j1 = math.min(j0 + 1, n_in - 1)
      local f = src - j0
      row[j0 + 1] = row[j0 + 1] + (1 - f)
      row[j1 + 1] = row[j1 + 1] + f
    end
    w[i + 1] = row
  end
  return lt.tensor(w, dtype)
end

--- interpolate(x [N x C x H x W] (or [N x C x L]), {size = | scale_factor =, mode = "nearest"|"bilinear"|"linear",
--- align_corners = false}), or PyTorch's positional interpolate(x, size, scale_factor, mode, align_corners) (size a
--- number or a list, nil when scale_factor is given): resampled spatial dims, in x's dtype; differentiable in x
--- (two matmuls with interpolation matrices).
function M.interpolate(x, opts, ...)
  check_tensor("interpolate", x, "input")
  if type(opts) ~= "table" or lt.is_tensor(opts) or opts[1] ~= nil or select("#", ...) > 0 then
    local scale_factor, mode, align_corners = ...
    opts = { size = opts, scale_factor = scale_factor, mode = mode, align_corners = align_corners }
  end
  local o = H.check_opts("interpolate", opts, { size = "number|table", scale_factor = "number|table",
    mode = "string", align_corners = "boolean" })
  local mode = o.mode or "nearest"
  local nsp = x:dim() - 2
  local want = ({ nearest = nil, linear = 1, bilinear = 2 })[mode]
  if mode ~= "nearest" and mode ~= "linear" and mode ~= "bilinear" then
    error(string.format('interpolate: mode must be "nearest", "linear" or "bilinear", got "%s"', mode), 2)
  end
  if nsp ~= 1 and nsp ~= 2 or (want and want ~= nsp) then
    error(string.format("interpolate: mode %s takes a %s input, got %s", mode,
      want == 1 and "[N x C x L]" or want == 2 and "[N x C x H x W]" or "[N x C x L] or [N x C x H x W]",
      x:shape_str()), 2)
  end
  if mode == "nearest" and o.align_corners ~= nil then
    error("interpolate: align_corners is only for the linear modes", 2)
  end
  if (o.size == nil) == (o.scale_factor == nil) then
    error("interpolate: give exactly one of size and scale_factor", 2)
  end
  local function per_dim(v, what)
    local t = type(v) == "table" and v or {}
    if type(v) == "number" then for i = 1, nsp do t[i] = v end end
    if #t ~= nsp then error(string.format("interpolate: %s needs %d value(s), got %d", what, nsp, #t), 3) end
    for i = 1, nsp do
      if type(t[i]) ~= "number" then
        error(string.format("interpolate: %s[%d] must be a number, got %s", what, i, type(t[i])), 3)
      end
    end
    return t
  end
  local sizes, scales = {}, nil
  if o.size then
    sizes = per_dim(o.size, "size")
  else
    scales = per_dim(o.scale_factor, "scale_factor")
    for i = 1, nsp do sizes[i] = math.floor(x:size(2 + i) * scales[i]) end
  end
  for i = 1, nsp do
    if sizes[i] < 1 or sizes[i] ~= math.floor(sizes[i]) then
      error(string.format("interpolate: output size %s must be a positive integer", tostring(sizes[i])), 2)
    end
    -- the interpolation matrices are built row by row as Lua tables: an infinite or huge scale_factor
    -- would exhaust the Lua heap before any tensor size check could refuse it
    if sizes[i] >= 2 ^ 31 then
      error(string.format("interpolate: output size %.14g is too large (at most 2^31 - 1 per dim)", sizes[i]), 2)
    end
  end
  local ac = o.align_corners == true
  local y = x
  local last = x:dim()
  local aw = interp_matrix(mode, x:size(last), sizes[nsp], ac, scales and scales[nsp], x:dtype())
  y = y:matmul(aw:t())
  if nsp == 2 then
    local ah = interp_matrix(mode, x:size(last - 1), sizes[1], ac, scales and scales[1], x:dtype())
    y = ah:matmul(y)
  end
  return y
end

-- ---- pixel_shuffle, pixel_unshuffle ---------------------------------------------------------------------------

-- x [..., C, H, W] checked: a tensor of 3 dims or more and a factor r >= 1; returns the leading dims (a list), C, H, W
local function pixel_input(fname, x, r, what)
  check_tensor(fname, x, "input")
  if type(r) ~= "number" or r ~= math.floor(r) or r < 1 or r > 2 ^ 31 - 1 then
    error(string.format("%s: %s must be an integer >= 1, got %s", fname, what, tostring(r)), 3)
  end
  local shape = x:shape()
  local n = #shape
  if n < 3 then
    error(string.format("%s: input must be [... x C x H x W] (3 dims or more), got %s", fname, x:shape_str()), 3)
  end
  local lead = {}
  for i = 1, n - 3 do lead[i] = shape[i] end
  return lead, shape[n - 2], shape[n - 1], shape[n]
end

local function with_lead(lead, ...)
  local out = {}
  for i = 1, #lead do out[i] = lead[i] end
  for _, v in ipairs { ... } do out[#out + 1] = v end
  return out
end

-- the permutation of the 5 trailing dims after k leading ones
local function perm_after(k, ...)
  local p = {}
  for i = 1, k do p[i] = i end
  for _, d in ipairs { ... } do p[#p + 1] = k + d end
  return p
end

--- pixel_shuffle(x [... x C*r^2 x H x W], r) -> [... x C x H*r x W*r]: each group of r^2 channels becomes an r x r
--- block of pixels (PyTorch's layout: channel c*r^2 + i*r + j goes to pixel (h*r + i, w*r + j) of channel c).
function M.pixel_shuffle(x, upscale_factor)
  local r = upscale_factor
  local lead, C, Hh, W = pixel_input("pixel_shuffle", x, r, "upscale_factor")
  if C % (r * r) ~= 0 then
    error(string.format("pixel_shuffle: the channels (dim %d of %s: %d) must be divisible by upscale_factor^2 = %d",
      x:dim() - 2, x:shape_str(), C, r * r), 2)
  end
  local c = math.floor(C / (r * r)) -- (an integer: Lua 5.3 keeps / a float)
  local y = x:reshape(with_lead(lead, c, r, r, Hh, W)):permute(perm_after(#lead, 1, 4, 2, 5, 3))
  return y:reshape(with_lead(lead, c, Hh * r, W * r))
end

--- pixel_unshuffle(x [... x C x H*r x W*r], r) -> [... x C*r^2 x H x W]: pixel_shuffle's inverse.
function M.pixel_unshuffle(x, downscale_factor)
  local r = downscale_factor
  local lead, C, Hh, W = pixel_input("pixel_unshuffle", x, r, "downscale_factor")
  if Hh % r ~= 0 or W % r ~= 0 then
    error(string.format("pixel_unshuffle: the height and width (%d x %d of %s) must be divisible by "
      .. "downscale_factor %d", Hh, W, x:shape_str(), r), 2)
  end
  local h, w = math.floor(Hh / r), math.floor(W / r)
  local y = x:reshape(with_lead(lead, C, h, r, w, r)):permute(perm_after(#lead, 1, 3, 5, 2, 4))
  return y:reshape(with_lead(lead, C * r * r, h, w))
end

return M
