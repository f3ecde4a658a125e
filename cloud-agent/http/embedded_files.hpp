// The operators' console (cloud-agent/console/*), embedded in the binary at
// build time by cmake/VendEmbedFiles.cmake: nothing is read from disk or the
// network at run time.
#pragma once

#include <cstddef>

namespace vend::agent::console {

struct EmbeddedFile {
  const char* name;   // the file name, e.g. "index.html"
  const char* bytes;  // `size` bytes (followed by a NUL not counted)
  std::size_t size;
  const char* sha256;  // hex digest of the bytes (the ETag)
};

extern const EmbeddedFile kEmbeddedFiles[];
extern const std::size_t kEmbeddedFileCount;

}  // namespace vend::agent::console
