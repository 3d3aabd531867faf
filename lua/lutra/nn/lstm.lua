-- nn/lstm.lua — LSTM(input_size, hidden_size[, {num_layers=1, bias=true, batch_first=false}]).
-- m(x[, {h0, c0}]) with x [seq, batch, in] (or [batch, seq, in] with batch_first, or unbatched
-- [seq, in]) returns output [seq, batch, hidden] and {h_n, c_n}, each [num_layers, batch, hidden].
-- Gates in PyTorch's order i, f, g, o: gates = x W_ih^T + b_ih + h W_hh^T + b_hh;
-- c' = sigmoid(f) * c + sigmoid(i) * tanh(g), h' = sigmoid(o) * tanh(c').
-- Parameters weight_ih [4H, in], weight_hh [4H, H], bias_ih [4H], bias_hh [4H] (layer k >= 2 adds the
-- suffix _l<k>), all ~ U(-1/sqrt(H), 1/sqrt(H)). Per layer: one GEMM for the input projection of all
-- steps, then per step one GEMM for the recurrent part and a fused C cell (lt._nn.lstm_cell).
local lt = require "lutra"
local Module = require("lutra.nn.module").Module
local H = require "lutra.nn.helpers"
local lstm_cell = require("lutra.core")._nn.lstm_cell

local LSTM = Module:extend("LSTM")

local function names(layer)
  local sfx = layer == 1 and "" or ("_l" .. layer)
  return "weight_ih" .. sfx, "weight_hh" .. sfx, "bias_ih" .. sfx, "bias_hh" .. sfx
end

function LSTM:init(input_size, hidden_size, opts)
  H.check_int("LSTM", "input_size", input_size, 1, 3)
  H.check_int("LSTM", "hidden_size", hidden_size, 1, 3)
  opts = H.check_opts("LSTM", opts, { num_layers = "number", bias = "boolean", batch_first = "boolean" }, 3)
  self.input_size, self.hidden_size = input_size, hidden_size
  self.num_layers = H.check_int("LSTM", "num_layers", opts.num_layers or 1, 1, 3)
  self.bias = opts.bias ~= false
  self.batch_first = opts.batch_first == true
  local init = H.fan_in_uniform(hidden_size)
  local params = {}
  for l = 1, self.num_layers do
    local wih, whh, bih, bhh = names(l)
    local in_l = l == 1 and input_size or hidden_size
    self[wih] = H.param({ 4 * hidden_size, in_l }, init)
    self[whh] = H.param({ 4 * hidden_size, hidden_size }, init)
    params[#params + 1], params[#params + 2] = wih, whh
    if self.bias then
      self[bih] = H.param({ 4 * hidden_size }, init)
      self[bhh] = H.param({ 4 * hidden_size }, init)
      params[#params + 1], params[#params + 2] = bih, bhh
    end
  end
  self._params = params
end

function LSTM:extra_repr()
  local s = self.input_size .. " -> " .. self.hidden_size
  if self.num_layers ~= 1 then s = s .. ", num_layers=" .. self.num_layers end
  if not self.bias then s = s .. ", bias=false" end
  if self.batch_first then s = s .. ", batch_first=true" end
  return s
end

function LSTM:forward(x, state)
  if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
  local d = x:dim()
  if d ~= 3 and d ~= 2 then self:fail("input must be [seq x batch x " .. self.input_size .. "], got " .. x:shape_str()) end
  if x:size(d) ~= self.input_size then
    self:fail(string.format("input has %d features, expected %d (input %s)", x:size(d), self.input_size, x:shape_str()))
  end
  local unbatched = d == 2
  if unbatched then x = x:unsqueeze(2)
  elseif self.batch_first then x = x:transpose(1, 2) end
  local T, B, Hs, L = x:size(1), x:size(2), self.hidden_size, self.num_layers
  if T == 0 then self:fail("the input sequence is empty (input " .. x:shape_str() .. "): it needs at least one step") end
  local h0, c0
  if state ~= nil then
    if type(state) ~= "table" or not lt.is_tensor(state[1]) or not lt.is_tensor(state[2]) then
      self:fail("the initial state must be a table {h0, c0} of tensors")
    end
    h0, c0 = state[1], state[2]
    if unbatched then h0, c0 = h0:unsqueeze(2), c0:unsqueeze(2) end
    for _, s in ipairs { h0, c0 } do
      local sh = s:shape()
      if #sh ~= 3 or sh[1] ~= L or sh[2] ~= B or sh[3] ~= Hs then
        self:fail(string.format("initial state is %s, expected [%d x %d x %d]", s:shape_str(), L, B, Hs))
      end
    end
  end
  local layer_in = x
  local hn, cn = {}, {}
  for l = 1, L do
    local wih, whh, bih, bhh = names(l)
    -- the input projection of every step in one GEMM
    local xg = lt.linear(layer_in, self[wih], self[bih])
    local h = h0 and h0:select(1, l) or lt.zeros(B, Hs)
    local c = c0 and c0:select(1, l) or lt.zeros(B, Hs)
    local outs = {}
    for t = 1, T do
      -- one fused C cell per step: (h, c) side by side in one [B, 2H] tensor
      local hc = lstm_cell(xg:select(1, t) + lt.linear(h, self[whh], self[bhh]), c)
      h, c = hc:narrow(2, 1, Hs), hc:narrow(2, Hs + 1, Hs)
      outs[t] = h
    end
    hn[l], cn[l] = h, c
    layer_in = lt.stack(outs, 1)
  end
  local out, h_n, c_n = layer_in, lt.stack(hn, 1), lt.stack(cn, 1)
  if unbatched then out, h_n, c_n = out:squeeze(2), h_n:squeeze(2), c_n:squeeze(2)
  elseif self.batch_first then out = out:transpose(1, 2) end
  return out, { h_n, c_n }
end

return LSTM
