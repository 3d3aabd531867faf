-- tensor.lua — the Lua side of the tensor type: printing (tostring) and small conveniences that read
-- better in Lua than in C.
local core = require "lutra.core"
local mt = core.Tensor
local methods = mt.methods

local function fmt_number(v, dtype, width, prec)
  if dtype == "int64" then return string.format("%" .. width .. "d", v) end
  if v ~= v then return string.format("%" .. width .. "s", "nan") end
  if v == math.huge then return string.format("%" .. width .. "s", "inf") end
  if v == -math.huge then return string.format("%" .. width .. "s", "-inf") end
  return string.format("%" .. width .. "." .. prec .. "f", v)
end

local util = require "lutra.utils.check"
local shape_str = util.shape_str

local MAX_SHOWN = 6 -- per dim, before eliding with "..."

local function render(t)
  local dtype = t:dtype()
  local flat = t:numel() <= 1000 and t:flatten():tolist() or nil
  -- pick one width and precision for the whole tensor, like torch's printer
  local maxabs, prec = 0, 4
  local vals = flat or t:reshape(-1):narrow(1, 1, 1000):flatten():tolist()
  for i = 1, #vals do
    local a = math.abs(vals[i])
    if a == a and a ~= math.huge and a > maxabs then maxabs = a end
  end
  if dtype == "float32" and (maxabs >= 1e5 or (maxabs > 0 and maxabs < 1e-3)) then prec = nil end
  local function one(v)
    if prec == nil then return string.format("%12.4e", v) end
    local w = math.max(#string.format("%.0f", maxabs) + prec + 3, 8)
    return fmt_number(v, dtype, dtype == "int64" and #string.format("%d", maxabs) + 2 or w, prec)
  end
  local lines = {}
  local dims = t:shape()
  local function rec(sub, depth, prefix)
    if #dims == 0 then lines[#lines + 1] = one(t:item()); return end
    local n = dims[depth]
    if depth == #dims then
      local row = {}
      for i = 1, n do
        if n > 2 * MAX_SHOWN and i == MAX_SHOWN + 1 then row[#row + 1] = "    ..." end
        if n <= 2 * MAX_SHOWN or i <= MAX_SHOWN or i > n - MAX_SHOWN then row[#row + 1] = one(sub[i]:item()) end
      end
      lines[#lines + 1] = prefix .. table.concat(row, " ")
      return
    end
    for i = 1, n do
      if n > 2 * MAX_SHOWN and i == MAX_SHOWN + 1 then lines[#lines + 1] = prefix .. "..." end
      if n <= 2 * MAX_SHOWN or i <= MAX_SHOWN or i > n - MAX_SHOWN then
        if depth == #dims - 2 and #dims > 2 then lines[#lines + 1] = prefix .. "(" .. i .. ",.,.)" end
        rec(sub[i], depth + 1, prefix)
      end
    end
  end
  rec(t, 1, "")
  return table.concat(lines, "\n")
end

mt.__tostring = function(t)
  local body = t:numel() == 0 and "(empty)" or render(t)
  local extra = ""
  if t:grad_fn() then extra = ", grad_fn=" .. t:grad_fn()
  elseif t:requires_grad() then extra = ", requires_grad=true" end
  return body .. "\n[" .. t:dtype() .. " tensor of shape " .. shape_str(t) .. extra .. "]"
end

methods.shape_str = shape_str

--- x:allclose(y[, rtol = 1e-5[, atol = 1e-8]]): every |x - y| <= atol + rtol * |y| (broadcasting, as
--- torch.allclose): NaN is close to nothing, equal infinities are close; shapes that cannot be broadcast are an error.
function methods.allclose(a, b, rtol, atol)
  rtol, atol = rtol or 1e-5, atol or 1e-8
  util.check_arg("allclose", 2, b, "tensor")
  util.check_arg("allclose", 3, rtol, "number")
  util.check_arg("allclose", 4, atol, "number")
  -- the broadcast rule checked here, not by catching the subtraction's error: any other failure (out of
  -- memory) keeps its own message
  local sa, sb = a:shape(), b:shape()
  for i = 0, math.min(#sa, #sb) - 1 do
    local x, y = sa[#sa - i], sb[#sb - i]
    if x ~= y and x ~= 1 and y ~= 1 then
      error(string.format("allclose: shapes %s and %s cannot be broadcast", shape_str(a), shape_str(b)), 2)
    end
  end
  local fa, fb = a:float(), b:float()
  local d = (fa - fb):abs()
  if d:numel() == 0 then return true end
  -- equal, or a finite difference within the tolerance (an infinite one is never close, as in torch.isclose)
  local close = fa:eq(fb):maximum(d:le(fb:abs() * rtol + atol) * d:lt(math.huge))
  return close:min():item() == 1
end

-- ---- reductions and helpers composed of the core's ops (autograd comes with them) ---------------------

local function var_of(fname, x, dim, keepdim, opts)
  opts = util.check_options(fname, opts, { unbiased = "boolean" }, 3)
  local unbiased = opts.unbiased ~= false
  if dim ~= nil then dim = util.check_dim(fname, dim, x:dim(), 3) end
  local n = dim == nil and x:numel() or x:size(dim)
  local centred = x - (dim == nil and x:mean() or x:mean(dim, true))
  local ss = dim == nil and centred:square():sum() or centred:square():sum(dim, keepdim)
  return ss / (unbiased and n - 1 or n) -- one element, unbiased: 0/0 = NaN, as torch.var
end

--- x:var([dim[, keepdim[, {unbiased = true}]]]): the variance over all elements or along dim (1-based),
--- Bessel-corrected unless unbiased = false (torch.var's default).
function methods.var(x, dim, keepdim, opts) return var_of("var", x, dim, keepdim, opts) end

--- x:std(...): the square root of x:var(...).
function methods.std(x, dim, keepdim, opts) return var_of("std", x, dim, keepdim, opts):sqrt() end

--- x:argmin([dim[, keepdim]]): 1-based index of the minimum (the first one), over all elements (flat) or along dim.
function methods.argmin(x, dim, keepdim)
  if dim == nil then return select(2, x:reshape(-1):min(1)) end
  return select(2, x:min(util.check_dim("argmin", dim, x:dim()), keepdim))
end

--- x:split(size[, dim = 1]): views of x along dim in pieces of `size` (the last may be shorter), as a list.
function methods.split(x, size, dim)
  if x:dim() == 0 then error("split: a 0-dim tensor has no dim to split", 2) end
  dim = util.check_dim("split", dim or 1, x:dim())
  if type(size) ~= "number" or size < 1 or size ~= math.floor(size) then
    error("split: size must be a positive integer, got " .. tostring(size), 2)
  end
  local n, parts = x:size(dim), {}
  for start = 1, n, size do parts[#parts + 1] = x:narrow(dim, start, math.min(size, n - start + 1)) end
  return parts
end

--- x:chunk(n[, dim = 1]): x split into n pieces of ceil(size / n) (fewer when it does not divide), as torch.chunk.
function methods.chunk(x, n, dim)
  if type(n) ~= "number" or n < 1 or n ~= math.floor(n) then
    error("chunk: the number of chunks must be a positive integer, got " .. tostring(n), 2)
  end
  if x:dim() == 0 then error("chunk: a 0-dim tensor has no dim to split", 2) end
  dim = util.check_dim("chunk", dim or 1, x:dim())
  return methods.split(x, math.max(1, math.ceil(x:size(dim) / n)), dim)
end

for _, name in ipairs { "var", "std", "argmin", "split", "chunk", "allclose" } do
  if rawget(core, name) == nil then core[name] = util.tensor_function(name, methods[name]) end
end


require "lutra.tensor.shape" -- sort, topk, logsumexp, any/all, repeat, flip, roll, unbind ...

return methods
