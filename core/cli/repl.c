/*
 * repl.c — the interactive prompt of the `lutra` binary.
 *
 * - Line editing with libedit's readline-compatible API (BSD licence); history in $HOME/.lutra_history,
 *   capped at 1000 lines, saved after every line (failures are ignored).
 * - Prompt "> ", continuation ">> " while the chunk is incomplete (loadstring's "<eof>" error, as lua.c).
 * - Expressions print their values: `return <chunk>` is tried first; all values go through `tostring`,
 *   separated by tabs. A trailing `;` runs the chunk but prints nothing. Results are not kept: once
 *   printed they are garbage (there is no `_` and no history of results).
 * - Tab completes globals, keywords, and `a.b.c` / `a:b` fields and methods, through metatables
 *   (require "lutra.cli.repl_complete").
 * - Errors print the message and a traceback; the session goes on.
 * - Ctrl-C at the prompt drops the line being edited and the continuation buffer; while a chunk runs,
 *   see sigint.c. The chunk's own code runs with the JIT off so that `while true do end` typed at the
 *   prompt can be interrupted; functions it defines are compiled as usual.
 * - `lt` is a global here (and only here): `lt = require "lutra"`, loaded on first use, and only if the
 *   require succeeds; so is `help` (lua/lutra/help.lua): `help` shows the topics, `help(x)` an entry.
 * When stdin is not a terminal (`lutra -i < file`), lines are read with fgets and no editing.
 */
#include <errno.h>
#include <locale.h>
#include <langinfo.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <editline/readline.h>

#include <lua.h>
#include <lauxlib.h>
#include <luajit.h>

#include "lutra.h"
#include "cli.h"

#define REPL_PROMPT "> "
#define REPL_PROMPT2 ">> "
#define REPL_HISTORY_FILE ".lutra_history"
#define REPL_HISTORY_MAX 1000
#define REPL_MAX_MATCHES 4096

enum { REPL_LINE, REPL_EOF, REPL_CANCEL };
enum { REPL_COMPLETE, REPL_INCOMPLETE, REPL_SYNTAX };

static lua_State *repl_L;
static int repl_tty;           /* stdin is a terminal: libedit is in use */
static int repl_utf8;          /* the locale's codeset is UTF-8: repl_getc decodes it */
static int repl_cancelled;     /* repl_getc saw Ctrl-C */
static sigset_t repl_waitmask; /* the signal mask while repl_getc waits (SIGINT unblocked) */
static char *repl_histpath;
static char repl_breaks[] = " \t\n\"\\'`@$><=;|&{}()[],+-*/%^~#";

/* ---- input ---------------------------------------------------------------------------------- */

static int repl_readbyte(int fd)
{
  unsigned char c;
  for (;;) {
    ssize_t n = read(fd, &c, 1);
    if (n == 1) return c;
    if (n == 0) return -1;
    if (errno != EINTR && errno != EAGAIN) return -1;
  }
}

/* libedit's rl_getc_function: waits with SIGINT unblocked (ppoll, no race with the flag), turns
 * Ctrl-C into an accepted line that repl_readline then drops, decodes UTF-8 into one code point. */
static int repl_getc(FILE *f)
{
  int fd = f != NULL ? fileno(f) : STDIN_FILENO;
  for (;;) {
    struct pollfd p;
    int r, c, extra, cp;
    if (cli_int_take_prompt()) {
      ssize_t w = write(STDOUT_FILENO, "^C", 2);
      (void)w;
      repl_cancelled = 1;
      return '\n';
    }
    p.fd = fd;
    p.events = POLLIN;
    p.revents = 0;
    r = ppoll(&p, 1, NULL, &repl_waitmask);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    c = repl_readbyte(fd);
    if (c < 0x80 || !repl_utf8) return c;
    if (c >= 0xf0 && c < 0xf8) {
      extra = 3;
      cp = c & 0x07;
    } else if (c >= 0xe0) {
      extra = 2;
      cp = c & 0x0f;
    } else if (c >= 0xc0) {
      extra = 1;
      cp = c & 0x1f;
    } else return c; /* a stray continuation byte */
    while (extra-- > 0) {
      int d = repl_readbyte(fd);
      if (d < 0) return -1;
      if ((d & 0xc0) != 0x80) return d; /* malformed: keep what follows */
      cp = (cp << 6) | (d & 0x3f);
    }
    return cp;
  }
}

