// Reading a secret that lives in a file of its own (an MQTT password, an
// operator token): the firmware's password_file, the agent's
// --mqtt-password-file, vend-sim's --mqtt-password-dir and secret files.
#pragma once

#include <cstddef>
#include <string>

#include "vend/result.hpp"

namespace vend {

// The one line of the secret file `path`. The file must pass
// check_secret_file (no permission bits for group or others); one trailing
// "\n" or "\r\n" is not part of the secret (as `echo` and add-user write
// it); nothing else is trimmed. Errors (code `code`) name `what` and the
// path: unreadable, empty, longer than `max_bytes`, more than one line.
Result<std::string> read_secret_line(const std::string& path, const std::string& what,
                                     const std::string& code, size_t max_bytes = 1024);

}  // namespace vend
