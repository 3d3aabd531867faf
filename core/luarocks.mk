# core/luarocks.mk — the make backend of lutra-dev-1.rockspec: `luarocks make` builds with ./lutra and installs
# the Lua module into the tree luarocks names (LUADIR for lua/lutra/, LIBDIR for lutra/core.so and mpi.so).
# Which Lua: luarocks passes its interpreter as LUA. lua5.3/lua5.4 get the PUC build of that version
# (LUTRA_LUA=5.4 ./lutra, into build-lua5.4/); the default tree (Lua 5.1's directories) gets LuaJIT's build.
LUTRA_LUA := $(if $(findstring lua5.4,$(LUA)),5.4,$(if $(findstring lua5.3,$(LUA)),5.3,luajit))
BUILD := $(if $(filter luajit,$(LUTRA_LUA)),build,build-lua$(LUTRA_LUA))
OUT = $${LUTRA_BUILD_DIR:-$(BUILD)}/bin/release/lutra

all:
	LUTRA_LUA=$(LUTRA_LUA) ./lutra --build-only

install:
	mkdir -p "$(LUADIR)/lutra" "$(LIBDIR)/lutra"
	cp -R lua/lutra/. "$(LUADIR)/lutra/"
	cp "$(OUT)/core.so" "$(LIBDIR)/lutra/core.so"
	if [ -f "$(OUT)/mpi.so" ]; then cp "$(OUT)/mpi.so" "$(LIBDIR)/lutra/mpi.so"; fi
