-- nn/rnn.lua — the recurrent layers with PyTorch 1.13's layouts, defaults, init and call forms:
--   RNN(in, hidden[, {num_layers=1, nonlinearity="tanh", bias=true, batch_first=false, dropout=0,
--       bidirectional=false}]), GRU(in, hidden[, {...}]), LSTM(in, hidden[, {..., proj_size=0}]):
--       m(x[, h0]) -> out, h_n;  LSTM: m(x[, {h0, c0}]) -> out, {h_n, c_n}
--   RNNCell(in, hidden[, {bias, nonlinearity}]), GRUCell(in, hidden[, {bias}]), LSTMCell(in, hidden[, {bias}]):
--       cell(x[, h]) -> h';  LSTMCell: cell(x[, {h, c}]) -> h', c'
-- x is [seq x batch x in] ([batch x seq x in] with batch_first), or unbatched [seq x in]; states are
-- [num_layers*directions x batch x hidden] (unbatched: without the batch dim). Parameters (PyTorch's names, so
-- state dicts move both ways): weight_ih_l<k>[_reverse] [G*hidden x in], weight_hh_l<k> [G*hidden x hidden or
-- proj], bias_ih_l<k>, bias_hh_l<k> [G*hidden], weight_hr_l<k> [proj x hidden] (k from 0, G = 1 RNN, 3 GRU in
-- order r, z, n, 4 LSTM in order i, f, g, o), all ~ U(-1/sqrt(hidden), 1/sqrt(hidden)).
-- Each layer and direction: one GEMM for the input projection of all steps (lt.linear), then the recurrence
-- and its fused cell in one C node (lt._nn.rnn_layer, core/src/nn_rnn.c); the cells are that node over one step.
local lt = require "lutra"
local H = require "lutra.nn.helpers"
local F = require "lutra.F"
local rnn_layer = require("lutra.core")._nn.rnn_layer

local M = {}

local GATES = { rnn_tanh = 1, rnn_relu = 1, gru = 3, lstm = 4 }

-- What the layers and the cells share in their constructors: the sizes, the options, bias, the nonlinearity (RNN)
-- and the kernel's mode. Errors point at the constructor's caller (level 4: here, init, the class call).
local function init_common(self, name, kind, input_size, hidden_size, opts, spec)
  H.check_int(name, "input_size", input_size, 1, 4)
  H.check_int(name, "hidden_size", hidden_size, 1, 4)
  opts = H.check_opts(name, opts, spec, 4)
  self.input_size, self.hidden_size = input_size, hidden_size
  self.bias = opts.bias ~= false
  self.mode = kind
  if kind == "rnn" then
    local v = opts.nonlinearity or "tanh"
    if v ~= "tanh" and v ~= "relu" then
      error(string.format("%s: nonlinearity must be \"tanh\" or \"relu\", got %s", name, tostring(v)), 4)
    end
    self.nonlinearity, self.mode = v, "rnn_" .. v
  end
  return opts
end

local function dims_str(t) return "[" .. table.concat(t, " x ") .. "]" end

-- An LSTM state: a table of two tensors {h, c} (a lone tensor is the usual slip from GRU code)
local function check_pair(self, state, what)
  if type(state) ~= "table" or lt.is_tensor(state) or state[1] == nil or state[2] == nil then
    self:fail(string.format("%s must be a table {%s} of tensors, got %s", what, what == "the state" and "h, c" or
      "h0, c0", lt.is_tensor(state) and ("a tensor " .. state:shape_str()) or type(state)))
  end
  return state[1], state[2]
end

-- ---- RNN, GRU, LSTM ----------------------------------------------------------------------------------------

