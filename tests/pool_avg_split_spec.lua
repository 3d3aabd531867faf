-- tests/pool_avg_split_spec.lua — the average pools and group_norm over the pool's threads: adaptive_avg_pool2d's
-- forward (a range of planes per thread, core/src/nn_pool_adaptive.c), the average pools' backward (a windows'
-- table shared by every plane, then a range of planes per thread: lt_nn_avg_pool_backward_table in
-- core/src/nn_pool.c), group_norm's forward (a range of rows) and backward (a range of groups, whose channels own
-- their weight and bias gradients: core/src/nn_group_norm.c). Each plane, row or group is computed as on one
-- thread, so two threads give the same bits, in float32 and float64; the inputs have more than 64K cells (the
-- split's threshold) and counts the two threads cut unevenly. And the tables' windows against sums written out
-- here: adaptive windows that overlap (13 -> 7) and avg_pool2d with padding, ceil_mode and count_include_pad off.
local lt = require "lutra"
local F = lt.F

local function run(threads, f, x, g, params)
  local was = lt.get_num_threads()
  lt.set_num_threads(threads)
  local ok, res = pcall(function()
    local xl = x:clone():requires_grad(true)
    local ps = {}
    for i, p in ipairs(params or {}) do ps[i] = p:clone():requires_grad(true) end
    local y = f(xl, unpack(ps))
    y:backward(g)
    local r = { y = y, gx = xl.grad }
    for i, p in ipairs(ps) do r[i] = p.grad end
    return r
  end)
  lt.set_num_threads(was)
  assert(ok, res)
  return res
end

local cases = {
  { what = "adaptive_avg_pool2d 13x13 -> 7x7", f = function(x) return F.adaptive_avg_pool2d(x, 7) end },
  { what = "adaptive_avg_pool2d 13x13 -> 5x3", f = function(x) return F.adaptive_avg_pool2d(x, { 5, 3 }) end },
  { what = "avg_pool2d k3 s2 p1, ceil_mode, count_include_pad off",
    f = function(x) return F.avg_pool2d(x, 3, { stride = 2, padding = 1, ceil_mode = true, count_include_pad = false }) end },
}

describe("the average pools over two threads", function()
  for _, c in ipairs(cases) do
    for _, dt in ipairs { "float32", "float64" } do
      it(c.what .. ", " .. dt .. ": the same bits as one thread", function()
        lt.manual_seed(3)
        local x = lt.randn(7, 97, 13, 13):to(dt) -- 115K cells, 679 planes
        local g = lt.randn(c.f(x):shape()):to(dt)
        local one, two = run(1, c.f, x, g), run(2, c.f, x, g)
        assert.is_true(lt.equal(one.y, two.y), "output")
        assert.is_true(lt.equal(one.gx, two.gx), "input gradient")
      end)
    end
  end

  for _, dt in ipairs { "float32", "float64" } do
    it("group_norm, 12 groups of 8 channels, " .. dt .. ": the same bits as one thread", function()
      lt.manual_seed(4)
      local x, w, b = lt.randn(5, 96, 15, 11):to(dt), lt.randn(96):to(dt), lt.randn(96):to(dt) -- 79K cells
      local f = function(t, ww, bb) return F.group_norm(t, 12, ww, bb) end
      local g = lt.randn(x:shape()):to(dt)
      local one, two = run(1, f, x, g, { w, b }), run(2, f, x, g, { w, b })
      for _, k in ipairs { "y", "gx", 1, 2 } do assert.is_true(lt.equal(one[k], two[k]), tostring(k)) end
      assert.is_true(one.y:allclose(F.group_norm(x, 12, w, b), 0, 0)) -- the grad-free forward: the same rows
    end)
  end

  it("spreads each output's gradient over its window, divided by the window's count", function()
    -- one plane, 13 -> 7: window i covers rows floor(13 i / 7) .. ceil(13 (i + 1) / 7) (0-based, end excluded)
    local x = lt.randn(1, 1, 13, 13)
    local g = lt.randn(1, 1, 7, 7)
    local r = run(2, function(t) return F.adaptive_avg_pool2d(t, 7) end, x, g)
    local gt, want = g:view(7, 7):tolist(), {}
    for h = 1, 13 do want[h] = {} for w = 1, 13 do want[h][w] = 0 end end
    for i = 0, 6 do
      local h0, h1 = math.floor(13 * i / 7), math.ceil(13 * (i + 1) / 7)
      for j = 0, 6 do
        local w0, w1 = math.floor(13 * j / 7), math.ceil(13 * (j + 1) / 7)
        for h = h0, h1 - 1 do
          for w = w0, w1 - 1 do want[h + 1][w + 1] = want[h + 1][w + 1] + gt[i + 1][j + 1] / ((h1 - h0) * (w1 - w0)) end
        end
      end
    end
    assert.is_true(r.gx:view(13, 13):allclose(lt.tensor(want), 1e-6, 1e-6))
  end)
end)
