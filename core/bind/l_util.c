/* l_util.c — argument parsing, tensor boxes, error raising and GC accounting for the binding. */
#include "l_util.h"
#include <limits.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lt_alloc.h"
#include "lt_prof.h"
#include "lt_size.h"

void l_push_upvalues(lua_State *L) {
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushvalue(L, lua_upvalueindex(2));
}

/* Registry table closure -> name, read only when an argument error is raised. A method's name is stored with
 * a leading ':' (self is argument 1, which l_argerror discounts as luaL_argerror does for x:f() calls). */
#define L_FNAMES "lutra.fnames"

/* The entry of every op registered by l_setops / l_setopmethods: calls the op's function (upvalue 3: its luaL_Reg,
 * in the binding's static tables) in the same frame, so its upvalues, arguments and errors are the op's own.
 * With the ops' profiler off (lt_ctx.prof NULL, the default) that is one test; on, the call is timed into the
 * row "[op] <name>" (lt_prof.h; a metamethod's name without its "__", so x + y and x:add(y) share a row). */
static int op_entry(lua_State *L) {
  const luaL_Reg *op = lua_touserdata(L, lua_upvalueindex(3));
  lt_ctx *c = L_CTX(L);
  if (!c->prof) return op->func(L);
  lt_prof *p = c->prof;
  const char *name = op->name[0] == '_' && op->name[1] == '_' ? op->name + 2 : op->name; /* x + y: "add" */
  lt_prof_op_begin(p);
  int n = op->func(L);
  lt_prof_op_end(p, 0, name);
  return n;
}

static void set_funcs(lua_State *L, const luaL_Reg *funcs, int methods, int ops) {
  lua_getfield(L, LUA_REGISTRYINDEX, L_FNAMES);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_createtable(L, 0, 1); /* weak keys: a closure the module drops is not kept alive by its name */
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, L_FNAMES);
  }
  for (; funcs->name; funcs++) {
    l_push_upvalues(L);
    if (ops) {
      lua_pushlightuserdata(L, (void *)funcs);
      lua_pushcclosure(L, op_entry, 3);
    } else {
      lua_pushcclosure(L, funcs->func, 2);
    }
    lua_pushvalue(L, -1);
    if (methods) lua_pushfstring(L, ":%s", funcs->name);
    else lua_pushstring(L, funcs->name);
    lua_rawset(L, -4);
    lua_setfield(L, -3, funcs->name);
  }
  lua_pop(L, 1);
}

void l_setfuncs(lua_State *L, const luaL_Reg *funcs) { set_funcs(L, funcs, 0, 0); }
void l_setmethods(lua_State *L, const luaL_Reg *funcs) { set_funcs(L, funcs, 1, 0); }
void l_setops(lua_State *L, const luaL_Reg *funcs) { set_funcs(L, funcs, 0, 1); }
void l_setopmethods(lua_State *L, const luaL_Reg *funcs) { set_funcs(L, funcs, 1, 1); }

/* The name the binding registered the running C function under (l_setfuncs), copied into name[size]; NULL
 * when it has none (a closure built elsewhere). *method: it was registered as a method (self is argument 1). */
static const char *registered_name(lua_State *L, char *name, size_t size, int *method) {
  lua_Debug ar;
  const char *found = NULL;
  *method = 0;
  if (!lua_getstack(L, 0, &ar) || !lua_getinfo(L, "f", &ar)) return NULL;
  lua_getfield(L, LUA_REGISTRYINDEX, L_FNAMES);
  if (lua_istable(L, -1)) {
    lua_pushvalue(L, -2);
    lua_rawget(L, -2);
    const char *reg = lua_tostring(L, -1);
    if (reg) {
      if (reg[0] == ':') {
        *method = 1;
        reg++;
      }
      snprintf(name, size, "%s", reg);
      found = name;
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 2); /* the names table (or nil) and the function */
  return found;
}

int l_argerror(lua_State *L, int narg, const char *extramsg) {
  lua_Debug ar;
  char name[64] = "?";
  int method = 0, reg_method;
  if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar)) {
    /* what the call site says (nothing for a tail call), then the registered name, which wins: it is the
     * function's own name even when the caller holds it in a local of another name */
    if (ar.name) snprintf(name, sizeof name, "%s", ar.name);
    method = ar.namewhat && !strcmp(ar.namewhat, "method");
    /* a tail-called method: how it was called is lost with the call site; x:f() is the usual way */
    if (registered_name(L, name, sizeof name, &reg_method) && reg_method && !ar.name) method = 1;
  }
  if (method && --narg == 0) return l_errorf(L, "calling '%s' on bad self (%s)", name, extramsg);
  return l_errorf(L, "bad argument #%d to '%s' (%s)", narg, name, extramsg);
}

