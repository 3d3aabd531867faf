/* l_prof.h — the profiler's rows as Lua tables (core/bind/l_prof.c), shared with the loops' profiler (l_loop.c). */
#ifndef L_PROF_H
#define L_PROF_H

#include <stdint.h>

#include "l_compat.h"
#include "lt_prof.h"

/* Pushes {<key> = name, count = count, total = total}. */
void l_push_time_row(lua_State *L, const char *key, const char *name, int64_t count, double total);

#endif
