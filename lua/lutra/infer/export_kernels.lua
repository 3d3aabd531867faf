-- infer/export_kernels.lua — the Lua forms of the strided copy, batched product, GroupNorm, transposed
-- convolution and whole-sequence recurrent steps, for lt.infer.export_lua (infer/export.lua puts the ones a plan
-- uses into its file). Flat 1-based arrays; offsets and strides as the C steps take them (lt_infer.h).
local K = {}

K.strided = [[
local function strided(x, y, n1, n2, n3, n4, a1, a2, a3, a4, b1, b2, b3, b4, xo, yo)
  for i = 0, n1 - 1 do
    for j = 0, n2 - 1 do
      for k = 0, n3 - 1 do
        local xi, yi = xo + i * a1 + j * a2 + k * a3 + 1, yo + i * b1 + j * b2 + k * b3 + 1
        for l = 0, n4 - 1 do y[yi + l * b4] = x[xi + l * a4] end
      end
    end
  end
end]]

K.matmul = [[
local function matmul(A, B, y, batch, M, K, N, ta, tb, sa, sb, alpha)
  for b = 0, batch - 1 do
    local ao, bo, yo = b * sa, b * sb, b * M * N
    for m = 0, M - 1 do
      for n = 0, N - 1 do
        local s = 0
        for k = 0, K - 1 do
          local av = ta == 1 and A[ao + k * M + m + 1] or A[ao + m * K + k + 1]
          local bv = tb == 1 and B[bo + n * K + k + 1] or B[bo + k * N + n + 1]
          s = s + av * bv
        end
        y[yo + m * N + n + 1] = alpha * s
      end
    end
  end
end]]

K.groupnorm = [[
local function groupnorm(x, y, N, C, S, G, w, b, eps)
  local Cg = C / G
  local n = Cg * S
  for r = 0, N * G - 1 do
    local o, mean, var = r * n, 0, 0
    for i = 1, n do mean = mean + x[o + i] end
    mean = mean / n
    for i = 1, n do local d = x[o + i] - mean; var = var + d * d end
    local inv = 1 / sqrt(var / n + eps)
    for cc = 0, Cg - 1 do
      local ch = (r % G) * Cg + cc + 1
      local scale = inv * (w and w[ch] or 1)
      local shift = (b and b[ch] or 0) - mean * scale
      local oc = o + cc * S
      for i = 1, S do y[oc + i] = x[oc + i] * scale + shift end
    end
  end
end]]

K.convt = [[
local function convt(x, y, W, b, N, Ci, H, Wd, Co, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW, G)
  local cig, cog = Ci / G, Co / G
  for n = 0, N - 1 do
    for co = 0, Co - 1 do
      local yo, bias = (n * Co + co) * OH * OW, b and b[co + 1] or 0
      for i = 1, OH * OW do y[yo + i] = bias end
    end
    for ci = 0, Ci - 1 do
      local xi, gr = (n * Ci + ci) * H * Wd, floor(ci / cig)
      for col = 0, cog - 1 do
        local yo, wk = (n * Co + gr * cog + col) * OH * OW, (ci * cog + col) * KH * KW
        for ki = 0, KH - 1 do
          for kj = 0, KW - 1 do
            local wv = W[wk + ki * KW + kj + 1]
            for ih = 0, H - 1 do
              local oh = ih * SH - PH + ki * DH
              if oh >= 0 and oh < OH then
                for iw = 0, Wd - 1 do
                  local ow = iw * SW - PW + kj * DW
                  if ow >= 0 and ow < OW then
                    local k = yo + oh * OW + ow + 1
                    y[k] = y[k] + wv * x[xi + ih * Wd + iw + 1]
                  end
                end
              end
            end
          end
        end
      end
    end
  end
end]]

-- one direction of one recurrent layer over the whole sequence from a zero state (matvec and update: K.cell)
K.seq = [[
local function seq(x, y, kind, T, B, I, Hd, xt, xb, ot, ob, off, rev, P, Wih, Whh, bih, bhh, Whr, st)
  local G = kind == "lstm" and 4 or kind == "gru" and 3 or 1
  local Hh = P > 0 and P or Hd
  local h, c, gi, gh, hs, pt = st.h, st.c, st.gi, st.gh, st.hs, st.pt
  for i = 1, B * Hh do h[i] = 0 end
  for i = 1, B * Hd do c[i] = 0 end
  for k = 0, T - 1 do
    local t = rev == 1 and T - 1 - k or k
    for b = 0, B - 1 do
      local ho, co = b * Hh, b * Hd
      matvec(Wih, x, t * xt + b * xb, bih, I, G * Hd, gi)
      matvec(Whh, h, ho, bhh, Hh, G * Hd, gh)
      if P > 0 then
        update(kind, gi, gh, h, ho, c, co, hs, 0, Hd)
        matvec(Whr, hs, 0, nil, Hd, P, pt)
        for j = 1, P do h[ho + j] = pt[j] end
      else
        update(kind, gi, gh, h, ho, c, co, h, ho, Hd)
      end
      local yo = off + t * ot + b * ob
      for j = 1, Hh do y[yo + j] = h[ho + j] end
    end
  end
end]]

return K
