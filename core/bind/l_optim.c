/*
 * l_optim.c — the optimizer userdata (lt.optim.SGD/Adam/AdamW/RMSprop build it from lua/lutra/optim/):
 * step([closure]), zero_grad([set_to_none]), param_groups (proxies whose fields read and write the C
 * hyper-parameters), state_dict()/load_state_dict(sd) in PyTorch's layout, add_param_group, tostring.
 *
 * The userdata's environment table holds the Lua side: { groups = {proxy, ...}, params = {{tensor...}...} }
 * so `opt.param_groups[1].params[1]` is the very tensor the user passed. Each group proxy is a plain
 * table with its own metatable whose __index/__newindex closures know the optimizer and the group:
 * the C hyper-parameters are read and written through them; other keys (initial_lr, ...) live in the
 * proxy itself, as in PyTorch's group dicts.
 */
#include "l_optim.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "l_util.h"

typedef struct l_optbox {
  lt_optimizer *o;
} l_optbox;

lt_optimizer *l_tooptimizer(lua_State *L, int idx) {
  l_optbox *b = lua_touserdata(L, idx);
  if (!b || !lua_getmetatable(L, idx)) return NULL;
  luaL_getmetatable(L, L_OPTIM_MT);
  int same = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return same ? b->o : NULL;
}

lt_optimizer *l_checkoptimizer(lua_State *L, int idx, const char *fname) {
  lt_optimizer *o = l_tooptimizer(L, idx);
  if (!o) luaL_error(L, "bad argument #%d to '%s' (optimizer expected, got %s)", idx, fname, luaL_typename(L, idx));
  return o;
}

#define OPT(L) l_checkoptimizer((L), 1, "optimizer")

/* The hyper-parameters that are one number or one boolean, and where they live in lt_optim_hparams
 * ("betas" is the pair beta1, beta2). */
