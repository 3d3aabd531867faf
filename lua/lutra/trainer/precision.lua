-- lutra.trainer.precision — Trainer{precision = ...}: "32-true" (default; 32 and "32" as Lightning 1.6 spells it)
-- or "bf16-mixed" (alias "bf16"): bfloat16 mixed precision for the whole run (fit, validate, test, predict),
-- through lt.autocast's switch (lua/lutra/autocast.lua): the GEMM-based ops compute with bf16 operands and fp32
-- sums; parameters, gradients and optimizer state stay fp32, no loss scaling (bf16 has fp32's exponent range).
local core = require "lutra.core"

local M = {}

local NAMES = { ["32"] = "32-true", ["32-true"] = "32-true", bf16 = "bf16-mixed", ["bf16-mixed"] = "bf16-mixed" }
local FP16 = { ["16"] = true, ["16-mixed"] = true, ["16-true"] = true }

-- The option's check: nil when fine, else what is wrong (the Trainer adds ", got ...").
function M.check(v)
  local s = type(v) == "number" and string.format("%d", v) or v
  if type(s) == "string" and NAMES[s] then return nil end
  if type(s) == "string" and FP16[s] then
    return "is float16, which the CPU has no autocast for (as Lightning's on CPU): use \"bf16-mixed\" " ..
      "(bfloat16 autocast) or \"32-true\""
  end
  return 'must be "32-true" (or 32, "32") or "bf16-mixed" (or "bf16")'
end

--- The option's value as Lightning 2 names it ("32-true" or "bf16-mixed").
function M.normalize(v)
  if v == nil then return "32-true" end
  return NAMES[type(v) == "number" and string.format("%d", v) or v]
end

-- A run starts / ends (trainer/init.lua's _begin_run, _end_run): autocast on for the run only.
function M.begin_run(trainer)
  if trainer.precision ~= "bf16-mixed" or trainer._autocast_was ~= nil then return end
  require("lutra.autocast").note_fallback(require "lutra")
  trainer._autocast_was = core._autocast_set(true)
end

function M.end_run(trainer)
  if trainer._autocast_was == nil then return end
  core._autocast_set(trainer._autocast_was)
  trainer._autocast_was = nil
end

return M
