#include "coordinator/hostfile.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/strings.h"

namespace dsd::coordinator {
namespace {

// One case of DeepSpeed launcher parity. `want` is the plan as "host:slots host:slots" or
// "error: <part of the message>". The comment after each case is what deepspeed's runner.py
// (0.19.8: _parse_hostfile, parse_inclusion_exclusion and the num_nodes/num_gpus code of main)
// gives for the same input; where dsdoctor differs, the note it prints says so.
struct ParityCase {
  std::string name;
  std::string hostfile;
  PlanOptions options;
  std::string want;
  std::string note = {};  // part of a note the plan must carry ("" = no note at all)
};

void PrintTo(const ParityCase& c, std::ostream* os) { *os << c.name; }

std::string Render(const NodeSelection& s) {
  std::string out;
  for (const auto& n : s.nodes) {
    std::string slots;
    for (int v : n.slots) slots += (slots.empty() ? "" : ",") + std::to_string(v);
    out += (out.empty() ? "" : " ") + n.host + ":" + slots;
  }
  return out;
}

class DeepSpeedParityTest : public ::testing::TestWithParam<ParityCase> {};

TEST_P(DeepSpeedParityTest, PlansWhatDeepSpeedPlans) {
  const ParityCase& c = GetParam();
  auto hf = ParseHostfile("hf", c.hostfile);
  Result<NodeSelection> plan = hf.ok() ? PlanNodes(*hf, c.options) : Result<NodeSelection>(hf.status());
  if (StartsWith(c.want, "error: ")) {
    ASSERT_FALSE(plan.ok()) << "planned " << Render(*plan);
    EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(plan.status().message().find(c.want.substr(7)), std::string::npos) << plan.status().message();
    return;
  }
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(Render(*plan), c.want);
  if (c.note.empty()) {
    EXPECT_TRUE(plan->notes.empty()) << plan->notes.front();
  } else {
    EXPECT_NE(Join(plan->notes, "\n").find(c.note), std::string::npos) << Join(plan->notes, "\n");
  }
}

const char* kThree = "w1 slots=4\nw2 slots=4\nw3 slots=2\n";

INSTANTIATE_TEST_SUITE_P(
    Grammar, DeepSpeedParityTest,
    ::testing::Values(
        ParityCase{"Plain", "w1 slots=4\n", {}, "w1:0,1,2,3"},  // {'w1': [0..3]}
        ParityCase{
            "SpacesAroundEquals", "w1 slots = 4\n", {}, "error: hf:1: bad entry 'w1 slots = 4': no spaces allowed"},
        ParityCase{"NoSlots", "w1\n", {}, "error: hf:1: bad entry 'w1': no slots=N (OpenMPI would take 1 slot"},
        ParityCase{"TokenBeforeSlots", "w1 cpu slots=4\n", {}, "error: 'cpu' stands between the host name and slots=N"},
        ParityCase{"MaxSlotsFirst", "w1 max_slots=8 slots=4\n", {}, "error: max_slots is OpenMPI-only"},
        ParityCase{"MaxSlotsAfter",
                   "w1 slots=4 max_slots=8\n",
                   {},
                   "w1:0,1,2,3",
                   "hf:1: 'max_slots=8' after slots=4 is ignored"},
        ParityCase{"HashInHostName", "worker#1 slots=2\n", {}, "worker#1:0,1"},  // no inline comments in host names
        ParityCase{"TrailingComment", "w1 slots=4 # rack 3\n", {}, "w1:0,1,2,3"},
        ParityCase{"OnlyComments", "# c\n\n", {}, "error: hf: no hosts (deepspeed: \"Hostfile is empty"},
        ParityCase{"Empty", "", {}, "error: hf: no hosts"},
        // deepspeed accepts slots=0 and counts a node that starts nothing
        ParityCase{"ZeroSlots", "w1 slots=0\n", {}, "error: hf:1: slots=0 for host 'w1'"},
        ParityCase{"LeadingZero", "w1 slots=04\n", {}, "w1:0,1,2,3"},
        ParityCase{"GluedText", "w1 slots=4abc\n", {}, "w1:0,1,2,3", "'abc' after slots=4 is ignored"},
        ParityCase{"Tab", "w1\tslots=2\n", {}, "w1:0,1"}, ParityCase{"Indented", "  w1 slots=2  \n", {}, "w1:0,1"},
        ParityCase{"Duplicate", "w1 slots=2\nw1 slots=3\n", {}, "error: hf:2: duplicate host 'w1' (first at line 1"},
        ParityCase{"Negative", "w1 slots=-1\n", {}, "error: slots= must be followed by a whole number"},
        ParityCase{"MissingCount", "w1 slots=\n", {}, "error: hf:1: bad entry 'w1 slots='"},
        ParityCase{"Crlf", "w1 slots=2\r\n", {}, "w1:0,1"},
        ParityCase{"LoneCr", "w1 slots=2\rw2 slots=1\r", {}, "w1:0,1 w2:0"},  // readlines() splits at \r
        ParityCase{"NoHost", "slots=4\n", {}, "error: no host name before slots="},
        ParityCase{"IndentedComment", "w1 slots=2 #x\n  # c\n", {}, "w1:0,1"},
        // deepspeed takes any count; thousands of slots per host is a typo that would cost memory
        ParityCase{"HugeSlots", "w1 slots=2000000000\n", {}, "error: is more than 4096 slots"}));

INSTANTIATE_TEST_SUITE_P(
    Include, DeepSpeedParityTest,
    ::testing::Values(
        // deepspeed 0.19.8 plans {} for a host named without slots (and then fails); the docs say all slots
        ParityCase{
            "WholeHost", kThree, {.include = "w1"}, "w1:0,1,2,3", "write w1:0,1,2,3 to run the same under deepspeed"},
        ParityCase{"Slots", kThree, {.include = "w1:0,2"}, "w1:0,2"},
        ParityCase{"RepeatedHostMerges", kThree, {.include = "w1:0@w1:2"}, "w1:0,2"},
        ParityCase{"WholeAndSlots", kThree, {.include = "w1@w1:2"}, "w1:2"},  // {'w1': [2]}
        ParityCase{"SortedUnique", kThree, {.include = "w1:2,0,2"}, "w1:0,2"},
        ParityCase{"UndeclaredSlot",
                   kThree,
                   {.include = "w1:7"},
                   "w1:7",
                   "deepspeed accepts it and sets CUDA_VISIBLE_DEVICES=7"},
        ParityCase{"UnknownHost", kThree, {.include = "w9"}, "error: --include: host 'w9' is not in hf"},
        ParityCase{"TrailingAt", kThree, {.include = "w1@"}, "error: empty host name between '@'"},
        ParityCase{"EmptySlot", kThree, {.include = "w1:"}, "error: slot '' of host 'w1' is not a slot number"},
        ParityCase{"TwoColons", kThree, {.include = "w1:0:1"}, "error: has more than one ':'"},
        ParityCase{"HostfileOrder", kThree, {.include = "w3:1@w1:0"}, "w1:0 w3:1"},
        // deepspeed passes it on: CUDA_VISIBLE_DEVICES=-1 hides every GPU
        ParityCase{"NegativeSlot", kThree, {.include = "w1:-1"}, "error: would pass it on as CUDA_VISIBLE_DEVICES"}));

INSTANTIATE_TEST_SUITE_P(
    Exclude, DeepSpeedParityTest,
    ::testing::Values(
        ParityCase{"WholeHost", kThree, {.exclude = "w1"}, "w2:0,1,2,3 w3:0,1"},
        ParityCase{"OneSlot", kThree, {.exclude = "w1:0"}, "w1:1,2,3 w2:0,1,2,3 w3:0,1"},
        ParityCase{"MissingSlot",
                   kThree,
                   {.exclude = "w3:5"},
                   "error: --exclude: slot 5 is not on host 'w3' (it has 2 slots (hf:3)"},
        ParityCase{"Everything", kThree, {.exclude = "w1@w2@w3"}, "error: no nodes left after filtering hf"},
        ParityCase{"EverySlot", kThree, {.exclude = "w1:0,1,2,3"}, "w2:0,1,2,3 w3:0,1"},
        ParityCase{"UnknownHost", kThree, {.exclude = "w9"}, "error: --exclude: host 'w9' is not in hf"}));

INSTANTIATE_TEST_SUITE_P(
    Counts, DeepSpeedParityTest,
    ::testing::Values(
        ParityCase{"IncludeAndExclude", kThree, {.include = "w1", .exclude = "w2"}, "error: mutually exclusive"},
        ParityCase{"IncludeWithNumNodes",
                   kThree,
                   {.include = "w1", .num_nodes = 1},
                   "error: --num_nodes with --include: deepspeed refuses"},
        ParityCase{"ExcludeWithNumGpus", kThree, {.exclude = "w1", .num_gpus = 2}, "error: --num_gpus with --exclude"},
        ParityCase{"IncludeWithNumNodesZero",
                   kThree,
                   {.include = "w1", .num_nodes = 0},
                   "error: Cannot specify num_nodes/gpus"},
        ParityCase{"NumNodesZeroIsAll", kThree, {.num_nodes = 0}, "w1:0,1,2,3 w2:0,1,2,3 w3:0,1"},
        ParityCase{"NumNodes", kThree, {.num_nodes = 2}, "w1:0,1,2,3 w2:0,1,2,3"},
        ParityCase{"NumNodesAboveHosts",
                   kThree,
                   {.num_nodes = 5},
                   "w1:0,1,2,3 w2:0,1,2,3 w3:0,1",
                   "deepspeed runs on those 3"},
        ParityCase{"NumGpus", kThree, {.num_gpus = 1}, "w1:0 w2:0 w3:0"},
        ParityCase{"NumGpusAboveSlots",
                   kThree,
                   {.num_gpus = 3},
                   "w1:0,1,2 w2:0,1,2 w3:0,1,2",
                   "--num_gpus 3 is more than the 2 slots of 'w3' (hf:3): deepspeed starts 3 ranks there anyway"},
        ParityCase{"NumGpusZeroIsAll", kThree, {.num_gpus = 0}, "w1:0,1,2,3 w2:0,1,2,3 w3:0,1"},
        ParityCase{"Both", kThree, {.num_nodes = 2, .num_gpus = 1}, "w1:0 w2:0"}));

TEST(HostfileTest, KeepsLineNumbers) {
  auto hf = ParseHostfile("hf", "# cluster\nworker-1 slots=4\n\n  worker-2   slots=2  # two GPUs\n");
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  ASSERT_EQ(hf->hosts.size(), 2u);
  EXPECT_EQ(hf->hosts[1].host, "worker-2");
  EXPECT_EQ(hf->hosts[1].line, 4);
}

// Control bytes in a hostfile never reach the terminal through a message: a host name with them is
// refused naming file:line, and every quoted piece of the file shows them as \xNN.
TEST(HostfileTest, ControlBytesAreNamedNeverPrinted) {
  const auto has_control = [](const std::string& s) {
    return std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
  };
  auto host = ParseHostfile("hf", "w1 slots=2\n\x1b[2Jw2 slots=2\n");
  ASSERT_FALSE(host.ok());
  EXPECT_NE(host.status().message().find("hf:2: host '\\x1b[2Jw2' holds control characters"), std::string::npos)
      << host.status().message();
  EXPECT_FALSE(has_control(host.status().message()));
  auto entry = ParseHostfile("hf", "w1 \x07slots=2\n");
  ASSERT_FALSE(entry.ok());
  EXPECT_NE(entry.status().message().find("bad entry 'w1 \\x07slots=2'"), std::string::npos)
      << entry.status().message();
  EXPECT_FALSE(has_control(entry.status().message()));
  auto note = ParseHostfile("hf", "w1 slots=2 \x1b]0;title\x07\n");
  ASSERT_TRUE(note.ok());
  ASSERT_EQ(note->notes.size(), 1u);
  EXPECT_FALSE(has_control(note->notes[0])) << note->notes[0];
  auto filter = PlanNodes(*ParseHostfile("hf", "w1 slots=2\n"), {.include = "w\x1b" "9"});
  ASSERT_FALSE(filter.ok());
  EXPECT_FALSE(has_control(filter.status().message())) << filter.status().message();
}

TEST(HostfileTest, DefaultHostfileFollowsDeepSpeed) {
  EXPECT_EQ(DefaultHostfilePath("/nonexistent/job/hostfile"), std::nullopt);
  EXPECT_EQ(DefaultHostfilePath("/proc/self/status"), "/proc/self/status");
}

}  // namespace
}  // namespace dsd::coordinator