typedef struct hp_field {
  const char *name;
  size_t off;
  int is_bool;
} hp_field;
#define HP_NUM(f) \
  { #f, offsetof(lt_optim_hparams, f), 0 }
#define HP_BOOL(f) \
  { #f, offsetof(lt_optim_hparams, f), 1 }
static const hp_field hp_fields[] = {
  HP_NUM(lr),        HP_NUM(momentum),       HP_NUM(dampening), HP_NUM(weight_decay),
  HP_NUM(eps),       HP_NUM(alpha),          HP_NUM(lr_decay),  HP_NUM(initial_accumulator_value),
  HP_NUM(rho),       HP_NUM(momentum_decay), HP_NUM(lambd),     HP_NUM(t0),
  HP_BOOL(nesterov), HP_BOOL(amsgrad),       HP_BOOL(centered), HP_BOOL(maximize),
};
#undef HP_NUM
#undef HP_BOOL

static const hp_field *hp_find(const char *k) {
  for (size_t i = 0; i < sizeof hp_fields / sizeof hp_fields[0]; i++)
    if (!strcmp(k, hp_fields[i].name)) return &hp_fields[i];
  return NULL;
}

#define HP_DOUBLE(h, f) (*(double *)((char *)(h) + (f)->off))
#define HP_INT(h, f) (*(int *)((char *)(h) + (f)->off))

static void push_hparam(lua_State *L, const lt_optim_hparams *h, const char *k) {
  const hp_field *f = hp_find(k);
  if (f && f->is_bool) lua_pushboolean(L, HP_INT(h, f));
  else if (f) lua_pushnumber(L, HP_DOUBLE(h, f));
  else if (!strcmp(k, "betas")) {
    lua_createtable(L, 2, 0);
    lua_pushnumber(L, h->beta1);
    lua_rawseti(L, -2, 1);
    lua_pushnumber(L, h->beta2);
    lua_rawseti(L, -2, 2);
  } else lua_pushnil(L);
}

/* Stores the value at idx into h's field k (a hyper-parameter of the kind), checking its type. */
static void set_hparam(lua_State *L, lt_optim_kind kind, lt_optim_hparams *h, const char *k, int idx) {
  const char *name = lt_optim_kind_name(kind);
  idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
  const hp_field *f = hp_find(k);
  if (f && f->is_bool) {
    if (!lua_isboolean(L, idx))
      luaL_error(L, "%s: option '%s' must be a boolean, got %s", name, k, luaL_typename(L, idx));
    HP_INT(h, f) = lua_toboolean(L, idx);
    return;
  }
  if (!strcmp(k, "betas")) {
    int ok = lua_istable(L, idx) && lua_objlen(L, idx) == 2;
    double b[2] = { 0, 0 };
    for (int i = 0; ok && i < 2; i++) {
      lua_rawgeti(L, idx, i + 1);
      ok = lua_type(L, -1) == LUA_TNUMBER;
      b[i] = lua_tonumber(L, -1);
      lua_pop(L, 1);
    }
    if (!ok)
      luaL_error(L, "%s: option 'betas' must be a table of two numbers {beta1, beta2}, got %s", name,
                 luaL_typename(L, idx));
    h->beta1 = b[0];
    h->beta2 = b[1];
    return;
  }
  if (lua_type(L, idx) != LUA_TNUMBER)
    luaL_error(L, "%s: option '%s' must be a number, got %s", name, k, luaL_typename(L, idx));
  if (f) HP_DOUBLE(h, f) = lua_tonumber(L, idx);
}

static void unknown_option(lua_State *L, lt_optim_kind kind, const char *k, int allow_params) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (const char *const *n = lt_optim_hparam_names(kind); *n; n++) {
    if (n != lt_optim_hparam_names(kind)) luaL_addstring(&b, ", ");
    luaL_addstring(&b, *n);
  }
  if (allow_params) luaL_addstring(&b, ", params");
  luaL_pushresult(&b);
  luaL_error(L, "%s: unknown option '%s' (known options: %s)", lt_optim_kind_name(kind), k, lua_tostring(L, -1));
}

/* Reads every key of the options table at idx into h (h holds the defaults on entry). Unknown keys are
 * errors; "params" is skipped when allow_params. */
static void read_hparams(lua_State *L, int idx, lt_optim_kind kind, lt_optim_hparams *h, int allow_params) {
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      luaL_error(L, "%s: options must have string keys, got a %s key", lt_optim_kind_name(kind), luaL_typename(L, -2));
    const char *k = lua_tostring(L, -2);
    if (allow_params && !strcmp(k, "params")) {
      lua_pop(L, 1);
      continue;
    }
    if (!lt_optim_has_hparam(kind, k)) unknown_option(L, kind, k, allow_params);
    set_hparam(L, kind, h, k, -1);
    lua_pop(L, 1);
  }
}

/* ---- group proxies -------------------------------------------------------------------------------- */

/* upvalues: 1 state, 2 tensor mt, 3 optimizer userdata, 4 group index (0-based) */
static lt_optimizer *proxy_opt(lua_State *L, int *g) {
  l_optbox *b = lua_touserdata(L, lua_upvalueindex(3));
  *g = (int)lua_tointeger(L, lua_upvalueindex(4));
  return b->o;
}

static int l_group_index(lua_State *L) {
  int g;
  lt_optimizer *o = proxy_opt(L, &g);
  if (lua_type(L, 2) != LUA_TSTRING) return 0;
  const char *k = lua_tostring(L, 2);
  if (!strcmp(k, "params")) {
    lua_getfenv(L, lua_upvalueindex(3));
    lua_getfield(L, -1, "params");
    lua_rawgeti(L, -1, g + 1);
    return 1;
  }
  if (!lt_optim_has_hparam(lt_optim_kind_of(o), k)) return 0;
  push_hparam(L, lt_optim_group_hparams(o, g), k);
  return 1;
}

static int l_group_newindex(lua_State *L) {
  int g;
  lt_optimizer *o = proxy_opt(L, &g);
  lt_optim_kind kind = lt_optim_kind_of(o);
  const char *k = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : NULL;
  if (k && !strcmp(k, "params"))
    return luaL_error(L, "param_groups[%d].params cannot be replaced (use opt:add_param_group for new parameters)",
                      g + 1);
  if (k && lt_optim_has_hparam(kind, k)) {
    lt_optim_hparams h = *lt_optim_group_hparams(o, g);
    set_hparam(L, kind, &h, k, 3);
    l_check(L, lt_optim_check_hparams(L_CTX(L), kind, &h));
    *lt_optim_group_hparams(o, g) = h;
    return 0;
  }
  lua_rawset(L, 1); /* any other key is kept in the group table, as in PyTorch */
  return 0;
}

