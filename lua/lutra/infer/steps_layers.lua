-- infer/steps_layers.lua — more modules as plan steps (infer/steps.lua's conventions): Mish, Hardswish,
-- Hardsigmoid, GroupNorm, InstanceNorm1d/2d, AdaptiveAvg/MaxPool1d/2d, ConvTranspose2d, and LSTM/GRU/RNN over a
-- whole sequence (bidirectional, proj_size, or an example longer than one step).
return function(S)
  local prod, fail, emit, forward = S.prod, S.fail, S.emit, S.forward

  local function act(name)
    return function(m, st)
      local y = forward(st, m)
      emit(st, m, y, { op = "act", act = name, n_in = y:numel() })
    end
  end
  S.Mish, S.Hardswish, S.Hardsigmoid = act "mish", act "hardswish", act "hardsigmoid"

  function S.GroupNorm(m, st)
    local shape = st.value:shape()
    local y = forward(st, m)
    emit(st, m, y, { op = "groupnorm", rows = shape[1], n_in = shape[2], geo = { prod(shape, 3), m.num_groups },
      a = m.eps, t = { m.weight or false, m.bias or false } })
  end

  -- InstanceNorm: each sample's channel normalised over its own values (GroupNorm with a group per channel), or
  -- in eval with track_running_stats, by the running statistics (BatchNorm's step)
  local function instance_norm(nsp)
    return function(m, st)
      local shape = st.value:shape()
      local y = forward(st, m)
      local N = #shape == nsp + 2 and shape[1] or 1
      local C, inner = m.num_features, prod(shape, #shape - nsp + 1)
      local w, b = m.affine and m.weight or false, m.affine and m.bias or false
      if m.track_running_stats and not m.training then
        emit(st, m, y, { op = "batchnorm", rows = N, n_in = C, geo = { inner }, a = m.eps,
          t = { m.running_mean, m.running_var, w, b } })
      else
        emit(st, m, y, { op = "groupnorm", rows = N, n_in = C, geo = { inner, C }, a = m.eps, t = { w, b } })
      end
    end
  end
  S.InstanceNorm1d, S.InstanceNorm2d = instance_norm(1), instance_norm(2)

  local function adaptive(nsp, kind)
    return function(m, st)
      if m.return_indices then fail(st, m, "return_indices gives two outputs; a plan returns one") end
      local shape = st.value:shape()
      local y = forward(st, m)
      local ys, nd = y:shape(), #shape
      local N, C = nd == nsp + 2 and shape[1] or 1, shape[nd - nsp]
      local H, OH = nsp == 2 and shape[nd - 1] or 1, nsp == 2 and ys[nd - 1] or 1
      emit(st, m, y, { op = "pool", act = "adaptive_" .. kind,
        geo = { N, C, H, shape[nd], C, OH, ys[nd], 1, 1, 1, 1, 0, 0, 1, 1, 1 } })
    end
  end
  S.AdaptiveAvgPool1d, S.AdaptiveAvgPool2d = adaptive(1, "avg"), adaptive(2, "avg")
  S.AdaptiveMaxPool1d, S.AdaptiveMaxPool2d = adaptive(1, "max"), adaptive(2, "max")

  function S.ConvTranspose2d(m, st)
    local shape = st.value:shape()
    local y = forward(st, m)
    local ys, nd = y:shape(), #shape
    local k, s, p, d = m.kernel_size, m.stride, m.padding, m.dilation
    emit(st, m, y, { op = "convt", t = { m.weight, m.bias or false }, geo = { nd == 4 and shape[1] or 1,
      m.in_channels, shape[nd - 1], shape[nd], m.out_channels, ys[nd - 1], ys[nd], k[1], k[2], s[1], s[2], p[1], p[2],
      d[1], d[2], m.groups } })
  end

  -- A recurrent module over a whole sequence: each layer's directions write their halves of one [T x B x D*H]
  -- (or batch-first [B x T x D*H]) buffer, which the next layer reads; the state starts at zero on every call
  -- (the plan takes one whole sequence per call: the backward direction needs its end first).
  local GATES = { lstm = 4, gru = 3, rnn_tanh = 1, rnn_relu = 1 }
  function S.sequence(m, st)
    local shape = st.value:shape()
    local unbatched = #shape == 2
    local bf = m.batch_first and not unbatched
    local T = (unbatched or not bf) and shape[1] or shape[2]
    local B = unbatched and 1 or (bf and shape[1] or shape[2])
    local y = forward(st, m)
    local D, Hd, P = m.bidirectional and 2 or 1, m.hidden_size, m.proj_size or 0
    local Hh = P > 0 and P or Hd
    local Fw = D * Hh
    local function strides(w) if bf then return w, T * w end return B * w, w end
    local win = m.input_size
    local bias = function(k) return m.bias and m[k] or false end
    for l = 0, m.num_layers - 1 do
      local last = l == m.num_layers - 1
      local out = st.plan:buffer(T * B * Fw)
      local state = st.plan:buffer(B * (Hh + Hd) + 2 * GATES[m.mode] * Hd + Hd)
      local value = last and y or S.zeros(T * B * Fw)
      local buf, inval = st.buf, st.value
      for dir = 0, D - 1 do
        st.buf, st.value = buf, inval
        local sfx = "_l" .. l .. (dir == 1 and "_reverse" or "")
        local xt, xb = strides(win)
        local ot, ob = strides(Fw)
        emit(st, m, value, { op = "seq", act = m.mode, n_in = win, n_out = Hd, out = out,
          geo = { T, B, xt, xb, ot, ob, dir * Hh, dir, state, P },
          t = { m["weight_ih" .. sfx], m["weight_hh" .. sfx], bias("bias_ih" .. sfx), bias("bias_hh" .. sfx),
            P > 0 and m["weight_hr" .. sfx] or false } })
      end
      win = Fw
    end
  end
end
