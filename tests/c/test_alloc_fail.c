/*
 * test_alloc_fail.c — the allocation-failure sweep in a C host, for LeakSanitizer: a LuaJIT state with
 * lutra runs a training step, a checkpoint save, a load and a resume with each allocation (lutra's
 * allocator and Jansson's, lt._io.fault_arm) failing in turn; every failure must be a Lua error saying
 * "memory". Then the state is closed and lutra's cache emptied, so that under the asan config
 * (tests/run --config asan runs C tests with detect_leaks=1) anything still allocated at exit is a leak
 * that LeakSanitizer reports. (tests/alloc_fail_spec.lua checks the same in more detail from Lua.)
 */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>

#include "check.h"
#include "lutra.h"

static const char *SWEEP =
  "local lt = require 'lutra'\n"
  "local IO = lt._io\n"
  "jit.off()\n"
  "local dir = os.tmpname(); os.remove(dir); IO.mkdirs(dir)\n"
  "local function model()\n"
  "  lt.manual_seed(5)\n"
  "  local m = { fc = lt.nn.Linear(3, 2) }\n"
  "  function m:training_step(b) return lt.F.mse_loss(self.fc(b[1]), b[2]) end\n"
  "  function m:configure_optimizers() return lt.optim.Adam(lt.nn.parameters(self), { lr = 0.01 }) end\n"
  "  return m\n"
  "end\n"
  "local function fit(m, epochs, path)\n"
  "  lt.manual_seed(1)\n"
  "  local dl = lt.data.DataLoader(lt.data.TensorDataset(lt.randn(8, 3), lt.randn(8, 2)), { batch_size = 4 })\n"
  "  local t = lt.Trainer { max_epochs = epochs, logger = false, enable_checkpointing = false,\n"
  "    enable_progress_bar = false, enable_model_summary = false }\n"
  "  t:fit(m, dl, { ckpt_path = path })\n"
  "  return t\n"
  "end\n"
  "local path = dir .. '/c.ckpt'\n"
  "local t = fit(model(), 1)\n"
  "t:save_checkpoint(path)\n"
  "local m = model()\n"
  "local opt = lt.optim.Adam(lt.nn.parameters(m), { lr = 0.01 })\n"
  "local x, y = lt.randn(4, 3), lt.randn(4, 2)\n"
  "local ops = {\n"
  "  step = function() opt:zero_grad(); local l = lt.F.mse_loss(m.fc(x), y); l:backward(); opt:step() end,\n"
  "  save = function() t:save_checkpoint(path) end,\n"
  "  load = function() lt.load(path, model()) end,\n"
  "  resume = function() fit(model(), 2, path) end,\n"
  "}\n"
  "local report = {}\n"
  "for _, name in ipairs { 'step', 'save', 'load', 'resume' } do\n"
  "  local op = ops[name]\n"
  "  IO.fault_arm(math.huge); op(); local n = IO.fault_seen(); IO.fault_arm(0)\n"
  "  local errors, bad = 0, 0\n"
  "  for i = 1, n do\n"
  "    IO.fault_arm(i); local ok, e = pcall(op); IO.fault_arm(0)\n"
  "    if not ok then\n"
  "      errors = errors + 1\n"
  "      if not tostring(e):find('memory', 1, true) then bad = bad + 1; print(name .. ' ' .. i .. ': ' .. tostring(e)) end\n"
  "    end\n"
  "  end\n"
  "  op() -- usable afterwards\n"
  "  report[#report + 1] = string.format('%s %d %d %d', name, n, errors, bad)\n"
  "end\n"
  "os.execute('rm -rf ' .. dir)\n"
  "return table.concat(report, ';')\n";

int main(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  lutra_preload(L);
  int rc = luaL_loadstring(L, SWEEP) || lua_pcall(L, 0, 1, 0);
  if (rc) printf("# %s\n", lua_tostring(L, -1));
  CHECK(rc == 0, "the sweep runs to its end (every operation usable after its failures)");
  const char *report = rc == 0 ? lua_tostring(L, -1) : "";
  char name[16];
  int n, errors, bad, off = 0, used, ops = 0;
  while (report && sscanf(report + off, " %15[a-z] %d %d %d%n", name, &n, &errors, &bad, &used) == 4) {
    char what[160];
    snprintf(what, sizeof what, "%s: %d allocations, %d failed with an error, %d errors without 'memory'", name, n,
             errors, bad);
    CHECK(n > 0 && errors > 0 && bad == 0, what);
    ops++;
    off += used;
    if (report[off] == ';') off++;
  }
  CHECK(ops == 4, "four operations swept");
  lua_close(L);
  lutra_empty_cache(); /* from here, anything lutra allocated and did not free is a leak LeakSanitizer sees */
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
