/*
 * main.c — the `lutra` binary: LuaJIT with lutra preloaded.
 *
 *   lutra SCRIPT.lua [args...]      runs a script; `arg` and `...` exactly as `luajit` sets them
 *   lutra -e CODE [-e CODE...]      runs code (in order, with -l in the order given)
 *   lutra -i [SCRIPT]               runs the script, then opens the REPL
 *   lutra                           the REPL when stdin is a terminal, else runs stdin as a script
 *   lutra --version                 lutra <version> (LuaJIT ...)
 *   lutra plot METRICS.csv|METRICS.jsonl ... [--metrics a,b] [--x step|epoch] [--smooth K] [-o out.svg|out.png]
 *                                   learning curves of one or several runs (lua/lutra/plot/init.lua)
 *   lutra fit|validate|test|predict CONFIG.lua [--trainer.K V] ...   the config CLI (lua/lutra/cli/init.lua)
 *
 * `require "lutra"` works everywhere (lutra_preload); `lt` is a global only in the REPL.
 * An error prints "lutra: <message>" and one traceback to stderr and exits with status 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include <luajit.h>

#include "lutra.h"
#include "cli.h"

#define CLI_FLAG_INTERACTIVE 1
#define CLI_FLAG_VERSION 2
#define CLI_FLAG_EXEC 4
#define CLI_FLAG_NOENV 8

static void cli_usage(FILE *f)
{
  fputs("usage: lutra [options] [script [args...]]\n"
        "       lutra plot METRICS.csv|METRICS.jsonl ... [--metrics a,b] [--x step|epoch] [--smooth K]\n"
        "                  [-o out.svg|out.png]\n"
        "       lutra fit|validate|test|predict CONFIG.lua [--trainer.KEY VALUE] [--help]\n"
        "Options:\n"
        "  -e chunk   run the string 'chunk' (may repeat)\n"
        "  -l name    require library 'name'\n"
        "  -i         open the REPL after running the script\n"
        "  -j cmd     LuaJIT control command (-joff, -jon, -jflush, -jv, -jdump ...)\n"
        "  -O[opt]    LuaJIT optimization level or flags\n"
        "  -E         ignore the environment variables LUA_INIT, LUA_PATH and LUA_CPATH\n"
        "  -v, --version  print the version\n"
        "  -h, --help     print this help\n"
        "  --         stop handling options\n"
        "  -          run stdin and stop handling options\n",
        f);
}

static void cli_print_version(void)
{
  printf("lutra %s (%s)\n", LUTRA_VERSION, LUAJIT_VERSION);
  fflush(stdout);
}

static int cli_status(lua_State *L, int status)
{
  if (status != 0) cli_report(L, CLI_PROGNAME ": ");
  return status;
}

static int cli_dostring(lua_State *L, const char *s, const char *name)
{
  int status = luaL_loadbuffer(L, s, strlen(s), name);
  if (status == 0) {
    cli_int_begin(CLI_INT_SCRIPT);
    status = cli_docall(L, 0, 0);
  }
  return cli_status(L, status);
}

static int cli_dolibrary(lua_State *L, const char *name)
{
  lua_getglobal(L, "require");
  lua_pushstring(L, name);
  cli_int_begin(CLI_INT_SCRIPT);
  if (cli_status(L, cli_docall(L, 1, 1)) != 0) return 1;
  lua_pop(L, 1); /* like luajit: the module is not made a global */
  return 0;
}

/* -j / -O: handled in Lua, as luajit.c does: jit.<cmd>(args) or require("jit.<cmd>").start(args). */
static int cli_jitcmd(lua_State *L, const char *cmd, int is_opt)
{
  static const char code[] = "local cmd, is_opt = ...\n"
                             "local name, rest = cmd:match('^([^=]*)=?(.*)$')\n"
                             "local args = {}\n"
                             "for a in (is_opt and cmd or rest):gmatch('[^,]+') do args[#args + 1] = a end\n"
                             "local f\n"
                             "if is_opt then f = jit.opt.start\n"
                             "elseif type(jit[name]) == 'function' then f = jit[name]\n"
                             "else f = require('jit.' .. name).start end\n"
                             "f(unpack(args))\n";
  int status = luaL_loadbuffer(L, code, sizeof code - 1, "=(command line)");
  if (status == 0) {
    lua_pushstring(L, cmd);
    lua_pushboolean(L, is_opt);
    cli_int_begin(CLI_INT_SCRIPT);
    status = cli_docall(L, 2, 0);
  }
  return cli_status(L, status);
}

