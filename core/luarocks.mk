# core/luarocks.mk — the make backend of lutra-dev-1.rockspec: `luarocks make` builds with ./lutra and installs
# the Lua module into the tree luarocks names (LUADIR for lua/lutra/, LIBDIR for lutra/core.so and mpi.so).
OUT = $${LUTRA_BUILD_DIR:-build}/bin/release/lutra

all:
	./lutra --build-only

install:
	mkdir -p "$(LUADIR)/lutra" "$(LIBDIR)/lutra"
	cp -R lua/lutra/. "$(LUADIR)/lutra/"
	cp "$(OUT)/core.so" "$(LIBDIR)/lutra/core.so"
	if [ -f "$(OUT)/mpi.so" ]; then cp "$(OUT)/mpi.so" "$(LIBDIR)/lutra/mpi.so"; fi
