// The core's writes (writes.hpp): may a step write, its commit, fencing,
// storage failure.
#include "core/writes.hpp"

#include <variant>

namespace vend::agent {

Status Writes::writable() {
  if (!started) return make_error("unavailable", "the agent core is not started");
  if (failed()) {
    return make_error("unavailable", "storage failed; retry later");
  }
  if (draining || fenced) {
    return make_error("unavailable",
                      "this instance's shards are moving between agents; retry in a second");
  }
  if (!repo.accepting()) return make_error("unavailable", "write queue full; retry later");
  return {};
}

// Cluster mode: the changeset names the devices whose data it writes, so
// the fence checks their shards; the records without a device (token moves,
// payments, new refunds) name them through their orders; a refund's update
// is fenced by refund_attempted().
void Writes::fence_devices(Changeset& changes) {
  auto order_device = [&](const std::string& order_id) {
    if (OrderRec* rec = orders_.find(order_id)) changes.fence_device(rec->order.device);
  };
  for (OrderRef ref : touched_) {
    if (OrderRec* rec = orders_.at(ref)) changes.fence_device(rec->order.device);
  }
  for (const Change& c : changes.changes()) {
    if (const auto* m = std::get_if<change::MoveToken>(&c)) {
      order_device(m->order_id);
    } else if (const auto* p = std::get_if<change::InsertPayment>(&c)) {
      order_device(p->payment.order_id);
    } else if (const auto* r = std::get_if<change::InsertRefund>(&c)) {
      order_device(r->refund.order_id);
    }
  }
}

void Writes::attribute(AuditEntry entry) {
  if (entry.account.empty()) return audit_.reset();
  entry.at_ms = clock.wall_ms();
  audit_ = std::move(entry);
}

Ticket Writes::commit(Changeset changes) {
  if (audit_) {
    changes.insert_audit(*audit_);
    audit_.reset();
  }
  if (owns) fence_devices(changes);
  auto ticket = repo.submit(std::move(changes));
  if (!ticket.ok()) {
    fail_storage("submit refused after writable(): " + ticket.error().to_string());
    touched_.clear();
    payments_.drop_staged();
    return detail::ready_ticket(ticket.error());
  }
  for (OrderRef ref : touched_) {
    if (OrderRec* rec = orders_.at(ref)) rec->last_write = *ticket;
  }
  touched_.clear();
  payments_.committed(*ticket);
  return *ticket;
}

void Writes::write_failed(const Error& e, const std::string& what) {
  if (e.code != "fenced") return fail_storage(what + ": " + e.to_string());
  if (!fenced) {
    log.warn(detail::kLog, "a write was refused by the fence (" + what + ": " + e.message +
                               "): no more writes until the shards are rebuilt");
  }
  fenced = true;
}

void Writes::fail_storage(const std::string& why) {
  if (!storage_failed) {
    log.error(detail::kLog,
              "storage failed, the core stops changing state until it is rebuilt from the log "
              "(a restart; several agents: once the database answers): " +
                  why);
  }
  storage_failed = true;
}

bool Writes::failed() {
  if (!storage_failed && repo.has_failed_writes()) fail_storage("a repository write failed");
  return storage_failed;
}

}  // namespace vend::agent
