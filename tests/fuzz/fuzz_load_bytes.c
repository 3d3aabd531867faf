/* fuzz_load_bytes.c — libFuzzer target: lt.load_bytes (the whole file reader behind lt.load: safetensors,
 * the lutra metadata through Jansson, its decoding and validation), and loading the result into a model. */
#include <stdint.h>

#include "fuzz_lua.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_lua_init(
    "local lt = require 'lutra'\n"
    "return function(s)\n"
    "  local ok, sd = pcall(lt.load_bytes, s)\n"
    "  if ok then\n"
    "    for k, t in pairs(sd) do assert(type(k) == 'string' and lt.is_tensor(t), 'load_bytes returned a non-tensor') end\n"
    "    pcall(lt.load_bytes, s, { fc = lt.nn.Linear(3, 2) })\n"
    "  elseif type(sd) ~= 'string' or not sd:find('^lt.load_bytes: ') then\n"
    "    error('FUZZ: unexpected error form: ' .. tostring(sd))\n"
    "  end\n"
    "end\n");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (fuzz_lua_call(data, size)) abort(); /* only the checks above raise out of the function */
  return 0;
}
