/* l_names.h — the message for a missing name with the nearest existing one (l_names.c). */
#ifndef L_NAMES_H
#define L_NAMES_H

#include "l_util.h"

/* Pushes "<ns> has no <what>'<key>' (did you mean '<nearest>'?)" choosing among the public string keys of the
 * tables at stack indices tbl and tbl2 (0: none); returns the pushed string. */
const char *l_missing_name_push(lua_State *L, const char *ns, const char *what, const char *key, int tbl, int tbl2);

#endif
