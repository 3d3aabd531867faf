-- lutra-dev-1.rockspec — `luarocks make` (from the repository root) builds lutra and installs its Lua module,
-- the build matching the Lua luarocks targets (core/luarocks.mk asks that interpreter what it is):
--   luarocks --lua-version=5.1 make LUA=/usr/bin/luajit LUA_INCDIR=/usr/include/luajit-2.1   LuaJIT's build
--   luarocks --lua-version=5.4 make (or 5.3, 5.1)                                              PUC Lua's build
-- LuaJIT and PUC Lua 5.1 share Lua 5.1's tree (/usr/local/lib/lua/5.1, on both their default paths), so LuaJIT
-- is named with LUA= (luarocks would otherwise pick lua5.1 when installed). Lua 5.2 is refused with what to run.
-- `luarocks --tree T path` prints the paths of a tree T.
rockspec_format = "3.0"
package = "lutra"
version = "dev-1"
-- (luarocks make builds the checkout it runs in; the url is required by the format, not used)
source = { url = "git+https://example.invalid/lutra.git" }
description = {
  summary = "A deep-learning training framework with a C core for LuaJIT",
  detailed = "float32 tensors, autograd, nn modules, optimizers and Lightning-style training loops; " ..
    "embeddable in LuaJIT hosts (games, editors).",
  license = "MIT",
}
dependencies = { "lua >= 5.1, < 5.5" }
build = {
  type = "make",
  makefile = "core/luarocks.mk",
  build_target = "all",
  build_variables = { LUA = "$(LUA)" },
  install_target = "install",
  install_variables = { LUADIR = "$(LUADIR)", LIBDIR = "$(LIBDIR)", LUA = "$(LUA)" },
}
