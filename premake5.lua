-- lutra build description.
-- Written in premake5 syntax; also runs under Debian's premake4 (`premake4 --file=premake5.lua gmake`)
-- through the small shim below, which maps the premake5 calls we use onto premake4's.

local is_premake4 = (_PREMAKE_VERSION or ""):match("^4") ~= nil
if is_premake4 then
  workspace = solution
  function filter(f)
    if type(f) == "table" then f = f[1] end
    local cfg = f and f:match("^configurations:(.+)$")
    configuration(cfg or f or {})
  end
  function symbols(v) if v == "On" then flags { "Symbols" } end end
  function optimize(v) if v == "Speed" or v == "Full" or v == "On" then flags { "OptimizeSpeed" } end end
  function warnings(v) if v == "Extra" then buildoptions { "-Wall", "-Wextra" } end end
  function cdialect(v) buildoptions { "-std=" .. v:lower() } end
else
  premake.override = premake.override
end

-- Which Lua the module is built for: LuaJIT (default; the `lutra` binary, the REPL, the C tests and
-- examples need it) or a PUC Lua (5.1, 5.3, 5.4), for which only liblutra.a and lutra/core.so are built,
-- into build-lua<V>/ so the LuaJIT build is untouched. `./lutra` passes LUTRA_LUA=5.4 as --lua=5.4.
newoption {
  trigger = "lua", value = "VERSION", description = "Lua to build the module for: luajit (default), 5.1, 5.3, 5.4",
  allowed = { { "luajit", "LuaJIT 2.1" }, { "5.1", "Lua 5.1" }, { "5.3", "Lua 5.3" }, { "5.4", "Lua 5.4" } },
}
local LUA = _OPTIONS["lua"] or "luajit"
local IS_LUAJIT = LUA == "luajit"
local LUA_INC = IS_LUAJIT and "/usr/include/luajit-2.1" or ("/usr/include/lua" .. LUA)
assert(os.isfile(LUA_INC .. "/lua.h"), "--lua=" .. LUA .. ": no " .. LUA_INC .. "/lua.h (apt-get install " ..
       (IS_LUAJIT and "libluajit-5.1-dev" or LUA == "5.1" and "liblua5.1-0-dev" or "liblua" .. LUA .. "-dev") .. ")")
-- One build tree per checkout by default; LUTRA_BUILD_DIR (a folder name at the top level) lets
-- several builds live side by side (e.g. one per engineer working in the same tree).
local BUILD = os.getenv("LUTRA_BUILD_DIR") or (IS_LUAJIT and "build" or "build-lua" .. LUA)
assert(not BUILD:find("/"), "LUTRA_BUILD_DIR must be a folder name at the repository's top level")

-- MPI (lt.distributed, Trainer{strategy="ddp"}) is optional and lives in its own module, lutra/mpi.so, built
-- when Debian's OpenMPI headers are installed (apt-get install openmpi-bin libopenmpi-dev), unless
-- LUTRA_NO_MPI=1; lutra loads it with dlopen on first use (core/src/lt_mpi.h). Nothing else links libmpi, so
-- loading lutra never loads MPI; without the module the distributed entry points raise an error saying what
-- to install.
local MPI_INC
if os.getenv("LUTRA_NO_MPI") ~= "1" then
  for _, dir in ipairs { "/usr/lib/x86_64-linux-gnu/openmpi/include", "/usr/lib/aarch64-linux-gnu/openmpi/include",
                         "/usr/include/x86_64-linux-gnu/mpi", "/usr/include/openmpi" } do
    if os.isfile(dir .. "/mpi.h") then MPI_INC = dir; break end
  end
end

-- targetdir BUILD/bin/<config>/<sub> for each configuration (the layout ./lutra and the tests expect)
local function targetdirs(sub)
  for _, cfg in ipairs { "release", "debug", "asan", "tsan" } do
    filter("configurations:" .. cfg)
      targetdir(BUILD .. "/bin/" .. cfg .. "/" .. sub)
  end
  filter {}
end

