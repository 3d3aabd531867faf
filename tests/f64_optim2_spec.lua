-- f64_optim2_spec.lua — RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam and ASGD with their options on float64
-- parameters against torch 1.13 (tests/fixtures/f64_optim2.json, gen_f64_optim2.py): parameters and state buffers
-- after each of 8 steps to 1e-12, the state in float64; one optimizer over a float64 and a float32 parameter
-- (each updates in its own dtype); LR schedulers driving float64 parameters; clip_grad_norm_ / clip_grad_value_
-- and the trainer's clipping (core._clip_gradients) on float64 gradients.
local lt = require "lutra"
local cjson = require "cjson"

local f64_ref = require "tests.helpers.f64_ref"
local tensor_of, check = f64_ref.tensor_of, f64_ref.check

local fx = f64_ref.load("f64_optim2")

local function copy(o)
  local t = {}
  for k, v in pairs(o) do t[k] = v end
  return t
end

-- runs an optimizer over w, b for the fixture's gradients, calling after(s, opt) after each step
local function run(w, b, name, options, after, sched)
  local opt = lt.optim[name]({ w, b }, copy(options))
  for s = 1, #fx.grads do
    local gw, gb = tensor_of(fx.grads[s][1]), tensor_of(fx.grads[s][2])
    opt:zero_grad()
    local loss = (w * gw):sum() + (b * gb:type(b:dtype())):sum()
    loss:backward()
    opt:step()
    if sched then sched:step() end
    if after then after(s, opt) end
  end
  return opt
end

describe("float64 optimizers against torch 1.13 (f64_optim2.json)", function()
  for n, c in ipairs(fx.cases) do
    it(string.format("%s %s", c.optimizer, cjson.encode(c.options)), function()
      local w, b = tensor_of(fx.w0):requires_grad(true), tensor_of(fx.b0):requires_grad(true)
      run(w, b, c.optimizer, c.options, function(s, opt)
        local want = c.steps[s]
        check(string.format("case %d step %d w", n, s), w, want.w)
        check(string.format("case %d step %d b", n, s), b, want.b)
        local st = opt:state_dict().state[1]
        for k, ref in pairs(want.state_w) do check(string.format("case %d step %d %s", n, s, k), st[k], ref) end
      end)
    end)
  end
end)

describe("one optimizer over float64 and float32 parameters", function()
  for _, c in ipairs(fx.cases) do
    it(c.optimizer .. " " .. cjson.encode(c.options) .. ": each parameter updates in its own dtype", function()
      -- w float64 follows torch's float64 run; b float32 follows an all-float32 run of the same optimizer
      local w, b = tensor_of(fx.w0):requires_grad(true), tensor_of(fx.b0):float():requires_grad(true)
      local opt = run(w, b, c.optimizer, c.options)
      check("w", w, c.steps[#c.steps].w)
      assert.are.equal("float32", b:dtype())
      local w32, b32 = tensor_of(fx.w0):float():requires_grad(true), tensor_of(fx.b0):float():requires_grad(true)
      run(w32, b32, c.optimizer, c.options)
      assert.are.same(b32:tolist(), b:tolist())
      for _, v in pairs(opt:state_dict().state[2]) do
        if lt.is_tensor(v) and v:numel() > 1 then assert.are.equal("float32", v:dtype()) end
      end
      for _, v in pairs(opt:state_dict().state[1]) do
        if lt.is_tensor(v) and v:numel() > 1 then assert.are.equal("float64", v:dtype()) end
      end
    end)
  end
end)

describe("LR schedulers on float64 parameters", function()
  for _, c in ipairs(fx.schedulers) do
    it(c.scheduler .. " over " .. c.optimizer, function()
      local w, b = tensor_of(fx.w0):requires_grad(true), tensor_of(fx.b0):requires_grad(true)
      local opt = lt.optim[c.optimizer]({ w, b }, copy(c.options))
      local sched = lt.optim.lr_scheduler[c.scheduler](opt, copy(c.sched_options))
      for s = 1, #fx.grads do
        opt:zero_grad()
        local loss = (w * tensor_of(fx.grads[s][1])):sum() + (b * tensor_of(fx.grads[s][2])):sum()
        loss:backward()
        opt:step()
        sched:step()
        local want = c.steps[s]
        assert(math.abs(opt.param_groups[1].lr - want.lr) <= 1e-15, "lr at step " .. s)
        check("w step " .. s, w, want.w)
        check("b step " .. s, b, want.b)
      end
    end)
  end
end)

describe("gradient clipping on float64 gradients", function()
  local function grads_of()
    local w, b = tensor_of(fx.w0):requires_grad(true), tensor_of(fx.b0):requires_grad(true)
    local loss = (w * tensor_of(fx.grads[1][1])):sum() + (b * tensor_of(fx.grads[1][2])):sum()
    loss:backward()
    return w, b
  end
  for _, c in ipairs(fx.clips) do
    local label = c.kind == "norm" and ("clip_grad_norm_ norm_type " .. tostring(c.norm_type) .. " max_norm " ..
      c.max_norm) or "clip_grad_value_"
    it(label, function()
      local w, b = grads_of()
      if c.kind == "norm" then
        local nt = c.norm_type == "inf" and math.huge or c.norm_type
        local total = lt.nn.utils.clip_grad_norm_({ w, b }, c.max_norm, nt)
        assert(math.abs(total - c.total) <= 1e-12 * math.abs(c.total), "total " .. total .. " torch " .. c.total)
      else
        lt.nn.utils.clip_grad_value_({ w, b }, c.clip_value)
      end
      check("grad w", w.grad, c.grad_w)
      check("grad b", b.grad, c.grad_b)
    end)
  end

  it("the trainer's clipping (core._clip_gradients) by norm and by value", function()
    local core = require "lutra.core"
    for _, c in ipairs(fx.clips) do
      if c.kind == "value" or (c.norm_type == 2 and c.max_norm == 0.5) then
        local w, b = grads_of()
        if c.kind == "value" then core._clip_gradients({ w, b }, c.clip_value, "value")
        else core._clip_gradients({ w, b }, c.max_norm, "norm") end
        check(c.kind .. " grad w", w.grad, c.grad_w)
        check(c.kind .. " grad b", b.grad, c.grad_b)
      end
    end
  end)
end)
