-- infer_attention_spec.lua — lt.infer on attention: traced views (transpose, permute, narrow, chunk, split, cat,
-- stack), matmul, mean/sum, lt.F.scaled_dot_product_attention, MultiheadAttention, the transformer layers and
-- stacks, models/gpt.lua on a fixed context; each against model(x), no allocation per call, the plain-Lua export
-- under luajit/lua5.1/lua5.4, and the refusals that remain.
local lt = require "lutra"
local H = require "helpers.infer"(assert)
local nn = lt.nn

local function causal(n) return nn.Transformer.generate_square_subsequent_mask(n) end

-- a forward of views, joins and products of its own
local Views = nn.Module:extend("Views")
function Views:init() self.fc = nn.Linear(4, 6) end
function Views:forward(x) -- x [2 x 3 x 4]
  local h = self.fc(x)                                  -- [2 x 3 x 6]
  local a, b = h:chunk(2, 3)[1], h:split(3, 3)[2]       -- [2 x 3 x 3] each, views of h
  local p = h:permute(3, 1, 2):transpose(2, 3)          -- [6 x 3 x 2]
  local s = lt.stack({ a, b:relu() }, 2)                -- [2 x 2 x 3 x 3]
  local c = lt.cat({ a:transpose(2, 3), b }, 3)         -- [2 x 3 x 6]
  local m = a:matmul(b:transpose(2, 3))                 -- [2 x 3 x 3]
  local n = h:narrow(3, 2, 3) + s:mean(2) + m + c:narrow(3, 1, 3)
  return n:matmul(p:select(1, 2)):sum(3) + lt.matmul(h, self.fc.weight):mean(3)
end

local Sdpa = nn.Module:extend("Sdpa")
function Sdpa:init(opts) self.q, self.k, self.v, self.opts = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 4), opts end
function Sdpa:forward(x) -- x [2 x 5 x 8] as [batch x heads x L x d] with 1 head
  local q, k, v = self.q(x):unsqueeze(2), self.k(x):unsqueeze(2), self.v(x):unsqueeze(2)
  return lt.F.scaled_dot_product_attention(q, k, v, self.opts):squeeze(2)
end

-- attention with both masks and the weights used, as a user writes it
local Masked = nn.Module:extend("Masked")
function Masked:init(opts)
  self.attn = nn.MultiheadAttention(8, 2, { batch_first = true })
  self.mask, self.pad, self.average = opts.mask, opts.pad, opts.average
end
function Masked:forward(x)
  local y, w = self.attn(x, x, x, { attn_mask = self.mask, key_padding_mask = self.pad,
    average_attn_weights = self.average })
  if self.average == false then w = w:mean(2) end
  return y + w:matmul(x)
end

local Seq2Seq = nn.Module:extend("Seq2Seq")
function Seq2Seq:init(norm_first)
  self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16 }), 2, nn.LayerNorm(8))
  self.dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, { dim_feedforward = 16, norm_first = norm_first,
    activation = "gelu" }), 2)
end
function Seq2Seq:forward(x) -- [L x B x E], the decoder attending to the encoded input, causally over itself
  return self.dec(x, self.enc(x), { tgt_mask = causal(x:size(1)) })
end

local function gpt(seed)
  lt.manual_seed(seed)
  return require("models.gpt").new { vocab_size = 13, block_size = 8, n_layer = 2, n_head = 2, n_embd = 16 }
end

local function tokens(b, t) return lt.randint(1, 14, { b, t }):long() end

