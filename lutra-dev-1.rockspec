-- lutra-dev-1.rockspec — `luarocks make` (from the repository root) builds lutra and installs its Lua module
-- for LuaJIT (Lua 5.1's module directories): `luajit -e 'require "lutra"'` then works with no path set when
-- the tree is one LuaJIT searches (the default /usr/local; `luarocks --tree T path` prints the paths of T).
-- `luarocks --lua-version=5.4 make` (or 5.3) builds and installs the PUC Lua build of that version instead
-- (core/luarocks.mk picks it from the interpreter luarocks names).
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
