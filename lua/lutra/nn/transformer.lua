-- nn/transformer.lua — PyTorch 1.13's transformer: TransformerEncoderLayer, TransformerEncoder,
-- TransformerDecoderLayer, TransformerDecoder, Transformer, with its parameter names and defaults.
--
--   local layer = lt.nn.TransformerEncoderLayer(64, 4, {dim_feedforward = 256, batch_first = true, norm_first = true})
--   local enc = lt.nn.TransformerEncoder(layer, 2, lt.nn.LayerNorm(64))
--   local y = enc(x, {mask = lt.nn.Transformer.generate_square_subsequent_mask(T), src_key_padding_mask = pad})
--
-- Layers: self_attn (and multihead_attn in a decoder layer), linear1, dropout, linear2, norm1..norm3,
-- dropout1..dropout3, as PyTorch names them. An encoder or decoder holds deep copies of the layer it is given
-- (so all start equal, as in PyTorch) in `layers`, named layers.0, layers.1, ... in state_dict (ipairs works:
-- enc.layers[1] is layers.0). Masks follow lt.nn.MultiheadAttention (nn/attention.lua). Every position is
-- computed, padded ones too (PyTorch's nested-tensor fast path, eval without grad, zeroes them instead).
local lt = require "lutra"
local MM = require "lutra.nn.module"
local Module = MM.Module
local H = require "lutra.nn.helpers"
local util = require "lutra.utils.check"
local MHA = require "lutra.nn.attention"
local Linear = require "lutra.nn.linear"
local Dropout = require "lutra.nn.dropout"
local LayerNorm = require("lutra.nn.norm").LayerNorm
local init = require "lutra.nn.initializers"
local ModuleList = require("lutra.nn.containers").ModuleList

local T = {}

-- ---- arguments: PyTorch's positional parameters stay positional, the rest go in a trailing table ---------

-- names[i] from the leading positional values, then the trailing options table (util.arguments: PyTorch's
-- convention, as every constructor's)
local function arguments(where, names, spec, ...)
  local o = util.arguments(where, names, spec, 3, ...) -- (not a tail call: the level counts this function)
  return o
end

local function is_callable(f)
  if type(f) == "function" then return true end
  local mt = getmetatable(f)
  return type(f) == "table" and type(mt) == "table" and mt.__call ~= nil
end

local LAYER_NAMES = { "d_model", "nhead", "dim_feedforward", "dropout", "activation", "layer_norm_eps",
  "batch_first", "norm_first" }
local LAYER_SPEC = { d_model = "number", nhead = "number", dim_feedforward = "number", dropout = "number",
  activation = function(v)
    if v == "relu" or v == "gelu" or is_callable(v) then return nil end
    return "must be \"relu\", \"gelu\" or a function, got " .. (type(v) == "string" and ('"' .. v .. '"') or type(v))
  end,
  layer_norm_eps = "number", batch_first = "boolean", norm_first = "boolean" }

-- the parts every layer has: feed-forward block, norms, dropouts, activation (PyTorch's defaults)
local function init_layer(self, where, o, n_norms)
  local d = H.check_int(where, "d_model", o.d_model, 1, 4)
  local ff = H.check_int(where, "dim_feedforward", o.dim_feedforward or 2048, 1, 4)
  local p = o.dropout or 0.1
  if not (p >= 0 and p <= 1) then -- (NaN fails both)
    error(string.format("%s: dropout must be a probability between 0 and 1, got %s", where, tostring(p)), 4)
  end
  local eps = H.check_finite(where, "layer_norm_eps", o.layer_norm_eps or 1e-5, 0, 4)
  self.batch_first, self.norm_first = o.batch_first == true, o.norm_first == true
  self.linear1 = Linear(d, ff)
  self.dropout = Dropout(p)
  self.linear2 = Linear(ff, d)
  for i = 1, n_norms do
    self["norm" .. i] = LayerNorm(d, { eps = eps })
    self["dropout" .. i] = Dropout(p)
  end
  self.activation = o.activation or "relu"
end

local function check_d_model(where, nhead, d_model)
  H.check_int(where, "nhead", nhead, 1, 5)
  if d_model % nhead ~= 0 then
    error(string.format("%s: d_model %d is not divisible by nhead %d", where, d_model, nhead), 5)
  end
end

-- linear2(dropout(activation(linear1(x)))); relu is fused into linear1's GEMM
local function feed_forward(self, x)
  local a, h = self.activation
  if a == "relu" then h = self.linear1:forward_relu(x)
  elseif a == "gelu" then h = self.linear1(x):gelu()
  else h = a(self.linear1(x)) end
  return self.linear2(self.dropout(h))
end

local function layer_repr(self)
  local s = self.linear1.in_features .. ", nhead=" .. self.self_attn.num_heads .. ", dim_feedforward=" ..
    self.linear1.out_features .. ", dropout=" .. self.dropout.p
  if type(self.activation) == "string" and self.activation ~= "relu" then s = s .. ", activation=" .. self.activation
  elseif type(self.activation) ~= "string" then s = s .. ", activation=<function>" end
  if self.batch_first then s = s .. ", batch_first=true" end
  if self.norm_first then s = s .. ", norm_first=true" end
  return s
end

local function check_input(self, what, x)
  if not lt.is_tensor(x) then self:fail(string.format("%s must be a tensor, got %s", what, type(x))) end
end

-- ---- TransformerEncoderLayer -------------------------------------------------------------------------------

local EncoderLayer = Module:extend("TransformerEncoderLayer")

function EncoderLayer:init(...)
  local o = arguments("TransformerEncoderLayer", LAYER_NAMES, LAYER_SPEC, ...)
  check_d_model("TransformerEncoderLayer", o.nhead, H.check_int("TransformerEncoderLayer", "d_model", o.d_model, 1, 3))
  init_layer(self, "TransformerEncoderLayer", o, 2) -- (checks the options the attention shares)
  self.self_attn = MHA(o.d_model, o.nhead, { dropout = self.dropout.p, batch_first = self.batch_first })
end

EncoderLayer.extra_repr = layer_repr

local ENC_LAYER_OPTS = { src_mask = "tensor", src_key_padding_mask = "tensor" }

--- layer(src[, {src_mask, src_key_padding_mask}]) -> the layer's output, src's shape
function EncoderLayer:forward(src, opts)
  opts = H.check_opts("TransformerEncoderLayer", opts, ENC_LAYER_OPTS, 2)
  check_input(self, "src", src)
  local am, kpm = opts.src_mask, opts.src_key_padding_mask
  local function sa(x)
    local y = self.self_attn(x, x, x, { attn_mask = am, key_padding_mask = kpm, need_weights = false })
    return self.dropout1(y)
  end
  local function ff(x) return self.dropout2(feed_forward(self, x)) end
  local x = src
  if self.norm_first then
    x = x + sa(self.norm1(x))
    return x + ff(self.norm2(x))
  end
  x = self.norm1(x + sa(x))
  return self.norm2(x + ff(x))
end
T.TransformerEncoderLayer = EncoderLayer

-- ---- TransformerDecoderLayer -------------------------------------------------------------------------------

local DecoderLayer = Module:extend("TransformerDecoderLayer")

function DecoderLayer:init(...)
  local o = arguments("TransformerDecoderLayer", LAYER_NAMES, LAYER_SPEC, ...)
  check_d_model("TransformerDecoderLayer", o.nhead, H.check_int("TransformerDecoderLayer", "d_model", o.d_model, 1, 3))
  init_layer(self, "TransformerDecoderLayer", o, 3)
  local mo = { dropout = self.dropout.p, batch_first = self.batch_first }
  self.self_attn = MHA(o.d_model, o.nhead, mo)
  self.multihead_attn = MHA(o.d_model, o.nhead, mo)
end

DecoderLayer.extra_repr = layer_repr

local DEC_LAYER_OPTS = { tgt_mask = "tensor", memory_mask = "tensor", tgt_key_padding_mask = "tensor",
  memory_key_padding_mask = "tensor" }

--- layer(tgt, memory[, {tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask}]) -> tgt's shape
function DecoderLayer:forward(tgt, memory, opts)
  opts = H.check_opts("TransformerDecoderLayer", opts, DEC_LAYER_OPTS, 2)
  check_input(self, "tgt", tgt)
  check_input(self, "memory", memory)
  local function sa(x)
    return self.dropout1(self.self_attn(x, x, x, { attn_mask = opts.tgt_mask, key_padding_mask =
      opts.tgt_key_padding_mask, need_weights = false }))
  end
  local function mha(x)
    return self.dropout2(self.multihead_attn(x, memory, memory, { attn_mask = opts.memory_mask, key_padding_mask =
      opts.memory_key_padding_mask, need_weights = false }))
  end
  local function ff(x) return self.dropout3(feed_forward(self, x)) end
  local x = tgt
  if self.norm_first then
    x = x + sa(self.norm1(x))
    x = x + mha(self.norm2(x))
    return x + ff(self.norm3(x))
  end
  x = self.norm1(x + sa(x))
  x = self.norm2(x + mha(x))
  return self.norm3(x + ff(x))
end
T.TransformerDecoderLayer = DecoderLayer

-- ---- stacks -----------------------------------------------------------------------------------------------

-- A deep copy of module m: new parameter tensors (leaves that require grad), copies of buffers and of every
-- table below m (shared ones stay shared), functions and classes kept. Paths are not copied.
local function deep_copy(m)
  local memo = {}
  local function copy(v)
    if lt.is_tensor(v) then
      if memo[v] then return memo[v] end
      local c = v:detach():clone()
      if v:requires_grad() and v:is_leaf() then c:requires_grad(true) end
      memo[v] = c
      return c
    end
    if type(v) ~= "table" then return v end
    if memo[v] then return memo[v] end
    local c = {}
    memo[v] = c
    for k, x in pairs(v) do
      if k ~= "_path" and k ~= "_paths_assigned" then c[copy(k)] = copy(x) end
    end
    return setmetatable(c, getmetatable(v))
  end
  return copy(m)
end

local STACK_NAMES = {
  TransformerEncoder = { "encoder_layer", "num_layers", "norm", "enable_nested_tensor" },
  TransformerDecoder = { "decoder_layer", "num_layers", "norm" },
}

-- PyTorch's (layer, num_layers[, norm[, enable_nested_tensor]]) and/or an options table of the same names
local function stack_init(self, where, ...)
  local names = STACK_NAMES[where]
  local opts = util.arguments(where, names, { [names[1]] = true, num_layers = true, norm = "table",
    enable_nested_tensor = names[4] and "boolean" or nil }, 4, ...)
  local layer, num_layers = opts[names[1]], opts.num_layers
  if not MM.is_module_instance(layer) and not (type(layer) == "table" and type(layer.forward) == "function") then
    error(string.format("%s: the first argument must be a layer module, got %s", where, type(layer)), 4)
  end
  H.check_int(where, "num_layers", num_layers, 1, 4)
  local norm = opts.norm
  if norm ~= nil and not is_callable(norm) then
    error(string.format("%s: norm must be a module (e.g. lt.nn.LayerNorm(d_model)), got %s", where, type(norm)), 4)
  end
  -- lt.nn.ModuleList: keys 1..n for ipairs, PyTorch's names "layers.0".."layers.<n-1>" in state_dict
  local layers = ModuleList()
  for i = 1, num_layers do layers:append(deep_copy(layer)) end
  self.layers, self.num_layers, self.norm = layers, num_layers, norm
end

local Encoder = Module:extend("TransformerEncoder")

--- TransformerEncoder(encoder_layer, num_layers[, norm][, {norm, enable_nested_tensor}])
function Encoder:init(...)
  stack_init(self, "TransformerEncoder", ...)
end

function Encoder:extra_repr() return "num_layers=" .. self.num_layers end

--- enc(src[, {mask, src_key_padding_mask}]) -> src's shape
function Encoder:forward(src, opts)
  opts = H.check_opts("TransformerEncoder", opts, { mask = "tensor", src_key_padding_mask = "tensor" }, 2)
  local x = src
  local lo = { src_mask = opts.mask, src_key_padding_mask = opts.src_key_padding_mask }
  for _, l in ipairs(self.layers) do x = l(x, lo) end
  if self.norm then x = self.norm(x) end
  return x
end
T.TransformerEncoder = Encoder

local Decoder = Module:extend("TransformerDecoder")

--- TransformerDecoder(decoder_layer, num_layers[, norm][, {norm}])
function Decoder:init(...)
  stack_init(self, "TransformerDecoder", ...)
end

Decoder.extra_repr = Encoder.extra_repr

--- dec(tgt, memory[, {tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask}]) -> tgt's shape
function Decoder:forward(tgt, memory, opts)
  opts = H.check_opts("TransformerDecoder", opts, DEC_LAYER_OPTS, 2)
  local x = tgt
  for _, l in ipairs(self.layers) do x = l(x, memory, opts) end
  if self.norm then x = self.norm(x) end
  return x
end
T.TransformerDecoder = Decoder

-- ---- Transformer ----------------------------------------------------------------------------------------

local Transformer = Module:extend("Transformer")

local TR_NAMES = { "d_model", "nhead", "num_encoder_layers", "num_decoder_layers", "dim_feedforward", "dropout",
  "activation", "custom_encoder", "custom_decoder", "layer_norm_eps", "batch_first", "norm_first" }
local TR_SPEC = { num_encoder_layers = "number", num_decoder_layers = "number", custom_encoder = "table",
  custom_decoder = "table" }
for k, v in pairs(LAYER_SPEC) do TR_SPEC[k] = v end

--- Transformer([d_model=512[, nhead=8[, num_encoder_layers=6[, num_decoder_layers=6[, ...]]]]][, {options}])
function Transformer:init(...)
  local o = arguments("Transformer", TR_NAMES, TR_SPEC, ...)
  local d = H.check_int("Transformer", "d_model", o.d_model or 512, 1, 3)
  local nhead = o.nhead or 8
  check_d_model("Transformer", nhead, d)
  local lo = { dim_feedforward = o.dim_feedforward, dropout = o.dropout, activation = o.activation,
    layer_norm_eps = o.layer_norm_eps, batch_first = o.batch_first, norm_first = o.norm_first }
  local eps = o.layer_norm_eps or 1e-5
  self.encoder = o.custom_encoder or Encoder(EncoderLayer(d, nhead, lo),
    H.check_int("Transformer", "num_encoder_layers", o.num_encoder_layers or 6, 1, 3), LayerNorm(d, { eps = eps }))
  self.decoder = o.custom_decoder or Decoder(DecoderLayer(d, nhead, lo),
    H.check_int("Transformer", "num_decoder_layers", o.num_decoder_layers or 6, 1, 3), LayerNorm(d, { eps = eps }))
  self.d_model, self.nhead, self.batch_first = d, nhead, o.batch_first == true
  -- PyTorch's _reset_parameters: xavier_uniform_ on every parameter with more than one dim
  for _, p in ipairs(MM.parameters(self)) do
    if p:dim() > 1 then init.xavier_uniform_(p) end
  end
end

function Transformer:extra_repr() return "d_model=" .. self.d_model .. ", nhead=" .. self.nhead end

local TR_OPTS = { src_mask = "tensor", tgt_mask = "tensor", memory_mask = "tensor", src_key_padding_mask = "tensor",
  tgt_key_padding_mask = "tensor", memory_key_padding_mask = "tensor" }

--- tr(src, tgt[, {src_mask, tgt_mask, memory_mask, src_key_padding_mask, tgt_key_padding_mask,
--- memory_key_padding_mask}]) -> tgt's shape
function Transformer:forward(src, tgt, opts)
  opts = H.check_opts("Transformer", opts, TR_OPTS, 2)
  check_input(self, "src", src)
  check_input(self, "tgt", tgt)
  local batched = src:dim() == 3
  if batched ~= (tgt:dim() == 3) or (src:dim() ~= 2 and not batched) then
    self:fail(string.format("src %s and tgt %s must both be 3-D (batched) or both 2-D", src:shape_str(),
      tgt:shape_str()))
  end
  local bd = self.batch_first and 1 or 2
  if batched and src:size(bd) ~= tgt:size(bd) then
    self:fail(string.format("the batch sizes of src %s and tgt %s must be equal (dim %d)", src:shape_str(),
      tgt:shape_str(), bd))
  end
  if src:size(-1) ~= self.d_model or tgt:size(-1) ~= self.d_model then
    self:fail(string.format("the feature number of src %s and tgt %s must be equal to d_model %d", src:shape_str(),
      tgt:shape_str(), self.d_model))
  end
  local memory = self.encoder(src, { mask = opts.src_mask, src_key_padding_mask = opts.src_key_padding_mask })
  return self.decoder(tgt, memory, { tgt_mask = opts.tgt_mask, memory_mask = opts.memory_mask,
    tgt_key_padding_mask = opts.tgt_key_padding_mask, memory_key_padding_mask = opts.memory_key_padding_mask })
end

--- [n x n] float mask, 0 on and below the diagonal and -inf above: position i attends to 1..i.
--- Callable as lt.nn.Transformer.generate_square_subsequent_mask(n) or tr:generate_square_subsequent_mask(n).
function Transformer.generate_square_subsequent_mask(a, b)
  local n = a
  if type(a) == "table" then n = b end
  H.check_int("Transformer.generate_square_subsequent_mask", "size", n, 1, 2)
  return lt.triu(lt.full({ n, n }, -math.huge), 1)
end
T.Transformer = Transformer

return T
