#include "runtime/checkpoint.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string_view>

#include "common/crc32.h"
#include "common/file.h"
#include "common/framing.h"
#include "common/strings.h"

namespace dsd::runtime {

const std::vector<float>* Shard::Find(const std::string& name) const {
  for (const auto& [n, v] : arrays) {
    if (n == name) return &v;
  }
  return nullptr;
}

namespace {

void PutU32(std::string* out, uint32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);
  out->append(b, 4);
}

uint32_t GetU32(const std::string& s, size_t off) {
  uint32_t v;
  std::memcpy(&v, s.data() + off, 4);
  return v;
}

Status MakeDirs(const std::string& path) {
  std::string cur;
  for (const auto& part : Split(path, '/')) {
    cur += part;
    if (!cur.empty() && ::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoError("mkdir " + cur, errno);
    cur += "/";
  }
  return Status::Ok();
}

}  // namespace

std::string EncodeShard(const Shard& shard) {
  nlohmann::json meta = shard.meta;
  nlohmann::json arrays = nlohmann::json::array();
  for (const auto& [name, v] : shard.arrays) arrays.push_back({{"name", name}, {"count", v.size()}});
  meta["arrays"] = arrays;
  std::string m = meta.dump();
  std::string out(kCheckpointMagic, sizeof kCheckpointMagic);
  PutU32(&out, kCheckpointVersion);
  PutU32(&out, static_cast<uint32_t>(m.size()));
  out += m;
  for (const auto& [name, v] : shard.arrays)
    out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  PutU32(&out, Crc32(out.data(), out.size()));
  return out;
}

Result<Shard> DecodeShard(const std::string& bytes, const std::string& what) {
  auto bad = [&](const std::string& why) { return Corruption("checkpoint " + what + ": " + why); };
  if (bytes.size() < 20) return bad("truncated (" + std::to_string(bytes.size()) + " bytes)");
  if (std::memcmp(bytes.data(), kCheckpointMagic, 8) != 0) return bad("bad magic (not a dsdoctor checkpoint shard)");
  uint32_t version = GetU32(bytes, 8);
  if (version != kCheckpointVersion) {
    return bad("format version " + std::to_string(version) + ", this build reads " +
               std::to_string(kCheckpointVersion));
  }
  uint32_t crc = GetU32(bytes, bytes.size() - 4);
  if (Crc32(bytes.data(), bytes.size() - 4) != crc) return bad("checksum mismatch (torn or corrupted file)");
  uint32_t mlen = GetU32(bytes, 12);
  if (16 + static_cast<size_t>(mlen) + 4 > bytes.size())
    return bad("meta length " + std::to_string(mlen) + " past the end");
  auto meta = wire::ParseJsonBounded(std::string_view(bytes).substr(16, mlen));
  if (!meta.ok()) return bad("meta: " + meta.status().message());
  Shard s;
  s.meta = *meta;
  size_t off = 16 + mlen;
  try {
    for (const auto& a : s.meta.at("arrays")) {
      size_t count = a.at("count").get<size_t>();
      if (count > (bytes.size() - 4 - off) / sizeof(float))
        return bad("array " + a.at("name").get<std::string>() + " past the end");
      std::vector<float> v(count);
      std::memcpy(v.data(), bytes.data() + off, count * sizeof(float));
      off += count * sizeof(float);
      s.arrays.emplace_back(a.at("name").get<std::string>(), std::move(v));
    }
  } catch (const std::exception& e) {
    return bad(std::string("meta: ") + e.what());
  }
  if (off != bytes.size() - 4)
    return bad(std::to_string(bytes.size() - 4 - off) + " unexpected bytes after the arrays");
  return s;
}

std::string ShardPath(const std::string& dir, const std::string& tag, int rank, int world_size) {
  return dir + "/" + tag + "/rank-" + std::to_string(rank) + "-of-" + std::to_string(world_size) + ".ckpt";
}

std::string LatestPath(const std::string& dir) { return dir + "/latest"; }

Status ValidateTag(const std::string& tag) {
  if (tag.empty() || tag == "." || tag == ".." || tag.size() > 128) {
    return InvalidArgument("checkpoint tag \"" + tag + "\" is not a usable directory name");
  }
  for (char c : tag) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return InvalidArgument("checkpoint tag \"" + tag + "\": only letters, digits, '.', '_' and '-' are allowed");
    }
  }
  return Status::Ok();
}

namespace {

// A rank killed mid-save leaves `<shard>.tmp.<pid>` (WriteFileAtomic's temp file): the next save of
// that shard removes those of processes that no longer exist, so they never pile up.
void RemoveStaleTempShards(const std::string& path) {
  const std::string dir = path.substr(0, path.rfind('/'));
  const std::string prefix = path.substr(path.rfind('/') + 1) + ".tmp.";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    std::string_view name(e->d_name);
    if (name.substr(0, prefix.size()) != prefix) continue;
    std::string_view digits = name.substr(prefix.size());
    pid_t pid = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
    if (ec != std::errc() || end != digits.data() + digits.size() || pid <= 0 || pid == ::getpid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // its writer may still be at it
    ::unlink((dir + "/" + std::string(name)).c_str());
  }
  ::closedir(d);
}

}  // namespace

Status WriteShard(const std::string& path, const Shard& shard, const std::function<void()>& crash_hook) {
  DSD_RETURN_IF_ERROR(MakeDirs(path.substr(0, path.rfind('/'))));
  RemoveStaleTempShards(path);
  return WriteFileAtomic(path, EncodeShard(shard), crash_hook);
}

Result<Shard> ReadShard(const std::string& path) {
  if (!FileExists(path)) return NotFound("checkpoint shard " + path + " does not exist");
  DSD_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path, size_t{16} << 30));
  return DecodeShard(bytes, path);
}

Status WriteLatest(const std::string& dir, const std::string& tag) {
  return WriteFileAtomic(LatestPath(dir), tag + "\n");
}

Result<std::string> ReadLatest(const std::string& dir) {
  std::string path = LatestPath(dir);
  if (!FileExists(path)) return NotFound("no checkpoint to resume in " + dir + ": " + path + " does not exist");
  DSD_ASSIGN_OR_RETURN(std::string text, ReadFile(path, 4096));
  std::string tag(Trim(text));
  DSD_RETURN_IF_ERROR(ValidateTag(tag).WithContext(path));
  return tag;
}

}  // namespace dsd::runtime
