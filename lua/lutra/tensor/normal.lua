-- tensor/normal.lua — lt.normal in PyTorch 1.13's four forms, drawn from lutra's RNG (lt.manual_seed):
--   lt.normal(mean, std, size[, dtype])     numbers, a tensor of size (the default dtype unless given)
--   lt.normal(mean_t[, std = 1])            a tensor of mean_t's shape and dtype
--   lt.normal(mean, std_t)                  a tensor of std_t's shape and dtype
--   lt.normal(mean_t, std_t)                the broadcast shape, mean_t's dtype (as torch 1.13)
-- The result records no gradient: PyTorch's gradient of normal with respect to mean and std is zero.
local core = require "lutra.core"
local util = require "lutra.utils.check"

local fmt = string.format

local function check_float(t, what)
  if t:dtype() == "int64" then error(fmt("normal: %s must be float32 or float64, got int64", what), 4) end
end

local function check_std_number(std)
  if not (std >= 0) then error(fmt("normal: std must be >= 0, got %s", tostring(std)), 4) end
end

local function draw(mean, std)
  local m_t, s_t = core.is_tensor(mean), core.is_tensor(std)
  if m_t then check_float(mean, "mean") end
  if s_t then
    check_float(std, "std")
    if std:numel() > 0 and not (std:min():item() >= 0) then
      error(fmt("normal: every element of std must be >= 0, got %s", tostring(std:min():item())), 3)
    end
  end
  if not s_t then check_std_number(std) end
  return util.call_as("normal", core.no_grad, function()
    local m = m_t and mean:detach() or mean
    local s = s_t and std:detach() or std
    local like = m_t and s_t and (m + s) or (m_t and m) or s -- the broadcast shape
    local out = core.randn(like:shape(), (m_t and m or s):dtype()) * s + m
    return m_t and out:to(m:dtype()) or out
  end)
end

--- lt.normal(mean, std, size[, dtype]) or lt.normal(mean_t[, std]) / (mean, std_t) / (mean_t, std_t)
function core.normal(mean, std, size, dtype)
  local m_t, s_t = core.is_tensor(mean), core.is_tensor(std)
  if not m_t and type(mean) ~= "number" then util.check_arg("normal", 1, mean, "tensor|number") end
  if std ~= nil and not s_t and type(std) ~= "number" then util.check_arg("normal", 2, std, "tensor|number") end
  if m_t or s_t then
    if size ~= nil then
      error("normal: size is only for numbers mean and std (the shape comes from the tensors)", 2)
    end
    return draw(mean, std == nil and 1 or std)
  end
  if type(size) ~= "table" then
    error(fmt("normal: with numbers mean and std, the size must be a table, normal(mean, std, {size}), got %s",
      type(size)), 2)
  end
  std = std == nil and 1 or std
  check_std_number(std)
  if dtype == "int64" or dtype == "long" then error("normal: dtype must be float32 or float64, got int64", 2) end
  return util.call_as("normal", function() return core.randn(size, dtype) * std + mean end)
end

return core.normal
