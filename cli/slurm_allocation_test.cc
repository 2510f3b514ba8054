#include <gtest/gtest.h>

#include "cli/commands.h"

namespace dsd::cli {
namespace {

using Args = std::vector<std::string>;

// What salloc runs again inside the allocation: our argv without the flags that asked for it, and
// never a word of the job's own command after "--".
TEST(WithoutSallocFlagsTest, DropsTheAllocationFlagsBeforeTheJobsCommandOnly) {
  EXPECT_EQ(WithoutSallocFlags({"--log-level", "debug", "check", "--slurm-args", "-N 4 -p gpu", "--slurm-wait", "60",
                                "--no-bandwidth"}),
            (Args{"--log-level", "debug", "check", "--no-bandwidth"}));
  EXPECT_EQ(WithoutSallocFlags(
                {"run", "--slurm-args=-N 2", "--slurm-wait=5", "--", "python", "train.py", "--slurm-args", "x"}),
            (Args{"run", "--", "python", "train.py", "--slurm-args", "x"}));
  EXPECT_EQ(WithoutSallocFlags({"check"}), (Args{"check"}));
}

}  // namespace
}  // namespace dsd::cli
