// <immintrin.h> for the x86 ISA files. GCC 12's AVX-512 intrinsics build their "undefined"
// pass-through operands from self-initialized variables, which -Wuninitialized reports at every
// use (a false positive); the warning is silenced for this header only.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#pragma GCC diagnostic pop
