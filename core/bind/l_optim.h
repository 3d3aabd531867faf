/*
 * l_optim.h — the optimizer userdata, for other binding files (the loops call lt_optim_step directly):
 *
 *   lt_optimizer *o = l_tooptimizer(L, idx);   // NULL when the value is not a lutra optimizer
 *   if (o && lt_optim_step(L_CTX(L), o)) l_error(L);
 */
#ifndef L_OPTIM_H
#define L_OPTIM_H

#include <lua.h>

#include "lt_optim.h"

#define L_OPTIM_MT "lutra.Optimizer" /* registry key of the optimizer metatable */

/* The optimizer behind the userdata at idx, or NULL (no error) when it is something else. */
lt_optimizer *l_tooptimizer(lua_State *L, int idx);
/* Same, but raises "bad argument #idx to 'fname' (optimizer expected, got ...)". */
lt_optimizer *l_checkoptimizer(lua_State *L, int idx, const char *fname);

#endif