local function make_layered(name, kind)
  local cls = H.class(name)
  local spec = { num_layers = "number", bias = "boolean", batch_first = "boolean", dropout = "number",
    bidirectional = "boolean" }
  if kind == "rnn" then spec.nonlinearity = "string" end
  if kind == "lstm" then spec.proj_size = "number" end

  function cls:init(input_size, hidden_size, opts)
    opts = init_common(self, name, kind, input_size, hidden_size, opts, spec)
    self.num_layers = H.check_int(name, "num_layers", opts.num_layers or 1, 1, 3)
    self.batch_first = opts.batch_first == true
    self.bidirectional = opts.bidirectional == true
    local p = opts.dropout or 0
    if not (p >= 0 and p <= 1) then
      error(string.format("%s: dropout must be a probability between 0 and 1, got %s", name, tostring(p)), 3)
    end
    self.dropout = p
    self.proj_size = kind == "lstm" and H.check_int(name, "proj_size", opts.proj_size or 0, 0, 3) or 0
    if self.proj_size >= hidden_size then
      error(string.format("%s: proj_size must be smaller than hidden_size (%d), got %d", name, hidden_size,
        self.proj_size), 3)
    end
    local G, D = GATES[self.mode], self.bidirectional and 2 or 1
    local real_h = self.proj_size > 0 and self.proj_size or hidden_size
    local init = H.fan_in_uniform(hidden_size)
    local params = {}
    for l = 0, self.num_layers - 1 do
      for d = 0, D - 1 do
        local sfx = "_l" .. l .. (d == 1 and "_reverse" or "")
        local in_l = l == 0 and input_size or real_h * D
        self["weight_ih" .. sfx] = H.param({ G * hidden_size, in_l }, init)
        self["weight_hh" .. sfx] = H.param({ G * hidden_size, real_h }, init)
        params[#params + 1], params[#params + 2] = "weight_ih" .. sfx, "weight_hh" .. sfx
        if self.bias then
          self["bias_ih" .. sfx] = H.param({ G * hidden_size }, init)
          self["bias_hh" .. sfx] = H.param({ G * hidden_size }, init)
          params[#params + 1], params[#params + 2] = "bias_ih" .. sfx, "bias_hh" .. sfx
        end
        if self.proj_size > 0 then
          self["weight_hr" .. sfx] = H.param({ self.proj_size, hidden_size }, init)
          params[#params + 1] = "weight_hr" .. sfx
        end
      end
    end
    self._params = params
  end

  function cls:extra_repr()
    local s = self.input_size .. " -> " .. self.hidden_size
    if self.num_layers ~= 1 then s = s .. ", num_layers=" .. self.num_layers end
    if kind == "rnn" and self.nonlinearity ~= "tanh" then s = s .. ", nonlinearity=relu" end
    if not self.bias then s = s .. ", bias=false" end
    if self.batch_first then s = s .. ", batch_first=true" end
    if self.dropout ~= 0 then s = s .. ", dropout=" .. self.dropout end
    if self.bidirectional then s = s .. ", bidirectional=true" end
    if self.proj_size ~= 0 then s = s .. ", proj_size=" .. self.proj_size end
    return s
  end

  -- a state tensor: [L*D x B x size] (unbatched: [L*D x size], returned with the batch dim added)
  local function check_state(self, what, s, unbatched, want)
    if not lt.is_tensor(s) then self:fail(string.format("%s must be a tensor, got %s", what, type(s))) end
    local sh = s:shape()
    local shown = unbatched and { want[1], want[3] } or want
    local ok = #sh == #shown
    for i = 1, #shown do ok = ok and sh[i] == shown[i] end
    if not ok then
      self:fail(string.format("%s is %s, expected %s%s", what, s:shape_str(), dims_str(shown),
        unbatched and " (the input is unbatched)" or ""))
    end
    return unbatched and s:unsqueeze(2) or s
  end

  function cls:forward(x, state)
    if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
    local d = x:dim()
    if d ~= 3 and d ~= 2 then
      self:fail(string.format("input must be %s or unbatched [seq x %d], got %s", self.batch_first and
        ("[batch x seq x " .. self.input_size .. "]") or ("[seq x batch x " .. self.input_size .. "]"),
        self.input_size, x:shape_str()))
    end
    if x:size(d) ~= self.input_size then
      self:fail(string.format("input has %d features, expected %d (input %s)", x:size(d), self.input_size, x:shape_str()))
    end
    local unbatched = d == 2
    if unbatched then x = x:unsqueeze(2)
    elseif self.batch_first then x = x:transpose(1, 2) end
    local T, B, Hs, L = x:size(1), x:size(2), self.hidden_size, self.num_layers
    if T == 0 then self:fail("the input sequence is empty (input " .. x:shape_str() .. "): it needs at least one step") end
    local D = self.bidirectional and 2 or 1
    local P = self.proj_size > 0 and self.proj_size or Hs
    local h0, c0
    if state ~= nil then
      if kind == "lstm" then
        local h, c = check_pair(self, state, "the initial state")
        h0 = check_state(self, "h0", h, unbatched, { L * D, B, P })
        c0 = check_state(self, "c0", c, unbatched, { L * D, B, Hs })
      else
        h0 = check_state(self, "h0", state, unbatched, { L * D, B, Hs })
      end
    end
    local layer_in = x
    local hn, cn = {}, {}
    for l = 0, L - 1 do
      local outs = {}
      for dir = 0, D - 1 do
        local sfx = "_l" .. l .. (dir == 1 and "_reverse" or "")
        local k = l * D + dir + 1
        local xg = lt.linear(layer_in, self["weight_ih" .. sfx], self["bias_ih" .. sfx])
        local h = h0 and h0:select(1, k) or lt.zeros(B, P, x:dtype())
        local c = kind == "lstm" and (c0 and c0:select(1, k) or lt.zeros(B, Hs, x:dtype())) or nil
        local y = rnn_layer(self.mode, xg, self["weight_hh" .. sfx], self["bias_hh" .. sfx], h, c,
          self["weight_hr" .. sfx], dir == 1)
        local o = y:narrow(1, 1, T * B * P):view(T, B, P)
        outs[dir + 1] = o
        hn[k] = o:select(1, dir == 1 and 1 or T)
        if c then cn[k] = y:narrow(1, T * B * P + 1, B * Hs):view(B, Hs) end
      end
      layer_in = D == 2 and lt.cat(outs, 3) or outs[1]
      if self.dropout > 0 and self.training and l < L - 1 then layer_in = F.dropout(layer_in, self.dropout, true) end
    end
    local out, h_n = layer_in, lt.stack(hn, 1)
    local c_n = kind == "lstm" and lt.stack(cn, 1) or nil
    if unbatched then
      out, h_n = out:squeeze(2), h_n:squeeze(2)
      if c_n then c_n = c_n:squeeze(2) end
    elseif self.batch_first then
      out = out:transpose(1, 2)
    end
    if kind == "lstm" then return out, { h_n, c_n } end
    return out, h_n
  end
  return cls
end

M.RNN = make_layered("RNN", "rnn")
M.GRU = make_layered("GRU", "gru")
M.LSTM = make_layered("LSTM", "lstm")

--- Files written by lutra before PyTorch's names: weight_ih, weight_hh, bias_ih, bias_hh for the first layer,
--- the same with _l<k> (k from 2) for layer k. A file holding the unsuffixed first-layer names is in that layout;
--- nn.load_state_dict renames its keys (old -> new) before matching.
function M.LSTM:_legacy_state_dict_keys(sd, prefix)
  if sd[prefix .. "weight_hh"] == nil then return nil end
  local map = {}
  for l = 1, self.num_layers do
    local old = l == 1 and "" or ("_l" .. l)
    for _, base in ipairs { "weight_ih", "weight_hh", "bias_ih", "bias_hh" } do
      map[base .. old] = base .. "_l" .. (l - 1)
    end
  end
  return map
end

-- ---- the cells -----------------------------------------------------------------------------------------------

local function make_cell(name, kind)
  local cls = H.class(name)
  local spec = { bias = "boolean" }
  if kind == "rnn" then spec.nonlinearity = "string" end

  function cls:init(input_size, hidden_size, opts)
    init_common(self, name, kind, input_size, hidden_size, opts, spec)
    local G, init = GATES[self.mode], H.fan_in_uniform(hidden_size)
    self.weight_ih = H.param({ G * hidden_size, input_size }, init)
    self.weight_hh = H.param({ G * hidden_size, hidden_size }, init)
    self._params = { "weight_ih", "weight_hh" }
    if self.bias then
      self.bias_ih = H.param({ G * hidden_size }, init)
      self.bias_hh = H.param({ G * hidden_size }, init)
      self._params[3], self._params[4] = "bias_ih", "bias_hh"
    end
  end

  function cls:extra_repr()
    local s = self.input_size .. " -> " .. self.hidden_size
    if kind == "rnn" and self.nonlinearity ~= "tanh" then s = s .. ", nonlinearity=relu" end
    if not self.bias then s = s .. ", bias=false" end
    return s
  end

  local function check_state(self, what, s, unbatched, B)
    if not lt.is_tensor(s) then self:fail(string.format("%s must be a tensor, got %s", what, type(s))) end
    local want = unbatched and { self.hidden_size } or { B, self.hidden_size }
    local sh = s:shape()
    local ok = #sh == #want
    for i = 1, #want do ok = ok and sh[i] == want[i] end
    if not ok then self:fail(string.format("%s is %s, expected %s", what, s:shape_str(), dims_str(want))) end
    return unbatched and s:unsqueeze(1) or s
  end

  function cls:forward(x, state)
    if not lt.is_tensor(x) then self:fail("expected a tensor input, got " .. type(x)) end
    local d = x:dim()
    if (d ~= 2 and d ~= 1) or x:size(d) ~= self.input_size then
      self:fail(string.format("input must be [batch x %d] or unbatched [%d], got %s", self.input_size,
        self.input_size, x:shape_str()))
    end
    local unbatched = d == 1
    if unbatched then x = x:unsqueeze(1) end
    local B, Hs = x:size(1), self.hidden_size
    local h, c
    if kind == "lstm" then
      if state ~= nil then
        local h1, c1 = check_pair(self, state, "the state")
        h, c = check_state(self, "h", h1, unbatched, B), check_state(self, "c", c1, unbatched, B)
      else
        h, c = lt.zeros(B, Hs, x:dtype()), lt.zeros(B, Hs, x:dtype())
      end
    else
      h = state ~= nil and check_state(self, "h", state, unbatched, B) or lt.zeros(B, Hs, x:dtype())
    end
    local xg = lt.linear(x, self.weight_ih, self.bias_ih):unsqueeze(1)
    local y = rnn_layer(self.mode, xg, self.weight_hh, self.bias_hh, h, c, nil, false)
    local h1 = y:narrow(1, 1, B * Hs):view(B, Hs)
    local c1 = c and y:narrow(1, B * Hs + 1, B * Hs):view(B, Hs) or nil
    if unbatched then
      h1 = h1:squeeze(1)
      if c1 then c1 = c1:squeeze(1) end
    end
    if kind == "lstm" then return h1, c1 end
    return h1
  end
  return cls
end

M.RNNCell = make_cell("RNNCell", "rnn")
M.GRUCell = make_cell("GRUCell", "gru")
M.LSTMCell = make_cell("LSTMCell", "lstm")

return M