int l_typeerror(lua_State *L, int narg, const char *tname) {
  const char *msg = lua_pushfstring(L, "%s expected, got %s", tname, luaL_typename(L, narg));
  return l_argerror(L, narg, msg);
}

void *l_checkudata(lua_State *L, int narg, const char *tname) {
  void *p = lua_touserdata(L, narg);
  if (p && lua_getmetatable(L, narg)) {
    lua_getfield(L, LUA_REGISTRYINDEX, tname);
    int same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    if (same) return p;
  }
  l_typeerror(L, narg, tname);
  return NULL;
}

/* the tensor box at idx (holding a tensor or emptied), or NULL for any other value */
static l_box *box_at(lua_State *L, int idx) {
  l_box *b = lua_touserdata(L, idx);
  if (!b || !lua_getmetatable(L, idx)) return NULL;
  int same = lua_rawequal(L, -1, lua_upvalueindex(2));
  lua_pop(L, 1);
  return same ? b : NULL;
}

lt_tensor *l_totensor(lua_State *L, int idx) {
  l_box *b = box_at(L, idx);
  return b ? b->t : NULL;
}

int l_is_released_box(lua_State *L, int idx) {
  l_box *b = box_at(L, idx);
  return b && !b->t;
}

const char *l_typename(lua_State *L, int idx) {
  return l_is_released_box(L, idx) ? "released tensor" : luaL_typename(L, idx);
}

lt_tensor *l_f64_gate(lua_State *L, lt_tensor *t, const char *fname) {
  if (t && t->dtype == LT_F64 && !l_f64_capable(fname)) {
    lt_check_no_f64(L_CTX(L), fname, t);
    l_error(L);
  }
  return t;
}

lt_tensor *l_checktensor(lua_State *L, int idx, const char *fname) {
  lt_tensor *t = l_totensor(L, idx);
  if (!t) {
    /* a tensor method's registered name wins over fname: one C function serves aliases (add_ and add, tolist
     * and totable); a private module's function keeps fname, the public Lua wrapper's name */
    char name[64];
    int method;
    const char *reg = registered_name(L, name, sizeof name, &method);
    const char *got = luaL_typename(L, idx);
    if (l_is_released_box(L, idx))
      l_errorf(L, "bad argument #%d to '%s' (%s)", idx, reg && method ? reg : fname, L_RELEASED_BOX);
    l_errorf(L, "bad argument #%d to '%s' (tensor expected, got %s)", idx, reg && method ? reg : fname, got);
  }
  return l_f64_gate(L, t, fname);
}

int l_errorf(lua_State *L, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  lua_pushstring(L, buf);
  return lua_error(L);
}

int l_error(lua_State *L) { return luaL_error(L, "%s", L_CTX(L)->err); }

int l_error_as(lua_State *L, const char *fname) {
  const char *msg = L_CTX(L)->err;
  size_t n = strlen(fname);
  if (!strncmp(msg, fname, n) && msg[n] == ':') return luaL_error(L, "%s", msg);
  if (!strncmp(msg, "tensor: ", 8)) return luaL_error(L, "%s: %s", fname, msg + 8);
  return luaL_error(L, "%s: %s", fname, msg);
}

void l_check(lua_State *L, int status) {
  if (status != LT_OK) l_error(L);
}

static void join_names(const char *const *names, char *buf, size_t size) {
  size_t n = 0;
  buf[0] = 0;
  for (const char *const *k = names; *k && n < size; k++)
    n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? ", " : "", *k);
}

