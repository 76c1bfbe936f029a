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
  static const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* p = static_cast<char*>(begin);
  const size_t head = (page - reinterpret_cast<uintptr_t>(p) % page) % page;  // to a boundary
  if (bytes <= head) return;
  const size_t len = (bytes - head) / page * page;
  if (len > 0) (void)madvise(p + head, len, MADV_DONTNEED);
#else
  (void)begin;
  (void)bytes;
#endif
}

// Bytes of the pages overlapping [begin, begin + bytes) that are resident (mincore); 0 where
// mincore is missing.
inline size_t ResidentBytes(const void* begin, size_t bytes) {
#if defined(__linux__)
  if (bytes == 0) return 0;
  static const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* p = const_cast<char*>(static_cast<const char*>(begin));  // mincore reads only
  const size_t lead = reinterpret_cast<uintptr_t>(p) % page;
  const size_t len = (lead + bytes + page - 1) / page * page;
  std::vector<unsigned char> in(len / page);
  if (mincore(p - lead, len, in.data()) != 0) return 0;
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
