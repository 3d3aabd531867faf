-- tests/helpers/f64_ref.lua — float64 results against a torch fixture's {shape, data}: load(name) reads
-- tests/fixtures/<name>.json (written by tests/fixtures/gen_<name>.py); tensor_of(ref) builds the fixture's tensor;
-- check(what, got, ref) asserts dtype float64, the shape, and every element to 1e-12 relative (absolute below 1),
-- naming the first element apart.
--
--   local ref = require "tests.helpers.f64_ref"
--   local FX = ref.load("f64_rnn")
--   ref.check("h'", h, case.h)
local lt = require "lutra"
local assert = require "luassert" -- (a required module sees the plain global assert, not busted's)

local cjson = require "cjson"

local M = {}

function M.load(name)
  local path = "tests/fixtures/" .. name .. ".json"
  local f = assert(io.open(path, "rb"))
  local fx = cjson.decode(f:read("*a"))
  f:close()
  return fx
end

function M.tensor_of(obj) return lt.tensor(obj.data, "float64"):reshape(obj.shape) end

function M.check(what, got, ref)
  assert.are.equal("float64", got:dtype(), what .. ": dtype")
  assert.are.same(ref.shape, got:shape(), what .. ": shape")
  local g = got:flatten():tolist()
  for i, r in ipairs(ref.data) do
    if not (g[i] == r or math.abs(g[i] - r) <= 1e-12 * math.max(1, math.abs(r))) then -- (== for infinities)
      error(string.format("%s: element %d is %.17g, torch %.17g", what, i, g[i], r), 2)
    end
  end
end

return M