/* Collects the options; returns the index of the script (argc when none), or -1 for bad usage. */
static int cli_collectargs(char **argv, int argc, int *flags)
{
  int i;
  for (i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-') return i; /* the script */
    if (strcmp(a, "--version") == 0) {
      *flags |= CLI_FLAG_VERSION;
      continue;
    }
    if (strcmp(a, "--help") == 0) return -2;
    switch (a[1]) {
      case '-':
        if (a[2] != '\0') return -1;
        return i + 1 < argc ? i + 1 : argc;
      case '\0': return i; /* "-": stdin */
      case 'i':
        if (a[2] != '\0') return -1;
        *flags |= CLI_FLAG_INTERACTIVE | CLI_FLAG_VERSION;
        break;
      case 'v':
        if (a[2] != '\0') return -1;
        *flags |= CLI_FLAG_VERSION;
        break;
      case 'E':
        if (a[2] != '\0') return -1;
        *flags |= CLI_FLAG_NOENV;
        break;
      case 'h': return -2;
      case 'O': break;
      case 'e':
        *flags |= CLI_FLAG_EXEC;
        /* fall through */
      case 'j':
      case 'l':
        if (a[2] == '\0') {
          if (++i >= argc) return -1;
        }
        break;
      default: return -1;
    }
  }
  return argc;
}

/* Runs -e, -l, -j, -O in order. */
static int cli_runargs(lua_State *L, char **argv, int argn)
{
  int i;
  for (i = 1; i < argn; i++) {
    const char *a = argv[i];
    if (a[0] != '-') continue;
    switch (a[1]) {
      case 'e': {
        const char *chunk = a[2] ? a + 2 : argv[++i];
        if (cli_dostring(L, chunk, "=(command line)") != 0) return 1;
        break;
      }
      case 'l': {
        const char *name = a[2] ? a + 2 : argv[++i];
        if (cli_dolibrary(L, name) != 0) return 1;
        break;
      }
      case 'j': {
        const char *cmd = a[2] ? a + 2 : argv[++i];
        if (cli_jitcmd(L, cmd, 0) != 0) return 1;
        break;
      }
      case 'O':
        if (cli_jitcmd(L, a + 2, 1) != 0) return 1;
        break;
      default: break;
    }
  }
  return 0;
}

/* arg[0] = script, arg[1..] = its arguments, negative indices = the interpreter and its options. */
static void cli_argtable(lua_State *L, char **argv, int argc, int argf)
{
  int i;
  lua_createtable(L, argc - argf, argf);
  for (i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - argf);
  }
  lua_setglobal(L, "arg");
}

static int cli_luainit(lua_State *L)
{
  const char *init = getenv("LUA_INIT");
  if (init == NULL) return 0;
  if (init[0] == '@') {
    int status = luaL_loadfile(L, init + 1);
    if (status == 0) {
      cli_int_begin(CLI_INT_SCRIPT);
      status = cli_docall(L, 0, 0);
    }
    return cli_status(L, status);
  }
  return cli_dostring(L, init, "=LUA_INIT");
}

static int cli_script(lua_State *L, char **argv, int argc, int argn)
{
  const char *fname = argv[argn];
  int status, i, nargs;
  if (strcmp(fname, "-") == 0 && strcmp(argv[argn - 1], "--") != 0) fname = NULL; /* stdin */
  status = luaL_loadfile(L, fname);
  if (status != 0) return cli_status(L, status);
  nargs = argc - argn - 1;
  luaL_checkstack(L, nargs + 3, "too many arguments to script");
  for (i = argn + 1; i < argc; i++) lua_pushstring(L, argv[i]);
  cli_int_begin(CLI_INT_SCRIPT);
  return cli_status(L, cli_docall(L, nargs, 0));
}

static int cli_stdin_script(lua_State *L)
{
  int status = luaL_loadfile(L, NULL);
  if (status == 0) {
    cli_int_begin(CLI_INT_SCRIPT);
    status = cli_docall(L, 0, 0);
  }
  return cli_status(L, status);
}

