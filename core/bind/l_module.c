/*
 * l_module.c — luaopen for the C part of lutra ("lutra.core"), lutra_preload/luaopen_lutra for hosts,
 * and the registration of every binding area. The Lua part (lua/lutra/) is embedded in the static
 * library by core/bind/embed_lua.lua, so a host needs no files on disk.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "l_background.h" /* lt.background's job record */
#include "l_util.h"
#include "lt_alloc.h"
#include "lt_blas.h"
#include "lt_interrupt.h"
#include "lutra.h"

/* Each binding area registers its functions into the module table on top of the stack. */
void l_tensor_register(lua_State *L);    /* l_tensor.c: the tensor userdata, its metatable */
void l_nn_register(lua_State *L);        /* l_nn.c: conv, pooling, norms, losses, dropout, embedding */
void l_optim_register(lua_State *L);     /* l_optim.c: optimizers (fused C updates) */
void l_data_register(lua_State *L);      /* l_data.c: IDX reading, batching */
void l_io_register(lua_State *L);        /* l_io.c: safetensors checkpoints, atomic files */
void l_loop_register(lua_State *L);      /* l_loop.c: the training loops and hook dispatch */
void l_dist_register(lua_State *L);      /* l_dist.c: MPI communication (lt.distributed) */
void l_math_ops_register(lua_State *L);  /* l_math_ops.c: sort, scans, prod, norm, tril/triu, rounding, erf ... */
void l_special_register(lua_State *L);   /* l_special.c: tan, asin ... digamma, atan2, fmod, remainder ... */
void l_names_register(lua_State *L);     /* l_names.c: the missing-name error with the nearest name */
void l_index_ops_register(lua_State *L); /* l_index_ops.c: masked_fill, scatter, nonzero ... */
void l_random_register(lua_State *L);    /* l_random.c: randint, multinomial, bernoulli, *_like, linspace */
/* modules and images */
void l_activation_register(lua_State *L); /* l_activation.c: silu, elu, softplus, mish, hard*, prelu */
void l_image_register(lua_State *L);      /* l_image.c: PNG files through libpng (lt.utils.save_image) */
void l_vision_register(lua_State *L);     /* l_vision.c: image decoding and pixel kernels (lt.vision) */
/* vision */
void l_nn_vision_register(lua_State *L); /* l_nn_vision.c: grouped/transposed conv, adaptive pools, group norm */
/* gpt area */
void l_attention_register(lua_State *L); /* l_attention.c: scaled dot-product attention */
/* metrics: */
void l_metrics_register(lua_State *L); /* l_metrics.c: the counting kernels of lt.metrics (core._metrics) */
/* [tools: profiler, loggers] */
void l_prof_register(lua_State *L);      /* l_prof.c: _detect_anomaly */
void l_tb_register(lua_State *L);        /* l_tb.c: _tb_open (TensorBoard event files) */
void l_json_line_register(lua_State *L); /* l_json_line.c: _json_line (JSON-lines rows) */
void l_docs_register(lua_State *L);      /* l_docs.c: _doc_pages (the reference pages, for lt.help) */
/* recurrent layers */
void l_nn_rnn_register(lua_State *L); /* l_nn_rnn.c: _nn.rnn_layer (RNN, GRU, LSTM) */
/* the tensor's methods by topic, after l_tensor_register (l_tensor.c: the userdata, its metatable) */
void l_tensor_create_register(lua_State *L); /* l_tensor_create.c: construction, fills, the RNG */
void l_tensor_shape_register(lua_State *L);  /* l_tensor_shape.c: queries, views, conversions, joins */
void l_tensor_math_register(lua_State *L);   /* l_tensor_math.c: maths, arithmetic metamethods */
void l_tensor_grad_register(lua_State *L);   /* l_tensor_grad.c: autograd, grad mode */
void l_runtime_register(lua_State *L);       /* l_runtime.c: threads, denormals, BLAS info, allocator stats */
void l_autocast_register(lua_State *L);      /* l_autocast.c: autocast state, bf16 GEMM info (lt.autocast) */
void l_carry_register(lua_State *L);         /* l_carry.c: _carry_pack, _carry_unpack (tests) */
void l_thread_register(lua_State *L, void (*preload)(lua_State *L)); /* l_thread.c: _thread_* (lua/lutra/thread.lua) */
void l_infer_register(lua_State *L); /* l_infer.c: _infer_new (inference plans, lt.infer) */

/* ---- process-wide run state (what a host or a signal handler may ask; the run count: l_run.c) ------ */

/* (atomic: any thread's state may set or read them, e.g. a host opening lutra in two threads at once) */
static atomic_int interactive = -1;     /* lutra_set_interactive (a C host, the binary): -1 not said, 0 quiet, 1 not */
static atomic_int lua_interactive = -1; /* lt.set_interactive from Lua: -1 not said */
static atomic_int preloaded;            /* lutra_preload was called: a host opened lutra */

void lutra_set_interactive(int on) { interactive = on != 0; }
void lutra_empty_cache(void) { lt_alloc_trim(); }

