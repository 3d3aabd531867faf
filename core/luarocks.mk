# core/luarocks.mk — the make backend of lutra-dev-1.rockspec: `luarocks make` builds with ./lutra and installs
# the Lua module into the tree luarocks names (LUADIR for lua/lutra/, LIBDIR for lutra/core.so and mpi.so).
# Which build: the one for the interpreter luarocks targets (LUA, which luarocks passes; `LUA=/usr/bin/luajit`
# on its command line picks LuaJIT), asked what it is rather than guessed from its name, since LuaJIT and
# PUC Lua 5.1 share Lua 5.1's tree: LuaJIT gets LuaJIT's build (build/), PUC Lua 5.1, 5.3 and 5.4 the PUC build
# of that version (LUTRA_LUA=5.4 ./lutra, into build-lua5.4/). A module built for one does not load into the
# other, so any other Lua (5.2) is refused with what to run instead.
LUA_IS := $(shell $(LUA) -e 'io.write(jit and "luajit" or _VERSION:sub(5))' 2>/dev/null)
LUTRA_LUA := $(filter luajit 5.1 5.3 5.4,$(LUA_IS))
BUILD := $(if $(filter luajit,$(LUTRA_LUA)),build,build-lua$(LUTRA_LUA))
OUT = $${LUTRA_BUILD_DIR:-$(BUILD)}/bin/release/lutra
REFUSAL = lutra: luarocks targets $(LUA) ($(if $(LUA_IS),Lua $(LUA_IS),which does not run)); lutra builds for \
LuaJIT and PUC Lua 5.1, 5.3 and 5.4: run luarocks --lua-version=5.4 make (or 5.3, 5.1), or for LuaJIT \
luarocks --lua-version=5.1 make LUA=/usr/bin/luajit LUA_INCDIR=/usr/include/luajit-2.1

all:
ifeq ($(LUTRA_LUA),)
	@echo "$(REFUSAL)" >&2; exit 1
endif
	LUTRA_LUA=$(LUTRA_LUA) ./lutra --build-only

install:
ifeq ($(LUTRA_LUA),)
	@echo "$(REFUSAL)" >&2; exit 1
endif
	# lua/lutra afresh: a file of an older layout left beside its successor (lutra/trainer.lua beside
	# lutra/trainer/init.lua) would be found first by package.path's ?.lua
	rm -rf "$(LUADIR)/lutra"
	mkdir -p "$(LUADIR)/lutra" "$(LIBDIR)/lutra"
	cp -R lua/lutra/. "$(LUADIR)/lutra/"
	cp "$(OUT)/core.so" "$(LIBDIR)/lutra/core.so"
	if [ -f "$(OUT)/mpi.so" ]; then cp "$(OUT)/mpi.so" "$(LIBDIR)/lutra/mpi.so"; fi