/* A subcommand: require(module).main([command, ]args) returns the exit status. `lutra plot FILES... [options]`
 * (lutra.plot: main(args), which reads its options); `lutra fit|validate|test|predict CONFIG.lua ...` (lutra.cli:
 * main(command, args)). */
static int cli_subcommand(lua_State *L, const char *module, int with_command, char **argv, int argc)
{
  int i, status, code = 1;
  lua_getglobal(L, "require");
  lua_pushstring(L, module);
  cli_int_begin(CLI_INT_SCRIPT);
  if (cli_status(L, cli_docall(L, 1, 1)) != 0) return 1;
  lua_getfield(L, -1, "main");
  lua_remove(L, -2);
  if (with_command) lua_pushstring(L, argv[1]);
  lua_createtable(L, argc, 0);
  for (i = 2; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - 1);
  }
  status = cli_docall(L, with_command ? 2 : 1, 1);
  if (cli_status(L, status) != 0) return 1;
  if (lua_isnumber(L, -1)) code = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  return code;
}

/* the config CLI's commands (lua/lutra/cli/init.lua) */
static int cli_is_config_command(const char *a)
{
  return strcmp(a, "fit") == 0 || strcmp(a, "validate") == 0 || strcmp(a, "test") == 0 || strcmp(a, "predict") == 0;
}

struct cli_main {
  int argc;
  char **argv;
  int status;
};

static int cli_pmain(lua_State *L)
{
  struct cli_main *s = (struct cli_main *)lua_touserdata(L, 1);
  char **argv = s->argv;
  int argc = s->argc;
  int flags = 0, argn;

  lua_settop(L, 0);
  if (argc >= 2 && (strcmp(argv[1], "plot") == 0 || cli_is_config_command(argv[1]))) {
    int plot = strcmp(argv[1], "plot") == 0;
    lua_gc(L, LUA_GCSTOP, 0);
    luaL_openlibs(L);
    lutra_preload(L);
    lua_gc(L, LUA_GCRESTART, -1);
    s->status = cli_subcommand(L, plot ? "lutra.plot" : "lutra.cli", !plot, argv, argc);
    return 0;
  }

  argn = cli_collectargs(argv, argc, &flags);
  if (argn == -2) {
    cli_usage(stdout);
    s->status = 0;
    return 0;
  }
  if (argn < 0) {
    cli_usage(stderr);
    s->status = 1;
    return 0;
  }
  if (flags & CLI_FLAG_NOENV) {
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
  }
  lua_gc(L, LUA_GCSTOP, 0);
  luaL_openlibs(L);
  lutra_preload(L);
  lua_gc(L, LUA_GCRESTART, -1);
  cli_argtable(L, argv, argc, argn);

  if (!(flags & CLI_FLAG_NOENV) && cli_luainit(L) != 0) {
    s->status = 1;
    return 0;
  }
  if ((flags & CLI_FLAG_VERSION) && !(flags & CLI_FLAG_INTERACTIVE)) cli_print_version();
  if (cli_runargs(L, argv, argn) != 0) {
    s->status = 1;
    return 0;
  }
  if (argn < argc && cli_script(L, argv, argc, argn) != 0) {
    s->status = 1;
    return 0;
  }

  if (flags & CLI_FLAG_INTERACTIVE) {
    s->status = cli_repl(L);
  } else if (argn == argc && !(flags & (CLI_FLAG_EXEC | CLI_FLAG_VERSION))) {
    if (isatty(STDIN_FILENO)) s->status = cli_repl(L);
    else s->status = cli_stdin_script(L) != 0;
  }
  return 0;
}

int main(int argc, char **argv)
{
  struct cli_main s;
  lua_State *L = luaL_newstate();
  int status;
  if (L == NULL) {
    fputs(CLI_PROGNAME ": cannot create the Lua state: not enough memory\n", stderr);
    return EXIT_FAILURE;
  }
  cli_int_init(L);
  lutra_set_interactive(1); /* the binary keeps the terminal defaults (progress bar, model summary) */
  s.argc = argc;
  s.argv = argv;
  s.status = 0;
  status = lua_cpcall(L, cli_pmain, &s);
  if (status != 0) cli_report(L, CLI_PROGNAME ": ");
  cli_int_end();
  lua_close(L);
  return (status != 0 || s.status != 0) ? EXIT_FAILURE : EXIT_SUCCESS;
}