static int l_group_tostring(lua_State *L) {
  int g;
  lt_optimizer *o = proxy_opt(L, &g);
  lua_pushfstring(L, "%s param group %d (%d tensors)", lt_optim_kind_name(lt_optim_kind_of(o)), g + 1,
                  lt_optim_group_size(o, g));
  return 1;
}

/* Pushes a new proxy for group g of the optimizer userdata at ud (absolute index). */
static void push_group_proxy(lua_State *L, int ud, int g) {
  lua_newtable(L);          /* the proxy */
  lua_createtable(L, 0, 4); /* its metatable */
  static const struct {
    const char *name;
    lua_CFunction f;
  } mm[] = { { "__index", l_group_index }, { "__newindex", l_group_newindex }, { "__tostring", l_group_tostring } };
  for (size_t i = 0; i < sizeof mm / sizeof mm[0]; i++) {
    l_push_upvalues(L);
    lua_pushvalue(L, ud);
    lua_pushinteger(L, g);
    lua_pushcclosure(L, mm[i].f, 4);
    lua_setfield(L, -2, mm[i].name);
  }
  lua_pushliteral(L, "lutra.ParamGroup");
  lua_setfield(L, -2, "__name");
  lua_setmetatable(L, -2);
}

/* ---- constructor, add_param_group --------------------------------------------------------------- */

static int l_optim_gc(lua_State *L) {
  l_optbox *b = lua_touserdata(L, 1);
  if (b && b->o) {
    lt_optim_free(b->o);
    b->o = NULL;
  }
  return 0;
}

/* opt:add_param_group{params = {t1, t2, ...} | t, lr = ..., ...}: options not given take the
 * optimizer's defaults (the constructor's options). */
static int l_add_param_group(lua_State *L) {
  lt_optimizer *o = OPT(L);
  lt_optim_kind kind = lt_optim_kind_of(o);
  const char *name = lt_optim_kind_name(kind);
  int g = lt_optim_num_groups(o);
  if (!lua_istable(L, 2))
    return luaL_error(L, "%s: add_param_group expects a table {params = {...}, ...}, got %s", name,
                      luaL_typename(L, 2));
  lt_optim_hparams h = *lt_optim_get_defaults(o);
  read_hparams(L, 2, kind, &h, 1);
  lua_getfield(L, 2, "params");
  int pidx = lua_gettop(L);
  lua_newtable(L); /* the group's list of tensors */
  int list = lua_gettop(L);
  int n = 0;
  if (l_totensor(L, pidx)) {
    lua_pushvalue(L, pidx);
    lua_rawseti(L, list, ++n);
  } else if (lua_istable(L, pidx)) {
    int len = (int)lua_objlen(L, pidx);
    for (int i = 1; i <= len; i++) {
      lua_rawgeti(L, pidx, i);
      if (!l_totensor(L, -1))
        return luaL_error(L, "%s: params[%d] of param group %d is a %s, expected a tensor", name, i, g + 1,
                          luaL_typename(L, -1));
      lua_rawseti(L, list, ++n);
    }
  } else {
    return luaL_error(L, "%s: param group %d needs params = a list of tensors, got %s", name, g + 1,
                      luaL_typename(L, pidx));
  }
  if (n == 0) return luaL_error(L, "%s: optimizer got an empty parameter list (param group %d)", name, g + 1);
  lt_tensor *stackbuf[64];
  lt_tensor **ps = n <= 64 ? stackbuf : lua_newuserdata(L, sizeof(lt_tensor *) * (size_t)n);
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, list, i + 1);
    ps[i] = l_totensor(L, -1);
    lua_pop(L, 1);
  }
  l_check(L, lt_optim_add_param_group(L_CTX(L), o, &h, n, ps));
  lua_getfenv(L, 1);
  int env = lua_gettop(L);
  lua_getfield(L, env, "params");
  lua_pushvalue(L, list);
  lua_rawseti(L, -2, g + 1);
  lua_getfield(L, env, "groups");
  push_group_proxy(L, 1, g);
  lua_rawseti(L, -2, g + 1);
  lua_settop(L, 1);
  return 1;
}

