-- tests/helpers/nn_fixtures.lua — reading tests/fixtures/*.json (see tests/fixtures/README.md) and
-- comparing tensors with the fixtures' tolerance |got - ref| <= max(atol, rtol * |ref|).
local lt = require "lutra"
local cjson = require "cjson"

local X = {}

function X.load(name)
  local f = assert(io.open("tests/fixtures/" .. name, "rb"))
  local s = f:read("*a")
  f:close()
  return cjson.decode(s)
end

--- A fixture tensor object {shape, data[, dtype]} as a lutra tensor.
function X.tensor(obj)
  local dtype = obj.dtype == "int64" and "int64" or "float32"
  if #obj.shape == 0 then return lt.tensor(obj.data[1], dtype) end
  return lt.tensor(obj.data, dtype):reshape(obj.shape)
end

--- The module of a modules.json-style case: lt.nn[case.module](args..., opts) (opts left out when empty).
--- A JSON null inside a list argument (PyTorch's None, e.g. output_size (None, 3)) becomes false, lutra's
--- spelling of an entry that a trailing nil could not hold.
function X.build_module(case)
  local args = {}
  for i, a in ipairs(case.args) do
    if type(a) == "table" then
      local t = {}
      for k, v in pairs(a) do t[k] = v ~= cjson.null and v end
      a = t
    end
    args[i] = a
  end
  if next(case.opts) ~= nil then args[#args + 1] = case.opts end
  return lt.nn[case.module](unpack(args, 1, #case.args + 1))
end

--- Raises a message naming what, the element and both values when got and ref differ (NaN matches NaN and an
--- infinity the same infinity).
function X.check(what, got, ref, rtol, atol)
  rtol, atol = rtol or 1e-5, atol or 1e-6
  assert(got ~= nil, what .. ": no tensor (nil)")
  local rs = ref.shape
  local gs = got:shape()
  assert(#gs == #rs, string.format("%s: shape %s, expected [%s]", what, got:shape_str(), table.concat(rs, " x ")))
  for i = 1, #rs do
    assert(gs[i] == rs[i], string.format("%s: shape %s, expected [%s]", what, got:shape_str(), table.concat(rs, " x ")))
  end
  local g = got:flatten():tolist()
  for i, r in ipairs(ref.data) do
    local tol = math.max(atol, rtol * math.abs(r))
    local same_special = (g[i] ~= g[i] and r ~= r) or (g[i] == r) -- both NaN, or the same infinity
    if not same_special and not (math.abs(g[i] - r) <= tol) then
      error(string.format("%s: element %d is %.9g, expected %.9g (diff %.3g > tol %.3g)", what, i, g[i], r,
        math.abs(g[i] - r), tol), 2)
    end
  end
  return true
end

--- The specs of a fixture file of ops2.json's layout ({name, inputs, gout, out, grads}): one `it` per case
--- checking ops[case.name](inputs...) and the gradients of sum(out * gout); plus one that every case has an op.
--- `it` is the spec's own (busted gives each spec file its own environment).
function X.describe_cases(it, file, ops)
  local cases = X.load(file)
  it("has a lutra function for every case", function()
    for _, cs in ipairs(cases) do assert(ops[cs.name], "no op for fixture case " .. cs.name) end
  end)
  for _, cs in ipairs(cases) do
    it("matches " .. cs.name .. " (values and gradients)", function()
      local ins = {}
      for i, t in ipairs(cs.inputs) do
        ins[i] = X.tensor(t)
        if type(cs.grads[i]) == "table" then ins[i]:requires_grad(true) end
      end
      local out = ops[cs.name](unpack(ins))
      X.check(cs.name .. " output", out, cs.out)
      local any = false
      for i = 1, #ins do if ins[i]:requires_grad() then any = true end end
      if any then
        out:backward(X.tensor(cs.gout))
        for i, g in ipairs(cs.grads) do
          if type(g) == "table" then X.check(cs.name .. " grad of input " .. i, ins[i].grad, g) end
        end
      end
    end)
  end
end

return X
