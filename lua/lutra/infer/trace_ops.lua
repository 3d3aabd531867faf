-- infer/trace_ops.lua — the tracer's views, products and lt.* functions (infer/trace.lua):
--   transpose, t, permute, narrow, select, expand, chunk, split, unbind   views: no step until a step reads them
--   matmul, lt.matmul                                                     one batched product (LT_INFER_MATMUL)
--   mean, sum over one dim                                                a product with a column of ones
--   lt.cat, lt.stack                                                      strided copies into one buffer
--   lt.linear                                                             a Linear step
--   lt.F.scaled_dot_product_attention                                     q k^T (scaled), + mask, softmax, w v
-- Attention (lt.nn.MultiheadAttention, the transformer layers, a user's attention) is traced through these: the
-- masks are constants of the plan, expanded once to the scores' shape when they do not repeat along them.
local lt = require "lutra"
local core = require "lutra.core"
local F = require "lutra.F"

return function(T, S)
  local methods, is_sym, view, sym, materialize = T.methods, T.is_sym, T.view, T.sym, T.materialize
  local function fail(st, msg) S.fail(st, st.module, msg) end

  -- ---- views --------------------------------------------------------------------------------------------
  local function viewer(name)
    return function(self, ...) return view(self, self.value[name](self.value, ...)) end
  end
  for _, k in ipairs { "transpose", "t", "permute", "narrow", "select", "expand", "expand_as" } do
    methods[k] = viewer(k)
  end
  local function viewer_list(name)
    return function(self, ...)
      local r = {}
      for i, p in ipairs(self.value[name](self.value, ...)) do r[i] = view(self, p) end
      return r
    end
  end
  methods.chunk, methods.split, methods.unbind = viewer_list "chunk", viewer_list "split", viewer_list "unbind"

  -- ---- products -----------------------------------------------------------------------------------------

  -- whether tensor v (a view of base, or a tensor on its own when base is nil) is stored as its last two dims
  -- swapped: the product then reads it transposed, without a copy
  local function stored_transposed(v, base)
    local n = v:dim()
    if n < 2 then return false end
    local tv = v:transpose(n - 1, n)
    if not tv:is_contiguous() then return false end
    return base == nil or (core._infer_offset(tv) == core._infer_offset(base) and tv:numel() == base:numel())
  end

  -- a Sym operand: (the Sym as the step reads it, 1 if stored transposed)
  local function operand(x)
    if T.offset(x) == nil then return x, 0 end
    if stored_transposed(x.value, x.base) then return x, 1 end
    return materialize(x), 0
  end

  -- a (a Sym) times b (a Sym or a constant tensor) as PyTorch's matmul of >= 2-D operands, times alpha
  local function matmul(a, b, alpha)
    local st = a.st
    local av, bv = a.value, is_sym(b) and b.value or b
    if not lt.is_tensor(bv) then fail(st, "its forward multiplies by a " .. type(b) .. ", which lt.infer cannot trace") end
    local y = av:matmul(bv)
    local na, nb = av:dim(), bv:dim()
    if na < 2 or nb < 2 then
      fail(st, string.format("its forward multiplies %s by %s: lt.infer traces products of matrices (2-D or more), " ..
        "not of vectors (unsqueeze the vector)", av:shape_str(), bv:shape_str()))
    end
    local M, K, N = av:size(na - 1), av:size(na), bv:size(nb)
    local batch = S.prod(av:shape(), 1, na - 2)
    local sb = 0
    if nb > 2 then
      local same = na == nb
      for d = 1, nb - 2 do same = same and av:size(d) == bv:size(d) end
      if not same then
        fail(st, string.format("its forward multiplies %s by %s, broadcasting batch dims, which lt.infer cannot " ..
          "trace (expand the operands to the same batch dims)", av:shape_str(), bv:shape_str()))
      end
      sb = K * N
    end
    local A, ta = operand(a)
    local Bsym, tb, bt = nil, 0, false
    if is_sym(b) then
      Bsym, tb = operand(b)
    elseif bv:dtype() ~= "float32" then
      fail(st, "its forward multiplies by a constant " .. bv:dtype() .. " tensor, expected float32")
    elseif bv:is_contiguous() then
      bt = bv
    elseif stored_transposed(bv) then
      bt, tb = bv:transpose(nb - 1, nb), 1
    else
      fail(st, "its forward multiplies by a constant tensor " .. bv:shape_str() .. " that is not contiguous " ..
        "(the plan shares it, as it shares weights)")
    end
    return T.step_from(A, y, { op = "matmul", a = alpha or 1,
      geo = { Bsym and Bsym.buf or -1, batch, M, K, N, ta, tb, M * K, sb }, t = { bt } })
  end
  T.matmul = matmul

  function methods.matmul(self, b) return matmul(self, b) end

  -- x:sum(dim) and x:mean(dim): for each outer index, X [n x inner] transposed times a column of n ones
  local function reduce(name, mean)
    return function(self, dim, keepdim)
      local st, v = self.st, self.value
      if type(dim) ~= "number" then
        fail(st, "its forward calls x:" .. name .. "() over all dims, which lt.infer traces only over one dim")
      end
      local shape = v:shape()
      local d = dim < 0 and #shape + dim + 1 or dim
      local y = v[name](v, dim, keepdim)
      local n, inner = shape[d], S.prod(shape, d + 1)
      local x = materialize(self)
      return T.step_from(x, y, { op = "matmul", a = mean and 1 / n or 1,
        geo = { -1, S.prod(shape, 1, d - 1), inner, n, 1, 1, 0, n * inner, 0 }, t = { lt.ones(n) } })
    end
  end
  methods.sum, methods.mean = reduce("sum", false), reduce("mean", true)

  -- ---- lt.* functions while a forward is traced -----------------------------------------------------------
  local function global(tbl, key, wrap) T.GLOBALS[#T.GLOBALS + 1] = { tbl, key, wrap } end

  global(lt, "is_tensor", function(orig) return function(v) return is_sym(v) or orig(v) end end)

  global(lt, "matmul", function(orig)
    return function(a, b, ...)
      if is_sym(a) then return matmul(a, b) end
      if is_sym(b) then
        fail(b.st, "its forward multiplies a constant by a value computed from its input (lt.matmul(W, x)); " ..
          "lt.infer traces x:matmul(W) (write it as (x^T W^T)^T)")
      end
      return orig(a, b, ...)
    end
  end)

  global(lt, "linear", function(orig)
    return function(x, w, b, ...)
      if not is_sym(x) then return orig(x, w, b, ...) end
      if is_sym(w) or is_sym(b) then fail(x.st, "its forward computes a linear layer's weight from its input") end
      local y = orig(x.value, w, b, ...)
      local O, I = w:size(1), w:size(2)
      return T.step(x, y, { op = "linear", rows = y:numel() / O, n_in = I, n_out = O, t = { w, b or false } })
    end
  end)

  -- lt.cat(list[, dim]) / lt.stack(list[, dim]) with Syms in the list: each one copied into its block of the output
  local function joiner(stack)
    return function(orig)
      return function(list, dim, ...)
        local any
        if type(list) == "table" then for _, v in ipairs(list) do if is_sym(v) then any = v end end end
        if not any then return orig(list, dim, ...) end
        local st, reals = any.st, {}
        for i, v in ipairs(list) do
          if not is_sym(v) then
            fail(st, "its forward " .. (stack and "stacks" or "concatenates") .. " a constant with values computed " ..
              "from its input, which lt.infer cannot trace")
          end
          reals[i] = v.value
        end
        local y = orig(reals, dim, ...)
        local d = dim or 1
        if d < 0 then d = y:dim() + d + 1 end
        local ys = T.contiguous_strides(y:shape())
        local out = st.plan:buffer(y:numel())
        local off = 0
        for _, v in ipairs(list) do
          local sout = {}
          for k = 1, #ys do if not (stack and k == d) then sout[#sout + 1] = ys[k] end end
          T.copy(v, out, off, sout, y)
          off = off + (stack and 1 or v.value:size(d)) * ys[d]
        end
        return sym(st, out, y)
      end
    end
  end
  global(lt, "cat", joiner(false))
  global(lt, "stack", joiner(true))

  -- the mask as lutra's attention reads it: int64 or only 0s and 1s means 1 = masked; other floats are added
  local function additive(m)
    if m:dtype() == "int64" or m:eq(0):logical_or(m:eq(1)):all():item() ~= 0 then
      return lt.zeros(m:shape()):masked_fill(m, -math.huge)
    end
    return m
  end

  global(F, "scaled_dot_product_attention", function(orig)
    return function(q, k, v, opts)
      local any = is_sym(q) and q or is_sym(k) and k or is_sym(v) and v
      if not any then return orig(q, k, v, opts) end
      local st = any.st
      opts = opts or {}
      if not is_sym(q) then fail(st, "its attention's query is a constant (lt.infer traces a query computed from its input)") end
      if is_sym(opts.attn_mask) then
        fail(st, "its attention mask is computed from its input; a plan takes masks as constants")
      end
      if (opts.dropout_p or 0) > 0 then
        fail(st, "its attention has dropout_p > 0 (training mode); call model:eval() before compiling")
      end
      local kv, vv = is_sym(k) and k.value or k, is_sym(v) and v.value or v
      orig(q.value, kv, vv, { attn_mask = opts.attn_mask, is_causal = opts.is_causal, scale = opts.scale }) -- checks
      local n = kv:dim()
      local kt = is_sym(k) and k:transpose(n - 1, n) or kv:transpose(n - 1, n)
      local scores = matmul(q, kt, opts.scale or 1 / math.sqrt(q.value:size(q.value:dim())))
      local mask = opts.attn_mask and additive(opts.attn_mask)
      if opts.is_causal then
        local c = lt.triu(lt.full({ q.value:size(-2), kv:size(-2) }, -math.huge), 1)
        mask = mask and mask + c or c
      end
      if mask then scores = scores + mask end
      local w = scores:softmax(-1)
      local out = matmul(w, v)
      if opts.need_weights then return out, w end
      return out
    end
  end)
end
