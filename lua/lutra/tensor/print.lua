-- tensor/print.lua — how a tensor prints (tostring: its values, elided past a few per dim, then dtype and
-- shape), and x:shape_str().
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
  if dtype ~= "int64" and (maxabs >= 1e5 or (maxabs > 0 and maxabs < 1e-3)) then prec = nil end
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

return methods