/* core._optim_new(kind_name, options) -> an optimizer with no groups (the Lua constructors add them). */
static int l_optim_new(lua_State *L) {
  const char *kname = l_checkstring(L, 1);
  int k = lt_optim_kind_from_name(kname);
  if (k < 0)
    return luaL_error(L,
                      "optimizer: unknown kind '%s' (expected SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax, "
                      "NAdam, RAdam or ASGD)",
                      kname);
  lt_optim_kind kind = (lt_optim_kind)k;
  lt_optim_hparams h;
  lt_optim_defaults(kind, &h);
  if (!lua_isnoneornil(L, 2)) {
    if (!lua_istable(L, 2)) return luaL_error(L, "%s: options must be a table, got %s", kname, luaL_typename(L, 2));
    read_hparams(L, 2, kind, &h, 0);
  }
  if (kind == LT_OPTIM_SGD) {
    int has_lr = 0;
    if (lua_istable(L, 2)) {
      lua_getfield(L, 2, "lr");
      has_lr = !lua_isnil(L, -1);
      lua_pop(L, 1);
    }
    if (!has_lr) return luaL_error(L, "SGD: option 'lr' is required (e.g. {lr = 0.01})");
  }
  l_optbox *b = lua_newuserdata(L, sizeof *b);
  b->o = NULL;
  luaL_getmetatable(L, L_OPTIM_MT);
  lua_setmetatable(L, -2);
  lua_createtable(L, 0, 2);
  lua_newtable(L);
  lua_setfield(L, -2, "groups");
  lua_newtable(L);
  lua_setfield(L, -2, "params");
  lua_setfenv(L, -2);
  b->o = lt_optim_new(L_CTX(L), kind, &h);
  if (!b->o) return l_error(L);
  return 1;
}

/* ---- step, zero_grad ---------------------------------------------------------------------------- */

static int l_step(lua_State *L) {
  lt_optimizer *o = OPT(L);
  lt_ctx *c = L_CTX(L);
  int nres = 0;
  if (!lua_isnoneornil(L, 2)) {
    if (!lua_isfunction(L, 2) && !luaL_getmetafield(L, 2, "__call"))
      return luaL_error(L, "%s: step expects a closure (function) or nothing, got %s",
                        lt_optim_kind_name(lt_optim_kind_of(o)), luaL_typename(L, 2));
    lua_settop(L, 2);
    int was = c->grad_enabled;
    c->grad_enabled = 1; /* the closure computes a loss and its gradients */
    int st = lua_pcall(L, 0, 1, 0);
    c->grad_enabled = was;
    if (st) return lua_error(L);
    nres = 1;
  }
  l_check(L, lt_optim_step(c, o));
  return nres;
}

static int l_zero_grad(lua_State *L) {
  lt_optimizer *o = OPT(L);
  l_check(L, lt_optim_zero_grad(L_CTX(L), o, lua_toboolean(L, 2)));
  return 0;
}

/* ---- state_dict --------------------------------------------------------------------------------- */

/* Copies the proxy's own keys (initial_lr, ...) into the table at dst (absolute indices). */
static void copy_extras(lua_State *L, int proxy, int dst) {
  lua_pushnil(L);
  while (lua_next(L, proxy)) {
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, dst);
  }
}

