/*
 * l_tensor_grad.c — autograd from Lua: requires_grad, lt.param, backward, zero_grad, is_leaf, grad_fn, and grad
 * mode (lt.set_grad_enabled, lt.is_grad_enabled). x.grad itself is read and set through the metatable
 * (l_tensor.c).
 */
#include "l_tensor.h"

static int l_requires_grad(lua_State *L) {
  lt_tensor *t = T(1, "requires_grad");
  if (lua_isnone(L, 2)) {
    lua_pushboolean(L, t->requires_grad);
    return 1;
  }
  int on = lua_toboolean(L, 2);
  if (t->grad_fn && !on)
    return l_errorf(L, "requires_grad: cannot turn off grad on a result of an op (use x:detach())");
  if (on && !lt_is_float(t->dtype))
    return l_errorf(L, "requires_grad: only float32 and float64 tensors can require grad, got %s",
                    lt_dtype_name(t->dtype));
  t->requires_grad = on;
  lua_settop(L, 1);
  return 1;
}

static int l_param(lua_State *L) {
  lt_tensor *t = T(1, "param");
  if (!lt_is_float(t->dtype))
    return l_errorf(L, "param: only float32 and float64 tensors can require grad, got %s", lt_dtype_name(t->dtype));
  lt_tensor *r = t->grad_fn ? lt_op_detach(L_CTX(L), t) : lt_tensor_retain(t);
  if (!r) return l_error(L);
  r->requires_grad = 1;
  return l_push(L, r);
}

static int l_backward(lua_State *L) {
  lt_tensor *t = T(1, "backward");
  lt_tensor *g = lua_isnoneornil(L, 2) ? NULL : T(2, "backward");
  l_check(L, lt_backward(L_CTX(L), t, g));
  l_gc_account(L, L_STATE(L));
  return 0;
}

static int l_zero_grad(lua_State *L) {
  lt_tensor *t = T(1, "zero_grad");
  if (lua_toboolean(L, 2)) {
    lt_tensor_release(t->grad);
    t->grad = NULL;
  } /* set_to_none */
  else if (t->grad)
    l_check(L, lt_op_zero_(L_CTX(L), t->grad));
  lua_settop(L, 1);
  return 1;
}

static int l_is_leaf(lua_State *L) {
  lua_pushboolean(L, T(1, "is_leaf")->grad_fn == NULL);
  return 1;
}
static int l_grad_fn(lua_State *L) {
  lt_tensor *t = T(1, "grad_fn");
  if (t->grad_fn) lua_pushstring(L, t->grad_fn->op);
  else lua_pushnil(L);
  return 1;
}

static int l_set_grad_enabled(lua_State *L) {
  lt_ctx *c = L_CTX(L);
  int was = c->grad_enabled;
  c->grad_enabled = lua_toboolean(L, 1);
  lua_pushboolean(L, was);
  return 1;
}
static int l_is_grad_enabled(lua_State *L) {
  lua_pushboolean(L, L_CTX(L)->grad_enabled);
  return 1;
}

static const luaL_Reg accessors[] = { { "requires_grad", l_requires_grad }, { "is_leaf", l_is_leaf }, { NULL, NULL } };
static const luaL_Reg methods[] = {
  { "backward", l_backward }, { "zero_grad", l_zero_grad }, { "grad_fn", l_grad_fn }, { NULL, NULL }
};
static const luaL_Reg functions[] = { { "param", l_param },
                                      { "set_grad_enabled", l_set_grad_enabled },
                                      { "is_grad_enabled", l_is_grad_enabled },
                                      { NULL, NULL } };

/* Autograd and grad mode: expects the module table on top, after l_tensor_register. */
void l_tensor_grad_register(lua_State *L) { l_tensor_add(L, accessors, methods, functions); }
