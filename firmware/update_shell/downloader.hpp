// Downloader: fetches one update artifact over HTTP(S) with cpp-httplib into
// a file, resuming what an earlier try left there (an HTTP Range request),
// refusing more bytes than announced, and hashing as it goes. Blocking: the
// daemon runs it on a thread of its own (UpdateShell). Thread-safe (no shared
// state); one download per file at a time.
#pragma once

#include <cstdint>
#include <string>

#include "update/update_core.hpp"

namespace vend::fw {

struct DownloadLimits {
  int64_t connect_timeout_ms = 10'000;
  int64_t read_timeout_ms = 30'000;
  // HTTPS: the CA bundle to trust ("" = the system's).
  std::string ca_file;
};

// Downloads `what` into `path`. A file already at `path` is taken as the
// first bytes of the artifact (an earlier try): they are hashed again and
// only the rest is asked for (`Range: bytes=N-`); a server that ignores the
// range (200) starts the file again. The file is fsync'd before a complete
// answer. Outcomes (update_core.hpp): kComplete with the bytes held and their
// SHA-256 once `size_bytes` arrived; kCut when the transfer stopped early
// (the bytes so far stay for the next try); kRefused for an HTTP error
// status, an answer longer than `size_bytes`, a bad URL or a file that
// cannot be written.
DownloadOutcome download_artifact(const StartDownload& what, const std::string& path,
                                  const DownloadLimits& limits);

}  // namespace vend::fw
