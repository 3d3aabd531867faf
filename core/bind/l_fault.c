/*
 * l_fault.c — allocation-failure injection for tests (lt_alloc.h), registered in `lutra.core._io`:
 *
 *   fault_arm(n)      the n-th allocation from now (lutra's allocator and Jansson's) fails, once;
 *                     n = 0 turns injection off, n = math.huge only counts
 *   fault_seen() -> n allocations counted since the last fault_arm
 *
 * tests/alloc_fail_spec.lua makes every allocation of a training step, a save, a load and a resume fail
 * in turn with these.
 */
#include <stdint.h>

#include "l_util.h"
#include "lt_alloc.h"

static int l_fault_arm(lua_State *L) {
  lua_Number n = l_checknumber(L, 1);
  if (!(n >= 0)) return l_errorf(L, "fault_arm: expected a count >= 0, got %g", (double)n);
  lt_alloc_fault_arm(n >= 0x1p63 ? UINT64_MAX : (uint64_t)n);
  return 0;
}

static int l_fault_seen(lua_State *L) {
  lua_pushnumber(L, (lua_Number)lt_alloc_fault_seen());
  return 1;
}

void l_fault_register(lua_State *L) {
  static const luaL_Reg funcs[] = { { "fault_arm", l_fault_arm }, { "fault_seen", l_fault_seen }, { NULL, NULL } };
  l_setfuncs(L, funcs);
}