void l_check_opts(lua_State *L, int idx, const char *fname, const char *const *known) {
  if (lua_isnoneornil(L, idx)) return;
  char list[256];
  join_names(known, list, sizeof list);
  if (idx < 0) idx = lua_gettop(L) + idx + 1;
  if (!lua_istable(L, idx)) l_errorf(L, "%s: options must be a table {%s}, got %s", fname, list, luaL_typename(L, idx));
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    int ok = 0;
    if (lua_type(L, -2) == LUA_TSTRING)
      for (const char *const *k = known; *k && !ok; k++) ok = !strcmp(lua_tostring(L, -2), *k);
    if (!ok)
      l_errorf(L, "%s: unknown option '%s' (known options: %s)", fname,
               lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : luaL_typename(L, -2), list);
    lua_pop(L, 1);
  }
}

/* GC pacing. The Lua GC sees a tensor as a 16-byte userdata; the C bytes behind it come back only when the
 * GC collects the box. Memory that the core frees by reference counting (gradients, the graph, scratch) needs
 * no GC, so what is counted is the bytes of tensors handed to Lua (l_push). Every L_GC_QUANTUM of them, the
 * collector is told that many bytes were allocated (LUA_GCSTEP): it does incremental work in proportion
 * (the collector's stepmul), as it would for Lua's own allocations. A step's length thus follows the bytes
 * lutra handed out, never the size of the heap: in a host with hundreds of MB of Lua data a cycle spreads over
 * many steps instead of being finished by one allocation (which cost a game 300 ms frames). After a step
 * finishes a cycle, the next steps wait until the bytes of tensors handed out reach the Lua heap's size times
 * the collector's pause (collectgarbage("setpause"), default 200: as much as the heap), the pause Lua makes
 * between cycles of its own, without which a large heap would be traversed back to back. Dead tensors can thus
 * hold up to ~1.5x the host's Lua heap (a cycle's own length, then the pause); a host that wants less sets a
 * smaller pause (down to the floor below). With lutra's own small heap (a few hundred KB) the pause is at least L_GC_REST_MIN_KB:
 * a cycle every few hundred KB traversed the heap ~30 times per step of a small GPT (22 MB of tensors), 5% of
 * its time; 4 MB of dead tensors at most is what that costs in memory, and C memory stays flat.
 *
 * What is counted is the bytes the collector can give back: a new tensor's storage, and for a view (a
 * storage shared with another tensor, already counted) only its header. */
#define L_GC_QUANTUM ((uint64_t)64 << 10)
#define L_GC_REST_MIN_KB ((uint64_t)4096)

#if LUA_VERSION_NUM >= 504
/* Lua 5.4 can run its collector in generational mode (lua5.4's own interpreter does). There a step is a minor
 * collection: a tensor alive across two of them (an activation kept for the backward) becomes old and only a
 * major collection takes it, which Lua starts when its heap has doubled since the last one; a tensor's box is
 * 16 bytes, so that would never come. In that mode lutra leaves minor collections to Lua and asks for a major
 * one (LUA_GCCOLLECT, as Lua's own would be) each time the tensor bytes handed out since the last reach the
 * larger of the Lua heap, the tensor bytes live after the last major collection and L_GC_MAJOR_MIN: dead
 * tensors stay within about that much, and the collector's work per byte stays bounded. */
#define L_GC_MAJOR_MIN_KB ((uint64_t)1024)

/* Whether the collector is generational. Asked by setting the mode last seen, which changes nothing and
 * returns the previous one; if the host switched modes since, its mode is put back (once per switch: going
 * back to generational is a full collection in Lua 5.4). */
static int gc_generational(lua_State *L, l_state *S) {
  int want = S->gc_gen ? LUA_GCGEN : LUA_GCINC;
  int was = S->gc_gen ? lua_gc(L, LUA_GCGEN, 0, 0) : lua_gc(L, LUA_GCINC, 0, 0, 0);
  if ((was == LUA_GCGEN || was == LUA_GCINC) && was != want) {
    if (was == LUA_GCGEN) lua_gc(L, LUA_GCGEN, 0, 0);
    else lua_gc(L, LUA_GCINC, 0, 0, 0);
    S->gc_gen = was == LUA_GCGEN;
  }
  return S->gc_gen;
}

