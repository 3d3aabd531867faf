-- tests/helpers/rel_diff.lua — the largest absolute difference of tensors a and b (same size, a spec failure
-- otherwise), relative to b's largest magnitude (or absolute when b is all zeros).
--
--   local rel_diff = require "tests.helpers.rel_diff"
--   assert.is_true(rel_diff(two_threads, one_thread) <= 1e-5)
return function(a, b)
  local sa, sb = table.concat(a:size(), "x"), table.concat(b:size(), "x")
  if sa ~= sb then error("rel_diff: sizes differ: " .. sa .. " and " .. sb, 2) end
  local scale = b:abs():max():item()
  return (a - b):abs():max():item() / (scale > 0 and scale or 1)
end
