/* fuzz_ckpt_meta.c — libFuzzer target: a checkpoint's metadata (the "lutra" JSON document): decoding by
 * Jansson into Lua values (core/bind/l_json.c), the restoring of tensors and floats, and the contents
 * validation (lua/lutra/checkpoint/validate.lua), on a correctly checksummed file built around the input
 * (so the checksum does not stop the fuzzer before the metadata is read). */
#include <stdint.h>

#include "fuzz_lua.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_lua_init(
    "local lt = require 'lutra'\n"
    "local ck = require 'lutra.checkpoint'\n"
    "local names = { 'state_dict.fc.weight', 'optimizer_states.1.state.1.exp_avg' }\n"
    "return function(s)\n"
    "  local tensors = { lt.zeros(2, 3), lt.zeros(2, 3) }\n"
    "  local ok, bytes = pcall(lt._io.save_bytes, names, tensors, { lutra = s })\n"
    "  if not ok then return end -- not UTF-8: the writer refuses it\n"
    "  local ok2, err = pcall(ck.read_bytes, bytes, 'fuzz')\n"
    "  if not ok2 and (type(err) ~= 'string' or not err:find('fuzz', 1, true)) then\n"
    "    error('FUZZ: an error that does not name the file: ' .. tostring(err))\n"
    "  end\n"
    "end\n");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (fuzz_lua_call(data, size)) abort();
  return 0;
}
