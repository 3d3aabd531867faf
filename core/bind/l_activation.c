/*
 * l_activation.c — the activations of core/src/ops_activation.c for lua/lutra/F/init.lua and the nn modules:
 * core._activation(name, x, p0, p1) and core._prelu(x, w), plus the tensor method x:prelu(w) (torch has it;
 * the other activations are functions only in torch, so they are lt.F functions here). F.lua checks the options.
 */
#include <string.h>

#include "l_util.h"
#include "lt_activation.h"

static int l_activation(lua_State *L) {
  const char *name = l_checkstring(L, 1);
  int kind = 0;
  while (kind < LT_AF_COUNT && strcmp(lt_actfn_name((lt_actfn)kind), name)) kind++;
  if (kind == LT_AF_COUNT) return l_errorf(L, "activation: unknown activation '%s'", name);
  lt_tensor *x = l_checktensor(L, 2, name);
  return l_push(L, lt_op_activation(L_CTX(L), (lt_actfn)kind, x, l_optnumber(L, 3, 0), l_optnumber(L, 4, 0)));
}

static int l_prelu(lua_State *L) {
  lt_tensor *x = l_checktensor(L, 1, "prelu");
  return l_push(L, lt_op_prelu(L_CTX(L), x, l_checktensor(L, 2, "prelu")));
}

void l_activation_register(lua_State *L) {
  static const luaL_Reg fns[] = { { "_activation", l_activation }, { "_prelu", l_prelu }, { NULL, NULL } };
  l_setops(L, fns);
  static const luaL_Reg meth[] = { { "prelu", l_prelu }, { NULL, NULL } };
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_getfield(L, -1, "methods");
  l_setopmethods(L, meth);
  lua_pop(L, 2);
}
