#include "collectors/output_pump.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "common/file.h"
#include "common/small_tmpfs_testing.h"

namespace dsd::collectors {
namespace {

namespace fs = std::filesystem;

class OutputPumpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dsd-pump-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

bool WriteAllTo(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// What a rank writes reaches its log, all of it, by the time Flush returns after the writer closed.
TEST_F(OutputPumpTest, EveryByteAWriterSendsIsInTheLogAfterFlush) {
  OutputPump pump;
  size_t index = 9;
  auto w = pump.Add(dir_ + "/rank-0.log", &index);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(index, 0u);
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "step " + std::to_string(i) + " loss 0.5\n";  // ~320 KB
  ASSERT_TRUE(WriteAllTo(w->get(), text));
  w->Reset();  // the rank exited
  pump.Flush(index);
  auto log = ReadFile(dir_ + "/rank-0.log");
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(*log, text);
  EXPECT_EQ(pump.stats(index).written, text.size());
  EXPECT_EQ(pump.stats(index).lost, 0u);
}

// The log's file system fills up (a 4 MiB tmpfs in a private mount namespace): the writer never
// sees an error nor blocks for good; 1 MiB waits in memory, the rest is counted lost; when space
// returns, what waited is written and a line marks the gap.
TEST_F(OutputPumpTest, AFullFileSystemNeverFailsTheWriterAndWhatWaitedIsWrittenWhenSpaceReturns) {
  const int code = testing::InSmallTmpfs(dir_, "4m", [](const std::string& small) {
    OutputPump pump;
    size_t index = 0;
    auto w = pump.Add(small + "/rank-0.log", &index);
    if (!w.ok()) return 3;
    // Fill the file system.
    {
      std::string block(4096, 'f');
      FILE* f = std::fopen((small + "/filler").c_str(), "w");
      if (!f) return 3;
      while (std::fwrite(block.data(), 1, block.size(), f) == block.size() && std::fflush(f) == 0) {
      }
      std::fclose(f);
    }
    const std::string chunk(1u << 16, 'x');
    for (int i = 0; i < 48; ++i)  // 3 MiB: more than the pipe and the memory allowance
      if (!WriteAllTo(w->get(), chunk)) return 4;
    for (int i = 0; i < 200 && pump.stats(index).held + pump.stats(index).lost < 48u * chunk.size(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    auto s = pump.stats(index);
    if (s.held != (1u << 20) || s.written + s.held + s.lost != 48u * chunk.size()) return 5;
    if (s.error != "No space left on device") return 6;
    ::unlink((small + "/filler").c_str());  // space returns
    for (int i = 0; i < 300 && pump.stats(index).held > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    s = pump.stats(index);
    if (s.held != 0) return 7;
    auto log = ReadFile(small + "/rank-0.log");
    const std::string mark = "[dsdoctor: " + std::to_string(s.lost) + " bytes of this rank's output were lost here: ";
    if (!log.ok() || log->find(mark) == std::string::npos) return 8;
    return 0;
  });
  if (code == testing::kNoNamespace) GTEST_SKIP() << "no root or no mount namespace here";
  EXPECT_EQ(code, 0) << "4: the writer failed; 5: held/lost wrong; 6: error; 7: not written when space returned; "
                        "8: no gap mark";
}

}  // namespace
}  // namespace dsd::collectors
