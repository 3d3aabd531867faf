/*
 * cli.h — shared declarations of the `lutra` binary (core/cli): the script runner (main.c),
 * the REPL (repl.c), the protected calls both use (docall.c) and the Ctrl-C policy (sigint.c).
 */
#ifndef LUTRA_CLI_H
#define LUTRA_CLI_H

#include <lua.h>

#define CLI_PROGNAME "lutra"

/* What SIGINT does right now (sigint.c). */
enum cli_int_mode {
  CLI_INT_SCRIPT, /* a script, -e or -l runs: 1st Ctrl-C lutra_interrupt(), 2nd raises "interrupted!" */
  CLI_INT_REPL,   /* a REPL chunk runs: see sigint.c for the escalation */
  CLI_INT_PROMPT  /* the REPL waits for input: Ctrl-C cancels the line being edited */
};

/* Installs the SIGINT handler; L is the main state (the hook is set on it). */
void cli_int_init(lua_State *L);
/* Enters `mode` (CLI_INT_SCRIPT or CLI_INT_REPL) before running a chunk: resets the Ctrl-C count. */
void cli_int_begin(enum cli_int_mode mode);
/* Before lua_close: later Ctrl-Cs no longer touch the state (the first is ignored, the second restores the
 * default action). */
void cli_int_end(void);
/* Back to the prompt after a REPL chunk: removes the "interrupted!" hook if it was armed. */
void cli_int_prompt(void);
/* Returns 1 (and clears the flag) when Ctrl-C was pressed at the prompt. Async-signal-safe to poll. */
int cli_int_take_prompt(void);

/* Protected calls (docall.c). */
/* Error handler for lua_pcall: turns the error object into "message\nstack traceback:...". */
int cli_traceback(lua_State *L);
/* Runs the function at the top of the stack (below it nothing of ours) with nargs arguments above it,
 * through cli_traceback; leaves the results (LUA_MULTRET) or the error message. Returns the status. */
int cli_docall(lua_State *L, int nargs, int nresults);
/* Prints the error message at the top of the stack to stderr, with `prefix` ("lutra: " or ""), and pops it. */
void cli_report(lua_State *L, const char *prefix);

/* The REPL (repl.c): returns the exit status for main. */
int cli_repl(lua_State *L);

#endif
