-- tests/helpers/rel_err.lua — the largest element-wise error of got against want, relative to each element's
-- magnitude plus one (so near-zero elements count absolutely); got is compared in want's precision (float64 when
-- the two dtypes differ).
--
--   local rel_err = require "tests.helpers.rel_err"
--   assert.is_true(rel_err(a:matmul(b), want_float64) < 2e-5)
return function(got, want)
  if got:dtype() ~= want:dtype() then got, want = got:double(), want:double() end
  return ((got - want):abs() / (want:abs() + 1)):max():item()
end
