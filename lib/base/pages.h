// Giving scratch memory's pages back to the kernel while keeping the allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace needle {

// The whole pages inside [begin, begin + bytes) leave the resident set (MADV_DONTNEED): their
// contents read as zero at the next touch, which maps them again. Only for memory whose contents
// are dead; bytes outside those whole pages (the allocation's edges, the allocator's headers) are
// untouched. A no-op where madvise is missing (WebAssembly) or fails.
inline void ReleasePages(void* begin, size_t bytes) {
#if defined(__linux__)
  static const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto b = reinterpret_cast<uintptr_t>(begin);
  const uintptr_t first = (b + page - 1) / page * page, end = (b + bytes) / page * page;
  if (end > first) (void)madvise(reinterpret_cast<void*>(first), end - first, MADV_DONTNEED);
#else
  (void)begin;
  (void)bytes;
#endif
}

// Bytes of the pages overlapping [begin, begin + bytes) that are resident (mincore); 0 where
// mincore is missing.
inline size_t ResidentBytes(const void* begin, size_t bytes) {
#if defined(__linux__)
  static const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto b = reinterpret_cast<uintptr_t>(begin);
  const uintptr_t first = b / page * page, end = (b + bytes + page - 1) / page * page;
  if (bytes == 0) return 0;
  std::vector<unsigned char> in((end - first) / page);
  if (mincore(reinterpret_cast<void*>(first), end - first, in.data()) != 0) return 0;
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n * page;
#else
  (void)begin;
  (void)bytes;
  return 0;
#endif
}

// Releases the pages of v past its first `keep` elements.
template <class T>
void ReleaseTail(std::vector<T>& v, size_t keep) {
  if (keep < v.size()) ReleasePages(v.data() + keep, (v.size() - keep) * sizeof(T));
}

}  // namespace needle
