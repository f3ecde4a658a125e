#include "vend/thread_name.hpp"

#include <pthread.h>

#include <cstring>

namespace vend {

void name_this_thread(const char* name) {
  char cut[16] = {};
  std::strncpy(cut, name, sizeof cut - 1);
  (void)::pthread_setname_np(::pthread_self(), cut);
}

}  // namespace vend
