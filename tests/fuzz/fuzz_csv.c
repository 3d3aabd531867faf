/* fuzz_csv.c — libFuzzer target: lt.data.read_csv (lua/lutra/data/init.lua) on the input as a file, with
 * and without a header row, float32 and int64. */
#include <stdint.h>

#include "fuzz_file.h"
#include "fuzz_lua.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_lua_init(
    "local lt = require 'lutra'\n"
    "return function(path)\n"
    "  for _, o in ipairs { {}, { header = false }, { dtype = 'int64' }, { sep = ';' } } do\n"
    "    local ok, t = pcall(lt.data.read_csv, path, o)\n"
    "    if ok then assert(lt.is_tensor(t) and t:dim() == 2, 'read_csv returned no 2-d tensor')\n"
    "    elseif type(t) ~= 'string' or not t:find('read_csv: ', 1, true) then\n"
    "      error('FUZZ: unexpected error form: ' .. tostring(t))\n"
    "    end\n"
    "  end\n"
    "end\n");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[64];
  int fd = fuzz_file(data, size, path, sizeof path);
  if (fuzz_lua_call((const uint8_t *)path, strlen(path))) abort();
  close(fd);
  return 0;
}
