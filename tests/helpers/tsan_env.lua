-- tests/helpers/tsan_env.lua — busted's helper for `tests/run --config tsan` (.busted's tsan run): LuaJIT is
-- not instrumented, so ThreadSanitizer's runtime comes by LD_PRELOAD; the programs the specs start (sh for
-- io.popen and os.execute, sleep, ls) must not inherit it: /bin/sh crashes under it. Cleared once the runtime
-- is loaded (LuaJIT's FFI: the sanitizer runs only under the lutra binary's LuaJIT).
local ffi = require "ffi"
ffi.cdef "int unsetenv(const char *name);"
ffi.C.unsetenv("LD_PRELOAD")
