/*
 * l_docs.c — the reference pages (the .md files of docs/reference), which the build embeds beside the Lua
 * sources (core/bind/embed_lua.lua), so that lt.help (lua/lutra/help.lua) works wherever lutra is, with no
 * docs on disk:
 *   core._doc_pages() -> { ["nn.md"] = text, ... }
 */
#include "l_util.h"

typedef struct lutra_doc_page {
  const char *name, *text;
  size_t len;
} lutra_doc_page;
extern const lutra_doc_page lutra_doc_pages[];

static int l_doc_pages(lua_State *L) {
  lua_newtable(L);
  for (const lutra_doc_page *p = lutra_doc_pages; p->name; p++) {
    lua_pushlstring(L, p->text, p->len);
    lua_setfield(L, -2, p->name);
  }
  return 1;
}

void l_docs_register(lua_State *L) {
  static const luaL_Reg fns[] = { { "_doc_pages", l_doc_pages }, { NULL, NULL } };
  l_setfuncs(L, fns);
}
