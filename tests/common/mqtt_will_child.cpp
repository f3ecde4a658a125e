// Helper process for the last-will test of paho_transport_test:
//   mqtt_will_child <server_uri> <client_id> <will_topic> <will_payload> <ready_topic>
// Connects with the will, publishes "ready" (QoS 1) to <ready_topic> once the
// broker has acknowledged it, then blocks until killed. Exit codes: 2 bad
// usage, 3 connect failed, 4 ready publish failed.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "vend/log.hpp"
#include "vend/paho_transport.hpp"

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s uri client_id will_topic will_payload ready_topic\n", argv[0]);
    return 2;
  }
  vend::StderrLogger logger(vend::LogLevel::kDebug);
  vend::PahoOptions options;
  options.server_uri = argv[1];
  options.client_id = argv[2];
  options.will = vend::Will{argv[3], argv[4], 1, false};
  options.keep_alive_s = 60;
  vend::PahoTransport transport(options, logger);
  if (!transport.connect()) return 3;
  if (!transport.publish(vend::Message{argv[5], "ready", 1, false})) return 4;
  for (;;) pause();  // until SIGKILL
}
