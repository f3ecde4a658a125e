#include "sqlite_wal_buffer.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <mutex>

namespace vend::sql::detail {
namespace {

constexpr const char* kVfsName = "vend-wal-buffer";
constexpr sqlite3_int64 kFirstBuffer = 64 * 1024;
// A group commit of a few hundred pages fits; a larger transaction is written
// in pieces of this size.
constexpr sqlite3_int64 kMaxBuffer = 4 * 1024 * 1024;
// The unix VFS writes at most 128 KiB - 1 bytes per xWrite (its pwrite takes
// the length modulo 128 KiB and answers SQLITE_FULL for what it did not
// write), so a flush hands the buffer over in pieces of this size.
constexpr sqlite3_int64 kMaxWrite = 124 * 1024;

// The wrapper of a WAL file; the default VFS's file follows it in the same
// allocation (szOsFile covers both).
struct WalFile {
  sqlite3_file base;
  sqlite3_file* real;
  char* data;
  sqlite3_int64 capacity;
  sqlite3_int64 length;
  sqlite3_int64 start;  // file offset of data[0]
};

sqlite3_vfs* g_default = nullptr;
sqlite3_vfs g_vfs;
sqlite3_io_methods g_methods;

WalFile* wal(sqlite3_file* file) { return reinterpret_cast<WalFile*>(file); }
sqlite3_file* real(sqlite3_file* file) { return wal(file)->real; }

// Hands the buffered bytes to the real file, kMaxWrite at a time. On failure the
// bytes are dropped, as a failed write of the default VFS leaves them unwritten.
int flush(WalFile* f) {
  int rc = SQLITE_OK;
  for (sqlite3_int64 done = 0; done < f->length && rc == SQLITE_OK; done += kMaxWrite) {
    auto piece = static_cast<int>(std::min(kMaxWrite, f->length - done));
    rc = f->real->pMethods->xWrite(f->real, f->data + done, piece, f->start + done);
  }
  f->length = 0;
  return rc;
}

int flush(sqlite3_file* file) { return flush(wal(file)); }

// Room for `more` bytes after the buffered ones, growing up to kMaxBuffer.
bool make_room(WalFile* f, sqlite3_int64 more) {
  sqlite3_int64 need = f->length + more;
  if (need <= f->capacity) return true;
  if (need > kMaxBuffer) return false;
  sqlite3_int64 grown = std::max(kFirstBuffer, f->capacity);
  while (grown < need) grown *= 2;
  grown = std::min(grown, kMaxBuffer);
  void* moved = sqlite3_realloc64(f->data, static_cast<sqlite3_uint64>(grown));
  if (moved == nullptr) return false;
  f->data = static_cast<char*>(moved);
  f->capacity = grown;
  return true;
}

int wal_write(sqlite3_file* file, const void* bytes, int amount, sqlite3_int64 offset) {
  WalFile* f = wal(file);
  bool appends = f->length > 0 && offset == f->start + f->length;
  if (!appends || !make_room(f, amount)) {
    if (int rc = flush(f); rc != SQLITE_OK) return rc;
    if (!make_room(f, amount)) return f->real->pMethods->xWrite(f->real, bytes, amount, offset);
    f->start = offset;
  }
  std::memcpy(f->data + f->length, bytes, static_cast<size_t>(amount));
  f->length += amount;
  return SQLITE_OK;
}

int wal_close(sqlite3_file* file) {
  WalFile* f = wal(file);
  int flushed = flush(f);
  int closed = f->real->pMethods->xClose(f->real);
  sqlite3_free(f->data);
  f->data = nullptr;
  f->capacity = 0;
  return flushed != SQLITE_OK ? flushed : closed;
}

int wal_read(sqlite3_file* file, void* bytes, int amount, sqlite3_int64 offset) {
  if (int rc = flush(file); rc != SQLITE_OK) return rc;
  return real(file)->pMethods->xRead(real(file), bytes, amount, offset);
}

int wal_truncate(sqlite3_file* file, sqlite3_int64 size) {
  if (int rc = flush(file); rc != SQLITE_OK) return rc;
  return real(file)->pMethods->xTruncate(real(file), size);
}

int wal_sync(sqlite3_file* file, int flags) {
  if (int rc = flush(file); rc != SQLITE_OK) return rc;
  return real(file)->pMethods->xSync(real(file), flags);
}

int wal_file_size(sqlite3_file* file, sqlite3_int64* size) {
  if (int rc = flush(file); rc != SQLITE_OK) return rc;
  return real(file)->pMethods->xFileSize(real(file), size);
}

int wal_file_control(sqlite3_file* file, int op, void* arg) {
  if (int rc = flush(file); rc != SQLITE_OK) return rc;
  return real(file)->pMethods->xFileControl(real(file), op, arg);
}

int wal_fetch(sqlite3_file* file, sqlite3_int64 offset, int amount, void** page) {
  if (int rc = flush(file); rc != SQLITE_OK) return rc;
  if (real(file)->pMethods->iVersion < 3) {  // no memory map: SQLite reads instead
    *page = nullptr;
    return SQLITE_OK;
  }
  return real(file)->pMethods->xFetch(real(file), offset, amount, page);
}

// The rest pass straight through.
int wal_lock(sqlite3_file* file, int level) {
  return real(file)->pMethods->xLock(real(file), level);
}
int wal_unlock(sqlite3_file* file, int level) {
  return real(file)->pMethods->xUnlock(real(file), level);
}
int wal_check_reserved(sqlite3_file* file, int* out) {
  return real(file)->pMethods->xCheckReservedLock(real(file), out);
}
int wal_sector_size(sqlite3_file* file) { return real(file)->pMethods->xSectorSize(real(file)); }
int wal_device(sqlite3_file* file) {
  return real(file)->pMethods->xDeviceCharacteristics(real(file));
}
int wal_shm_map(sqlite3_file* file, int page, int size, int extend, void volatile** out) {
  return real(file)->pMethods->xShmMap(real(file), page, size, extend, out);
}
int wal_shm_lock(sqlite3_file* file, int offset, int n, int flags) {
  return real(file)->pMethods->xShmLock(real(file), offset, n, flags);
}
void wal_shm_barrier(sqlite3_file* file) { real(file)->pMethods->xShmBarrier(real(file)); }
int wal_shm_unmap(sqlite3_file* file, int remove) {
  return real(file)->pMethods->xShmUnmap(real(file), remove);
}
int wal_unfetch(sqlite3_file* file, sqlite3_int64 offset, void* page) {
  return real(file)->pMethods->xUnfetch(real(file), offset, page);
}

// Non-WAL files are opened by the default VFS in place, so they are its own
// files with its own methods; a WAL file gets the wrapper.
int open_file(sqlite3_vfs* /*vfs*/, const char* name, sqlite3_file* file, int flags,
              int* out_flags) {
  if ((flags & SQLITE_OPEN_WAL) == 0) {
    return g_default->xOpen(g_default, name, file, flags, out_flags);
  }
  WalFile* f = wal(file);
  f->base.pMethods = nullptr;
  f->real = reinterpret_cast<sqlite3_file*>(f + 1);
  f->data = nullptr;
  f->capacity = 0;
  f->length = 0;
  f->start = 0;
  int rc = g_default->xOpen(g_default, name, f->real, flags, out_flags);
  if (rc != SQLITE_OK) {
    if (f->real->pMethods != nullptr) f->real->pMethods->xClose(f->real);
    return rc;
  }
  f->base.pMethods = &g_methods;
  return SQLITE_OK;
}

void register_vfs() {
  g_default = sqlite3_vfs_find(nullptr);
  g_vfs = *g_default;  // same pAppData and helpers; only opening differs
  g_vfs.pNext = nullptr;
  g_vfs.zName = kVfsName;
  g_vfs.szOsFile = static_cast<int>(sizeof(WalFile)) + g_default->szOsFile;
  g_vfs.xOpen = open_file;

  g_methods = sqlite3_io_methods{};
  g_methods.iVersion = 3;
  g_methods.xClose = wal_close;
  g_methods.xRead = wal_read;
  g_methods.xWrite = wal_write;
  g_methods.xTruncate = wal_truncate;
  g_methods.xSync = wal_sync;
  g_methods.xFileSize = wal_file_size;
  g_methods.xLock = wal_lock;
  g_methods.xUnlock = wal_unlock;
  g_methods.xCheckReservedLock = wal_check_reserved;
  g_methods.xFileControl = wal_file_control;
  g_methods.xSectorSize = wal_sector_size;
  g_methods.xDeviceCharacteristics = wal_device;
  g_methods.xShmMap = wal_shm_map;
  g_methods.xShmLock = wal_shm_lock;
  g_methods.xShmBarrier = wal_shm_barrier;
  g_methods.xShmUnmap = wal_shm_unmap;
  g_methods.xFetch = wal_fetch;
  g_methods.xUnfetch = wal_unfetch;
  sqlite3_vfs_register(&g_vfs, 0);
}

}  // namespace

const char* wal_buffer_vfs_name() {
  static std::once_flag registered;
  std::call_once(registered, register_vfs);
  return kVfsName;
}

}  // namespace vend::sql::detail
