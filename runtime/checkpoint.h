// Checkpoint shards (docs/checkpoint.md): one file per rank, <dir>/<tag>/rank-<r>-of-<w>.ckpt,
// holding a JSON meta block and named float32 arrays, with a CRC-32 over the whole file. Each is
// written atomically (temporary file, fsync, rename, fsync of the directory), and <dir>/latest
// names the newest complete tag, rewritten the same way only after every rank's shard is on disk:
// a crash at any point leaves the previous checkpoint loadable. Pure encode/decode plus file I/O;
// thread-compatible.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace dsd::runtime {

inline constexpr char kCheckpointMagic[8] = {'D', 'S', 'D', 'C', 'K', 'P', 'T', '1'};
inline constexpr uint32_t kCheckpointVersion = 1;

struct Shard {
  nlohmann::json meta;
  std::vector<std::pair<std::string, std::vector<float>>> arrays;
  const std::vector<float>* Find(const std::string& name) const;
};

std::string EncodeShard(const Shard& shard);
// `what` names the file in errors (magic, version, lengths, checksum).
Result<Shard> DecodeShard(const std::string& bytes, const std::string& what);

std::string ShardPath(const std::string& dir, const std::string& tag, int rank, int world_size);
std::string LatestPath(const std::string& dir);

// A tag becomes a directory name: letters, digits, '.', '_', '-' only, not "." or "..".
Status ValidateTag(const std::string& tag);

// Writes one shard atomically; `crash_hook` (tests) runs after half of it reached the temporary file.
Status WriteShard(const std::string& path, const Shard& shard, const std::function<void()>& crash_hook = {});
Result<Shard> ReadShard(const std::string& path);
Status WriteLatest(const std::string& dir, const std::string& tag);
// The tag in <dir>/latest; NotFound names the file when there is none.
Result<std::string> ReadLatest(const std::string& dir);

}  // namespace dsd::runtime
