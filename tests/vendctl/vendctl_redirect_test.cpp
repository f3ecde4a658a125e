// vendctl and the redirects of several agents, against scripted loopback
// httplib servers playing two agents: a 307 to a member of the cluster of
// --api (GET /v1/cluster) is followed with the method, body and token; a
// redirect anywhere else is refused without sending the token there. Also
// --version and the deprecated watch spellings.
#include <doctest/doctest.h>
#include <httplib.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ctl_rig.hpp"
#include "test_support.hpp"

namespace vend::ctl {
namespace {

using namespace testing;  // NOLINT: the rig is the test's vocabulary

constexpr const char* kToken = "redirect-token-0123456789abcdef";

// An httplib server on a free loopback port, served on its own thread.
class Scripted {
 public:
  Scripted() : port_(server_.bind_to_any_port("127.0.0.1")) {}
  ~Scripted() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  httplib::Server& server() { return server_; }
  void start() {
    // Bound already: connections wait in the backlog until it accepts.
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  int port_;
  std::thread thread_;
};

TEST_CASE("vendctl follows a redirect to a member of the cluster, and only there") {
  test::TempDir dir;
  test::write_private_file(dir.file("token"), std::string(kToken) + "\n");
  Scripted front, owner, stranger;
  std::mutex mu;
  std::vector<std::string> owner_saw;  // "METHOD path auth body"
  std::atomic<int> stranger_hits{0};
  std::atomic<bool> owner_is_member{true};

  auto redirect_to = [](const std::string& base) {
    return [base](const httplib::Request& req, httplib::Response& res) {
      res.status = 307;
      res.set_header("Location", base + req.target);
      res.set_content(R"({"error":{"code":"moved","message":"served by )" + base + R"("}})",
                      "application/json");
    };
  };
  front.server().Post(R"(/v1/devices/vm-own/restock)", redirect_to(owner.url()));
  front.server().Post(R"(/v1/devices/vm-far/restock)", redirect_to(stranger.url()));
  front.server().Get("/v1/cluster", [&](const httplib::Request&, httplib::Response& res) {
    std::string members = R"([{"instance":"a","url":")" + front.url() + R"("})";
    if (owner_is_member) members += R"(,{"instance":"b","url":")" + owner.url() + R"("})";
    res.set_content(R"({"instance":"a","members":)" + members + "]}", "application/json");
  });
  owner.server().Post(R"(/v1/devices/vm-own/restock)",
                      [&](const httplib::Request& req, httplib::Response& res) {
                        std::lock_guard lock(mu);
                        owner_saw.push_back("POST " + req.path + " " +
                                            req.get_header_value("Authorization") + " " + req.body);
                        res.status = 202;
                        res.set_content(R"({"restock_id":"rst-7"})", "application/json");
                      });
  stranger.server().Post(R"(/v1/devices/vm-far/restock)",
                         [&](const httplib::Request&, httplib::Response& res) {
                           ++stranger_hits;
                           res.status = 202;
                           res.set_content(R"({"restock_id":"rst-x"})", "application/json");
                         });
  front.start();
  owner.start();
  stranger.start();

  Run followed = vendctl(dir, {"restock", "vm-own", "1", "3", "--api", front.url(), "--token-file",
                               dir.file("token")});
  CHECK_MESSAGE(followed.code == 0, followed.output);
  CHECK(has(followed, "restock rst-7 sent to vm-own: slot 1, 3 item(s)."));
  {
    std::lock_guard lock(mu);
    REQUIRE(owner_saw.size() == 1);
    CHECK(owner_saw[0] == std::string("POST /v1/devices/vm-own/restock Bearer ") + kToken +
                              R"( {"count":3,"slot":1})");
  }

  Run refused = vendctl(dir, {"restock", "vm-far", "1", "3", "--api", front.url(), "--token-file",
                              dir.file("token")});
  CHECK(refused.code == 1);
  CHECK_MESSAGE(has(refused, "vendctl: redirect_refused: the agent redirected to " +
                                 stranger.url() + ", which is not a member of its cluster"),
                refused.output);
  CHECK(stranger_hits == 0);

  owner_is_member = false;  // a fresh vendctl asks /v1/cluster again
  Run not_member = vendctl(dir, {"restock", "vm-own", "1", "3", "--api", front.url(),
                                 "--token-file", dir.file("token")});
  CHECK(not_member.code == 1);
  CHECK(has(not_member, "redirect_refused"));
  std::lock_guard lock(mu);
  CHECK(owner_saw.size() == 1);
}

TEST_CASE("vendctl --version; the old watch spellings work with a one-line warning") {
  test::TempDir dir;
  Run version = vendctl(dir, {"--version"});
  CHECK(version.code == 0);
  CHECK(version.output.rfind("vendctl ", 0) == 0);
  CHECK(version.output.find('\n') == version.output.size() - 1);

  test::MosquittoServer broker;
  Run old = vendctl(dir, {"watch", "--once", "--for", "1", "--mqtt", broker.url(), "--ca-file",
                          "/etc/ssl/certs/ca-certificates.crt"});
  CHECK_MESSAGE(old.code == 0, old.output);
  CHECK(has(old, "vendctl: warning: --ca-file is deprecated; use --mqtt-ca-file\n"));
  Run spelled = vendctl(dir, {"watch", "--once", "--for", "1", "--mqtt", broker.url(),
                              "--mqtt-ca-file", "/etc/ssl/certs/ca-certificates.crt"});
  CHECK_MESSAGE(spelled.code == 0, spelled.output);
  CHECK_FALSE(has(spelled, "warning"));
}

}  // namespace
}  // namespace vend::ctl
