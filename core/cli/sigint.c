/*
 * sigint.c — what Ctrl-C (SIGINT) does in the `lutra` binary.
 *
 * Script (-e, -l, SCRIPT, stdin):
 *   1st Ctrl-C  lutra_interrupt(): a running fit/validate/test/predict stops at the next batch boundary.
 *   2nd Ctrl-C  like lua.c: a count hook raises "interrupted!" in the running Lua code, and SIGINT goes
 *               back to its default action, so a 3rd Ctrl-C kills the process (code stuck in C or in a
 *               JIT-compiled loop that never returns to the interpreter).
 * REPL, while a chunk runs:
 *   1st Ctrl-C  lutra_interrupt().
 *   2nd Ctrl-C  lutra_interrupt() again and, when no lutra run is active, the "interrupted!" hook.
 *   3rd Ctrl-C  the hook in any case, and a notice that one more Ctrl-C quits.
 *   4th Ctrl-C  default action: the process ends (the history is saved after every line).
 * REPL, at the prompt: sets a flag that repl.c polls; the line being edited and the continuation
 *   buffer are dropped.
 * When SIGINT is ignored at start-up (nohup, a background job of a script), it stays ignored.
 *
 * Whether a run is active: lutra.h's `int lutra_run_active(void)` (async-signal-safe, nonzero while a
 * fit/validate/test/predict runs). It is declared weak here, so the binary also links against a core
 * without it; then no run is assumed and the 2nd Ctrl-C always arms the hook.
 *
 * The REPL compiles each chunk it runs with the JIT off for the chunk's own code (repl.c), so a loop
 * typed at the prompt stays in the interpreter, where the hook is seen: `while true do end` is
 * interruptible. Functions defined in it are compiled as usual.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <lua.h>
#include <lauxlib.h>

#include "lutra.h"
#include "cli.h"

/* Optional core query (see the header comment); NULL when the linked core does not define it. */
extern int lutra_run_active(void) __attribute__((weak));

/* The state the "interrupted!" hook is set on. Cleared by cli_int_end() before lua_close: a Ctrl-C that
 * arrives while the process exits (OpenBLAS joining its threads) must not touch a freed state. */
static lua_State *int_L;
static volatile sig_atomic_t int_closing; /* cli_int_end() ran: the handler leaves int_L alone */
static int int_in_handler;                /* handlers running now (any thread may take SIGINT) */
static volatile sig_atomic_t int_mode = CLI_INT_SCRIPT;
static volatile sig_atomic_t int_count;      /* Ctrl-C received by the running chunk */
static volatile sig_atomic_t int_prompt_hit; /* Ctrl-C at the prompt, not yet seen by repl.c */
static volatile sig_atomic_t int_hook_armed; /* the "interrupted!" hook is (or was) set */

static void int_stop(lua_State *L, lua_Debug *ar)
{
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  int_hook_armed = 0;
  luaL_where(L, 0);
  lua_pushfstring(L, "%sinterrupted!", lua_tostring(L, -1));
  lua_error(L);
}

/* Async-signal-safe: LuaJIT's lua_sethook only stores the hook and swaps the dispatch table. */
static void int_arm(void)
{
  lua_State *L = __atomic_load_n(&int_L, __ATOMIC_SEQ_CST);
  if (L == NULL || __atomic_load_n(&int_closing, __ATOMIC_SEQ_CST)) return;
  int_hook_armed = 1;
  lua_sethook(L, int_stop, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

static void int_say(const char *s)
{
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

static void int_default(void)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
}

static void int_handler(int sig)
{
  int saved = errno;
  (void)sig;
  __atomic_add_fetch(&int_in_handler, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&int_closing, __ATOMIC_SEQ_CST)) {
    /* exiting: nothing left to interrupt; a 2nd Ctrl-C restores the default, so a 3rd ends a stuck exit */
    if (++int_count >= 2) int_default();
  } else if (int_mode == CLI_INT_PROMPT) {
    int_prompt_hit = 1;
  } else if (int_mode == CLI_INT_SCRIPT) {
    int n = ++int_count;
    lutra_interrupt();
    if (n >= 2) {
      int_default();
      int_arm();
    }
  } else {
    int n = ++int_count;
    if (n >= 4) {
      int_default();
      raise(SIGINT);
    } else {
      lutra_interrupt();
      if (n == 2 && !(lutra_run_active != NULL && lutra_run_active())) {
        int_arm();
      } else if (n == 3) {
        int_arm();
        int_say("\nlutra: still running; press Ctrl-C once more to quit\n");
      }
    }
  }
  __atomic_sub_fetch(&int_in_handler, 1, __ATOMIC_SEQ_CST);
  errno = saved;
}

static int int_ignored; /* SIGINT was ignored when lutra started (nohup, `cmd &`): leave it so */

static void int_install(void)
{
  struct sigaction sa;
  if (int_ignored) return;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = int_handler;
  sa.sa_flags = SA_RESTART; /* ppoll at the prompt returns EINTR regardless */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
}

void cli_int_init(lua_State *L)
{
  struct sigaction old;
  if (sigaction(SIGINT, NULL, &old) == 0 && old.sa_handler == SIG_IGN) int_ignored = 1;
  int_L = L;
  int_mode = CLI_INT_SCRIPT;
  int_install();
}

void cli_int_end(void)
{
  int_count = 0;
  /* sequentially consistent: this store comes before the load of int_in_handler below, as the handler's
   * increment comes before its load of int_closing (no fence: ThreadSanitizer does not model fences) */
  __atomic_store_n(&int_closing, 1, __ATOMIC_SEQ_CST);
  /* a handler that started before int_closing was set may still be using int_L: wait for it */
  while (__atomic_load_n(&int_in_handler, __ATOMIC_SEQ_CST) != 0) sched_yield();
  __atomic_store_n(&int_L, NULL, __ATOMIC_SEQ_CST);
}

void cli_int_begin(enum cli_int_mode mode)
{
  int_count = 0;
  int_mode = (sig_atomic_t)mode;
  int_install(); /* a previous 2nd Ctrl-C of a script may have left the default action */
}

void cli_int_prompt(void)
{
  int_mode = CLI_INT_PROMPT;
  int_count = 0;
  lutra_interrupt_clear(); /* a Ctrl-C no fit saw belonged to the chunk that ended: not to the next fit */
  if (int_hook_armed && int_L != NULL) {
    lua_sethook(int_L, NULL, 0, 0);
    int_hook_armed = 0;
  }
}

int cli_int_take_prompt(void)
{
  if (!int_prompt_hit) return 0;
  int_prompt_hit = 0;
  return 1;
}
