-- default_dtype_spec.lua — lt.set_default_dtype / lt.get_default_dtype as torch 1.13's: what every creation
-- without a dtype makes, module parameters and buffers created after the call, the errors, worker states, and
-- pytorch/examples time_sequence_prediction written with the default dtype (tests/fixtures/default_dtype.json,
-- from tests/fixtures/gen_default_dtype.py).
local lt = require "lutra"
local nn = lt.nn
local cjson = require "cjson"

local fh = assert(io.open("tests/fixtures/default_dtype.json", "rb"))
local fx = cjson.decode(fh:read("*a"))
fh:close()

-- runs f with the default float64, restoring float32 even when f fails (later specs expect float32)
local function with_f64(f)
  lt.set_default_dtype("float64")
  local ok, err = pcall(f)
  lt.set_default_dtype("float32")
  if not ok then error(err, 0) end
end

describe("lt.set_default_dtype / get_default_dtype", function()
  it("starts float32 and reads back what was set, as torch's", function()
    assert.are.equal(fx.initial, lt.get_default_dtype())
    with_f64(function() assert.are.equal(fx.after, lt.get_default_dtype()) end)
    assert.are.equal("float32", lt.get_default_dtype())
    lt.set_default_dtype("double")
    assert.are.equal("float64", lt.get_default_dtype())
    lt.set_default_dtype("float")
    assert.are.equal("float32", lt.get_default_dtype())
  end)

  it("makes every creation without a dtype float64, as torch 1.13 does", function()
    with_f64(function()
      local made = {
        tensor_numbers = lt.tensor({ 1.5, 2.0 }),
        tensor_number = lt.tensor(3.5),
        zeros = lt.zeros(2, 3),
        ones = lt.ones(2),
        empty = lt.empty(2),
        full = lt.full({ 2 }, 1.5),
        arange_float = lt.arange(0, 1, 0.25),
        linspace = lt.linspace(0, 1, 5),
        logspace = lt.logspace(0, 1, 5),
        rand = lt.rand(3),
        randn = lt.randn(3),
        eye = lt.eye(3),
        zeros_like_f32 = lt.zeros_like(lt.zeros(2, "float32")),
        linear_weight = nn.Linear(3, 2).weight,
        linear_bias = nn.Linear(3, 2).bias,
        conv2d_weight = nn.Conv2d(1, 2, 3).weight,
        batchnorm_running_mean = nn.BatchNorm1d(3).running_mean,
        lstmcell_weight_ih = nn.LSTMCell(2, 3).weight_ih,
        float32_times_number = lt.zeros(2, "float32") * 0.5,
      }
      for name, want in pairs(fx.dtypes) do
        assert(made[name], name)
        assert.are.equal(want, made[name]:dtype(), name)
      end
      -- the values are float64's too, not float32's widened
      assert.are.equal(fx.tensor_third, lt.tensor({ 1 / 3 }):item())
      local ls = lt.linspace(-1.3, 2.9, 7):tolist()
      -- to the last bits of torch's (its vectorised loop rounds a few elements the other way), far below float32's
      for i, v in ipairs(fx.linspace_values) do assert(math.abs(ls[i] - v) <= 1e-15, i) end
      local r = lt.randn(1000)
      local rf = r:float():double()
      assert.is_true((r - rf):abs():max():item() > 0, "randn draws below float32's precision")
      local u = lt.rand(1000)
      assert.is_true((u - u:float():double()):abs():max():item() > 0, "rand draws below float32's precision")
      assert.is_true(u:min():item() >= 0 and u:max():item() < 1)
    end)
  end)

  it("leaves explicit dtypes, *_like and int64 alone", function()
    with_f64(function()
      assert.are.equal("float32", lt.zeros(2, "float32"):dtype())
      assert.are.equal("float32", lt.randn(2, { dtype = "float32" }):dtype())
      assert.are.equal("float32", lt.tensor({ 1 }, "float32"):dtype())
      assert.are.equal("int64", lt.tensor({ 1 }, "int64"):dtype())
      assert.are.equal("float32", lt.ones_like(lt.ones(2, "float32")):dtype())
      assert.are.equal("float32", lt.tensor(lt.ones(2, "float32")):dtype()) -- a tensor keeps its dtype
    end)
    -- and float32 again after going back
    assert.are.equal("float32", lt.zeros(2):dtype())
    assert.are.equal("float32", nn.Linear(2, 2).weight:dtype())
    assert.are.equal("float32", lt.randn(2):dtype())
  end)

  it("refuses what is not a floating type, naming the value", function()
    local ok, err = pcall(lt.set_default_dtype, "int64")
    assert.is_false(ok)
    assert.truthy(err:find("set_default_dtype: " .. fx.int64_error .. ", got 'int64'", 1, true), err)
    ok, err = pcall(lt.set_default_dtype, "float16")
    assert.truthy(err:find("set_default_dtype: unknown dtype 'float16' (expected \"float32\" or \"float64\")", 1, true), err)
    ok, err = pcall(lt.set_default_dtype, 64)
    assert.truthy(err:find("set_default_dtype: expected \"float32\" or \"float64\", got number", 1, true), err)
    ok, err = pcall(lt.rand, 2, "int64")
    assert.truthy(err:find("rand: dtype must be float32 or float64, got int64", 1, true), err)
    assert.are.equal("float32", lt.get_default_dtype())
  end)

  it("is the state's: a worker lutra starts begins with its parent's, and keeps its own afterwards", function()
    with_f64(function()
      local w = lt.thread.spawn(function()
        local l = require "lutra"
        local first = l.get_default_dtype() .. " " .. l.zeros(1):dtype()
        l.set_default_dtype("float32")
        return first, l.get_default_dtype()
      end)
      local first, after = w:join()
      assert.are.equal("float64 float64", first)
      assert.are.equal("float32", after)
      assert.are.equal("float64", lt.get_default_dtype()) -- the worker's change stays in the worker
    end)
    local w = lt.thread.spawn(function() return require("lutra").zeros(1):dtype() end)
    assert.are.equal("float32", (w:join()))
  end)
end)

