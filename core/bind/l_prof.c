/*
 * l_prof.c — the context's watches of the autograd ops (lt_ctx.watch, core/src/autograd.c), for the trainer:
 *   core._detect_anomaly(on)      an op whose forward output or backward gradient is NaN/inf fails, named
 *   core._sigprof_quiet()         SIGPROF ignored where nothing handles it (before jit.profile starts)
 * (the time per op and backward kernel is the loops' profiler's: lp:profiler_ops in l_loop.c)
 */
#include "l_prof.h"

#include <signal.h>
#include <string.h>

#include "l_util.h"

void l_prof_update_watch(lt_ctx *c) { c->watch = c->detect_anomaly || c->prof != NULL; }

static int l_detect_anomaly(lua_State *L) {
  lt_ctx *c = L_CTX(L);
  lua_pushboolean(L, c->detect_anomaly);
  if (!lua_isnoneornil(L, 1)) c->detect_anomaly = lua_toboolean(L, 1);
  l_prof_update_watch(c);
  return 1;
}

void l_push_time_row(lua_State *L, const char *key, const char *name, int64_t count, double total) {
  lua_createtable(L, 0, 3);
  lua_pushstring(L, name);
  lua_setfield(L, -2, key);
  lua_pushnumber(L, (lua_Number)count);
  lua_setfield(L, -2, "count");
  lua_pushnumber(L, total);
  lua_setfield(L, -2, "total");
}

/* A sampling profiler's last SIGPROF can still be pending when it stops (its timer is process-wide, and the
 * threads lutra starts block the signal, so the main thread takes it later): jit.profile.stop puts back the
 * handler it found, and under the default action that signal ends the process ("Profiling timer expired",
 * seen under the sanitizers). So before jit.profile starts, a SIGPROF nobody handles is ignored; a host's own
 * handler is left as it is. Returns whether the disposition was changed. */
static int l_sigprof_quiet(lua_State *L) {
  struct sigaction now;
  int changed = 0;
  if (sigaction(SIGPROF, NULL, &now) == 0 && now.sa_handler == SIG_DFL && !(now.sa_flags & SA_SIGINFO)) {
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    changed = sigaction(SIGPROF, &ign, NULL) == 0;
  }
  lua_pushboolean(L, changed);
  return 1;
}

void l_prof_register(lua_State *L) {
  static const luaL_Reg fns[] = { { "_detect_anomaly", l_detect_anomaly },
                                  { "_sigprof_quiet", l_sigprof_quiet },
                                  { NULL, NULL } };
  l_setfuncs(L, fns);
}
