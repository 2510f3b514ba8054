// File helpers returning Status instead of throwing.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace dsd {

// Whole file; errors name the path. Refuses files over max_bytes (protects against /dev/zero).
Result<std::string> ReadFile(const std::string& path, size_t max_bytes = 64u << 20);
// Up to `length` bytes from `offset` (fewer where the file ends first); errors name the path.
Result<std::string> ReadFileRange(const std::string& path, uint64_t offset, size_t length);
// Writes to path.tmp.<pid>, fsyncs, renames over path, fsyncs the directory: readers see the old
// or the new content, never a torn file. A path that exists and is not a regular file (/dev/null,
// /dev/stdout, a FIFO) is written in place: renaming over it would replace the device.
// `after_partial_write`, when set, runs after half the bytes reached the temporary file: the
// crash-during-write tests use it.
Status WriteFileAtomic(const std::string& path, const std::string& content,
                       const std::function<void()>& after_partial_write = {});
// The same for content produced in parts (a report too big to hold twice): `write` passes each
// part to its sink in order; an error from either ends the write and leaves the old file.
using PartSink = std::function<Status(std::string_view)>;
using ContentWriter = std::function<Status(const PartSink&)>;
Status WriteFileAtomicWith(const std::string& path, const ContentWriter& write);
bool FileExists(const std::string& path);

// Log dirs are private by default (docs/run.md "Log dir"): `run` and its agents create what they
// write with umask 077 (directories 0700, files 0600), or 027 when shared with the group. The umask
// is the process's, so this is process-wide state: call it once, before the first file is made.
// UserUmask() is the umask the process started with, which the job's own processes keep.
void UsePrivateUmask(bool share_with_group);
mode_t UserUmask();

}  // namespace dsd
