-- callbacks/weights.lua — what the weight-averaging callbacks (swa.lua, ema.lua) share: a model's parameters
-- by name, detached copies of them, copying one set into another outside autograd, and which layers are
-- BatchNorm (finetuning.lua leaves them trainable, swa.lua recomputes their statistics).
local lt = require "lutra"

local M = {}

--- The model's parameters: a list of {name, tensor} in walk order (lt.nn.named_parameters).
function M.params(model)
  local named, order = lt.nn.named_parameters(model)
  local list = {}
  for i, name in ipairs(order) do list[i] = { name, named[name] } end
  return list
end

--- name -> a detached copy of each parameter.
function M.copies(model)
  local out = {}
  for _, np in ipairs(M.params(model)) do out[np[1]] = np[2]:detach():clone() end
  return out
end

--- Copies src (name -> tensor) into the model's parameters of the same names (in place, no graph);
--- `what` names the caller in the error for a name the model lacks.
function M.load_into(model, src, what)
  local named = lt.nn.named_parameters(model)
  lt.no_grad(function()
    for name, t in pairs(src) do
      local p = named[name]
      if p == nil then error(string.format("%s: the model has no parameter '%s'", what, name), 0) end
      p:copy_(t)
    end
  end)
end

--- Whether m is a BatchNorm layer (lua/lutra/nn/norm.lua's BatchNorm1d / BatchNorm2d).
function M.is_batch_norm(m)
  local mt = getmetatable(m)
  local name = type(mt) == "table" and rawget(mt, "__name") or nil
  return type(name) == "string" and name:match("^BatchNorm") ~= nil
end

--- Swaps the model's parameters with `other` (name -> tensor) in place.
function M.swap(model, other)
  local named = lt.nn.named_parameters(model)
  lt.no_grad(function()
    for name, t in pairs(other) do
      local p = named[name]
      local keep = p:detach():clone()
      p:copy_(t)
      t:copy_(keep)
    end
  end)
end

return M