static void gc_major_when_due(lua_State *L, l_state *S, uint64_t kb) {
  S->gc_major_kb += kb;
  uint64_t due = (uint64_t)lua_gc(L, LUA_GCCOUNT, 0);
  if (S->gc_live_kb > due) due = S->gc_live_kb;
  if (L_GC_MAJOR_MIN_KB > due) due = L_GC_MAJOR_MIN_KB;
  if (S->gc_major_kb < due) return;
  S->gc_major_kb = 0;
  S->gc.cycles++;
  lua_gc(L, LUA_GCCOLLECT, 0);
  lt_alloc_stats st;
  lt_alloc_get_stats(&st);
  S->gc_live_kb = st.live_bytes >> 10;
}
#endif

/* Whether the host's collector runs. A stopped one (collectgarbage("stop"), as games do during play) is left
 * stopped: in LuaJIT a LUA_GCSTEP lowers the threshold below the heap, which is "running" again, and loops
 * until the debt is paid, a whole cycle; Lua 5.4's LUA_GCCOLLECT runs a cycle whatever the host said. PUC 5.1
 * cannot be asked: there the host says it with lt.set_gc_pacing(false). */
static int gc_running(lua_State *L, l_state *S) {
  if (S->gc_off) return 0;
#ifdef LUA_GCISRUNNING
  return lua_gc(L, LUA_GCISRUNNING, 0);
#else
  (void)L;
  return 1;
#endif
}

void l_gc_account(lua_State *L, l_state *S) {
  if (S->gc_debt < L_GC_QUANTUM) return;
  if (!gc_running(L, S)) {
    S->gc_debt = 0; /* dropped, not paid later in one lump: the host's own collections free what is dead */
    return;
  }
  uint64_t kb = S->gc_debt >> 10;
  S->gc_debt &= 1023;
#if LUA_VERSION_NUM >= 504
  if (gc_generational(L, S)) {
    gc_major_when_due(L, S, kb);
    return;
  }
#endif
  if (S->gc_rest_kb >= kb) {
    S->gc_rest_kb -= kb;
    return;
  }
  kb -= S->gc_rest_kb;
  S->gc_rest_kb = 0;
  int data = kb > (uint64_t)INT_MAX ? INT_MAX : (int)kb;
  S->gc.steps++;
  S->gc.step_kb += kb;
  if (kb > S->gc.max_step_kb) S->gc.max_step_kb = kb;
  if (lua_gc(L, LUA_GCSTEP, data)) {
    S->gc.cycles++;
    int pause = lua_gc(L, LUA_GCSETPAUSE, 200); /* the host's setting (collectgarbage("setpause")), put back */
    lua_gc(L, LUA_GCSETPAUSE, pause);
    S->gc_rest_kb = (uint64_t)lua_gc(L, LUA_GCCOUNT, 0) * (uint64_t)(pause > 100 ? pause - 100 : 0) / 100;
    if (S->gc_rest_kb < L_GC_REST_MIN_KB) S->gc_rest_kb = L_GC_REST_MIN_KB;
  }
}

static void push_box(lua_State *L, lt_tensor *t) {
  l_box *b = lua_newuserdata(L, sizeof *b);
  b->t = NULL; /* a half-built box is safe to collect */
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_setmetatable(L, -2);
  b->t = t;
}

/* Whether t is the only tensor on its storage apart from the alias its own node saved of it (an op whose
 * backward reads its output: softmax, tanh, linear+ReLU): the box is then all that keeps those bytes alive,
 * and a new output that goes uncounted is never collected in time (each step's backward found no buffer to
 * reuse and faulted fresh pages in). */
static int owns_storage(const lt_tensor *t) {
  int64_t holders = t->storage->refcount;
  const lt_node *n = t->grad_fn;
  if (n && n->saved_output)
    for (int s = 0; s < (int)(sizeof n->saved / sizeof n->saved[0]); s++)
      if ((n->saved_output & (1u << s)) && n->saved[s] && n->saved[s]->storage == t->storage) holders--;
  return holders == 1;
}

