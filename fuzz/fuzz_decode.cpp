// libFuzzer target for the protocol decoders (decode_command, decode_event,
// decode_status) and the operator-message decoders of vend/ops.hpp (what
// vendctl reads off the broker). Besides the sanitizers' checks it asserts the codec's
// invariants and aborts when one breaks:
//  - a rejection carries one of the kErr* codes;
//  - a decoded message's canonical form is encode_canonical(message);
//  - encoding a decoded message and decoding it again gives the same message,
//    MAC and canonical form.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "vend/ops.hpp"
#include "vend/protocol.hpp"

namespace {

using namespace vend::proto;  // NOLINT: a fuzz harness of this one header

[[noreturn]] void fail(const char* what, std::string_view detail) {
  std::fprintf(stderr, "invariant broken: %s\n%.*s\n", what, static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

void check_error_code(const vend::Error& error) {
  for (const char* code : {kErrOversize, kErrBadJson, kErrBadVersion, kErrUnknownType,
                           kErrMissingField, kErrUnknownField, kErrWrongType, kErrOutOfRange}) {
    if (error.code == code) return;
  }
  fail("unexpected error code", error.to_string());
}

template <typename Message, typename Decode>
void check(const vend::Result<Decoded<Message>>& first, Decode decode) {
  if (!first.ok()) {
    check_error_code(first.error());
    return;
  }
  if (first->canonical != encode_canonical(first->message)) {
    fail("canonical differs from encode_canonical", first->canonical);
  }
  const std::string again = encode(first->message, first->mac);
  auto second = decode(again);
  if (!second.ok()) fail("re-encoded message rejected", second.error().to_string());
  if (!(second->message == first->message)) fail("re-decoded message differs", again);
  if (second->mac != first->mac) fail("re-decoded mac differs", again);
  if (second->canonical != first->canonical) fail("re-decoded canonical differs", again);
}

// An ops message decodes to one that encodes and decodes to itself.
template <typename Message, typename Decode>
void check_ops(const vend::Result<Message>& first, Decode decode) {
  if (!first.ok()) {
    if (first.error().message.empty()) fail("ops rejection without a message", first.error().code);
    return;
  }
  const std::string again = vend::ops::encode(*first);
  auto second = decode(again);
  if (!second.ok()) fail("re-encoded ops message rejected", second.error().to_string());
  if (!(*second == *first)) fail("re-decoded ops message differs", again);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view payload(reinterpret_cast<const char*>(data), size);
  check(decode_command(payload), decode_command);
  check(decode_event(payload), decode_event);
  check(decode_status(payload), decode_status);
  check_ops(vend::ops::decode_fleet(payload), vend::ops::decode_fleet);
  check_ops(vend::ops::decode_device(payload), vend::ops::decode_device);
  check_ops(vend::ops::decode_order_events(payload), vend::ops::decode_order_events);
  check_ops(vend::ops::decode_alert(payload), vend::ops::decode_alert);
  check_ops(vend::ops::decode_reconcile(payload), vend::ops::decode_reconcile);
  return 0;
}
