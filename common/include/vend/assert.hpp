// Assertions that state invariants (CONVENTIONS.md #5: bugs are assertions).
//
//   VEND_ASSERT(cond)        always compiled, release builds included
//                            (TigerBeetle-style): for cheap checks — a
//                            comparison of fields already in memory.
//   VEND_DEBUG_ASSERT(cond)  compiled out when NDEBUG is defined: for checks
//                            that cost a ledger read or a scan.
//
// A failing assertion is a bug, never an expected failure: it writes
// "assertion failed: <file>:<line>: <condition>" to stderr (the journal on a
// device) and aborts. Nothing is unwound; crash recovery runs at the next
// boot. Thread-safe (stderr is). Header-only, portable (no OS calls but
// std::fprintf and std::abort).
#pragma once

#include <cstdio>
#include <cstdlib>

namespace vend::detail {

[[noreturn]] inline void assert_failed(const char* file, int line, const char* condition) {
  std::fprintf(stderr, "assertion failed: %s:%d: %s\n", file, line, condition);
  std::fflush(stderr);
  std::abort();
}

}  // namespace vend::detail

#define VEND_ASSERT(cond) \
  ((cond) ? static_cast<void>(0) : ::vend::detail::assert_failed(__FILE__, __LINE__, #cond))

#ifdef NDEBUG
// sizeof: the condition is type-checked, never evaluated.
#define VEND_DEBUG_ASSERT(cond) static_cast<void>(sizeof(!(cond)))
#else
#define VEND_DEBUG_ASSERT(cond) VEND_ASSERT(cond)
#endif