int l_push(lua_State *L, lt_tensor *t) {
  if (!t) return l_error(L);
  push_box(L, t);
  l_state *S = L_STATE(L);
  S->gc_debt += sizeof *t + (t->storage && owns_storage(t) ? t->storage->nbytes : 0);
  l_gc_account(L, S);
  return 1;
}

/* The bytes a released box was counted for stay in the pacing's count: they are usually paid already (the next
 * layer's output was pushed, and the collector asked, before the release), and the pacing keeps no per-box record
 * of what is paid, so taking them out would take out other boxes' bytes. */
int l_release_box(lua_State *L, int idx) {
  l_box *b = box_at(L, idx);
  if (!b || !b->t) return 0;
  lt_tensor *t = b->t;
  b->t = NULL;
  lt_tensor_release(t);
  return 1;
}

void l_push_retained(lua_State *L, lt_tensor *t) { push_box(L, lt_tensor_retain(t)); }

/* l_checknumber, with the message in the form of the checks that name what is wrong */
static lua_Number checknum(lua_State *L, int idx, const char *fname, const char *what) {
  if (!lua_isnumber(L, idx)) l_errorf(L, "%s: %s must be a number, got %s", fname, what, luaL_typename(L, idx));
  return lua_tonumber(L, idx);
}

int64_t l_checkint(lua_State *L, int idx, const char *fname, const char *what, int64_t lo, int64_t hi) {
  lua_Number v = checknum(L, idx, fname, what);
  /* NaN fails the first test, +-inf the second: a cast of either to an integer is undefined */
  if (v != floor(v)) l_errorf(L, "%s: %s must be an integer, got %.14g", fname, what, v);
  if (v < (lua_Number)lo || v > (lua_Number)hi)
    l_errorf(L, "%s: %s %.14g is out of range (expected %lld..%lld)", fname, what, v, (long long)lo, (long long)hi);
  return (int64_t)v;
}

int l_checkdim(lua_State *L, int idx, int ndim, const char *fname) {
  lua_Number d = checknum(L, idx, fname, "dim");
  int n = ndim > 0 ? ndim : 1;
  if (d != floor(d)) return l_errorf(L, "%s: dim must be an integer, got %.14g", fname, d);
  if (d >= 1 && d <= n) return (int)d - 1;
  if (d < 0 && -d <= n) return n + (int)d;
  if (ndim == 0)
    return l_errorf(L, "%s: dim %.14g out of range for a 0-dimensional tensor (expected 1 or -1)", fname, d);
  return l_errorf(L, "%s: dim %.14g out of range for a %d-dimensional tensor (expected 1..%d, or -%d..-1)", fname, d,
                  ndim, n, n);
}

int l_checkdim_nz(lua_State *L, int idx, int ndim, const char *fname) {
  if (ndim == 0) return l_errorf(L, "%s: the tensor is 0-dimensional (a scalar): it has no dim to work on", fname);
  return l_checkdim(L, idx, ndim, fname);
}

int l_optdim(lua_State *L, int idx, int ndim, const char *fname, int def) {
  if (lua_isnoneornil(L, idx)) return def;
  return l_checkdim(L, idx, ndim, fname);
}

/* One size of a shape: an integer (-1 is allowed through; views resolve it, the core rejects the rest). */
static int64_t shape_size(lua_State *L, lua_Number v, int i, const char *fname) {
  if (v != floor(v)) l_errorf(L, "%s: size %d must be an integer, got %.14g", fname, i, v);
  if (v < -(lua_Number)L_INT_MAX || v > (lua_Number)L_INT_MAX)
    l_errorf(L, "%s: size %d is too large, got %.14g", fname, i, v);
  return (int64_t)v;
}