static int l_state_dict(lua_State *L) {
  lt_optimizer *o = OPT(L);
  lt_optim_kind kind = lt_optim_kind_of(o);
  lt_ctx *c = L_CTX(L);
  lua_getfenv(L, 1);
  lua_getfield(L, -1, "groups");
  int groups = lua_gettop(L);
  lua_createtable(L, 0, 2);
  int sd = lua_gettop(L);
  lua_newtable(L);
  int state = lua_gettop(L);
  lua_newtable(L);
  int pgs = lua_gettop(L);
  int id = 0;
  for (int g = 0; g < lt_optim_num_groups(o); g++) {
    lua_newtable(L);
    int gt = lua_gettop(L);
    lua_rawgeti(L, groups, g + 1);
    copy_extras(L, lua_gettop(L), gt);
    lua_pop(L, 1);
    const lt_optim_hparams *h = lt_optim_group_hparams(o, g);
    for (const char *const *k = lt_optim_hparam_names(kind); *k; k++) {
      push_hparam(L, h, *k);
      lua_setfield(L, gt, *k);
    }
    lua_newtable(L);
    for (int i = 0; i < lt_optim_group_size(o, g); i++) {
      id++;
      lua_pushinteger(L, id);
      lua_rawseti(L, -2, i + 1);
      lt_optim_state *s = lt_optim_param_state(o, g, i);
      if (!s->initialized) continue;
      lua_newtable(L);
      if (kind != LT_OPTIM_SGD) {
        lua_pushinteger(L, (lua_Integer)s->step);
        lua_setfield(L, -2, "step");
      }
      for (int v = 0; v < LT_OPTIM_NSCALARS; v++) {
        if (!lt_optim_kind_has_scalar(kind, (lt_optim_scalar)v)) continue;
        lua_pushnumber(L, s->scalar[v]);
        lua_setfield(L, -2, lt_optim_scalar_name((lt_optim_scalar)v));
      }
      for (int b = 0; b < LT_OPTIM_NBUFS; b++) {
        if (!s->buf[b] || !lt_optim_kind_has_buf(kind, (lt_optim_buf)b)) continue;
        l_push(L, lt_op_clone(c, s->buf[b]));
        lua_setfield(L, -2, lt_optim_buf_name((lt_optim_buf)b));
      }
      lua_rawseti(L, state, id);
    }
    lua_setfield(L, gt, "params");
    lua_rawseti(L, pgs, g + 1);
  }
  lua_setfield(L, sd, "param_groups");
  lua_setfield(L, sd, "state");
  return 1;
}

/* ---- load_state_dict ------------------------------------------------------------------------------ */

/* Pushes state[id]; a state dict that went through JSON may have its integer keys as strings ("3"). */
static void push_state_entry(lua_State *L, int state, int id) {
  lua_rawgeti(L, state, id);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_pushfstring(L, "%d", id);
    lua_rawget(L, state);
  }
}

/* The scalar state entry (step, mu_product, eta, mu) of the kind called k, or -1; step is LT_OPTIM_NSCALARS. */
static int scalar_from_name(lt_optim_kind kind, const char *k) {
  if (!strcmp(k, "step")) return LT_OPTIM_NSCALARS;
  for (int v = 0; v < LT_OPTIM_NSCALARS; v++)
    if (lt_optim_kind_has_scalar(kind, (lt_optim_scalar)v) && !strcmp(k, lt_optim_scalar_name((lt_optim_scalar)v)))
      return v;
  return -1;
}

static int buf_from_name(const char *k) {
  for (int b = 0; b < LT_OPTIM_NBUFS; b++)
    if (!strcmp(k, lt_optim_buf_name((lt_optim_buf)b))) return b;
  return -1;
}

