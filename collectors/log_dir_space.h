// How full the file system under a log dir is: statvfs for the space, /proc/self/mountinfo for
// which file system it is. `run` reports it from every node so that a full disk is named
// (LOG_DIR_FULL) rather than showing up as ranks that died or stopped printing.
// Free functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "diagnosis/state.h"

namespace dsd::collectors {

// Space and identity of the file system holding `dir`. `node` and `write_errors` are left empty.
Result<diagnosis::LogDirStatus> ProbeLogDir(const std::string& dir);

// The mount point and type of the mount that holds `path` (an absolute, resolved path), from the
// text of a mountinfo file: the longest mount point that is a path prefix of `path`. Pure.
void MountOf(std::string_view mountinfo, const std::string& path, std::string* mount, std::string* fs_type);

}  // namespace dsd::collectors