describe("time_sequence_prediction written with torch.set_default_dtype(torch.float64)", function()
  local ts = fx.time_sequence
  local Sequence = nn.Module:extend("SequenceDefault")
  function Sequence:init()
    self.lstm1 = nn.LSTMCell(1, 51)
    self.lstm2 = nn.LSTMCell(51, 51)
    self.linear = nn.Linear(51, 1)
  end
  function Sequence:forward(input, future)
    local outputs = {}
    local h_t = lt.zeros(input:size(1), 51) -- h_t = torch.zeros(input.size(0), 51): the default dtype
    local c_t = lt.zeros(input:size(1), 51)
    local h_t2 = lt.zeros(input:size(1), 51)
    local c_t2 = lt.zeros(input:size(1), 51)
    local output
    for _, input_t in ipairs(input:split(1, 2)) do
      h_t, c_t = self.lstm1(input_t, { h_t, c_t })
      h_t2, c_t2 = self.lstm2(h_t, { h_t2, c_t2 })
      output = self.linear(h_t2)
      outputs[#outputs + 1] = output
    end
    for _ = 1, future or 0 do
      h_t, c_t = self.lstm1(output, { h_t, c_t })
      h_t2, c_t2 = self.lstm2(h_t, { h_t2, c_t2 })
      output = self.linear(h_t2)
      outputs[#outputs + 1] = output
    end
    return lt.cat(outputs, 2)
  end

  it("trains with LBFGS from parameters created float64 and follows torch 1.13's losses to 1e-10", function()
    with_f64(function()
      local data = ts.data
      local function rows(a, b, c0, c1)
        local r = {}
        for i = a, b do
          local row = {}
          for j = c0, c1 do row[#row + 1] = data[i][j] end
          r[#r + 1] = row
        end
        return lt.tensor(r) -- from Lua numbers: the default dtype
      end
      local N, L = #data, #data[1]
      local input, target = rows(4, N, 1, L - 1), rows(4, N, 2, L)
      local test_input, test_target = rows(1, 3, 1, L - 1), rows(1, 3, 2, L)
      assert.are.equal("float64", input:dtype())
      local seq = Sequence() -- no seq:double()
      local named = seq:named_parameters()
      for j, name in ipairs(ts.param_order) do
        local p = assert(named[name], name)
        assert.are.equal("float64", p:dtype(), name)
        local w = {}
        for k = 0, p:numel() - 1 do w[k + 1] = ((k * 7919 + (j - 1) * 131) % 1001 - 500) / 3500 end
        lt.no_grad(function() p:copy_(lt.tensor(w):reshape(p:shape())) end)
      end
      local criterion = nn.MSELoss()
      local optimizer = lt.optim.LBFGS(seq:parameters(), 0.8)
      for i = 1, #ts.losses do
        local loss = optimizer:step(function()
          optimizer:zero_grad()
          local l = criterion(seq(input), target)
          l:backward()
          return l
        end):item()
        local pred, test_loss
        lt.no_grad(function()
          pred = seq(test_input, ts.future)
          test_loss = criterion(pred:narrow(2, 1, L - 1), test_target):item()
        end)
        assert.are.equal(ts.pred_dtype, pred:dtype())
        assert(math.abs(loss - ts.losses[i]) <= 1e-10 * ts.losses[i], string.format("step %d loss %.17g, torch %.17g", i, loss, ts.losses[i]))
        assert(math.abs(test_loss - ts.test_losses[i]) <= 1e-10 * ts.test_losses[i],
          string.format("step %d test loss %.17g, torch %.17g", i, test_loss, ts.test_losses[i]))
      end
    end)
  end)
end)
