-- lutra.autocast — bfloat16 mixed precision for plain loops: lt.autocast(dtype_or_options, fn, ...).
--
-- Inside fn the GEMM-based ops (linear, matmul/bmm, conv, attention's products, the recurrent products) round
-- their operands to bfloat16 and sum in fp32 (lutra's AVX512-BF16 GEMM, core/src/lt_gemm_bf16.h); every other op,
-- the parameters, gradients and optimizer state stay fp32. A backward runs each op's gradient products in the
-- precision its forward had, wherever backward() is called. Trainer{precision = "bf16-mixed"} uses the same switch.
local core = require "lutra.core"
local compat = require "lutra._compat"
local util = require "lutra.utils.check"
local pack, unpack = compat.pack, compat.unpack
local fmt = string.format

local M = {}

local BF16 = { bfloat16 = true, bf16 = true }
local FP16 = { float16 = true, half = true, fp16 = true }

-- (dtype or options) -> enabled; errors name what is wrong
local function parse(spec, level)
  level = level + 1
  local dtype, enabled = spec, true
  if type(spec) == "table" then
    util.check_options("autocast", spec, { device_type = "string", dtype = "string", enabled = "boolean",
      cache_enabled = "boolean" }, level)
    if spec.device_type ~= nil and spec.device_type ~= "cpu" then
      error(fmt("autocast: device_type '%s' is not available: lutra computes on the CPU (device_type = \"cpu\")",
        spec.device_type), level)
    end
    dtype = spec.dtype or "bfloat16"
    if spec.enabled ~= nil then enabled = spec.enabled end
  elseif spec == "cpu" then -- PyTorch's torch.autocast("cpu"): bfloat16 is the CPU's autocast dtype
    dtype = "bfloat16"
  elseif type(spec) ~= "string" then
    error(fmt("bad argument #1 to 'autocast' (string or table expected, got %s)", type(spec)), level)
  end
  if FP16[dtype] then
    error(fmt("autocast: dtype '%s': the CPU has no float16 autocast (as PyTorch's and Lightning's on CPU); " ..
      "use \"bfloat16\"", dtype), level)
  end
  if not BF16[dtype] then
    error(fmt("autocast: unknown dtype '%s' (known: \"bfloat16\", alias \"bf16\")", tostring(dtype)), level)
  end
  return enabled
end

local noted = false
-- A one-time note when autocast is asked for on a CPU (or under LUTRA_BF16_GEMM=0) where it computes in fp32.
function M.note_fallback(lt)
  if noted or core._bf16_info().active then return end
  noted = true
  local why = core._bf16_info().supported and "LUTRA_BF16_GEMM=0 (or a test) forces the fp32 path"
    or "this CPU has no AVX512-BF16"
  lt._note("lutra: note: bfloat16 autocast computes in fp32 here: " .. why)
end

--- Runs fn(...) with autocast set to `enabled` and restores the previous state however fn ends; returns fn's
--- results (errors pass through unchanged).
function M.run(lt, enabled, fn, ...)
  if enabled then M.note_fallback(lt) end
  local was = core._autocast_set(enabled)
  local res = pack(pcall(fn, ...))
  core._autocast_set(was)
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, res.n)
end

--- lt.autocast("bfloat16" | "bf16" | "cpu" | {device_type = "cpu", dtype = "bfloat16", enabled = true}, fn, ...)
function M.autocast(lt, spec, fn, ...)
  local enabled = parse(spec, 3)
  util.check_arg("autocast", 2, fn, "function", 3)
  return M.run(lt, enabled, fn, ...)
end

return M