describe("lt.infer on attention", function()
  setup(function() lt.manual_seed(7) end)

  it("traces transpose, permute, narrow, select, chunk, split, cat, stack, matmul, mean and sum", function()
    local plan = H.check(Views(), lt.randn(2, 3, 4), { x2 = lt.randn(2, 3, 4) })
    local kinds = {}
    for _, s in ipairs(plan._steps) do kinds[s.op] = true end
    assert.is_true(kinds.strided and kinds.matmul and true)
  end)

  it("runs lt.F.scaled_dot_product_attention with is_causal, a constant mask and a scale", function()
    H.check(Sdpa {}, lt.randn(2, 5, 8), { x2 = lt.randn(2, 5, 8) })
    H.check(Sdpa { is_causal = true }, lt.randn(2, 5, 8), { x2 = lt.randn(2, 5, 8) })
    local pad = lt.tensor({ { 0, 0, 0, 1, 1 } }):expand(5, 5):contiguous() -- 0/1 float: 1 = masked
    H.check(Sdpa { attn_mask = pad, scale = 0.3 }, lt.randn(2, 5, 8), { x2 = lt.randn(2, 5, 8) })
  end)

  it("runs MultiheadAttention as self-attention, batch first or not, batched or not", function()
    for _, bf in ipairs { true, false } do
      local m = nn.MultiheadAttention(8, 2, { batch_first = bf })
      local ref = function(x) return m(x, x, x) end
      H.check(m, lt.randn(3, 5, 8), { ref = ref, x2 = lt.randn(3, 5, 8) })
      H.check(m, lt.randn(5, 8), { ref = ref, x2 = lt.randn(5, 8) })
    end
    local m = nn.MultiheadAttention(8, 4, { bias = false })
    H.check(m, lt.randn(4, 2, 8), { ref = function(x) return m(x, x, x) end })
  end)

  it("takes masks as constants (attn_mask 2-D and 3-D, key_padding_mask) and returns the weights", function()
    local pad = lt.tensor({ { 0, 0, 0, 1, 1 }, { 0, 0, 0, 0, 0 }, { 0, 1, 0, 0, 0 } }, "int64")
    H.check(Masked { mask = causal(5), pad = pad }, lt.randn(3, 5, 8), { x2 = lt.randn(3, 5, 8) })
    local m3 = lt.randn(6, 5, 5):gt(1):float() -- [B*heads x L x S], 1 = masked
    H.check(Masked { mask = m3, average = false }, lt.randn(3, 5, 8), { x2 = lt.randn(3, 5, 8) })
    H.check(Masked { pad = pad }, lt.randn(3, 5, 8))
  end)

  it("runs TransformerEncoderLayer: norm_first both ways, relu and gelu, batch first or not", function()
    for _, bf in ipairs { true, false } do
      for _, nf in ipairs { true, false } do
        for _, act in ipairs { "relu", "gelu" } do
          local l = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, batch_first = bf, norm_first = nf,
            activation = act })
          H.check(l, lt.randn(3, 5, 8), { x2 = lt.randn(3, 5, 8) })
        end
      end
    end
  end)

  it("runs TransformerEncoder (with its norm) and TransformerDecoder layers over an encoded memory", function()
    H.check(Seq2Seq(true), lt.randn(5, 2, 8), { x2 = lt.randn(5, 2, 8) })
    H.check(Seq2Seq(false), lt.randn(5, 2, 8), { x2 = lt.randn(5, 2, 8) })
  end)

  it("runs models/gpt.lua (its causal attention, tied head) as a plan on a fixed context", function()
    local m = gpt(3)
    H.check(m, tokens(2, 8), { x2 = tokens(2, 8) })
    H.check(m.transformer.h[1], lt.randn(1, 8, 16), { x2 = lt.randn(1, 8, 16) }) -- one Block
  end)

  it("allocates nothing per call in an encoder layer, masked attention and the GPT", function()
    local l = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, batch_first = true })
    l:eval()
    local x = lt.randn(1, 5, 8)
    assert.are.same(H.NONE, H.allocations(lt.infer.compile(l, x), x))
    local mm = Masked { mask = causal(5) }
    mm:eval()
    assert.are.same(H.NONE, H.allocations(lt.infer.compile(mm, x), x))
    local g = gpt(4)
    g:eval()
    local idx = tokens(1, 8)
    assert.are.same(H.NONE, H.allocations(lt.infer.compile(g, idx), idx))
  end)

  it("exports views, attention, an encoder layer and the GPT as plain Lua", function()
    H.check_export(Views(), { lt.randn(2, 3, 4), lt.randn(2, 3, 4) }, "views")
    H.check_export(Masked { mask = causal(4), pad = lt.tensor({ { 0, 0, 1, 1 } }, "int64") },
      { lt.randn(1, 4, 8), lt.randn(1, 4, 8) }, "masked")
    H.check_export(nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, norm_first = true, activation = "gelu" }),
      { lt.randn(4, 1, 8), lt.randn(4, 1, 8) }, "encoder_layer")
    H.check_export(gpt(5), { tokens(1, 6), tokens(1, 6) }, "gpt")
  end)

  it("refuses what stays unsupported, naming the module and the reason", function()
    local mha = nn.MultiheadAttention(8, 2, { add_bias_kv = true })
    mha:eval()
    assert.matches("model (MultiheadAttention): its forward concatenates a constant with values computed from its " ..
      "input", H.error_of(lt.infer.compile, mha, lt.randn(4, 1, 8)), 1, true)
    local train = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16 })
    assert.matches("model (TransformerEncoderLayer): is in training mode",
      H.error_of(lt.infer.compile, train, lt.randn(4, 1, 8)), 1, true)
    local Net = nn.Module:extend("Net")
    function Net:init() self.fc = nn.Linear(4, 4) end
    function Net:forward(x)
      local h = self.fc(x)
      return lt.F.scaled_dot_product_attention(h, h, h, { attn_mask = h:gt(0) })
    end
    local err = H.error_of(lt.infer.compile, Net(), lt.randn(1, 4, 4))
    assert.matches("model (Net): its forward uses x:gt", err, 1, true)
    function Net:forward(x) return lt.matmul(self.fc.weight, self.fc(x)) end
    assert.matches("model (Net): its forward multiplies a constant by a value computed from its input",
      H.error_of(lt.infer.compile, Net(), lt.randn(4, 4)), 1, true)
    function Net:forward(x) return self.fc(x):matmul(lt.randn(3, 4, 4)) end
    assert.matches("its forward multiplies [2 x 4] by [3 x 4 x 4], broadcasting batch dims",
      H.error_of(lt.infer.compile, Net(), lt.randn(2, 4)), 1, true)
    function Net:forward(x) return lt.cat({ self.fc(x), lt.zeros(1, 4) }, 1) end
    assert.matches("its forward concatenates a constant with values computed from its input",
      H.error_of(lt.infer.compile, Net(), lt.randn(1, 4)), 1, true)
    function Net:forward(x) return self.fc(x):view(2, 2, 2, 2, 2):permute(5, 4, 3, 2, 1):contiguous() end
    assert.matches("in more than 4 independent dims", H.error_of(lt.infer.compile, Net(), lt.randn(8, 4)), 1, true)
    function Net:forward(x) return self.fc(x):mean() end
    assert.matches("its forward calls x:mean() over all dims", H.error_of(lt.infer.compile, Net(), lt.randn(4, 4)), 1,
      true)
    function Net:forward(x) return self.fc(x):matmul(self.fc.weight[1]) end
    assert.matches("lt.infer traces products of matrices", H.error_of(lt.infer.compile, Net(), lt.randn(4, 4)), 1, true)
  end)
end)
