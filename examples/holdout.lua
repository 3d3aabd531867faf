-- examples/holdout.lua — the validation split the example scripts share: the last n_val samples of a data set
-- validate, the ones before them train (consecutive ranges, so lt.data.Subset makes views: no copy).
--
--   local train, val = require("examples.holdout")(full, 500)    -- two lt.data.Subset
local lt = require "lutra"

return function(ds, n_val)
  local n_train = #ds - n_val
  local train_idx, val_idx = {}, {}
  for i = 1, n_train do train_idx[i] = i end
  for i = 1, n_val do val_idx[i] = n_train + i end
  return lt.data.Subset(ds, train_idx), lt.data.Subset(ds, val_idx)
end
