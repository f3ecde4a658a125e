// `vend-agent account ...` and `vend-agent token ...`: the operators'
// accounts from the agent host, straight into the agent's log (the --db of
// the command line or of --config), with their audit rows; the first admin
// is made this way (docs/operations.md, "The first admin").
//
//   vend-agent account add NAME --role ROLE [--machines ID,ID...]
//                               [--password-file FILE|-] [--db ...|--config FILE]
//   vend-agent account list [--db ...|--config FILE]
//   vend-agent token add NAME [--label TEXT] [--ttl-days N] [--db ...|--config FILE]
//
// A password is read from a file or from stdin ("-"), never from the
// command line; `token add` prints the new token once on stdout.
#pragma once

#include <istream>
#include <ostream>
#include <string>
#include <vector>

namespace vend::agent {

// True when `args` (argv without argv[0]) is one of the commands above.
bool is_account_command(const std::vector<std::string>& args);

// Runs it. Exit code: 0 done, 1 the log refused (conflict, unreachable
// database), 2 bad arguments (one line on `err`).
int run_account_command(const std::vector<std::string>& args, std::istream& in, std::ostream& out,
                        std::ostream& err);

}  // namespace vend::agent