workspace "lutra"
  configurations { "release", "debug", "asan", "tsan" }
  location(BUILD)
  language "C"
  cdialect "C11"
  warnings "Extra"
  includedirs { "core/include", "core/src", "core/bind", LUA_INC, BUILD .. "/gen" }
  buildoptions { "-fPIC", "-pthread", "-D_GNU_SOURCE" }
  linkoptions { "-pthread" }
  objdir(BUILD .. "/obj")
  if not IS_LUAJIT then defines { "LUTRA_LUA_PUC" } end

  filter "configurations:release"
    optimize "Speed"
    buildoptions { "-O3", "-fno-math-errno", "-fno-trapping-math" }
    defines { "NDEBUG" }
    targetdir(BUILD .. "/bin/release")
  filter "configurations:debug"
    symbols "On"
    buildoptions { "-O0" }
    targetdir(BUILD .. "/bin/debug")
  filter "configurations:asan"
    symbols "On"
    -- float-cast-overflow is not part of GCC's "undefined" group: without it a NaN, inf or out-of-range
    -- double cast to an integer (a size, an index, an int64 value) goes unreported. float-divide-by-zero
    -- stays off: inf/NaN from x/0 are legitimate tensor values.
    buildoptions { "-O1", "-fsanitize=address,undefined,float-cast-overflow", "-fno-omit-frame-pointer",
                   "-fno-sanitize-recover=undefined,float-cast-overflow" }
    linkoptions { "-fsanitize=address,undefined,float-cast-overflow" }
    targetdir(BUILD .. "/bin/asan")
  filter "configurations:tsan"
    -- ThreadSanitizer, for what crosses threads: lutra's pool, lt.thread / lt.background states, DataLoader
    -- workers, tensors shared by refcount (tests/run --config tsan runs those tests: .ci/run)
    symbols "On"
    buildoptions { "-O1", "-fsanitize=thread", "-fno-omit-frame-pointer" }
    linkoptions { "-fsanitize=thread" }
    targetdir(BUILD .. "/bin/tsan")
  filter {}

-- Everything of the core and the Lua binding, for C hosts (and for the binary and the module).
project "lutra_static"
  kind "StaticLib"
  targetname "lutra"
  files { "core/src/*.c", "core/bind/*.c", BUILD .. "/gen/lutra_lua.c",
          BUILD .. "/gen/tb_event.pb-c.c", -- [tools: loggers] protoc-c's output of core/src/tb_event.proto
          BUILD .. "/gen/tb_hparams.pb-c.c" } -- and of core/src/tb_hparams.proto (./lutra)
  excludes { "core/bind/module_so.c" }
  prebuildcommands { "luajit ../core/bind/embed_lua.lua ../lua gen/lutra_lua.c" }

-- The same as a shared library, liblutra.so, for C hosts that link it dynamically (`./lutra install`, lutra.pc):
-- linked from the whole of liblutra.a, whose objects are position-independent (-fPIC above), rather than
-- compiled a second time: a first build compiles each source once.
project "lutra_shared"
  kind "SharedLib"
  targetname "lutra"
  links { "lutra_static" } -- the build order, and a relink when liblutra.a changes
  for _, cfg in ipairs { "release", "debug", "asan", "tsan" } do
    filter("configurations:" .. cfg)
      linkoptions { "-Wl,--whole-archive", "bin/" .. cfg .. "/liblutra.a", "-Wl,--no-whole-archive" }
  end
  filter {}
  -- a PUC build leaves the Lua API to the host that links it, as core.so does
  if IS_LUAJIT then links { "luajit-5.1" } end
  links { "jansson", "z", "dl", "m" }
  links { "png" } -- lt.utils.save_image (core/src/image_png.c)
  links { "jpeg" } -- lt.vision.io.read_image (core/src/vision_decode.c)
  links { "protobuf-c" } -- [tools: loggers] TensorBoardLogger (core/src/tb_writer.c)
  linkoptions { "-Wl,-soname,liblutra.so" }
  -- its own folder: beside liblutra.a, `links { "lutra_static" }` (-llutra) would pick the .so instead
  targetdirs("shared")

