// End-to-end tests of `dsdoctor check` with real agents, real sockets and real iptables rules,
// each inside a private network namespace (`unshare -n`, only lo, which the script brings up), so
// nothing touches the host's network. The namespace disappears with the script; agents started
// by a script are ended by pid.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/file.h"
#include "common/process.h"
#include "tests/e2e/netns_test.h"
#include "tests/e2e/sshd.h"

namespace dsd {
namespace {

using nlohmann::json;

class CheckE2eTest : public e2e::NetnsTest {};

constexpr const char* kCheck4 =
    "$DSD check --local 4 --agent-port 47000 --connect-timeout-ms 500 --no-bandwidth --json $DIR/out.json "
    "--junit $DIR/junit.xml";

TEST_F(CheckE2eTest, HealthyClusterExitsZeroWithValidJUnit) {
  auto r = InNamespace(
      "$DSD check --local 4 --agent-port 47000 --connect-timeout-ms 500 --sizes 4K,1M --p2p-seconds 0.1 "
      "--json $DIR/out.json --junit $DIR/junit.xml");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  json doc = ReadJson("out.json");
  EXPECT_EQ(doc["summary"]["fail"], 0);
  EXPECT_EQ(doc["nodes"].size(), 4u);
  // Well-formed JUnit with one testcase per check and no failure.
  auto xml =
      RunCommand({"python3", "-c",
                  "import sys,xml.etree.ElementTree as E; s=E.parse(sys.argv[1]).getroot().find('testsuite');"
                  "print(s.get('tests'), s.get('failures'), len(s.findall('testcase')), len(s.findall('.//failure')))",
                  (dir_ / "junit.xml").string()},
                 {});
  ASSERT_TRUE(xml.ok());
  EXPECT_EQ(xml->exit_code, 0) << xml->err;
  EXPECT_EQ(xml->out, "12 0 12 0\n");  // plan, agents, …
  // Bandwidth probes ran on real Gloo between the four agents: exact sums, and every ordered pair.
  const json& bw = doc["bandwidth"];
  EXPECT_EQ(bw["ran"], true);
  EXPECT_EQ(bw["ranks"], 4);
  ASSERT_EQ(bw["allreduce"].size(), 2u);
  for (const auto& row : bw["allreduce"]) {
    EXPECT_EQ(row["wrong"], 0);
    EXPECT_GT(row["busbw_gbps"].get<double>(), 0);
  }
  EXPECT_EQ(bw["allreduce"][1]["bytes"], 1 << 20);
  EXPECT_EQ(bw["p2p"].size(), 12u);
  for (const auto& p : bw["p2p"]) EXPECT_GT(p["gbit_s"].get<double>(), 0) << p.dump();
}

TEST_F(CheckE2eTest, DropRuleIsPortBlockedForExactlyThatPair) {
  auto r =
      InNamespace("iptables -A OUTPUT -s 127.0.0.3 -d 127.0.0.4 -p tcp --dport 47000 -j DROP; " + std::string(kCheck4));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  json doc = ReadJson("out.json");
  auto blocked = FindingsWithCode(doc, "PORT_BLOCKED");
  ASSERT_EQ(blocked.size(), 1u) << doc["findings"].dump(2);
  EXPECT_EQ(blocked[0]["nodes"], json({"node-1", "node-2"}));
  EXPECT_NE(blocked[0]["summary"].get<std::string>().find("node-1 -> node-2:47000"), std::string::npos);
  EXPECT_NE(blocked[0]["evidence"].dump().find("asymmetric: node-2 -> node-1:47000 works"), std::string::npos);
  EXPECT_EQ(doc["findings"].size(), 1u) << doc["findings"].dump(2);
  EXPECT_EQ(doc["matrix"]["agent"][1][2], "DROP");
  EXPECT_NE(r.out.find("PORT_BLOCKED"), std::string::npos);
  auto junit = ReadFile((dir_ / "junit.xml").string());
  EXPECT_NE(junit->find("<failure type=\"PORT_BLOCKED\""), std::string::npos) << *junit;
}

TEST_F(CheckE2eTest, RejectRuleIsPortRefusedWhileTheTargetListens) {
  auto r = InNamespace(
      "iptables -A OUTPUT -s 127.0.0.3 -d 127.0.0.4 -p tcp --dport 47000 -j REJECT --reject-with tcp-reset; " +
      std::string(kCheck4));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  json doc = ReadJson("out.json");
  auto refused = FindingsWithCode(doc, "PORT_REFUSED");
  ASSERT_EQ(refused.size(), 1u) << doc["findings"].dump(2);
  EXPECT_EQ(refused[0]["nodes"], json({"node-1", "node-2"}));
  EXPECT_NE(refused[0]["summary"].get<std::string>().find("REJECT rule"), std::string::npos) << refused[0].dump();
  EXPECT_TRUE(FindingsWithCode(doc, "PORT_BLOCKED").empty());
}

TEST_F(CheckE2eTest, BlockedRendezvousPortNamesTheMasterPort) {
  auto r =
      InNamespace("iptables -A OUTPUT -s 127.0.0.4 -d 127.0.0.2 -p tcp --dport 29500 -j DROP; " + std::string(kCheck4));
  EXPECT_EQ(r.exit_code, 1);
  json doc = ReadJson("out.json");
  auto blocked = FindingsWithCode(doc, "PORT_BLOCKED");
  ASSERT_EQ(blocked.size(), 1u) << doc["findings"].dump(2);
  EXPECT_EQ(blocked[0]["nodes"], json({"node-2", "node-0"}));
  EXPECT_NE(blocked[0]["summary"].get<std::string>().find("rendezvous port 29500"), std::string::npos);
}

// One node's agent port dropped for every other agent (not for the coordinator, whose link must
// work): one finding that names that node, not nineteen pair findings. Each pair is tried twice
// (the retry that tells a full listen queue from a firewall), so both attempts time out.
TEST_F(CheckE2eTest, ANodeDroppedByEveryAgentIsOneFindingNamingIt) {
  auto r = InNamespace(
      "iptables -A OUTPUT ! -s 127.0.0.1 -d 127.0.0.9 -p tcp --dport 47000 -j DROP; "
      "$DSD check --local 20 --agent-port 47000 --connect-timeout-ms 400 --no-bandwidth --json $DIR/out.json");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  json doc = ReadJson("out.json");
  ASSERT_EQ(doc["findings"].size(), 1u) << doc["findings"].dump(2);
  const json& f = doc["findings"][0];
  EXPECT_EQ(f["code"], "PORT_BLOCKED");
  EXPECT_EQ(f["nodes"], json({"node-7"}));
  EXPECT_NE(f["summary"].get<std::string>().find("connections from 19 of 19 nodes time out"), std::string::npos)
      << f.dump(2);
  EXPECT_NE(f["evidence"][0].get<std::string>().find("on the second try too"), std::string::npos) << f.dump(2);
  EXPECT_EQ(doc["connectivity"]["agent"]["failed"].size(), 19u);
  EXPECT_EQ(doc["connectivity"]["agent"]["ok"], 20u * 19u - 19u);
  EXPECT_EQ(doc["matrix"]["agent"][3][7], "DROP");
}

// Below the open-file limit a check of many nodes needs, nothing starts and no node is blamed.
TEST_F(CheckE2eTest, TooLowUlimitIsResourceLimitNotUnreachableAgents) {
  auto r = InNamespace("ulimit -n 64; $DSD check --local 100 --no-bandwidth --json $DIR/out.json");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  json doc = ReadJson("out.json");
  ASSERT_EQ(doc["findings"].size(), 1u) << doc["findings"].dump(2);
  EXPECT_EQ(doc["findings"][0]["code"], "RESOURCE_LIMIT");
  EXPECT_NE(doc["findings"][0]["summary"].get<std::string>().find("ulimit -n is 64"), std::string::npos)
      << doc["findings"][0].dump(2);
  EXPECT_NE(doc["findings"][0]["summary"].get<std::string>().find("528 open files"), std::string::npos);
}

// Two hand-started agents, one whose own environment names a missing interface; attach to both.
TEST_F(CheckE2eTest, AttachedAgentWithMissingIfnameIsSocketIfnameInvalid) {
  auto r = InNamespace(
      "umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n' > $DIR/token; "
      "$DSD agent --listen 127.0.0.2:47100 --token-file $DIR/token --name good > $DIR/a.out & A=$!; "
      "NCCL_SOCKET_IFNAME=nosuch0 $DSD agent --listen 127.0.0.3:47100 --token-file $DIR/token --name bad > $DIR/b.out "
      "& B=$!; "
      "for i in $(seq 100); do grep -q READY $DIR/a.out && grep -q READY $DIR/b.out && break; sleep 0.05; done; "
      "$DSD check --launcher attach --agents 127.0.0.2:47100,127.0.0.3:47100 --token-file $DIR/token "
      "--connect-timeout-ms 500 --json $DIR/out.json; rc=$?; kill $A $B; wait $A $B; exit $rc");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  json doc = ReadJson("out.json");
  auto invalid = FindingsWithCode(doc, "SOCKET_IFNAME_INVALID");
  // node-1 fails; node-0 works but, with only lo in this namespace, is warned about loopback.
  ASSERT_EQ(invalid.size(), 2u) << doc["findings"].dump(2);
  EXPECT_EQ(invalid[0]["severity"], "error");
  EXPECT_EQ(invalid[0]["nodes"], json({"node-1"}));
  EXPECT_NE(invalid[0]["summary"].get<std::string>().find("NCCL_SOCKET_IFNAME=nosuch0"), std::string::npos);
  EXPECT_EQ(invalid[1]["severity"], "warning");
  EXPECT_EQ(invalid[1]["nodes"], json({"node-0"}));
  EXPECT_NE(invalid[1]["summary"].get<std::string>().find("loopback"), std::string::npos);
  auto mismatch = FindingsWithCode(doc, "ENV_MISMATCH");
  ASSERT_EQ(mismatch.size(), 1u);
  EXPECT_NE(mismatch[0]["summary"].get<std::string>().find("NCCL_SOCKET_IFNAME"), std::string::npos);
}

// Two real NCCL libraries: the system one and the older one scripts/setup.sh fetched from the
// nvidia-nccl-cu12 wheel; node-1's agent loads the latter through DSDOCTOR_NCCL_LIBRARY.
TEST_F(CheckE2eTest, TwoRealNcclVersionsAreNcclVersionMismatch) {
  if (!std::filesystem::exists(DSDOCTOR_SECOND_NCCL)) {
    if (std::getenv("DSDOCTOR_REQUIRE_NCCL")) FAIL() << DSDOCTOR_SECOND_NCCL << " missing: run scripts/setup.sh";
    GTEST_SKIP() << "second NCCL not fetched";
  }
  auto r = InNamespace(
      "umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n' > $DIR/token; "
      "$DSD agent --listen 127.0.0.2:47400 --token-file $DIR/token > $DIR/a.out & A=$!; "
      "DSDOCTOR_NCCL_LIBRARY=" DSDOCTOR_SECOND_NCCL
      " $DSD agent --listen 127.0.0.3:47400 --token-file $DIR/token > $DIR/b.out & B=$!; "
      "$DSD agent --listen 127.0.0.4:47400 --token-file $DIR/token > $DIR/c.out & C=$!; "
      "for i in $(seq 100); do grep -q READY $DIR/a.out && grep -q READY $DIR/b.out && grep -q READY $DIR/c.out && "
      "break; sleep 0.05; done; "
      "$DSD check --launcher attach --agents 127.0.0.2:47400,127.0.0.3:47400,127.0.0.4:47400 --token-file $DIR/token "
      "--connect-timeout-ms 500 --json $DIR/out.json; rc=$?; kill $A $B $C; wait $A $B $C; exit $rc");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  json doc = ReadJson("out.json");
  auto mismatch = FindingsWithCode(doc, "NCCL_VERSION_MISMATCH");
  ASSERT_EQ(mismatch.size(), 1u) << doc["findings"].dump(2);
  std::string summary = mismatch[0]["summary"];
  EXPECT_NE(summary.find("2.21.5 on node-1;"), std::string::npos) << summary;
  // The other two nodes run the system NCCL, whatever its version is, as its own report says.
  std::string system_version = doc["nodes"][0]["report"]["inventory"]["nccl"]["version"];
  EXPECT_NE(system_version, "2.21.5");
  EXPECT_NE(summary.find(system_version + " on node-0, node-2"), std::string::npos) << summary;
  EXPECT_NE(mismatch[0]["evidence"].dump().find(DSDOCTOR_SECOND_NCCL), std::string::npos);
}

TEST_F(CheckE2eTest, WrongTokenIsRefusedAndTheAgentStaysUp) {
  auto r = InNamespace(
      "umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n' > $DIR/token; head -c 32 /dev/urandom | od -An "
      "-tx1 | tr -d ' \\n' > $DIR/bad; "
      "$DSD agent --listen 127.0.0.2:47200 --token-file $DIR/token > $DIR/a.out 2> $DIR/a.err & A=$!; "
      "for i in $(seq 100); do grep -q READY $DIR/a.out && break; sleep 0.05; done; "
      "$DSD check --launcher attach --agents 127.0.0.2:47200 --token-file $DIR/bad --json $DIR/bad.json; echo "
      "bad_rc=$?; "
      "$DSD check --launcher attach --agents 127.0.0.2:47200 --token-file $DIR/token --json $DIR/good.json; echo "
      "good_rc=$?; "
      "kill $A; wait $A; cat $DIR/a.err");
  EXPECT_NE(r.out.find("bad_rc=1"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("good_rc=0"), std::string::npos) << r.out << r.err;
  json bad = ReadJson("bad.json");
  auto unreachable = FindingsWithCode(bad, "AGENT_UNREACHABLE");
  ASSERT_EQ(unreachable.size(), 1u);
  EXPECT_NE(unreachable[0]["evidence"].dump().find("authentication failed"), std::string::npos)
      << unreachable[0].dump();
  EXPECT_NE(r.out.find("refused connection from 127.0.0.1"), std::string::npos);  // the agent logged it
}

// An attacker on the path records a real check's traffic to an agent: the token is nowhere in it,
// and replaying the client's bytes to the agent authenticates nothing (docs/security.md).
TEST_F(CheckE2eTest, TokenNeverCrossesTheWireAndAReplayAuthenticatesNothing) {
  auto r = InNamespace(
      "umask 077; T=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \\n'); echo $T > $DIR/token; echo token=$T; "
      "$DSD agent --listen 127.0.0.2:47410 --token-file $DIR/token > $DIR/a.out 2> $DIR/a.err & A=$!; "
      "for i in $(seq 100); do grep -q READY $DIR/a.out && break; sleep 0.05; done; "
      "python3 " HOSTILE_CLIENT
      " relay --listen 127.0.0.3:47411 --to 127.0.0.2:47410 --record $DIR/cap "
      "--seconds 30 > $DIR/relay.out & R=$!; "
      "for i in $(seq 100); do grep -q relay-ready $DIR/relay.out && break; sleep 0.05; done; "
      "$DSD check --launcher attach --agents 127.0.0.3:47411 --token-file $DIR/token --no-bandwidth "
      "--connect-timeout-ms 300 --json $DIR/via.json > /dev/null; "
      "python3 " HOSTILE_CLIENT
      " replay --to 127.0.0.2:47410 --file $DIR/cap.0.client; "
      "sleep 0.5; kill $R; kill $A; wait $A; echo agent_rc=$?; cat $DIR/a.err");
  auto at = r.out.find("token=");
  ASSERT_NE(at, std::string::npos) << r.out << r.err;
  std::string token = r.out.substr(at + 6, 48);
  ASSERT_EQ(token.size(), 48u);
  json via = ReadJson("via.json");
  EXPECT_EQ(via["nodes"].size(), 1u) << via.dump(2);  // the check worked through the relay
  size_t captured = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    if (e.path().filename().string().rfind("cap.", 0) != 0) continue;
    auto bytes = ReadFile(e.path().string());
    ASSERT_TRUE(bytes.ok());
    captured += bytes->size();
    EXPECT_EQ(bytes->find(token), std::string::npos) << e.path();
    EXPECT_EQ(bytes->find("inventory"), std::string::npos) << e.path();  // requests are sealed too
  }
  EXPECT_GT(captured, 1000u);
  EXPECT_NE(r.out.find("replay-sent="), std::string::npos) << r.out;
  // The agent refused the replay (logged with the peer) and stayed up until we ended it.
  EXPECT_NE(r.out.find("refused connection from"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a replayed or forged handshake"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("agent_rc=143"), std::string::npos) << r.out;
}

// Idle connections and 16 MiB frames before any hello, all at once, while a real check runs: the
// check is clean and the agent stays up (docs/performance.md has its memory under this load).
TEST_F(CheckE2eTest, HostileClientsDoNotStopTheAgentOrACheck) {
  auto r = InNamespace(
      "umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n' > $DIR/token; "
      "$DSD agent --listen 127.0.0.2:47420 --token-file $DIR/token > $DIR/a.out 2> $DIR/a.err & A=$!; "
      "for i in $(seq 100); do grep -q READY $DIR/a.out && break; sleep 0.05; done; "
      "python3 " HOSTILE_CLIENT
      " flood --to 127.0.0.2:47420 --idle 300 --oversized 20 --hold 4 "
      "> $DIR/flood.out & F=$!; "
      "for i in $(seq 200); do grep -q flood-ready $DIR/flood.out && break; sleep 0.05; done; cat $DIR/flood.out; "
      "$DSD check --launcher attach --agents 127.0.0.2:47420 --token-file $DIR/token --no-bandwidth "
      "--json $DIR/out.json > /dev/null; echo check_rc=$?; "
      "kill -0 $A && echo agent_alive=yes; wait $F; kill $A; wait $A; cat $DIR/a.err");
  EXPECT_NE(r.out.find("flood-ready idle=300"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("check_rc=0"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("agent_alive=yes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("it speaks the plaintext protocol of an older dsdoctor"), std::string::npos) << r.out;
  json doc = ReadJson("out.json");
  EXPECT_EQ(doc["summary"]["fail"], 0) << doc["findings"].dump(2);
}

// A DROP rule and a 10 s connect timeout hold the coordinator in its probe phase, agents up, until
// it is killed; $P is the pgrep pattern of the processes it started, $N how many there must be.
// Prints "running=yes" when at least $N are up, lets the coordinator reach its probe phase, kills
// it, then waits up to 10 s for them to go.
constexpr const char* kKillCoordinator =
    "for i in $(seq 200); do [ \"$(pgrep -fc \"$P\")\" -ge $N ] && break; sleep 0.05; done; "
    "[ \"$(pgrep -fc \"$P\")\" -ge $N ] && echo running=yes; sleep 1; kill -9 $C; wait $C; "
    "for i in $(seq 100); do pgrep -f \"$P\" >/dev/null || break; sleep 0.1; done; "
    "pgrep -af \"$P\" || echo no-agents-left; ";

TEST_F(CheckE2eTest, AgentsDoNotOutliveAKilledCoordinator) {
  auto r = InNamespace(
      "iptables -A OUTPUT -s 127.0.0.3 -d 127.0.0.2 -p tcp --dport 47300 -j DROP; "
      "$DSD check --local 3 --agent-port 47300 --connect-timeout-ms 10000 --json $DIR/out.json & C=$!; "
      "P='[a]gent --listen 127.0.0.[234]:47300'; N=3; " +
      std::string(kKillCoordinator));
  EXPECT_NE(r.out.find("running=yes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no-agents-left"), std::string::npos) << r.out << r.err;
}

TEST_F(CheckE2eTest, SshLauncherStartsAgentsAndNamesTheNodeSshCannotReach) {
  if (::access("/usr/sbin/sshd", X_OK) != 0) {
    if (std::getenv("DSDOCTOR_REQUIRE_NETNS")) FAIL() << "sshd missing: run scripts/setup.sh";
    GTEST_SKIP() << "no sshd";
  }
  auto r =
      InNamespace(std::string(e2e::kSshd) +
                  "printf '127.0.0.2 slots=1\\n127.0.0.3 slots=1\\n127.0.0.4 slots=1\\n' > $DIR/hostfile; "
                  "iptables -A INPUT -d 127.0.0.4 -p tcp --dport 2222 -j REJECT --reject-with tcp-reset; "
                  "$DSD check --hostfile $DIR/hostfile --launcher ssh --ssh-opts \"$SSH_OPTS\" --agent-port 47550 "
                  "--connect-timeout-ms 500 --json $DIR/out.json; rc=$?; sleep 0.5; "
                  "pgrep -f '[a]gent --listen 127.0.0.[234]:47550' || echo no-agents-left; kill $S; wait $S; exit $rc");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("no-agents-left"), std::string::npos) << r.out;
  json doc = ReadJson("out.json");
  auto unreachable = FindingsWithCode(doc, "AGENT_UNREACHABLE");
  ASSERT_EQ(unreachable.size(), 1u) << doc["findings"].dump(2);
  EXPECT_EQ(unreachable[0]["nodes"], json({"127.0.0.4"}));
  // ssh's own message is the evidence.
  EXPECT_NE(unreachable[0]["evidence"].dump().find("ssh: connect to host 127.0.0.4 port 2222: Connection refused"),
            std::string::npos)
      << unreachable[0].dump();
  // The two reachable nodes ran real agents over ssh and probed each other.
  EXPECT_EQ(doc["nodes"][0]["reachable"], true);
  EXPECT_EQ(doc["nodes"][1]["reachable"], true);
  EXPECT_EQ(doc["matrix"]["agent"][0][1].get<std::string>().rfind("ok", 0), 0u);
  EXPECT_EQ(doc["matrix"]["agent"][1][0].get<std::string>().rfind("ok", 0), 0u);
  // Over ssh both "nodes" are this machine: the check rightly sees one hostname twice.
  EXPECT_EQ(FindingsWithCode(doc, "DUPLICATE_HOSTNAME").size(), 1u);
}

// `dsdoctor run` over ssh-started agents: two "nodes" (127.0.0.2, 127.0.0.3) with 2 slots each.
TEST_F(CheckE2eTest, RunOverSshAgentsPinpointsRankZeroOnlyCheckpoint) {
  if (::access("/usr/sbin/sshd", X_OK) != 0) {
    if (std::getenv("DSDOCTOR_REQUIRE_NETNS")) FAIL() << "sshd missing: run scripts/setup.sh";
    GTEST_SKIP() << "no sshd";
  }
  auto r = InNamespace(
      std::string(e2e::kSshd) +
      "printf '127.0.0.2 slots=2\\n127.0.0.3 slots=2\\n' > $DIR/hostfile; "
      "$DSD run --hostfile $DIR/hostfile --launcher ssh --ssh-opts \"$SSH_OPTS\" --master_port 29533 --quiet "
      "--log-dir $DIR/logs --json $DIR/run.json -- " EXAMPLES_DIR
      "/rank0_only_checkpoint; rc=$?; "
      "kill $S; wait $S; exit $rc");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  json doc = ReadJson("run.json");
  // Every rank, started by an agent over ssh, was stopped after the report.
  for (const auto& rank : doc["ranks"]) {
    int pid = rank["pid"].get<int>();
    ASSERT_GT(pid, 0);
    EXPECT_NE(::kill(pid, 0), 0) << "rank " << rank["rank"] << " (pid " << pid << ") still runs";
  }
  ASSERT_FALSE(doc["findings"].empty()) << r.out << r.err;
  EXPECT_EQ(doc["findings"][0]["code"], "COLLECTIVE_MISMATCH") << doc["findings"].dump(2);
  EXPECT_EQ(doc["findings"][0]["ranks"], json::array({0}));  // json({0}) is null under clang
  EXPECT_EQ(doc["findings"][0]["nodes"], json({"127.0.0.2"}));
  EXPECT_EQ(doc["ranks"][3]["node"], "127.0.0.3");
  EXPECT_TRUE(std::filesystem::exists(dir_ / "logs" / "rank-3.log"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "logs" / "rank-3.trace"));
  EXPECT_EQ(doc["ranks"][3]["in_flight"]["callsite"], "engine.step");
}

TEST_F(CheckE2eTest, SshAgentsExitWhenTheCoordinatorIsKilled) {
  if (::access("/usr/sbin/sshd", X_OK) != 0) {
    if (std::getenv("DSDOCTOR_REQUIRE_NETNS")) FAIL() << "sshd missing: run scripts/setup.sh";
    GTEST_SKIP() << "no sshd";
  }
  // Both the ssh clients and the agents they started match the pattern: 2 + 2.
  auto r = InNamespace(std::string(e2e::kSshd) +
                       "printf '127.0.0.2 slots=1\\n127.0.0.3 slots=1\\n' > $DIR/hostfile; "
                       "iptables -A OUTPUT -s 127.0.0.3 -d 127.0.0.2 -p tcp --dport 47500 -j DROP; "
                       "$DSD check --hostfile $DIR/hostfile --launcher ssh --ssh-opts \"$SSH_OPTS\" --agent-port 47500 "
                       "--connect-timeout-ms 10000 --json $DIR/out.json & C=$!; "
                       "P='[a]gent --listen 127.0.0.[23]:47500'; N=4; " +
                       std::string(kKillCoordinator) + "kill $S; wait $S");
  EXPECT_NE(r.out.find("running=yes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no-agents-left"), std::string::npos) << r.out << r.err;
}

// OpenMPI's mpirun starts the agents; each takes its node from OMPI_COMM_WORLD_RANK and binds
// that node's address, so a firewall rule between two of them is still seen as such.
TEST_F(CheckE2eTest, MpirunLauncherStartsOneAgentPerNode) {
  auto r = InNamespace(
      "iptables -A OUTPUT -s 127.0.0.4 -d 127.0.0.2 -p tcp --dport 47700 -j DROP; "
      "$DSD check --local 3 --launcher mpirun --agent-port 47700 --connect-timeout-ms 500 --json $DIR/out.json; rc=$?; "
      "sleep 0.5; pgrep -f '[a]gent --mpi-nodes .* --listen mpi:47700' || echo no-agents-left; exit $rc");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("no-agents-left"), std::string::npos) << r.out;
  json doc = ReadJson("out.json");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(doc["nodes"][i]["reachable"], true) << doc["nodes"][i]["error"];
  EXPECT_EQ(doc["nodes"][1]["address"], "127.0.0.3");
  auto blocked = FindingsWithCode(doc, "PORT_BLOCKED");
  ASSERT_EQ(blocked.size(), 1u) << doc["findings"].dump(2);
  EXPECT_EQ(blocked[0]["nodes"], json({"node-2", "node-0"}));
  EXPECT_EQ(doc["findings"].size(), 1u) << doc["findings"].dump(2);
}

// Agents started by mpirun run the all-reduce probe as MPI_Allreduce over MPI_COMM_WORLD.
TEST_F(CheckE2eTest, MpirunAgentsProbeWithMpiAllreduce) {
  auto r = InNamespace(
      "$DSD check --local 3 --launcher mpirun --agent-port 47900 --sizes 4K,64K --p2p-seconds 0.1 --json "
      "$DIR/out.json");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  json doc = ReadJson("out.json");
  EXPECT_EQ(doc["bandwidth"]["backend"], "mpi");
  EXPECT_EQ(doc["bandwidth"]["ranks"], 3);
  ASSERT_EQ(doc["bandwidth"]["allreduce"].size(), 2u) << doc["bandwidth"].dump();
  for (const auto& row : doc["bandwidth"]["allreduce"]) EXPECT_EQ(row["wrong"], 0);
  EXPECT_NE(r.out.find("all-reduce, mpi, 3 ranks"), std::string::npos);
}

// A container's CPU limit (a cgroup quota) of 1.5 CPUs on a node with two ranks: spinning on two
// cores would get the cgroup throttled, so the all-reduce probe must sleep in read(2). A real cgroup
// (v1 cpu, or v2 where the cpu controller is on), made for this test and removed after it.
TEST_F(CheckE2eTest, ACgroupCpuQuotaBelowTheRanksTurnsBusyPollingOff) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(::sched_getaffinity(0, sizeof allowed, &allowed), 0);
  if (CPU_COUNT(&allowed) < 2) GTEST_SKIP() << "needs 2 CPUs, so that without the quota the ranks would busy-poll";
  const std::string name = "dsd-e2e-quota-" + std::to_string(::getpid());
  // A cgroup file is written in place (a rename would not set anything).
  auto write = [](const std::string& path, const std::string& text) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) return false;
    const bool ok = std::fputs(text.c_str(), f) >= 0;
    return std::fclose(f) == 0 && ok;
  };
  std::string cgroup;
  if (std::filesystem::exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")) {
    cgroup = "/sys/fs/cgroup/cpu/" + name;
    if (::mkdir(cgroup.c_str(), 0755) != 0 || !write(cgroup + "/cpu.cfs_quota_us", "150000")) cgroup.clear();
  } else if (ReadFile("/sys/fs/cgroup/cgroup.subtree_control").value_or("").find("cpu") != std::string::npos) {
    cgroup = "/sys/fs/cgroup/" + name;
    if (::mkdir(cgroup.c_str(), 0755) != 0 || !write(cgroup + "/cpu.max", "150000 100000")) cgroup.clear();
  }
  struct Remove {
    std::string dir;
    ~Remove() {
      if (!dir.empty()) ::rmdir(dir.c_str());  // empty by then: its processes have exited
    }
  } remove{cgroup};
  if (cgroup.empty()) GTEST_SKIP() << "cannot make a cgroup with a CPU quota here";
  auto r = InNamespace("echo $$ > " + cgroup +
                       "/cgroup.procs && $DSD check --local 2 --sizes 4K --p2p-seconds 0.1 --json $DIR/out.json");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  json doc = ReadJson("out.json");
  EXPECT_EQ(doc["bandwidth"]["mode"], "synchronous pairs, blocking reads") << doc["bandwidth"].dump();
  for (const auto& node : doc["nodes"]) {
    EXPECT_EQ(node["report"]["inventory"]["system"]["cpus"], 1) << node["name"];
    EXPECT_EQ(node["report"]["inventory"]["system"]["cpu_quota"], 1.5) << node["name"];
  }
}

TEST_F(CheckE2eTest, MpirunFailureIsAgentUnreachableWithMpirunsMessage) {
  auto r = InNamespace(
      "$DSD check --local 2 --launcher mpirun --remote-dsdoctor /nonexistent/dsdoctor --json $DIR/out.json");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  json doc = ReadJson("out.json");
  auto unreachable = FindingsWithCode(doc, "AGENT_UNREACHABLE");
  ASSERT_EQ(unreachable.size(), 2u) << doc["findings"].dump(2);
  EXPECT_NE(unreachable[0]["evidence"].dump().find("/nonexistent/dsdoctor"), std::string::npos)
      << unreachable[0].dump();
}

TEST_F(CheckE2eTest, MpirunAgentsExitWhenTheCoordinatorIsKilled) {
  auto r = InNamespace(
      "iptables -A OUTPUT -s 127.0.0.3 -d 127.0.0.2 -p tcp --dport 47800 -j DROP; "
      "$DSD check --local 3 --launcher mpirun --agent-port 47800 --connect-timeout-ms 10000 --json $DIR/out.json & "
      "C=$!; "
      "P='[a]gent --mpi-nodes .* --listen mpi:47800'; N=4; " +
      std::string(kKillCoordinator));
  EXPECT_NE(r.out.find("running=yes"), std::string::npos) << r.out;  // mpirun's command line matches too
  EXPECT_NE(r.out.find("no-agents-left"), std::string::npos) << r.out << r.err;
}

// A cluster of network namespaces joined by a bridge (tests/e2e/netns_cluster.sh, 198.18.0.0/24),
// node-2's link shaped to 50 Mbit/s both ways with tc: the p2p probes must name node-2.
TEST_F(CheckE2eTest, RateLimitedNodeIsBandwidthLowInJsonAndJUnit) {
  std::string prefix = "dsd" + std::to_string(::getpid() % 100000);
  CommandOptions opts;
  opts.env = {{"DSD", DSDOCTOR_BIN}, {"DIR", dir_.string()}, {"DSDOCTOR_LOG_LEVEL", "warn"}};
  opts.timeout = std::chrono::seconds(120);
  auto r = RunCommand({NETNS_CLUSTER, prefix, "4", "2", "50mbit", "--", "bash", "-c",
                       "$DSD check --launcher attach --agents $AGENTS --token-file $TOKEN_FILE --sizes 4K,256K "
                       "--p2p-seconds 0.2 --connect-timeout-ms 1000 --json $DIR/out.json --junit $DIR/junit.xml"},
                      opts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 1) << r->out << r->err;
  json doc = ReadJson("out.json");
  auto low = FindingsWithCode(doc, "BANDWIDTH_LOW");
  ASSERT_EQ(low.size(), 1u) << doc["findings"].dump(2);
  EXPECT_EQ(low[0]["nodes"], json({"node-2"}));
  EXPECT_NE(low[0]["summary"].get<std::string>().find("node node-2 is slow: 6 of its 6 transfers"), std::string::npos)
      << low[0].dump();
  // Every pair touching node-2 is far below the others.
  for (const auto& p : doc["bandwidth"]["p2p"]) {
    bool slow_pair = p["from"] == "node-2" || p["to"] == "node-2";
    if (slow_pair)
      EXPECT_LT(p["gbit_s"].get<double>(), 0.06) << p.dump();
    else
      EXPECT_GT(p["gbit_s"].get<double>(), 0.2) << p.dump();
  }
  for (const auto& row : doc["bandwidth"]["allreduce"]) EXPECT_EQ(row["wrong"], 0);
  auto junit = ReadFile((dir_ / "junit.xml").string());
  ASSERT_TRUE(junit.ok());
  EXPECT_NE(junit->find("name=\"p2p bandwidth\""), std::string::npos);
  EXPECT_NE(junit->find("<failure type=\"BANDWIDTH_LOW\""), std::string::npos) << *junit;
  // The script removed its namespaces.
  auto ns = RunCommand({"ip", "netns", "list"}, {});
  EXPECT_EQ(ns->out.find(prefix + "-"), std::string::npos) << ns->out;
}

}  // namespace
}  // namespace dsd
