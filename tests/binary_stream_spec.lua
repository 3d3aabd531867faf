-- binary_stream_spec.lua — large results of add, sub, mul and div (more than twice a core's L2 cache) are
-- written with streaming stores (core/src/ops_stream.c), one loop per instruction set. Each element must be the
-- same IEEE operation as in the plain kernels: for these four ops a float32 result equals the float64 result
-- rounded to float32, so the check is exact. Shapes cover a full operand, a bias row, a column, a number, an
-- unaligned view as operand, lengths that leave a tail, and the split over two threads.
local lt = require "lutra"

local N = 3 * 1024 * 1024 + 7 -- 12 MB of float32: streamed on any CPU whose L2 is below 6 MB

local function exact(op, a, b)
  local r = lt[op](a, b)
  local a64 = lt.is_tensor(a) and a:double() or a
  local b64 = lt.is_tensor(b) and b:double() or b
  local want = lt[op](a64, b64):float()
  assert.are.equal("float32", r:dtype())
  assert.are.same(want:shape(), r:shape())
  local diff = (r:double() - want:double()):abs():max():item() -- in float64: not the path under test
  assert.are.equal(0, diff, op .. " differs from the float64 result rounded by " .. diff)
end

describe("large elementwise results (streamed stores)", function()
  lt.manual_seed(11)
  local threads = lt.get_num_threads()
  after_each(function() lt.set_num_threads(threads) end)

  for _, t in ipairs { 1, 2 } do
    it(("equal the float64 result rounded, for each op and broadcast (%d thread%s)"):format(t, t > 1 and "s" or ""),
      function()
        lt.set_num_threads(t)
        local x, y = lt.randn(N), lt.randn(N) + 3
        local m = lt.randn(2048, 1031)
        local row, col = lt.randn(1031) + 3, lt.randn(2048, 1) + 3
        for _, op in ipairs { "add", "sub", "mul", "div" } do
          exact(op, x, y)
          exact(op, m, row)
          exact(op, row, m)
          exact(op, m, col)
          exact(op, m, 1.25)
          exact(op, 0.75, m + 5)
          exact(op, x:narrow(1, 2, N - 1), y:narrow(1, 1, N - 1)) -- operands off the vector alignment
        end
      end)
  end

  it("keep autograd and the operators working as for small tensors", function()
    local a, b = lt.randn(1024, 1024):requires_grad(true), lt.randn(1024):requires_grad(true)
    local y = a * 3 + b
    y:sum():backward()
    assert.are.equal(3, a.grad:min():item())
    assert.are.equal(3, a.grad:max():item())
    assert.are.equal(1024, b.grad:min():item())
  end)
end)
