-- tests/helpers/err_of.lua — the message of the error that f(...) raises (a spec failure when it raises none).
--
--   local err_of = require "tests.helpers.err_of"
--   assert.matches("softplus: beta must not be 0", err_of(lt.F.softplus, x, 0), 1, true)
return function(f, ...)
  local ok, e = pcall(f, ...)
  assert(not ok, "expected an error")
  return tostring(e)
end
