/*
 * l_util.h — shared pieces of the Lua binding: the per-state context, the tensor box, argument
 * parsing (1-based dims, shapes as varargs or a table) and turning core failures into Lua errors.
 *
 * Every C function of the binding is registered with two upvalues: 1 = the l_state userdata,
 * 2 = the tensor metatable (so type checks are a pointer comparison, not a registry string lookup).
 */
#ifndef L_UTIL_H
#define L_UTIL_H

#include <math.h>

#include "l_compat.h"

#include "lt_ops.h"

typedef struct l_state {
  lt_ctx ctx;
  uint64_t gc_debt;                 /* bytes of tensors handed to Lua not yet paid to the GC as a step */
  uint64_t gc_rest_kb;              /* KB of tensors to hand out before the next step (the pause after a cycle) */
  int gc_gen;                       /* Lua 5.4: the collector was generational when last asked (l_util.c) */
  int gc_off;                       /* lt.set_gc_pacing(false): the host paces the collector itself */
  uint64_t gc_major_kb, gc_live_kb; /* Lua 5.4 generational: KB handed out since the last major collection,
                                       KB of live tensors after it */
  struct {
    uint64_t steps, step_kb, max_step_kb; /* GC steps l_gc_account asked for, their total and largest size */
    uint64_t cycles;                      /* GC cycles that those steps finished */
  } gc;                                   /* counters for tests (lutra.core._gc_stats) */
} l_state;

typedef struct l_box {
  lt_tensor *t;
} l_box;

#define L_STATE(L) ((l_state *)lua_touserdata((L), lua_upvalueindex(1)))
#define L_CTX(L) (&L_STATE(L)->ctx)
/* the dtype of what is created without one (lt.set_default_dtype: float32 or float64) */
#define L_DEFAULT_DTYPE(L) ((lt_dtype)L_CTX(L)->default_dtype)

/* Registers funcs into the table at the top of the stack with the two standard upvalues, and records each
 * closure's name for argument errors (l_argerror). l_setmethods is for methods (self is argument 1). */
void l_setfuncs(lua_State *L, const luaL_Reg *funcs);
void l_setmethods(lua_State *L, const luaL_Reg *funcs);
/* The same for tensor ops: each is entered through one function that times it while the advanced profiler
 * runs (l_util.c's op_entry; lt_prof.h). funcs must be static (the closures keep pointers into it). */
void l_setops(lua_State *L, const luaL_Reg *funcs);
void l_setopmethods(lua_State *L, const luaL_Reg *funcs);
/* Pushes the state and the metatable (the two upvalues), for code that builds closures itself. */
void l_push_upvalues(lua_State *L);

lt_tensor *l_totensor(lua_State *L, int idx); /* NULL if not a tensor */
/* Argument idx as a tensor, or an argument error naming fname; a float64 tensor is refused unless fname is one of
 * the functions with float64 kernels (l_f64.c). */
lt_tensor *l_checktensor(lua_State *L, int idx, const char *fname);
/* 1 when the binding function fname takes float64 tensors (l_f64.c) */
int l_f64_capable(const char *fname);
/* t (NULL passes), or the float64 refusal when fname is not float64-capable: for tensors taken with l_totensor */
lt_tensor *l_f64_gate(lua_State *L, lt_tensor *t, const char *fname);
/* Pushes a new box owning t (a new reference from a core op). t NULL: raises the core's error. */
int l_push(lua_State *L, lt_tensor *t);
/* Pushes a box that takes one more reference to t. */
void l_push_retained(lua_State *L, lt_tensor *t);
/* Releases the tensor of the box at idx now instead of when the collector frees the box (nn.Sequential's
 * intermediate outputs: l_tensor.c's _release); the box is left empty, and passing it to a function afterwards is
 * the error L_RELEASED_BOX. Returns 0 (and does nothing) for anything but a box holding a tensor. */
int l_release_box(lua_State *L, int idx);
/* 1 for a tensor box that l_release_box emptied */
int l_is_released_box(lua_State *L, int idx);
/* luaL_typename for messages, "released tensor" for an emptied box (not "userdata") */
const char *l_typename(lua_State *L, int idx);
#define L_RELEASED_BOX                                                                                       \
  "a released tensor: nn.Sequential frees an output it passes from one layer to the next once the next one " \
  "has used it"
