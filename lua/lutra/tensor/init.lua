-- lutra.tensor — the Lua side of the tensor type, which the core defines (core/bind/l_tensor.c): each file of
-- this folder adds tensor methods and lt.* functions of one topic, composed of the core's ops so that autograd
-- comes with them.
local methods = require("lutra.core").Tensor.methods

require "lutra.tensor.print" -- tostring, shape_str
require "lutra.tensor.compare" -- allclose, logical_and / or / not
require "lutra.tensor.reduce" -- var, std, argmin, logsumexp, any, all, norm over several dims
require "lutra.tensor.shape" -- split, chunk, repeat, tile, flip, roll, unbind, unflatten
require "lutra.tensor.sort" -- sort, topk
require "lutra.tensor.math" -- round with decimals
require "lutra.tensor.pointwise_aliases" -- fix, sgn, clip, clamp_min/max, float_power
require "lutra.tensor.stats" -- nansum, nanmean, quantile, nanquantile, cov, corrcoef
require "lutra.tensor.numpy_names" -- fliplr, flipud, atleast_nd, argwhere, triu/tril_indices, logspace
require "lutra.tensor.statistics" -- amax, amin, median, kthvalue, mode, var_mean, count_nonzero, ...
require "lutra.tensor.pointwise" -- nan_to_num, lerp, hypot, logaddexp, xlogy, isclose, equal, diff
require "lutra.tensor.rearrange" -- movedim, hstack, tensor_split, rot90, take, meshgrid, block_diag, ...
require "lutra.tensor.counting" -- bincount, histc, searchsorted, bucketize, unique, dist, cdist
require "lutra.tensor.dtype" -- x:to(dtype)
require "lutra.tensor.indexed_writes" -- index_copy, index_put (accumulate), and their in-place forms
require "lutra.tensor.normal" -- lt.normal with tensor means and stds
require "lutra.tensor.index" -- Torch7's x[{1, {2, 3}}] (the C __index hands it the keys it does not know)

return methods
