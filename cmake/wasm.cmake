# The WebAssembly build of libneedle (scripts/build-wasm.sh, configured with emcmake): one module,
# needle.js + needle.wasm, that the official npm wrapper (@tyler71/cactus-needle2) loads in place of
# its own, and a node-run Catch2 driver for the kernel tests. Single-threaded (no OpenMP, no
# pthreads), WASM SIMD128 kernels (lib/kernels/*_simd128.cpp), native wasm exceptions.

# Header-only dependencies from the host's Debian packages (nlohmann-json3-dev, libfmt-dev,
# libspdlog-dev, catch2). Only these four folders are made visible, through links in the build
# tree, so no other host header can shadow the emscripten sysroot's.
macro(needle_wasm_dependencies)
  set(NEEDLE_WASM_HOST_INCLUDE "/usr/include" CACHE PATH "Where the header-only dependencies live")
  set(host_include ${CMAKE_BINARY_DIR}/host-include)
  file(MAKE_DIRECTORY ${host_include})
  foreach(dir nlohmann fmt spdlog catch2)
    if(NOT EXISTS ${NEEDLE_WASM_HOST_INCLUDE}/${dir})
      message(FATAL_ERROR "wasm build: ${NEEDLE_WASM_HOST_INCLUDE}/${dir} is missing "
        "(apt-get install nlohmann-json3-dev libfmt-dev libspdlog-dev catch2)")
    endif()
    file(CREATE_LINK ${NEEDLE_WASM_HOST_INCLUDE}/${dir} ${host_include}/${dir} SYMBOLIC)
  endforeach()
  # fmt compiled into every user (FMT_HEADER_ONLY); spdlog header-only over that fmt (Debian's
  # tweakme.h already selects the external fmt).
  add_library(needle_wasm_headers INTERFACE)
  target_include_directories(needle_wasm_headers SYSTEM INTERFACE ${host_include})
  target_compile_definitions(needle_wasm_headers INTERFACE FMT_HEADER_ONLY=1 SPDLOG_FMT_EXTERNAL=1)
  add_library(nlohmann_json::nlohmann_json ALIAS needle_wasm_headers)
  add_library(needle_fmt_spdlog ALIAS needle_wasm_headers)

  # Every object: SIMD128 and native wasm exceptions (the library reports errors by exception);
  # C++ objects also get wasm/compat.h (what this emscripten's libc++ lacks of C++20).
  add_compile_options(-msimd128 -fwasm-exceptions
    "$<$<COMPILE_LANGUAGE:CXX>:SHELL:-include ${PROJECT_SOURCE_DIR}/wasm/compat.h>")
  add_link_options(-fwasm-exceptions)
endmacro()

macro(needle_wasm_targets)
  # Debian's emscripten runs acorn (a Debian node module) with the system's node; a node from
  # elsewhere (e.g. NodeSource) does not search Debian's module folder, so links name it.
  if(EXISTS /usr/share/nodejs/acorn)
    set(CMAKE_CXX_LINKER_LAUNCHER ${CMAKE_COMMAND} -E env "NODE_PATH=/usr/share/nodejs")
  endif()
  # lib/quant's OpenMP pragmas are inert here (single thread).
  target_compile_options(needle_core PRIVATE -Wno-unknown-pragmas)

  # ---- needle.js + needle.wasm: the official four functions and the handle API ----
  set(exports _needle_load _needle_init _needle_complete _needle_reset _needle_model_open
    _needle_model_load _needle_model_free _needle_session_new _needle_session_prefix_tokens
    _needle_session_complete _needle_session_reset _needle_session_free _malloc _free)
  string(REPLACE ";" "," exports "${exports}")
  add_executable(needle_wasm ${PROJECT_SOURCE_DIR}/lib/capi/libneedle.c)
  set_target_properties(needle_wasm PROPERTIES OUTPUT_NAME needle SUFFIX ".js"
    LINKER_LANGUAGE CXX RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
  target_link_libraries(needle_wasm PRIVATE needle_core)
  # The wrapper's contract (src/needle.mjs): a CommonJS factory createNeedle({locateFile}) whose
  # module has cwrap, UTF8ToString, HEAPU8, _malloc/_free and _needle_load(ptr, len) taking len as
  # a plain number (no WASM_BIGINT: the i64 is split into two i32 and the high half defaults to 0).
  target_link_options(needle_wasm PRIVATE
    "SHELL:-s MODULARIZE=1" "SHELL:-s EXPORT_NAME=createNeedle"
    "SHELL:-s ALLOW_MEMORY_GROWTH=1" "SHELL:-s INITIAL_MEMORY=33554432"
    "SHELL:-s EXPORTED_FUNCTIONS=${exports}"
    "SHELL:-s EXPORTED_RUNTIME_METHODS=cwrap,ccall,UTF8ToString,stringToUTF8,lengthBytesUTF8"
    "SHELL:--pre-js ${PROJECT_SOURCE_DIR}/wasm/node-instantiate.js")
  set_property(TARGET needle_wasm APPEND PROPERTY LINK_DEPENDS
    ${PROJECT_SOURCE_DIR}/wasm/node-instantiate.js)

  # ---- the kernel tests under node: every ISA table against the scalar reference ----
  if(NEEDLE_BUILD_TESTS)
    set(test_dir ${PROJECT_SOURCE_DIR}/tests)
    add_executable(needle_kernel_tests ${test_dir}/test_main.cpp ${test_dir}/kernels_i8_test.cpp
      ${test_dir}/attention_i8_test.cpp ${test_dir}/vmath_test.cpp ${test_dir}/libm_test.cpp
      ${test_dir}/quant_test.cpp)
    set_target_properties(needle_kernel_tests PROPERTIES SUFFIX ".js")
    target_compile_options(needle_kernel_tests PRIVATE ${NEEDLE_WARNINGS})
    # No CLI in this build: the helpers that would run it are unused by these tests.
    target_compile_definitions(needle_kernel_tests PRIVATE NEEDLE_TEST_DATA="${test_dir}/data"
      NEEDLE_BINARY="" CATCH_CONFIG_NO_POSIX_SIGNALS)
    target_link_libraries(needle_kernel_tests PRIVATE needle_core)
    # NODERAWFS: the tests read tests/data straight from the host's file system.
    # node only: synchronous instantiation (no fetch() of a file path, see wasm/node-instantiate.js).
    target_link_options(needle_kernel_tests PRIVATE "SHELL:-s NODERAWFS=1"
      "SHELL:-s ALLOW_MEMORY_GROWTH=1" "SHELL:-s EXIT_RUNTIME=1"
      "SHELL:-s WASM_ASYNC_COMPILATION=0")
  endif()
endmacro()
