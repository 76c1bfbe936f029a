# Every external dependency of needle, in one place (included by the top-level CMakeLists.txt).
# All come from Debian 12 packages (scripts/setup.sh installs them); nothing is downloaded at
# build time and nothing is vendored. The minimum versions are Debian 12's (bookworm); a package's
# own version file decides what newer versions it accepts (noted per package).
#
# Runtime: the needle binary is static (NEEDLE_STATIC_BINARY); the .deb (CPack, at the end of the
# top-level CMakeLists.txt) depends on what libneedle.so links: libgomp1, libstdc++6, libgcc-s1,
# libc6. CLI11, nlohmann-json, fmt and spdlog are used as headers.
# Packaging and its tests also use dpkg-dev (dpkg-shlibdeps), file, man-db and groff-base.

# WebAssembly (emcmake, cmake/wasm.cmake): libneedle only; the header-only subset of the same
# packages (nlohmann-json, fmt and spdlog as headers, Catch2 v2 for the node-run kernel tests) is
# taken from the host's /usr/include; no CLI11, OpenMP or threads.
if(EMSCRIPTEN)
  include(${PROJECT_SOURCE_DIR}/cmake/wasm.cmake)
  needle_wasm_dependencies()
  return()
endif()

# CLI11 >= 2.1.2 (libcli11-dev, header-only): the command line of apps/needle (subcommands,
# shared option groups, --help, which also generates the man page and bash completion).
# Accepts any newer version.
find_package(CLI11 2.1.2 REQUIRED)

# nlohmann/json >= 3.11.2 (nlohmann-json3-dev, header-only): every JSON the library reads or
# writes: tools, config.json, goldens, reply envelopes, bench records, --json output.
# Accepts 3.x.
find_package(nlohmann_json 3.11.2 REQUIRED)

# {fmt} >= 9.1.0 (libfmt-dev): text formatting of tables, messages and records.
# Accepts any newer version.
find_package(fmt 9.1.0 REQUIRED)

# spdlog >= 1.10.0 (libspdlog-dev, built over the external fmt): the diagnostics on stderr
# (--log-level, NEEDLE_LOG_LEVEL; lib/report/log.h). Accepts 1.x.
find_package(spdlog 1.10.0 REQUIRED)

# fmt and spdlog are used as headers (FMT_HEADER_ONLY, spdlog's header-only mode over that fmt),
# as in the WebAssembly build: neither shared library is needed at run time, which lets the
# needle binary be linked statically (NEEDLE_STATIC_BINARY). spdlog's own header-only target
# would still link the shared libfmt, so the target is assembled here.
add_library(needle_fmt_spdlog INTERFACE)
get_target_property(needle_spdlog_include spdlog::spdlog_header_only INTERFACE_INCLUDE_DIRECTORIES)
target_include_directories(needle_fmt_spdlog SYSTEM INTERFACE ${needle_spdlog_include})
target_link_libraries(needle_fmt_spdlog INTERFACE fmt::fmt-header-only)
target_compile_definitions(needle_fmt_spdlog INTERFACE SPDLOG_FMT_EXTERNAL=1)

# OpenMP >= 4.5 (GCC 12's libgomp: libgcc-12-dev at build time, runtime libgomp1; clang builds
# use libomp-14-dev): the parallel CQ encoder of requant/synth (lib/quant/cq.cpp) and the default
# thread count (omp_get_num_procs). The decoder's own worker pool uses std::thread.
find_package(OpenMP 4.5 REQUIRED)

# POSIX threads (libc6): the decoder's worker pool (lib/kernels/parallel.h).
find_package(Threads REQUIRED)

# git (optional): the commit `needle --version` prints ("unknown" without it).
find_package(Git QUIET)

# Tests only (NEEDLE_BUILD_TESTS): Catch2 v2 >= 2.13.10 (catch2; v2 only: v3 is another API,
# and its version file accepts 2.x only) for the unit tests; python3 >= 3.11 (python3, with
# python3-numpy and python3-sentencepiece) for the docs, tokenizer-corpus and dataset tests,
# which are not registered without it. (The grammar tests run python3 with python3-jsonschema
# themselves.)
if(NEEDLE_BUILD_TESTS)
  find_package(Catch2 2.13.10 REQUIRED)
  find_package(Python3 3.11 COMPONENTS Interpreter)
endif()
