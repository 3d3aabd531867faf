-- nn/embedding.lua — Embedding(n, d[, {padding_idx}]): a lookup table weight [n, d] ~ N(0, 1) indexed by
-- 1-based int64 indices of any shape -> [indices shape..., d]. Repeated indices accumulate gradient;
-- the padding row (1-based padding_idx) starts at zero and gets no gradient.
local lt = require "lutra"
local core = require "lutra.core"
local H = require "lutra.nn.helpers"

local Embedding = H.class("Embedding")
Embedding._params = { "weight" }

function Embedding:init(n, d, opts)
  H.check_int("Embedding", "num_embeddings", n, 1, 3)
  H.check_int("Embedding", "embedding_dim", d, 1, 3)
  opts = H.check_opts("Embedding", opts, { padding_idx = "number" }, 3)
  self.num_embeddings, self.embedding_dim = n, d
  local pad = opts.padding_idx
  if pad ~= nil then
    if pad < 0 then pad = n + 1 + pad end
    if pad < 1 or pad > n then error(string.format("Embedding: padding_idx must be in 1..%d, got %d", n, opts.padding_idx), 3) end
    self.padding_idx = pad
  end
  self.weight = H.param({ n, d }, function(t)
    t:normal_(0, 1)
    if pad then t:narrow(1, pad, 1):zero_() end
  end)
end

function Embedding:extra_repr()
  return self.num_embeddings .. ", " .. self.embedding_dim .. (self.padding_idx and (", padding_idx=" .. self.padding_idx) or "")
end

function Embedding:forward(idx)
  if not lt.is_tensor(idx) then self:fail("expected an int64 tensor of indices, got " .. type(idx)) end
  if idx:dtype() ~= "int64" then self:fail("indices must be int64 (1-based), got " .. idx:dtype()) end
  local ok, res = pcall(core._nn.embedding, idx, self.weight, self.padding_idx)
  if not ok then self:fail((tostring(res):gsub("^embedding: ", ""))) end
  return res
end

return Embedding
