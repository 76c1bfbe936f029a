# Precompiled headers for the heavy third-party headers (compile time, not code: the objects are
# the same). A translation unit that includes CLI11, nlohmann/json or Catch2 spends 1-8 s of the
# build's CPU time parsing and instantiating them at -O3; CI builds the tree four times (GCC,
# clang ASan, the aarch64 cross build, emscripten), so each target parses them once instead.
# Off for emscripten (em++), and per file for sources with their own compile options or
# definitions (the ISA kernels' -mavx512..., version.cpp): a header precompiled with other target
# flags would be rejected (-Winvalid-pch, an error under -Werror).
option(NEEDLE_PCH "Precompile the heavy third-party headers of each target" ON)

# needle_precompile(TARGET HEADER...): HEADERs (<...> names) precompiled for TARGET's sources.
function(needle_precompile target)
  if(NOT NEEDLE_PCH OR EMSCRIPTEN)
    return()
  endif()
  target_precompile_headers(${target} PRIVATE ${ARGN})
  get_target_property(sources ${target} SOURCES)
  foreach(src IN LISTS sources)
    get_source_file_property(options ${src} COMPILE_OPTIONS)
    get_source_file_property(definitions ${src} COMPILE_DEFINITIONS)
    if(options OR definitions)
      set_source_files_properties(${src} TARGET_DIRECTORY ${target} PROPERTIES
        SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endforeach()
endfunction()
