// A SQLite VFS that gathers a transaction's WAL writes into a few large ones.
//
// SQLite writes a WAL frame as two pwrite() calls (its 24-byte header, then
// the page), so a group commit of 200 pages makes 400 system calls before its
// one fdatasync(). This VFS wraps the default one; for WAL files only, it
// keeps appending writes in memory and hands them to the real file, in writes
// of up to 124 KiB, at the first operation that needs them on disk: a sync, a
// read, a size query, a truncate, a file control, a write somewhere else, or
// the close. Every other file (database, journals, temporary files) is the
// default VFS's own file, untouched.
//
// REQUIRES synchronous=FULL in WAL mode: there SQLite syncs the WAL before it
// publishes a commit in the wal-index, so no other connection can read a frame
// that is still in this buffer, and a commit is in the kernel (kill -9 safe)
// before COMMIT returns. With NORMAL no sync marks the commit's end, so
// sqlite.cpp opens such databases on the default VFS.
//
// The order of the writes that reach the file is the order SQLite made them;
// only their timing changes, never what is on disk after a sync.
#pragma once

namespace vend::sql::detail {

// The VFS's name for sqlite3_open_v2(). Registers it (not as the default) on
// the first call; thread-safe.
const char* wal_buffer_vfs_name();

}  // namespace vend::sql::detail
