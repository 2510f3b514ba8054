// The `dsdoctor` subcommands. Each returns the process exit code:
// 0 healthy, 1 problems found, 2 bad usage or input, 3 internal failure.
#pragma once

#include <string>

namespace dsd::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitProblems = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitInternal = 3;

struct ReportOptions {
  bool json = false;
  bool color = false;  // colour marks (only when stdout is a terminal and NO_COLOR is unset)
};
int RunReport(const ReportOptions& options);

// Parses argv and dispatches; catches everything so no exception escapes main.
int Main(int argc, char** argv);

}  // namespace dsd::cli