/* Raises a formatted message (printf formats, unlike luaL_error which knows only %d %s %f). */
int l_errorf(lua_State *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Raises the core message of the last failure. */
int l_error(lua_State *L);
/* The same, named by the public function fname that reached the core under another name: the core's generic
 * "tensor: " (creating a tensor) becomes "fname: ", any other message is prefixed "fname: " unless it already
 * starts so. For functions whose core op has another name (lt.zeros creates through lt_tensor_new). */
int l_error_as(lua_State *L, const char *fname);
/* Checks a core status; on failure raises. */
void l_check(lua_State *L, int status);
/* The bindings' one options checker: the value at idx is none, nil or a table whose keys are all in known (a
 * NULL-terminated list); raises "fname: options must be a table {a, b}, got ..." or "fname: unknown option 'k'
 * (known options: a, b)". The values are the caller's to check. */
void l_check_opts(lua_State *L, int idx, const char *fname, const char *const *known);

/* Argument checks in the Lua way, "bad argument #2 to 'full' (number expected, got string)", that name the
 * function even when it was tail-called (`return lt.full({2}, "x")`), where luaL_check* say '?' because the
 * call site is gone: the name is the one the binding registered the closure under (l_setfuncs). Use these
 * instead of luaL_check* / luaL_opt* in the binding. The fast paths are inline; errors are out of line. */
int l_argerror(lua_State *L, int narg, const char *extramsg);
int l_typeerror(lua_State *L, int narg, const char *tname);
static inline lua_Number l_checknumber(lua_State *L, int narg) {
  lua_Number v = lua_tonumber(L, narg);
  if (v == 0 && !lua_isnumber(L, narg)) l_typeerror(L, narg, "number");
  return v;
}
static inline lua_Number l_optnumber(lua_State *L, int narg, lua_Number def) {
  return lua_isnoneornil(L, narg) ? def : l_checknumber(L, narg);
}
static inline const char *l_checklstring(lua_State *L, int narg, size_t *len) {
  const char *s = lua_tolstring(L, narg, len);
  if (!s) l_typeerror(L, narg, "string");
  return s;
}
static inline const char *l_checkstring(lua_State *L, int narg) { return l_checklstring(L, narg, NULL); }
static inline const char *l_optstring(lua_State *L, int narg, const char *def) {
  return lua_isnoneornil(L, narg) ? def : l_checklstring(L, narg, NULL);
}
static inline void l_checktype(lua_State *L, int narg, int t) {
  if (lua_type(L, narg) != t) l_typeerror(L, narg, lua_typename(L, t));
}
void *l_checkudata(lua_State *L, int narg, const char *tname);

/* Integers that a double holds exactly: the range l_checkint callers use when nothing narrower applies. */
#define L_INT_MAX ((int64_t)1 << 53)
/* v is an integer that an int64 holds (so the cast is defined): no NaN, inf or fraction. */
static inline int l_is_int64(double v) { return v == floor(v) && v >= -0x1p63 && v < 0x1p63; }
/* A Lua number that must be an integer in lo..hi (NaN, inf and fractions are errors naming fname and what). */
int64_t l_checkint(lua_State *L, int idx, const char *fname, const char *what, int64_t lo, int64_t hi);
/* Lua dim (1-based, negative counts from the end) to 0-based; ndim is the tensor's. A 0-dim tensor accepts
 * dim 1 / -1 (reductions over "its only dim"); l_checkdim_nz is for ops that need a real dim. */
int l_checkdim(lua_State *L, int idx, int ndim, const char *fname);
int l_checkdim_nz(lua_State *L, int idx, int ndim, const char *fname);
int l_optdim(lua_State *L, int idx, int ndim, const char *fname, int def);
/* Shape from varargs of integers or one table, starting at stack index first. Returns ndim. */
int l_checkshape(lua_State *L, int first, int64_t *shape, const char *fname);
/* The shape of a tensor to create: no negative size, and at most 2^62 elements (lt_size.h); errors name fname. */
void l_check_new_shape(lua_State *L, int ndim, const int64_t *shape, const char *fname);
/* The same, for calls where nothing may follow the sizes (view, reshape, expand, permute). */
int l_checkshape_only(lua_State *L, int first, int64_t *shape, const char *fname);
lt_dtype l_checkdtype(lua_State *L, int idx, lt_dtype def, const char *fname);

/* Accounts C memory to the Lua GC: a step of work in proportion to bytes allocated since the last. */
void l_gc_account(lua_State *L, l_state *S);

/* package.preload gets lutra.core and lutra's embedded Lua modules (lutra_preload without making the process
 * a host: the Lua states of lt.thread's workers) */
void l_preload_modules(lua_State *L);

/* Converts a 1-based int64 index tensor (from Lua) to a 0-based copy; errors on values < 1. */
lt_tensor *l_index_from_lua(lua_State *L, lt_tensor *idx, const char *fname);
/* An int64 tensor of 1-based values as a 0-based copy; a value below `min` is an error naming fname and
 * what ("fname: what v is out of range (whats are 1-based)"). */
lt_tensor *l_shift_1based(lua_State *L, lt_tensor *t, int64_t min, const char *fname, const char *what,
                          const char *whats);

#endif
