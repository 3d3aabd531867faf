/* l_background.h — what the loops' binding asks of lt.background (l_background.c). */
#ifndef L_BACKGROUND_H
#define L_BACKGROUND_H

#include <stdatomic.h>

#include "l_util.h"

/* The stop flag of the background job this state runs (its fit loop stops at the next batch boundary when it
 * is set, instead of on the process-wide interrupt), or NULL in a state that runs no job. */
const atomic_int *l_background_stop_flag(lua_State *L);

void l_background_register(lua_State *L);

#endif
