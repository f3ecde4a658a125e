// Changeset: records typed changes; every backend applies them with its SQL.
#include <algorithm>
#include <cassert>
#include <utility>

#include "repository/repository.hpp"

namespace vend::agent {

void Changeset::insert_device(const std::string& id, const std::string& key_hex,
                              int64_t created_ms) {
  fence_device(id);
  changes_.push_back(change::InsertDevice{id, key_hex, created_ms});
}

void Changeset::upsert_slot(const std::string& device, const SlotSpec& slot) {
  fence_device(device);
  changes_.push_back(change::UpsertSlot{device, slot});
}

void Changeset::insert_order(const Order& order) {
  assert(order.state == OrderState::kReserved);
  fence_device(order.device);
  changes_.push_back(change::InsertOrder{order});
}

void Changeset::transition_order(const Order& after, OrderState from, const std::string& detail) {
  fence_device(after.device);
  changes_.push_back(change::TransitionOrder{after, from, detail});
}

void Changeset::move_token(const std::string& token, TokenState from, TokenState to,
                           const std::string& order_id) {
  changes_.push_back(change::MoveToken{token, from, to, order_id});
}

void Changeset::insert_pool_tokens(const std::string& device, int slot,
                                   const std::string& restock_id,
                                   const std::vector<std::string>& tokens) {
  fence_device(device);
  changes_.push_back(change::InsertPoolTokens{device, slot, restock_id, tokens});
}

void Changeset::put_restock(const StoredRestock& restock, int64_t at_ms) {
  fence_device(restock.device);
  changes_.push_back(change::PutRestock{restock, at_ms});
}

void Changeset::insert_payment(const StoredPayment& payment) {
  changes_.push_back(change::InsertPayment{payment});
}

void Changeset::insert_refund(const StoredRefund& refund) {
  fence_device(owner_key(refund));
  changes_.push_back(change::InsertRefund{refund});
}

void Changeset::update_refund(const std::string& payment_id, RefundState state, int attempts,
                              const std::string& last_error, int64_t at_ms) {
  changes_.push_back(change::UpdateRefund{payment_id, state, attempts, last_error, at_ms});
}

void Changeset::advance_device_seq(const std::string& device, uint64_t from, uint64_t to,
                                   const std::string& mac) {
  fence_device(device);
  changes_.push_back(change::AdvanceDeviceSeq{device, from, to, mac});
}

void Changeset::switch_ledger(const std::string& device, const std::string& from, uint64_t from_seq,
                              const std::string& to, int64_t at_ms) {
  fence_device(device);
  changes_.push_back(change::SwitchLedger{device, from, from_seq, to, at_ms});
}

void Changeset::set_next_key(const std::string& device, const std::string& key_hex) {
  fence_device(device);
  changes_.push_back(change::SetNextKey{device, key_hex});
}

void Changeset::promote_next_key(const std::string& device, const std::string& key_hex) {
  fence_device(device);
  changes_.push_back(change::PromoteNextKey{device, key_hex});
}

void Changeset::decommission_device(const std::string& device, int64_t at_ms) {
  fence_device(device);
  changes_.push_back(change::DecommissionDevice{device, at_ms});
}

void Changeset::put_snapshot(const std::string& device, const std::string& payload, int64_t at_ms) {
  fence_device(device);
  changes_.push_back(change::PutSnapshot{device, payload, at_ms});
}

void Changeset::put_reconcile_report(const std::string& device, const std::string& report,
                                     int64_t at_ms) {
  fence_device(device);
  changes_.push_back(change::PutReconcileReport{device, report, at_ms});
}

void Changeset::insert_fault(const StoredFault& fault) {
  fence_device(fault.device);
  changes_.push_back(change::InsertFault{fault});
}

void Changeset::put_account(const StoredAccount& account) {
  changes_.push_back(change::PutAccount{account});
}

void Changeset::insert_api_token(const StoredApiToken& token) {
  changes_.push_back(change::InsertApiToken{token});
}

void Changeset::revoke_api_token(const std::string& id, int64_t at_ms) {
  changes_.push_back(change::RevokeApiToken{id, at_ms});
}

void Changeset::insert_audit(const AuditEntry& entry) {
  changes_.push_back(change::InsertAudit{entry});
}

namespace {

struct ConflictName {
  std::string operator()(const change::TransitionOrder& c) const {
    return "order " + c.after.id + " " + to_string(c.from) + " -> " + to_string(c.after.state);
  }
  std::string operator()(const change::MoveToken& c) const {
    return "token " + c.token + " " + to_string(c.from) + " -> " + to_string(c.to);
  }
  std::string operator()(const change::UpdateRefund& c) const {
    return "refund of " + c.payment_id;
  }
  std::string operator()(const change::AdvanceDeviceSeq& c) const {
    return "device " + c.device + " seq " + std::to_string(c.from) + " -> " + std::to_string(c.to);
  }
  std::string operator()(const change::SwitchLedger& c) const {
    return "device " + c.device + " ledger '" + c.from + "' -> '" + c.to + "'";
  }
  std::string operator()(const change::SetNextKey& c) const {
    return "next key of device " + c.device;
  }
  std::string operator()(const change::PromoteNextKey& c) const {
    return "new key of device " + c.device;
  }
  std::string operator()(const change::DecommissionDevice& c) const {
    return "decommission of device " + c.device;
  }
  std::string operator()(const change::RevokeApiToken& c) const {
    return "revocation of live token " + c.id;
  }
  template <typename Other>
  std::string operator()(const Other&) const {
    return "change";
  }
};

}  // namespace

std::string describe_conflict(const Change& change) { return std::visit(ConflictName{}, change); }

void Changeset::fence_device(const std::string& device) {
  // A handful of devices per changeset at most: a linear look-up.
  if (std::find(fenced_devices_.begin(), fenced_devices_.end(), device) != fenced_devices_.end()) {
    return;
  }
  fenced_devices_.push_back(device);
}

}  // namespace vend::agent
