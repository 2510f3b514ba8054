// Terminal-wrapped pastes: recognised from their shape, joined back, and nothing else is joined.
#include "collectors/log_unwrap.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectors/log_samples_testing.h"

namespace dsd::collectors {
namespace {

// What a terminal of `width` columns does to ASCII lines (and what `fold -w` does).
std::string Fold(const std::string& text, size_t width) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    do {
      out += line.substr(0, width) + "\n";
      line = line.size() > width ? line.substr(width) : "";
    } while (!line.empty());
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return out;
}

const std::string kWatchdogLog =
    "[2024-05-01 12:00:00,001] torch.distributed.run: [WARNING] Setting OMP_NUM_THREADS environment variable for "
    "each process to be 1\n"
    "[default0]:step 1 loss 2.31\n" +
    log_samples::TorchWatchdogTimeoutLine(1, "1800012") + log_samples::TorchWatchdogTimeoutLine(2, "1800015") +
    "[rank1]:[E501 12:30:00.100000000 ProcessGroupNCCL.cpp:1570] [PG ID 0 PG GUID 0(default_pg) Rank 1] Timeout at "
    "NCCL work: 2, last enqueued NCCL work: 2, last completed NCCL work: 1.\n"
    "Traceback (most recent call last):\n"
    "  File \"/home/user/train.py\", line 42, in <module>\n"
    "    dist.all_reduce(t)\n"
    "torch.distributed.DistBackendError: NCCL communicator was aborted on rank 1. Original reason for failure was: "
    "[Rank 1] Watchdog caught collective operation timeout\n";

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    out.push_back(text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos));
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return out;
}

TEST(LogUnwrapTest, DisplayColumnsCountCharactersAndTabStops) {
  EXPECT_EQ(DisplayColumns("abc"), 3);
  EXPECT_EQ(DisplayColumns("abc\r"), 3);
  EXPECT_EQ(DisplayColumns("\tx"), 9);
  EXPECT_EQ(DisplayColumns("ab\tx"), 9);
  EXPECT_EQ(DisplayColumns("caf\xc3\xa9"), 4);  // é is two bytes, one column
}

TEST(LogUnwrapTest, AFoldedPasteIsRecognisedAtItsWidth) {
  for (size_t width : {80, 100, 120, 132}) {
    WrapShape w = DetectWrap(Fold(kWatchdogLog, width), {});
    EXPECT_EQ(w.width, static_cast<int>(width));
    EXPECT_GE(w.continued, 3);
  }
}

TEST(LogUnwrapTest, AnUnwrappedLogIsNotTakenForWrapped) {
  EXPECT_EQ(DetectWrap(kWatchdogLog, {}).width, 0);
  // The same record on many ranks: many lines of the greatest width, each followed by a new record.
  std::string same;
  for (int r = 10; r < 40; ++r)
    same += "[rank" + std::to_string(r) +
            "]:[E501 12:30:00.000000000 ProcessGroupNCCL.cpp:607] [Rank x] Watchdog caught collective operation "
            "timeout\n";
  EXPECT_EQ(DetectWrap(same, {}).width, 0);
}

TEST(LogUnwrapTest, TablesAndFixedFormatLinesAreNotTakenForWrapped) {
  // nvidia-smi: every line of the table has the same width, and none ends a "record".
  std::string smi = "Mon May  1 12:00:00 2024\n";
  smi += "+" + std::string(89, '-') + "+\n";
  for (int i = 0; i < 8; ++i)
    smi += "|   " + std::to_string(i) +
           "  NVIDIA A100-SXM4-80GB          On  | 00000000:07:00.0 Off |                    0 |\n";
  smi += "+" + std::string(89, '-') + "+\n";
  smi += "done\n";
  EXPECT_EQ(DetectWrap(smi, {}).width, 0);
  // A training loop's fixed-format lines.
  std::string loop;
  for (int i = 0; i < 50; ++i)
    loop += "step " + std::to_string(1000 + i) +
            " | loss 2.3456 | lr 1.00e-04 | grad norm 0.5123 | 0.52 s/it | tokens/s 123456\n";
  EXPECT_EQ(DetectWrap(loop, {}).width, 0);
  // Open MPI's help texts: 74-dash rules around short lines.
  std::string help;
  for (int i = 0; i < 4; ++i)
    help += std::string(74, '-') + "\nmpirun noticed that process rank " + std::to_string(i) +
            " with PID 0 on node n1 exited on signal 9 (Killed).\n" + std::string(74, '-') + "\n";
  EXPECT_EQ(DetectWrap(help, {}).width, 0);
}

