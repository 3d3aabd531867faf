-- tensor/compare.lua — allclose and the logical ops (logical_and, logical_or, logical_not), composed of the core's
-- comparisons; 0/1 tensors as the core's comparisons give them.
local util = require "lutra.utils.check"
local A = require "lutra.tensor.args"

local M = {}

--- x:allclose(y[, rtol = 1e-5[, atol = 1e-8]]): every |x - y| <= atol + rtol * |y| (broadcasting, as
--- torch.allclose): NaN is close to nothing, equal infinities are close; shapes that cannot be broadcast are an error.
function M.allclose(a, b, rtol, atol)
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
      error(string.format("allclose: shapes %s and %s cannot be broadcast", util.shape_str(a), util.shape_str(b)), 2)
    end
  end
  local fa, fb = a:float(), b:float()
  local d = (fa - fb):abs()
  if d:numel() == 0 then return true end
  -- equal, or a finite difference within the tolerance (an infinite one is never close, as in torch.isclose)
  local close = fa:eq(fb):maximum(d:le(fb:abs() * rtol + atol) * d:lt(math.huge))
  return close:min():item() == 1
end

local function as_tensor(fname, n, v) return util.check_arg(fname, n, v, "tensor", 2) end
-- (a and b that cannot be broadcast: the error names the logical op, then the product or sum that found it)
local function mul(x, y) return x * y end
local function add_gt0(x, y) return (x + y):gt(0) end
function M.logical_and(a, b)
  return util.call_as("logical_and", mul, as_tensor("logical_and", 1, a):ne(0), as_tensor("logical_and", 2, b):ne(0))
end
function M.logical_or(a, b)
  return util.call_as("logical_or", add_gt0, as_tensor("logical_or", 1, a):ne(0), as_tensor("logical_or", 2, b):ne(0))
end
function M.logical_not(a) return as_tensor("logical_not", 1, a):eq(0) end

-- (logical_* take tensors in every position and check them all themselves)
A.register(M, { logical_and = true, logical_or = true, logical_not = true })

return M