/* Reads one line into *out (malloc'd, without the newline). */
static int repl_readline(const char *prompt, char **out)
{
  *out = NULL;
  if (repl_tty) {
    sigset_t block, old;
    char *line;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &old);
    repl_waitmask = old;
    sigdelset(&repl_waitmask, SIGINT);
    repl_cancelled = 0;
    line = readline(prompt);
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (repl_cancelled) {
      free(line);
      return REPL_CANCEL;
    }
    if (line == NULL) return REPL_EOF;
    *out = line;
    return REPL_LINE;
  } else {
    size_t len = 0, cap = 256;
    char *buf = malloc(cap);
    if (buf == NULL) return REPL_EOF;
    fputs(prompt, stdout);
    fflush(stdout);
    for (;;) {
      if (len + 2 > cap) {
        char *nb = realloc(buf, cap *= 2);
        if (nb == NULL) {
          free(buf);
          return REPL_EOF;
        }
        buf = nb;
      }
      if (fgets(buf + len, (int)(cap - len), stdin) == NULL) {
        if (len > 0) break;
        free(buf);
        return REPL_EOF;
      }
      len += strlen(buf + len);
      if (len > 0 && buf[len - 1] == '\n') {
        buf[--len] = '\0';
        break;
      }
    }
    cli_int_take_prompt();
    *out = buf;
    return REPL_LINE;
  }
}

/* ---- history -------------------------------------------------------------------------------- */

static void repl_history_init(void)
{
  const char *home = getenv("HOME");
  size_t n;
  stifle_history(REPL_HISTORY_MAX);
  if (home == NULL || home[0] == '\0') return;
  n = strlen(home) + sizeof(REPL_HISTORY_FILE) + 2;
  repl_histpath = malloc(n);
  if (repl_histpath == NULL) return;
  snprintf(repl_histpath, n, "%s/%s", home, REPL_HISTORY_FILE);
  if (read_history(repl_histpath) != 0) { /* not libedit's format: take it as one entry per line */
    FILE *f = fopen(repl_histpath, "r");
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    if (f == NULL) return;
    while ((len = getline(&line, &cap, f)) >= 0) {
      while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
      if (len > 0) add_history(line);
    }
    free(line);
    fclose(f);
  }
}

static void repl_history_add(const char *line)
{
  const char *p = line;
  HIST_ENTRY *last;
  while (*p == ' ' || *p == '\t') p++;
  if (*p == '\0') return;
  last = history_length > 0 ? history_get(history_base + history_length - 1) : NULL;
  if (last != NULL && last->line != NULL && strcmp(last->line, line) == 0) return;
  add_history(line);
  if (repl_histpath != NULL) write_history(repl_histpath);
}

/* ---- completion ----------------------------------------------------------------------------- */

static char **repl_matches;
static size_t repl_nmatches, repl_next;

static void repl_matches_free(void)
{
  size_t i;
  for (i = repl_next; i < repl_nmatches; i++) free(repl_matches[i]);
  free(repl_matches);
  repl_matches = NULL;
  repl_nmatches = repl_next = 0;
}

/* Protected: require("lutra.cli.repl_complete").complete(text) -> list of full replacements for text. */
static int repl_complete_lua(lua_State *L)
{
  const char *text = lua_tostring(L, 1);
  size_t i, n;
  lua_getglobal(L, "require");
  lua_pushliteral(L, "lutra.cli.repl_complete");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "complete");
  lua_pushstring(L, text);
  lua_call(L, 1, 1);
  if (!lua_istable(L, -1)) return 0;
  n = lua_objlen(L, -1);
  if (n > REPL_MAX_MATCHES) n = REPL_MAX_MATCHES;
  repl_matches = calloc(n + 1, sizeof *repl_matches);
  if (repl_matches == NULL) return 0;
  for (i = 0; i < n; i++) {
    const char *s;
    lua_rawgeti(L, -1, (int)i + 1);
    s = lua_tostring(L, -1);
    if (s != NULL && (repl_matches[repl_nmatches] = strdup(s)) != NULL) repl_nmatches++;
    lua_pop(L, 1);
  }
  return 0;
}

static char *repl_generator(const char *text, int state)
{
  if (state == 0) {
    lua_State *L = repl_L;
    int top = lua_gettop(L);
    repl_matches_free();
    lua_pushcfunction(L, repl_complete_lua);
    lua_pushstring(L, text);
    lua_pcall(L, 1, 0, 0); /* no completion when it fails */
    lua_settop(L, top);
  }
  if (repl_next < repl_nmatches) return repl_matches[repl_next++]; /* readline frees it */
  repl_matches_free();
  return NULL;
}