TEST(LogUnwrapTest, UnwrapGivesBackTheLinesAndWhereEachBegan) {
  const std::string folded = Fold(kWatchdogLog, 80);
  std::vector<LineOrigin> origins;
  int64_t joins = 0;
  std::string joined = Unwrap(folded, 80, {}, 1, 0, 64 << 10, &origins, &joins);
  std::vector<std::string> want = Lines(kWatchdogLog);
  want.pop_back();  // the text's final '\n'
  EXPECT_EQ(Lines(joined), want);
  ASSERT_EQ(origins.size(), want.size());
  const std::vector<std::string> physical = Lines(folded);
  for (size_t i = 0; i < origins.size(); ++i) {
    // Each joined line begins where its first piece began.
    ASSERT_GE(origins[i].line, 1);
    EXPECT_EQ(physical[origins[i].line - 1], want[i].substr(0, 80)) << i;
    EXPECT_EQ(folded.substr(origins[i].offset, 80).substr(0, std::min<size_t>(80, want[i].size())),
              want[i].substr(0, 80));
  }
  EXPECT_EQ(joins, static_cast<int64_t>(physical.size() - 1 - want.size()));
}

TEST(LogUnwrapTest, ALineOfTheWidthIsNotJoinedWithARecordOrAnEmptyLine) {
  const std::string a(80, 'a');
  std::vector<LineOrigin> origins;
  int64_t joins = 0;
  std::string text = a + "\n[rank1]: next record\n" + a + "\n\nafter a blank\n" + a +
                     "\nTraceback (most recent call last):\n" + a + "\ncontinued";
  std::string joined = Unwrap(text, 80, {}, 10, 100, 64 << 10, &origins, &joins);
  EXPECT_EQ(Lines(joined), (std::vector<std::string>{a, "[rank1]: next record", a, "", "after a blank", a,
                                                     "Traceback (most recent call last):", a + "continued"}));
  EXPECT_EQ(joins, 1);
  EXPECT_EQ(origins.front().line, 10);
  EXPECT_EQ(origins.front().offset, 100);
  EXPECT_EQ(origins.back().line, 17);
}

TEST(LogUnwrapTest, AJoinedLineStopsGrowingAtTheLimit) {
  std::string text;
  for (int i = 0; i < 10; ++i) text += std::string(80, 'x') + "\n";
  std::vector<LineOrigin> origins;
  int64_t joins = 0;
  std::string joined = Unwrap(text, 80, {}, 1, 0, 250, &origins, &joins);
  for (const std::string& line : Lines(joined)) EXPECT_LE(line.size(), 250u);
  EXPECT_GT(origins.size(), 1u);
}

// Logs of plain prints (no prefix, timestamp or level on their records) give the signal nothing to
// stand on: a fixed-format progress line followed by a checkpoint message and a final "Killed", a
// warning followed by its source line, an exception followed by NCCL's explanation.
TEST(LogUnwrapTest, LogsOfPlainPrintsAreNotTakenForWrapped) {
  std::string killed;
  for (int i = 1; i <= 13; ++i) {
    killed += "step " + std::to_string(1000 + i * 100) +
              "/100000 | loss 2.3456 | lr 1.00e-04 | grad norm 0.5123 | 0.52 s/it | tok/s 123456 | mem 12.34 GiB\n";
    if (i % 3 == 0) killed += "saved checkpoint to /ckpt/step" + std::to_string(i) + "\n";
  }
  killed += "Killed\n";
  EXPECT_EQ(DetectWrap(killed, {}).width, 0);
  std::string warned;
  for (int r = 0; r < 4; ++r)
    warned += "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py:" + std::to_string(100 + r) +
              ": UserWarning: barrier(): using the device under current context. You can specify device_id in "
              "init_process_group to mute this warning and make the barrier use the device of the process group.\n"
              "  warnings.warn(\n";
  EXPECT_EQ(DetectWrap(warned, {}).width, 0);
  // Never joined either: a line that starts like a record of its own.
  std::vector<LineOrigin> origins;
  int64_t joins = 0;
  const std::string a(80, 'a');
  Unwrap(a + "\nKilled\n" + a + "\nRuntimeError: boom\n" + a + "\nsrun: error: node7: task 3: Out Of Memory\n", 80, {},
         1, 0, 64 << 10, &origins, &joins);
  EXPECT_EQ(joins, 0);
}

}  // namespace
}  // namespace dsd::collectors