/* Checks the state entry on top of the stack for parameter (g, i); raises naming what is wrong. */
static void check_state_entry(lua_State *L, lt_optimizer *o, int g, int i, int id) {
  const char *name = lt_optim_kind_name(lt_optim_kind_of(o));
  int st = lua_gettop(L);
  if (!lua_istable(L, st))
    luaL_error(L, "%s: load_state_dict: state[%d] must be a table, got %s", name, id, luaL_typename(L, st));
  lt_tensor *p = lt_optim_group_param(o, g, i);
  lua_pushnil(L);
  while (lua_next(L, st)) {
    const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
    int sc = scalar_from_name(lt_optim_kind_of(o), k);
    if (sc >= 0) {
      if (lua_type(L, -1) != LUA_TNUMBER)
        luaL_error(L, "%s: load_state_dict: state[%d].%s must be a number, got %s", name, id, k, luaL_typename(L, -1));
      /* a negative or NaN step count would make the bias corrections NaN: training would go on, silently */
      lua_Number v = lua_tonumber(L, -1);
      if (sc == LT_OPTIM_NSCALARS && !(v >= 0 && v <= (lua_Number)L_INT_MAX && v == floor(v)))
        l_errorf(L, "%s: load_state_dict: state[%d].step must be an integer >= 0, got %.17g", name, id, (double)v);
      if (sc < LT_OPTIM_NSCALARS && !(v > -HUGE_VAL && v < HUGE_VAL))
        l_errorf(L, "%s: load_state_dict: state[%d].%s must be a finite number, got %.17g", name, id, k, (double)v);
    } else {
      int b = buf_from_name(k);
      if (b < 0 || !lt_optim_kind_has_buf(lt_optim_kind_of(o), (lt_optim_buf)b))
        luaL_error(L, "%s: load_state_dict: state[%d] has an unknown entry '%s'", name, id, k);
      lt_tensor *t = l_totensor(L, -1);
      if (!t)
        luaL_error(L, "%s: load_state_dict: state[%d].%s must be a tensor, got %s", name, id, k, luaL_typename(L, -1));
      if (!lt_same_shape(t, p)) {
        char b1[128], b2[128];
        luaL_error(L, "%s: load_state_dict: state[%d].%s has shape %s, but parameter %d of group %d has shape %s", name,
                   id, k, lt_shape_str(t, b1, sizeof b1), i + 1, g + 1, lt_shape_str(p, b2, sizeof b2));
      }
    }
    lua_pop(L, 1);
  }
}