-- The Lua module for plain `luajit` (or lua5.x): lutra/core.so on package.cpath; Lua files come from
-- package.path. It does not link the Lua library: the interpreter that loads it provides the Lua API.
project "lutra_core"
  kind "SharedLib"
  targetname "core"
  targetprefix ""
  files { "core/bind/module_so.c" }
  links { "lutra_static", "jansson", "z", "dl", "m" }
  links { "png" } -- lt.utils.save_image (core/src/image_png.c)
  links { "jpeg" } -- lt.vision.io.read_image (core/src/vision_decode.c)
  links { "protobuf-c" } -- [tools: loggers] TensorBoardLogger (core/src/tb_writer.c)
  targetdirs("lutra")

-- lutra/mpi.so: every MPI call, loaded by core/src/dist.c on first use (only where MPI's headers exist).
if MPI_INC then
  project "lutra_mpi"
    kind "SharedLib"
    targetname "mpi"
    targetprefix ""
    files { "core/mpi/*.c" }
    includedirs { MPI_INC }
    links { "mpi" }
    targetdirs("lutra")
end

-- Everything below embeds LuaJIT: built for the LuaJIT build only.
if IS_LUAJIT then

-- The `lutra` binary: embeds LuaJIT, runs scripts, opens the REPL.
project "lutra"
  kind "ConsoleApp"
  files { "core/cli/*.c" }
  links { "lutra_static", "luajit-5.1", "edit", "jansson", "z", "dl", "m" }
  links { "png" } -- lt.utils.save_image (core/src/image_png.c)
  links { "jpeg" } -- lt.vision.io.read_image (core/src/vision_decode.c)
  links { "protobuf-c" } -- [tools: loggers] TensorBoardLogger (core/src/tb_writer.c)
  linkoptions { "-Wl,-E" }
  -- bin/<config>/lutra/ holds the Lua module (lutra/core.so), so the binary lives in bin/<config>/cli/
  targetdirs("cli")

-- C test programs: one executable per tests/c/test_*.c, linked with the static library.
for _, path in ipairs(os.matchfiles("tests/c/test_*.c")) do
  local name = path:match("([^/]+)%.c$")
  project(name)
    kind "ConsoleApp"
    files { path }
    links { "lutra_static", "luajit-5.1", "jansson", "z", "dl", "m" }
    links { "png" } -- lt.utils.save_image (core/src/image_png.c)
    links { "jpeg" } -- lt.vision.io.read_image (core/src/vision_decode.c)
    links { "protobuf-c" } -- [tools: loggers] TensorBoardLogger (core/src/tb_writer.c)
      linkoptions { "-Wl,-E" }
end

-- Benchmarks in C (bench/bench_*.c), not tests: run by bench/run.
for _, path in ipairs(os.matchfiles("bench/bench_*.c")) do
  local name = path:match("([^/]+)%.c$")
  project(name)
    kind "ConsoleApp"
    files { path }
    links { "lutra_static", "luajit-5.1", "jansson", "z", "dl", "m" }
    links { "png" } -- lt.utils.save_image (core/src/image_png.c)
    links { "jpeg" } -- lt.vision.io.read_image (core/src/vision_decode.c)
    links { "protobuf-c" } -- [tools: loggers] TensorBoardLogger (core/src/tb_writer.c)
  end

-- examples/embed: a game-like C host that embeds LuaJIT and lutra (docs/guide-embedding.md). Run from the repository root:
-- build/bin/release/embed_host (it loads examples/embed/world.lua).
project "embed_host"
  kind "ConsoleApp"
  files { "examples/embed/*.c" }
  links { "lutra_static", "luajit-5.1", "jansson", "z", "dl", "m" }
  links { "png" } -- lt.utils.save_image (core/src/image_png.c)
  links { "jpeg" } -- lt.vision.io.read_image (core/src/vision_decode.c)
  links { "protobuf-c" } -- [tools: loggers] TensorBoardLogger (core/src/tb_writer.c)
  linkoptions { "-Wl,-E" }

end -- IS_LUAJIT