static char **repl_attempt(const char *text, int start, int end)
{
  (void)start;
  (void)end;
  rl_attempted_completion_over = 1; /* no file-name completion */
  return rl_completion_matches(text, repl_generator);
}

static void repl_edit_init(void)
{
  const char *cs;
  setlocale(LC_CTYPE, "");
  cs = nl_langinfo(CODESET);
  if (cs == NULL || strcmp(cs, "UTF-8") != 0) {
    if (setlocale(LC_CTYPE, "C.UTF-8") != NULL) cs = nl_langinfo(CODESET);
  }
  repl_utf8 = cs != NULL && strcmp(cs, "UTF-8") == 0;
  rl_readline_name = "lutra"; /* ~/.editrc: "lutra:bind ..." */
  rl_getc_function = repl_getc;
  rl_attempted_completion_function = repl_attempt;
  rl_basic_word_break_characters = repl_breaks;
  rl_completer_word_break_characters = repl_breaks;
  rl_completion_append_character = '\0';
  rl_initialize();
  repl_history_init();
}

/* ---- evaluation ----------------------------------------------------------------------------- */

/* `lt` and `help` on first use: a metatable on _G whose __index loads lutra (once) when "lt" is read, and
 * lutra.help's `help` (prints the overview when shown, an entry when called: help(lt.nn.Linear)) when "help" is. */
static const char repl_lt_code[] =
    "local lazy = {}\n"
    "if rawget(_G, 'lt') == nil then lazy.lt = true end\n"
    "if rawget(_G, 'help') == nil then lazy.help = true end\n"
    "if next(lazy) == nil then return end\n"
    "local function load(k)\n"
    "  local ok, mod = pcall(require, k == 'lt' and 'lutra' or 'lutra.help')\n"
    "  if ok then\n"
    "    local v = k == 'lt' and mod or mod.repl_help\n"
    "    rawset(_G, k, v)\n"
    "    return v\n"
    "  end\n"
    "  io.stderr:write('lutra: require \"', k == 'lt' and 'lutra' or 'lutra.help', '\" failed, so `', k,\n"
    "    '` is not defined: ', tostring(mod), '\\n')\n"
    "end\n"
    "if getmetatable(_G) ~= nil then for k in pairs(lazy) do load(k) end return end\n"
    "local mt = { __lazy = lazy }\n"
    "function mt.__index(t, k)\n"
    "  if not lazy[k] then return nil end\n"
    "  lazy[k] = nil\n"
    "  if next(lazy) == nil and getmetatable(_G) == mt then setmetatable(_G, nil) end\n"
    "  return load(k)\n"
    "end\n"
    "setmetatable(_G, mt)\n";

/* Prints its arguments with the global tostring (the original one if it was replaced by a non-function). */
static int repl_print(lua_State *L)
{
  int n = lua_gettop(L), i;
  lua_getglobal(L, "tostring");
  if (!lua_isfunction(L, -1)) {
    lua_pop(L, 1);
    lua_pushvalue(L, lua_upvalueindex(1));
  }
  for (i = 1; i <= n; i++) {
    size_t len;
    const char *s;
    lua_pushvalue(L, -1);
    lua_pushvalue(L, i);
    lua_call(L, 1, 1);
    s = lua_tolstring(L, -1, &len);
    if (s == NULL) return luaL_error(L, "'tostring' must return a string to be printed");
    if (i > 1) fputc('\t', stdout);
    fwrite(s, 1, len, stdout);
    lua_pop(L, 1);
  }
  fputc('\n', stdout);
  fflush(stdout);
  return 0;
}

static int repl_incomplete(lua_State *L)
{
  size_t len;
  const char *msg = lua_tolstring(L, -1, &len);
  static const char eof[] = "'<eof>'";
  return msg != NULL && len >= sizeof eof - 1 && strcmp(msg + len - (sizeof eof - 1), eof) == 0;
}

static size_t repl_trim(const char *src, size_t len)
{
  while (len > 0 && (src[len - 1] == ' ' || src[len - 1] == '\t' || src[len - 1] == '\n' || src[len - 1] == '\r'))
    len--;
  return len;
}

/* A trailing `;` runs the chunk without printing its values. */
static int repl_quiet(const char *src, size_t len)
{
  len = repl_trim(src, len);
  return len > 0 && src[len - 1] == ';';
}

/* Compiles the chunk: as an expression list first, then as statements. Leaves the function (or the
 * syntax error message) on the stack, nothing when incomplete. The expression form passes the values
 * through an identity function, so that a call in it is not a tail call and keeps its position
 * ("stdin:1: bad" for `error("bad")`) and its frame in the traceback. */