/* The process's argv[0] (from /proc/self/cmdline) into buf; "" when it cannot be read. */
static void process_argv0(char *buf, size_t size) {
  buf[0] = 0;
  FILE *f = fopen("/proc/self/cmdline", "rb");
  if (!f) return;
  size_t n = fread(buf, 1, size - 1, f);
  fclose(f);
  buf[n] = 0; /* argv[0] ends at its NUL */
}

/* A plain command-line interpreter running a script with a terminal on stdout: the process is lua/luajit
 * (lua5.4, luajit-2.1 ...), the global `arg` holds a script name, and stdout is a terminal. LÖVE, Neovim or a
 * C host loading lutra with require are not; nor is `luajit game.lua >game.log`, where a summary or a bar
 * would land in the game's log. Without a script (`lua5.4 -e ...`) PUC Lua 5.2+ still sets arg[0], to the
 * interpreter's own argv[0] (LuaJIT and 5.1 set no `arg`): that is not a script. */
static int plain_interpreter(lua_State *L) {
  if (!isatty(STDOUT_FILENO)) return 0;
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return 0;
  exe[n] = 0;
  const char *base = strrchr(exe, '/');
  base = base ? base + 1 : exe;
  if (strncmp(base, "lua", 3) != 0) return 0;
  lua_getglobal(L, "arg");
  int script = 0;
  if (lua_istable(L, -1)) {
    lua_rawgeti(L, -1, 0);
    if (lua_type(L, -1) == LUA_TSTRING) {
      char argv0[4096];
      process_argv0(argv0, sizeof argv0);
      script = strcmp(lua_tostring(L, -1), argv0) != 0;
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return script;
}

/* The quiet rule (docs/guide-hosts.md): lt.set_interactive from Lua, else LUTRA_QUIET (1 quiet, 0 not), else
 * lutra_set_interactive (the `lutra` binary says 1), else a host that called lutra_preload is quiet, else
 * only a plain interpreter running a script with a terminal on stdout is interactive. */
static int is_interactive(lua_State *L) {
  if (lua_interactive >= 0) return lua_interactive;
  const char *q = getenv("LUTRA_QUIET");
  if (q && *q) return strcmp(q, "0") == 0;
  if (interactive >= 0) return interactive;
  if (preloaded) return 0;
  return plain_interpreter(L);
}

/* core.embedded() -> true when lutra writes nothing it was not asked for (not interactive) */
static int l_embedded(lua_State *L) {
  lua_pushboolean(L, !is_interactive(L));
  return 1;
}

/* lt.set_interactive(on) -> the previous answer of lt.is_interactive() */
static int l_set_interactive(lua_State *L) {
  if (!lua_isboolean(L, 1)) return l_errorf(L, "set_interactive: expected a boolean, got %s", luaL_typename(L, 1));
  int was = is_interactive(L);
  lua_interactive = lua_toboolean(L, 1);
  lua_pushboolean(L, was);
  return 1;
}
static int l_is_interactive(lua_State *L) {
  lua_pushboolean(L, is_interactive(L));
  return 1;
}
static int l_run_active(lua_State *L) {
  lua_pushboolean(L, lutra_run_active());
  return 1;
}

/* core._gc_stats([reset]) -> {steps=, step_kb=, max_step_kb=, cycles=, generational=}: what the GC pacing (l_util.c) asked
 * of the collector since lutra was loaded (or the last reset), for tests that pin its mechanism without
 * timing it */
static int l_gc_stats(lua_State *L) {
  l_state *S = L_STATE(L);
  int reset = lua_toboolean(L, 1);
  lua_createtable(L, 0, 4);
  lua_pushnumber(L, (lua_Number)S->gc.steps);
  lua_setfield(L, -2, "steps");
  lua_pushnumber(L, (lua_Number)S->gc.step_kb);
  lua_setfield(L, -2, "step_kb");
  lua_pushnumber(L, (lua_Number)S->gc.max_step_kb);
  lua_setfield(L, -2, "max_step_kb");
  lua_pushnumber(L, (lua_Number)S->gc.cycles);
  lua_setfield(L, -2, "cycles");
  lua_pushboolean(L, S->gc_gen); /* Lua 5.4 in generational mode: cycles are the major collections asked */
  lua_setfield(L, -2, "generational");
  if (reset) memset(&S->gc, 0, sizeof S->gc);
  return 1;
}

/* lt.set_gc_pacing(on) -> the previous setting: whether lutra asks this state's collector for work in
 * proportion to the tensor bytes it hands out (l_util.c, l_gc_account) */
static int l_set_gc_pacing(lua_State *L) {
  if (!lua_isboolean(L, 1)) return l_errorf(L, "set_gc_pacing: expected a boolean, got %s", luaL_typename(L, 1));
  l_state *S = L_STATE(L);
  lua_pushboolean(L, !S->gc_off);
  S->gc_off = !lua_toboolean(L, 1);
  S->gc_debt = 0;
  return 1;
}

static int l_interrupt(lua_State *L) {
  (void)L;
  lt_interrupt_request();
  return 0;
}
static int l_interrupt_pending(lua_State *L) {
  lua_pushboolean(L, lt_interrupt_pending());
  return 1;
}
static int l_interrupt_clear(lua_State *L) {
  (void)L;
  lt_interrupt_clear();
  return 0;
}

static int open_with_upvalues(lua_State *L) {
  lua_newtable(L);
  l_tensor_register(L);
  l_tensor_create_register(L);
  l_tensor_shape_register(L);
  l_tensor_math_register(L);
  l_tensor_grad_register(L);
  l_runtime_register(L);
  l_autocast_register(L);
  l_math_ops_register(L);
  l_special_register(L);
  l_nn_register(L);
  l_optim_register(L);
  l_data_register(L);
  l_io_register(L);
  l_loop_register(L);
  l_dist_register(L);
  l_names_register(L);
  l_index_ops_register(L);
  l_random_register(L);
  l_activation_register(L); /* modules and images */
  l_image_register(L);
  l_vision_register(L);
  l_nn_vision_register(L); /* vision */
  l_attention_register(L); /* gpt area */
  l_metrics_register(L);   /* metrics */
  l_prof_register(L);      /* [tools: profiler, loggers] */
  l_tb_register(L);
  l_json_line_register(L);
  l_docs_register(L);
  l_nn_rnn_register(L); /* recurrent layers (after l_nn_register: adds to _nn) */
  l_carry_register(L);  /* values carried between Lua states, and lt.thread's workers */
  l_thread_register(L, l_preload_modules);
  l_background_register(L);
  l_infer_register(L); /* inference plans */
  static const luaL_Reg misc[] = { { "interrupt", l_interrupt },
                                   { "interrupt_pending", l_interrupt_pending },
                                   { "interrupt_clear", l_interrupt_clear },
                                   { "embedded", l_embedded },
                                   { "run_active", l_run_active },
                                   { "_gc_stats", l_gc_stats },
                                   { "set_gc_pacing", l_set_gc_pacing },
                                   { "set_interactive", l_set_interactive },
                                   { "is_interactive", l_is_interactive },
                                   { "_newproxy", l_compat_newproxy },
                                   { NULL, NULL } };
  l_setfuncs(L, misc);
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_setfield(L, -2, "Tensor"); /* the metatable: Lua adds __tostring and friends */
  lua_pushstring(L, LUTRA_VERSION);
  lua_setfield(L, -2, "version");
  return 1;
}

int luaopen_lutra_core(lua_State *L) {
  /* choose the BLAS kernel family before OpenBLAS is loaded; the host's floating-point mode stays its own
   * (lutra sets its own only while it computes: lt_fp_enter in core/src/lt_fpmode.h) */
  lt_blas_init();
  l_state *S = lua_newuserdata(L, sizeof *S);
  memset(S, 0, sizeof *S);
  lt_ctx_init(&S->ctx);
  S->ctx.num_threads = lt_blas_get_info()->threads;
  lua_newtable(L); /* tensor metatable */
  lua_pushcclosure(L, open_with_upvalues, 2);
  lua_call(L, 0, 1);
  return 1;
}

/* ---- hosts ------------------------------------------------------------------------------------ */

typedef struct lutra_lua_module {
  const char *name, *chunkname, *src;
  size_t len;
} lutra_lua_module;
extern const lutra_lua_module lutra_lua_modules[];

static int load_embedded(lua_State *L) {
  const lutra_lua_module *m = lua_touserdata(L, lua_upvalueindex(1));
  if (luaL_loadbuffer(L, m->src, m->len, m->chunkname)) return lua_error(L);
  lua_pushvalue(L, 1);
  lua_call(L, 1, 1);
  return 1;
}

void lutra_preload(lua_State *L) {
  preloaded = 1;
  l_preload_modules(L);
}

void l_preload_modules(lua_State *L) {
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "preload");
  lua_pushcfunction(L, luaopen_lutra_core);
  lua_setfield(L, -2, "lutra.core");
  for (const lutra_lua_module *m = lutra_lua_modules; m->name; m++) {
    lua_pushlightuserdata(L, (void *)m);
    lua_pushcclosure(L, load_embedded, 1);
    lua_setfield(L, -2, m->name);
  }
  lua_pop(L, 2);
}

int luaopen_lutra(lua_State *L) {
  lutra_preload(L);
  lua_getglobal(L, "require");
  lua_pushstring(L, "lutra");
  lua_call(L, 1, 1);
  return 1;
}

int lutra_set_allocator(const lutra_allocator *a) {
  lt_allocator al;
  if (a) {
    al.alloc = a->alloc;
    al.free = a->free;
    al.ud = a->ud;
  }
  return lt_alloc_set_allocator(a ? &al : NULL);
}

void lutra_interrupt(void) { lt_interrupt_request(); }
void lutra_interrupt_clear(void) { lt_interrupt_clear(); }
