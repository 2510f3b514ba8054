// File helpers returning Status instead of throwing.
#pragma once

#include <functional>
#include <string>

#include "common/status.h"

namespace dsd {

// Whole file; errors name the path. Refuses files over max_bytes (protects against /dev/zero).
Result<std::string> ReadFile(const std::string& path, size_t max_bytes = 64u << 20);
// Writes to path.tmp.<pid>, fsyncs, renames over path, fsyncs the directory: readers see the old
// or the new content, never a torn file. A path that exists and is not a regular file (/dev/null,
// /dev/stdout, a FIFO) is written in place: renaming over it would replace the device.
// `after_partial_write`, when set, runs after half the bytes reached the temporary file: the
// crash-during-write tests use it.
Status WriteFileAtomic(const std::string& path, const std::string& content,
                       const std::function<void()>& after_partial_write = {});
bool FileExists(const std::string& path);

}  // namespace dsd
