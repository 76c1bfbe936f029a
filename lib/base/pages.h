// Page-level memory helpers: giving scratch memory's pages back to the kernel while keeping the
// allocation, counting resident pages, and buffers on transparent huge pages.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
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

// A buffer (zeroed unless asked not to) for large data read in full by every decoded token (the
// weights' tiles): on Linux it starts on a 2 MiB boundary and asks for transparent huge pages
// (MADV_HUGEPAGE, honoured when THP is "madvise" or "always"), so streaming it costs a few TLB
// entries instead of one per 4 KiB page (~18% faster 2-bit products measured on a 10 MB stream).
// Elsewhere: plain memory.
class HugePageBuffer {
 public:
  HugePageBuffer() = default;
  // zeroed = false: the contents start unspecified and untouched pages stay out of the resident
  // set until written (a whole huge page at a time).
  explicit HugePageBuffer(size_t bytes, bool zeroed = true) : size_(bytes) {
    if (bytes == 0) return;
#if defined(__linux__)
    // Its own mapping (not the heap: a freed buffer goes back to the system at once, and no later
    // small allocation lands in a region marked for huge pages), aligned by trimming the excess.
    const size_t rounded = Rounded(bytes);
    void* raw =
        mmap(nullptr, rounded + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    auto* base = static_cast<uint8_t*>(raw);
    const size_t head = (kHuge - reinterpret_cast<uintptr_t>(base) % kHuge) % kHuge;
    if (head > 0) (void)munmap(base, head);
    if (kHuge - head > 0) (void)munmap(base + head + rounded, kHuge - head);
    data_ = base + head;
    // Huge pages for the whole 2 MiB regions only: a partial last region on a huge page would
    // hold up to 2 MiB that the data never uses (best effort, either way).
    if (bytes / kHuge > 0) (void)madvise(data_, bytes / kHuge * kHuge, MADV_HUGEPAGE);
    if (rounded > bytes / kHuge * kHuge)
      (void)madvise(data_ + bytes / kHuge * kHuge, rounded - bytes / kHuge * kHuge,
                    MADV_NOHUGEPAGE);
    (void)zeroed;  // a fresh anonymous mapping reads as zeros
#else
    data_ = static_cast<uint8_t*>(std::malloc(bytes));
    if (data_ == nullptr) throw std::bad_alloc();
    if (zeroed) std::fill(data_, data_ + bytes, uint8_t{0});
#endif
  }
  ~HugePageBuffer() {
#if defined(__linux__)
    if (data_ != nullptr) (void)munmap(data_, Rounded(size_));
#else
    std::free(data_);
#endif
  }
  HugePageBuffer(HugePageBuffer&& o) noexcept : data_(o.data_), size_(o.size_) {
    o.data_ = nullptr;
    o.size_ = 0;
  }
  HugePageBuffer& operator=(HugePageBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    return *this;
  }
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  static constexpr size_t kHuge = size_t{2} << 20;
  static size_t Rounded(size_t bytes) { return (bytes + kHuge - 1) / kHuge * kHuge; }

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// An allocator whose value-less construction leaves trivial elements uninitialized: a
// std::vector<T, UninitAllocator<T>> resizes without writing its new elements, so scratch whose
// every element is written before it is read keeps the pages it never uses out of the resident
// set (a large block comes straight from the kernel) instead of faulting them all in to zero them.
template <class T>
struct UninitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitAllocator<U>;
  };
  UninitAllocator() = default;
  template <class U>
  explicit UninitAllocator(const UninitAllocator<U>& /*other*/) noexcept {}
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;  // default-initialization: no write for trivial types
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

// Scratch memory: written before it is read, so never zeroed (UninitAllocator).
template <class T>
using ScratchVector = std::vector<T, UninitAllocator<T>>;

// Releases the pages of v past its first `keep` elements.
template <class T, class A>
void ReleaseTail(std::vector<T, A>& v, size_t keep) {
  if (keep < v.size()) ReleasePages(v.data() + keep, (v.size() - keep) * sizeof(T));
}

}  // namespace needle
