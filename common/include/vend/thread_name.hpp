// Names the calling thread as `top -H`, `ps -L`, perf and gdb show it
// (Linux keeps 15 characters; a longer name is cut). Best effort: a failure
// changes nothing else.
#pragma once

namespace vend {

void name_this_thread(const char* name);

}  // namespace vend
