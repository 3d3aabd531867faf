/*
 * l_names.c — the error for a name that does not exist: "lt.optim has no 'Adadlta' (did you mean
 * 'Adadelta'?)". One implementation for the lt namespaces (lua/lutra/names.lua sets their __index) and the
 * tensor methods (l_tensor.c's __index): the suggestion is the nearest existing public name by edit
 * distance, when it is close enough to be a typo.
 */
#include <ctype.h>
#include <string.h>

#include "l_names.h"

#define NAME_MAX_LEN 64

/* Optimal-string-alignment distance (insert, delete, substitute, swap two neighbours), case-insensitive, so
 * that 'adam' finds 'Adam'; a case-only difference costs nothing here and is broken by the exact compare. */
static int edit_distance(const char *a, const char *b) {
  int n = (int)strlen(a), m = (int)strlen(b);
  if (n > NAME_MAX_LEN || m > NAME_MAX_LEN) return 1 << 20;
  int d[NAME_MAX_LEN + 1][NAME_MAX_LEN + 1];
  for (int i = 0; i <= n; i++) d[i][0] = i;
  for (int j = 0; j <= m; j++) d[0][j] = j;
  for (int i = 1; i <= n; i++) {
    for (int j = 1; j <= m; j++) {
      int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
      int best = d[i - 1][j - 1] + (ca != cb);
      if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) && tolower((unsigned char)a[i - 2]) == cb &&
          d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  }
  return d[n][m];
}

/* Walks the string keys of the table at idx (public names only: no leading '_'), keeping the nearest. */
static void nearest_in(lua_State *L, int idx, const char *key, char *best, int *best_d) {
  if (idx == 0 || !lua_istable(L, idx)) return;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) == LUA_TSTRING) {
      const char *k = lua_tostring(L, -2);
      if (k[0] != '_') {
        int d = edit_distance(key, k);
        /* ties go to the alphabetically first name, so the message does not depend on table order */
        if (d < *best_d || (d == *best_d && strcmp(k, best) < 0)) {
          *best_d = d;
          snprintf(best, NAME_MAX_LEN + 1, "%s", k);
        }
      }
    }
    lua_pop(L, 1);
  }
}

const char *l_missing_name_push(lua_State *L, const char *ns, const char *what, const char *key, int tbl, int tbl2) {
  /* relative indices to absolute ones (pseudo-indices such as upvalues stay): the walk pushes */
  if (tbl < 0 && tbl > LUA_REGISTRYINDEX) tbl = lua_gettop(L) + tbl + 1;
  if (tbl2 < 0 && tbl2 > LUA_REGISTRYINDEX) tbl2 = lua_gettop(L) + tbl2 + 1;
  char best[NAME_MAX_LEN + 1] = "";
  int best_d = 1 << 20;
  nearest_in(L, tbl, key, best, &best_d);
  nearest_in(L, tbl2, key, best, &best_d);
  int len = (int)strlen(key);
  int limit = len <= 3 ? 1 : len <= 8 ? 2 : 3; /* a typo, not another word */
  if (best[0] && best_d <= limit && strcmp(best, key) != 0)
    return lua_pushfstring(L, "%s has no %s'%s' (did you mean '%s'?)", ns, what, key, best);
  return lua_pushfstring(L, "%s has no %s'%s'", ns, what, key);
}

/* core._missing_name(namespace, key, names_table[, more_names]) -> the message (names.lua raises it) */
static int l_missing_name(lua_State *L) {
  const char *ns = l_checkstring(L, 1);
  const char *key = l_checkstring(L, 2);
  l_checktype(L, 3, LUA_TTABLE);
  l_missing_name_push(L, ns, "", key, 3, lua_istable(L, 4) ? 4 : 0);
  return 1;
}

void l_names_register(lua_State *L) {
  static const luaL_Reg fns[] = { { "_missing_name", l_missing_name }, { NULL, NULL } };
  l_setfuncs(L, fns);
}
