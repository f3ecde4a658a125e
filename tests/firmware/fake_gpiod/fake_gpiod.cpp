// A stand-in for libgpiod v1, loaded with LD_PRELOAD into the real
// vend-firmware binary, for tests of hal "gpio" on a machine without GPIO
// chips or gpio-sim. The line levels live in a file (VEND_FAKE_GPIO_FILE:
// kLines int32 physical levels) that every process maps shared, as they
// share a chip's lines: the test reads what a motor line does after the
// process driving it is killed, and sets the drop sensor's level. Like most
// GPIO drivers, a released line keeps its last level. No edge events (the
// request fails, so the firmware samples the level). Only the functions
// vend_firmware_gpio calls exist here; any other would reach the real
// libgpiod with these structures, so keep the two lists equal.
#include <fcntl.h>
#include <gpiod.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>

namespace {

constexpr unsigned kLines = 1024;

}  // namespace

struct gpiod_line {
  int32_t* level = nullptr;  // physical, in the shared file
  bool requested = false;
  bool output = false;
  bool active_low = false;
};

struct gpiod_chip {
  int32_t* levels = nullptr;
  gpiod_line lines[kLines];
};

namespace {

int32_t logical(const gpiod_line& l, int32_t physical) {
  return l.active_low ? (physical == 0 ? 1 : 0) : physical;
}

int request(gpiod_line* line, bool output, int flags) {
  if (line->requested) {
    errno = EBUSY;
    return -1;
  }
  line->requested = true;
  line->output = output;
  line->active_low = (flags & GPIOD_LINE_REQUEST_FLAG_ACTIVE_LOW) != 0;
  return 0;
}

}  // namespace

extern "C" {

gpiod_chip* gpiod_chip_open_lookup(const char* /*descr*/) {
  const char* path = std::getenv("VEND_FAKE_GPIO_FILE");
  if (path == nullptr) {
    errno = ENOENT;
    return nullptr;
  }
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return nullptr;
  void* p = mmap(nullptr, kLines * sizeof(int32_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return nullptr;
  auto* chip = new gpiod_chip;
  chip->levels = static_cast<int32_t*>(p);
  for (unsigned i = 0; i < kLines; ++i) chip->lines[i].level = &chip->levels[i];
  return chip;
}

void gpiod_chip_close(gpiod_chip* chip) {
  munmap(chip->levels, kLines * sizeof(int32_t));
  delete chip;
}

gpiod_line* gpiod_chip_get_line(gpiod_chip* chip, unsigned int offset) {
  if (offset >= kLines) {
    errno = EINVAL;
    return nullptr;
  }
  return &chip->lines[offset];
}

int gpiod_line_request_output_flags(gpiod_line* line, const char* /*consumer*/, int flags,
                                    int default_val) {
  if (request(line, true, flags) != 0) return -1;
  __atomic_store_n(line->level, logical(*line, default_val != 0 ? 1 : 0), __ATOMIC_SEQ_CST);
  return 0;
}

int gpiod_line_request_input_flags(gpiod_line* line, const char* /*consumer*/, int flags) {
  return request(line, false, flags);
}

int gpiod_line_request_both_edges_events_flags(gpiod_line* /*line*/, const char* /*consumer*/,
                                               int /*flags*/) {
  errno = ENOTSUP;
  return -1;
}

// Async-signal-safe, as the motor guard requires: one atomic store.
int gpiod_line_set_value(gpiod_line* line, int value) {
  if (!line->requested || !line->output) {
    errno = EPERM;
    return -1;
  }
  __atomic_store_n(line->level, logical(*line, value != 0 ? 1 : 0), __ATOMIC_SEQ_CST);
  return 0;
}

int gpiod_line_get_value(gpiod_line* line) {
  if (!line->requested) {
    errno = EPERM;
    return -1;
  }
  return logical(*line, __atomic_load_n(line->level, __ATOMIC_SEQ_CST));
}

int gpiod_line_event_wait(gpiod_line* /*line*/, const struct timespec* /*timeout*/) {
  errno = ENOTSUP;
  return -1;
}

int gpiod_line_event_read(gpiod_line* /*line*/, struct gpiod_line_event* /*event*/) {
  errno = ENOTSUP;
  return -1;
}

void gpiod_line_release(gpiod_line* line) { line->requested = false; }  // the level stays

}  // extern "C"
