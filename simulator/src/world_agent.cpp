#include "world_agent.hpp"

#include "vend/protocol.hpp"
#include "vend/topics.hpp"

namespace vend::sim {

std::string describe_device_message(const Message& m) {
  auto topic = topics::parse_device_topic(m.topic);
  if (!topic.ok()) return "bad topic " + m.topic;
  if (topic->kind == topics::DeviceTopic::Kind::kStatus) {
    auto status = proto::decode_status(m.payload);
    if (!status.ok()) return topic->device + " status undecodable";
    return topic->device + " status " + (status->message.online ? "online " : "offline ") +
           status->message.boot_id.substr(0, 8) + (m.retained ? " (retained)" : "");
  }
  auto event = proto::decode_event(m.payload);
  if (!event.ok()) return topic->device + " evt undecodable";
  std::string what = topic->device + " evt " + std::to_string(event->message.seq) + " " +
                     proto::type_name(event->message.body);
  if (auto* r = std::get_if<proto::DispenseResult>(&event->message.body)) {
    what += std::string(" ") + proto::to_string(r->status) + " " + r->order_id;
  }
  return what;
}

WorldAgent::WorldAgent(std::string db_path, agent::AgentOptions options, InMemoryBus& bus,
                       const Clock& clock, Random& random, Logger& log, Trace& trace)
    : db_path_(std::move(db_path)),
      options_(options),
      bus_(bus),
      clock_(clock),
      random_(random),
      log_(log),
      trace_(trace) {}

WorldAgent::~WorldAgent() {
  flush();
  core_.reset();
  client_.reset();
  repo_.reset();
}

Status WorldAgent::start() {
  agent::RepositoryOptions ro;
  ro.synchronous = sql::Sync::kOff;  // durability against process death only
  // Writes commit only when the core waits for them or the world flushes:
  // what a crash loses depends on the seed alone.
  ro.manual_commit = true;
  auto repo = agent::Repository::open(db_path_, ro, log_);
  if (!repo.ok()) return repo.error();
  repo_ = std::move(repo).value();
  client_ = bus_.make_client(kAgentClientId);
  core_ = std::make_unique<agent::AgentCore>(*repo_, *client_, clock_, random_, log_, options_);
  if (Status s = core_->start(); !s.ok()) return s;
  client_->on_message([this](const Message& m) {
    if (!core_) return;
    trace_.add("agent <- " + describe_device_message(m));
    core_->on_message(m);
  });
  client_->on_connection([this](bool up) {
    if (core_) core_->on_connection(up);
  });
  for (const std::string& filter : {topics::all_device_evt(), topics::all_device_status()}) {
    if (Status s = client_->subscribe(filter, 1); !s.ok()) return s;
  }
  Status connected = client_->connect();
  trace_.add(std::string("agent start") +
             (connected.ok() ? "" : " (offline: " + connected.error().code + ")"));
  flush();
  return {};
}

void WorldAgent::crash() {
  repo_->abandon();  // kill -9: what was queued and not committed is lost
  bus_.kill_client(kAgentClientId);
  core_.reset();
  client_.reset();
  repo_.reset();
  trace_.add("agent crash");
}

void WorldAgent::tick() {
  if (core_) core_->tick();
}

void WorldAgent::flush() {
  if (repo_) repo_->flush();
}

}  // namespace vend::sim