static int l_load_state_dict(lua_State *L) {
  lt_optimizer *o = OPT(L);
  lt_optim_kind kind = lt_optim_kind_of(o);
  const char *name = lt_optim_kind_name(kind);
  lt_ctx *c = L_CTX(L);
  lua_settop(L, 2);
  if (!lua_istable(L, 2))
    return luaL_error(L, "%s: load_state_dict expects a table, got %s", name, luaL_typename(L, 2));
  lua_getfield(L, 2, "param_groups");
  int pgs = lua_gettop(L);
  lua_getfield(L, 2, "state");
  int state = lua_gettop(L);
  if (!lua_istable(L, pgs)) return luaL_error(L, "%s: load_state_dict: the state dict has no param_groups table", name);
  if (!lua_isnil(L, state) && !lua_istable(L, state))
    return luaL_error(L, "%s: load_state_dict: state must be a table, got %s", name, luaL_typename(L, state));
  int ng = lt_optim_num_groups(o);
  if ((int)lua_objlen(L, pgs) != ng)
    return luaL_error(L,
                      "%s: load_state_dict: loaded state dict has a different number of parameter groups "
                      "(%d, the optimizer has %d)",
                      name, (int)lua_objlen(L, pgs), ng);
  lt_optim_hparams hs[ng > 0 ? ng : 1];
  /* pass 1: check everything, change nothing */
  for (int g = 0; g < ng; g++) {
    lua_rawgeti(L, pgs, g + 1);
    int sg = lua_gettop(L);
    if (!lua_istable(L, sg))
      return luaL_error(L, "%s: load_state_dict: param_groups[%d] must be a table, got %s", name, g + 1,
                        luaL_typename(L, sg));
    hs[g] = *lt_optim_group_hparams(o, g);
    for (const char *const *k = lt_optim_hparam_names(kind); *k; k++) {
      lua_getfield(L, sg, *k);
      if (!lua_isnil(L, -1)) set_hparam(L, kind, &hs[g], *k, -1);
      lua_pop(L, 1);
    }
    if (lt_optim_check_hparams(c, kind, &hs[g])) {
      lt_fail_prefix(c, "load_state_dict");
      return l_error(L);
    }
    lua_getfield(L, sg, "params");
    int ids = lua_gettop(L);
    int n = lt_optim_group_size(o, g);
    if (!lua_istable(L, ids))
      return luaL_error(L, "%s: load_state_dict: param_groups[%d].params must be a list of indices, got %s", name,
                        g + 1, luaL_typename(L, ids));
    if ((int)lua_objlen(L, ids) != n)
      return luaL_error(L,
                        "%s: load_state_dict: loaded state dict contains a parameter group that doesn't match the "
                        "size of optimizer's group (group %d: %d parameters, the optimizer's has %d)",
                        name, g + 1, (int)lua_objlen(L, ids), n);
    for (int i = 0; i < n; i++) {
      lua_rawgeti(L, ids, i + 1);
      if (lua_type(L, -1) != LUA_TNUMBER)
        return luaL_error(L, "%s: load_state_dict: param_groups[%d].params[%d] must be a number, got %s", name, g + 1,
                          i + 1, luaL_typename(L, -1));
      int id = (int)lua_tointeger(L, -1);
      lua_pop(L, 1);
      if (lua_isnil(L, state)) continue;
      push_state_entry(L, state, id);
      if (!lua_isnil(L, -1)) check_state_entry(L, o, g, i, id);
      lua_pop(L, 1);
    }
    lua_settop(L, state);
  }
  /* pass 2: apply */
  lt_optim_clear_state(o);
  lua_getfenv(L, 1);
  lua_getfield(L, -1, "groups");
  int proxies = lua_gettop(L);
  for (int g = 0; g < ng; g++) {
    *lt_optim_group_hparams(o, g) = hs[g];
    lua_rawgeti(L, pgs, g + 1);
    int sg = lua_gettop(L);
    /* other keys (initial_lr, ...) go to the group table */
    lua_rawgeti(L, proxies, g + 1);
    int proxy = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, sg)) {
      const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
      if (k && (lt_optim_has_hparam(kind, k) || !strcmp(k, "params"))) {
        lua_pop(L, 1);
        continue;
      }
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_rawset(L, proxy);
    }
    lua_getfield(L, sg, "params");
    int ids = lua_gettop(L);
    for (int i = 0; i < lt_optim_group_size(o, g) && !lua_isnil(L, state); i++) {
      lua_rawgeti(L, ids, i + 1);
      int id = (int)lua_tointeger(L, -1);
      lua_pop(L, 1);
      push_state_entry(L, state, id);
      int st = lua_gettop(L);
      if (lua_istable(L, st)) {
        lt_optim_state *s = lt_optim_param_state(o, g, i);
        s->initialized = 1;
        lua_getfield(L, st, "step");
        s->step = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : 0;
        lua_pop(L, 1);
        for (int v = 0; v < LT_OPTIM_NSCALARS; v++) {
          if (!lt_optim_kind_has_scalar(kind, (lt_optim_scalar)v)) continue;
          lua_getfield(L, st, lt_optim_scalar_name((lt_optim_scalar)v));
          s->scalar[v] = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : v == LT_OPTIM_ETA ? (float)hs[g].lr : 1.0;
          lua_pop(L, 1);
        }
        for (int b = 0; b < LT_OPTIM_NBUFS; b++) {
          lua_getfield(L, st, lt_optim_buf_name((lt_optim_buf)b));
          lt_tensor *t = l_totensor(L, -1);
          lua_pop(L, 1);
          if (t) l_check(L, lt_optim_set_state_buf(c, o, g, i, (lt_optim_buf)b, t));
        }
      }
      lua_pop(L, 1);
    }
    lua_settop(L, proxies);
  }
  return 0;
}

/* ---- printing and fields ---------------------------------------------------------------------------- */

static void add_number(luaL_Buffer *b, lua_State *L, double v) {
  char s[64];
  if (v == floor(v) && fabs(v) < 1e15) snprintf(s, sizeof s, "%.0f", v);
  else snprintf(s, sizeof s, "%.10g", v);
  (void)L;
  luaL_addstring(b, s);
}