int l_checkshape(lua_State *L, int first, int64_t *shape, const char *fname) {
  int n = 0;
  if (lua_istable(L, first)) {
    n = (int)lua_objlen(L, first);
    if (n > LT_MAX_DIM) l_errorf(L, "%s: %d dimensions requested, at most %d are supported", fname, n, LT_MAX_DIM);
    for (int i = 1; i <= n; i++) {
      lua_rawgeti(L, first, i);
      if (lua_type(L, -1) != LUA_TNUMBER)
        l_errorf(L, "%s: size %d of the shape must be a number, got %s", fname, i, luaL_typename(L, -1));
      shape[i - 1] = shape_size(L, lua_tonumber(L, -1), i, fname);
      lua_pop(L, 1);
    }
    return n;
  }
  int top = lua_gettop(L);
  for (int i = first; i <= top && lua_type(L, i) == LUA_TNUMBER; i++) {
    if (n >= LT_MAX_DIM) l_errorf(L, "%s: at most %d dimensions are supported", fname, LT_MAX_DIM);
    shape[n] = shape_size(L, lua_tonumber(L, i), n + 1, fname);
    n++;
  }
  return n;
}

void l_check_new_shape(lua_State *L, int ndim, const int64_t *shape, const char *fname) {
  char b[256];
  for (int d = 0; d < ndim; d++)
    if (shape[d] < 0)
      l_errorf(L, "%s: size %lld of dim %d is negative (shape %s)", fname, (long long)shape[d], d + 1,
               lt_dims_str(ndim, shape, b, sizeof b));
  if (lt_check_size(L_CTX(L), fname, ndim, shape)) l_error(L);
}

int l_checkshape_only(lua_State *L, int first, int64_t *shape, const char *fname) {
  int n = l_checkshape(L, first, shape, fname);
  if (!lua_istable(L, first) && !lua_isnoneornil(L, first + n))
    l_errorf(L, "%s: size %d must be a number, got %s", fname, n + 1, luaL_typename(L, first + n));
  return n;
}

lt_dtype l_checkdtype(lua_State *L, int idx, lt_dtype def, const char *fname) {
  if (lua_isnoneornil(L, idx)) return def;
  if (lua_type(L, idx) == LUA_TTABLE) { /* PyTorch's dtype= keyword: {dtype = "float64"}, nothing else */
    static const char *const known[] = { "dtype", NULL };
    if (idx < 0) idx = lua_gettop(L) + idx + 1;
    l_check_opts(L, idx, fname, known);
    lua_getfield(L, idx, "dtype");
    lua_replace(L, idx);
    if (lua_isnil(L, idx)) return def;
  }
  if (lua_type(L, idx) != LUA_TSTRING)
    l_errorf(L, "%s: dtype must be a string (\"float32\", \"float64\" or \"int64\"), got %s", fname,
             luaL_typename(L, idx));
  const char *s = lua_tostring(L, idx);
  if (!strcmp(s, "float32") || !strcmp(s, "float")) return LT_F32;
  if (!strcmp(s, "float64") || !strcmp(s, "double")) return LT_F64;
  if (!strcmp(s, "int64") || !strcmp(s, "long")) return LT_I64;
  l_errorf(L, "%s: unknown dtype '%s' (expected \"float32\", \"float64\" or \"int64\")", fname, s);
  return LT_F32;
}

lt_tensor *l_shift_1based(lua_State *L, lt_tensor *t, int64_t min, const char *fname, const char *what,
                          const char *whats) {
  lt_ctx *c = L_CTX(L);
  lt_tensor *z = lt_op_contiguous(c, t);
  lt_tensor *r = z ? lt_tensor_new_like(c, z) : NULL;
  if (!r) {
    lt_tensor_release(z);
    l_error(L);
  }
  const int64_t *s = lt_i64(z);
  int64_t *d = lt_i64(r);
  for (int64_t i = 0, n = lt_numel(z); i < n; i++) {
    if (s[i] < min) {
      long long bad = (long long)s[i];
      lt_tensor_release(z);
      lt_tensor_release(r);
      l_errorf(L, "%s: %s %lld is out of range (%s are 1-based)", fname, what, bad, whats);
    }
    d[i] = s[i] - 1;
  }
  lt_tensor_release(z);
  return r;
}

lt_tensor *l_index_from_lua(lua_State *L, lt_tensor *idx, const char *fname) {
  if (idx->dtype != LT_I64) l_errorf(L, "%s: index must be int64, got %s", fname, lt_dtype_name(idx->dtype));
  return l_shift_1based(L, idx, 1, fname, "index", "indices");
}
