/*
 * l_tensor.h — what the files of the tensor binding share: l_tensor.c holds the box and the metatable; the
 * methods and lt.* functions live by topic in l_tensor_create.c, l_tensor_shape.c, l_tensor_math.c and
 * l_tensor_grad.c, each registered by l_module.c.
 */
#ifndef L_TENSOR_H
#define L_TENSOR_H

#include "l_util.h"

/* argument i as a tensor, or an argument error naming the function */
#define T(i, name) l_checktensor(L, (i), (name))

/* t, or an error naming name_ when t is an expand()ed view (several elements at one address) */
lt_tensor *l_check_writable(lua_State *L, lt_tensor *t, const char *name);

/* Adds a topic's methods to the tensor methods table, each also as lt.name(x, ...), and its lt.* functions fns
 * (any list may be NULL). The plain ones are accessors: the advanced profiler does not time them as ops, since
 * they compute nothing. Expects the module table on top, after l_tensor_register made the methods table. */
void l_tensor_add(lua_State *L, const luaL_Reg *plain, const luaL_Reg *ops, const luaL_Reg *fns);

#endif