static int l_optim_tostring(lua_State *L) {
  lt_optimizer *o = OPT(L);
  lt_optim_kind kind = lt_optim_kind_of(o);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, lt_optim_kind_name(kind));
  luaL_addstring(&b, " (");
  for (int g = 0; g < lt_optim_num_groups(o); g++) {
    char s[96];
    snprintf(s, sizeof s, "\nParameter Group %d", g + 1);
    luaL_addstring(&b, s);
    const lt_optim_hparams *h = lt_optim_group_hparams(o, g);
    for (const char *const *k = lt_optim_hparam_names(kind); *k; k++) {
      snprintf(s, sizeof s, "\n    %s: ", *k);
      luaL_addstring(&b, s);
      if (!strcmp(*k, "betas")) {
        luaL_addstring(&b, "{");
        add_number(&b, L, h->beta1);
        luaL_addstring(&b, ", ");
        add_number(&b, L, h->beta2);
        luaL_addstring(&b, "}");
      } else if (hp_find(*k)->is_bool) {
        luaL_addstring(&b, HP_INT(h, hp_find(*k)) ? "true" : "false");
      } else {
        double v = HP_DOUBLE(h, hp_find(*k));
        add_number(&b, L, v);
      }
    }
    snprintf(s, sizeof s, "\n    params: %d tensors", lt_optim_group_size(o, g));
    luaL_addstring(&b, s);
  }
  luaL_addstring(&b, "\n)");
  luaL_pushresult(&b);
  return 1;
}

/* upvalue 3: the methods table */
static int l_optim_index(lua_State *L) {
  lt_optimizer *o = OPT(L);
  if (lua_type(L, 2) == LUA_TSTRING) {
    const char *k = lua_tostring(L, 2);
    if (!strcmp(k, "param_groups")) {
      lua_getfenv(L, 1);
      lua_getfield(L, -1, "groups");
      return 1;
    }
    if (!strcmp(k, "defaults")) {
      const lt_optim_hparams *h = lt_optim_get_defaults(o);
      lua_newtable(L);
      for (const char *const *n = lt_optim_hparam_names(lt_optim_kind_of(o)); *n; n++) {
        push_hparam(L, h, *n);
        lua_setfield(L, -2, *n);
      }
      return 1;
    }
    if (!strcmp(k, "kind")) {
      lua_pushstring(L, lt_optim_kind_name(lt_optim_kind_of(o)));
      return 1;
    }
  }
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(3));
  return 1;
}

static int l_optim_newindex(lua_State *L) {
  lt_optimizer *o = OPT(L);
  return luaL_error(L, "%s: cannot set field '%s' (change hyper-parameters through opt.param_groups[i])",
                    lt_optim_kind_name(lt_optim_kind_of(o)), lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?");
}

static int l_is_optimizer(lua_State *L) {
  lua_pushboolean(L, l_tooptimizer(L, 1) != NULL);
  return 1;
}

static const luaL_Reg optim_methods[] = { { "step", l_step },
                                          { "zero_grad", l_zero_grad },
                                          { "state_dict", l_state_dict },
                                          { "load_state_dict", l_load_state_dict },
                                          { "add_param_group", l_add_param_group },
                                          { NULL, NULL } };

static const luaL_Reg optim_functions[] = { { "_optim_new", l_optim_new },
                                            { "is_optimizer", l_is_optimizer },
                                            { NULL, NULL } };

void l_optim_register(lua_State *L) {
  int mod = lua_gettop(L);
  luaL_newmetatable(L, L_OPTIM_MT);
  int mt = lua_gettop(L);
  lua_newtable(L);
  int meth = lua_gettop(L);
  l_setmethods(L, optim_methods);
  l_push_upvalues(L);
  lua_pushvalue(L, meth);
  lua_pushcclosure(L, l_optim_index, 3);
  lua_setfield(L, mt, "__index");
  static const luaL_Reg meta[] = {
    { "__gc", l_optim_gc }, { "__tostring", l_optim_tostring }, { "__newindex", l_optim_newindex }, { NULL, NULL }
  };
  lua_pushvalue(L, mt);
  l_setfuncs(L, meta);
  lua_pop(L, 1);
  lua_pushvalue(L, meth);
  lua_setfield(L, mt, "methods");
  lua_pushliteral(L, "lutra.Optimizer");
  lua_setfield(L, mt, "__name");
  lua_settop(L, mod);
  l_setfuncs(L, optim_functions);
}