static int repl_load(lua_State *L, const char *src, size_t len)
{
  int status;
  size_t elen;
  if (src[0] == '=') { /* Lua 5.1's "= expr" */
    src++;
    len--;
  }
  elen = repl_trim(src, len);
  if (elen > 0 && src[elen - 1] == ';') elen--;
  lua_pushliteral(L, "return (function(...) return ... end)(");
  lua_pushlstring(L, src, elen);
  lua_pushliteral(L, "\n)");
  lua_concat(L, 3);
  status = luaL_loadbuffer(L, lua_tostring(L, -1), lua_objlen(L, -1), "=stdin");
  lua_remove(L, -2);
  if (status == 0) return REPL_COMPLETE;
  lua_pop(L, 1);
  status = luaL_loadbuffer(L, src, len, "=stdin");
  if (status == 0) return REPL_COMPLETE;
  if (status == LUA_ERRSYNTAX && repl_incomplete(L)) {
    lua_pop(L, 1);
    return REPL_INCOMPLETE;
  }
  return REPL_SYNTAX;
}

/* Runs the function at the top of the stack and prints its results unless quiet. */
static void repl_run(lua_State *L, int quiet)
{
  int base = lua_gettop(L), status;
  luaJIT_setmode(L, -1, LUAJIT_MODE_FUNC | LUAJIT_MODE_OFF); /* the chunk's own loops stay interruptible */
  cli_int_begin(CLI_INT_REPL);
  status = cli_docall(L, 0, LUA_MULTRET);
  cli_int_prompt();
  fflush(stdout);
  if (status != 0) {
    cli_report(L, "");
  } else if (!quiet && lua_gettop(L) >= base) {
    int n = lua_gettop(L) - base + 1;
    lua_getfield(L, LUA_REGISTRYINDEX, "lutra.repl.print");
    lua_insert(L, base);
    if (cli_docall(L, n, 0) != 0) cli_report(L, "");
  }
  lua_settop(L, base - 1);
}

struct repl_buf {
  char *p;
  size_t len, cap;
};

static int repl_append(struct repl_buf *b, const char *s, int newline)
{
  size_t n = strlen(s), need = b->len + n + 2;
  if (need > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    char *np;
    while (cap < need) cap *= 2;
    np = realloc(b->p, cap);
    if (np == NULL) return -1;
    b->p = np;
    b->cap = cap;
  }
  if (newline) b->p[b->len++] = '\n';
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
  return 0;
}

int cli_repl(lua_State *L)
{
  struct repl_buf buf = { NULL, 0, 0 };
  repl_L = L;
  repl_tty = isatty(STDIN_FILENO);

  lua_getglobal(L, "tostring");
  lua_pushcclosure(L, repl_print, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, "lutra.repl.print");
  if (luaL_loadbuffer(L, repl_lt_code, sizeof repl_lt_code - 1, "=(lutra repl)") != 0 || cli_docall(L, 0, 0) != 0)
    cli_report(L, CLI_PROGNAME ": ");

  if (repl_tty) repl_edit_init();
  printf("lutra %s (%s); Ctrl-D quits, Ctrl-C cancels\n", LUTRA_VERSION, LUAJIT_VERSION);
  fflush(stdout);

  for (;;) {
    char *line;
    int r, st;
    cli_int_prompt();
    cli_int_take_prompt();
    r = repl_readline(buf.len > 0 ? REPL_PROMPT2 : REPL_PROMPT, &line);
    if (r == REPL_EOF) break;
    if (r == REPL_CANCEL) {
      buf.len = 0;
      continue;
    }
    if (repl_tty) repl_history_add(line);
    if (repl_append(&buf, line, buf.len > 0) != 0) {
      free(line);
      fputs(CLI_PROGNAME ": not enough memory for the input\n", stderr);
      buf.len = 0;
      continue;
    }
    free(line);
    if (buf.len == 0) continue; /* an empty line at the prompt */
    st = repl_load(L, buf.p, buf.len);
    if (st == REPL_INCOMPLETE) continue;
    if (st == REPL_SYNTAX) cli_report(L, "");
    else repl_run(L, repl_quiet(buf.p, buf.len));
    buf.len = 0;
  }
  if (repl_tty) fputc('\n', stdout);
  fflush(stdout);
  free(buf.p);
  repl_matches_free();
  free(repl_histpath);
  repl_histpath = NULL;
  return 0;
}
