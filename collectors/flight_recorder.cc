#include "collectors/flight_recorder.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <map>
#include <thread>

#include "collectors/pickle.h"
#include "collectors/run_dir.h"  // kMaxRanks
#include "common/file.h"
#include "common/json_get.h"
#include "common/strings.h"

namespace dsd::collectors {
namespace {

constexpr size_t kMaxDumpBytes = size_t{1} << 30;  // a 2,000-entry dump is a few MiB
// The entries of each dump the diagnosis reads (RankStateFromDump's default).
constexpr size_t kKeepEntries = 64;

// torch's dtype names (c10::ScalarType) as the trace's.
std::string DtypeName(const std::string& t) {
  static const std::map<std::string, std::string> kNames = {{"Float", "float32"},
                                                            {"Half", "float16"},
                                                            {"BFloat16", "bfloat16"},
                                                            {"Double", "float64"},
                                                            {"Int", "int32"},
                                                            {"Long", "int64"},
                                                            {"Byte", "uint8"},
                                                            {"Char", "int8"},
                                                            {"Bool", "bool"},
                                                            {"Short", "int16"},
                                                            {"ComplexFloat", "complex64"},
                                                            {"ComplexDouble", "complex128"}};
  auto it = kNames.find(t);
  return it != kNames.end() ? it->second : ToLower(t);
}

// "nccl:_allgather_base", "gloo:all_reduce", "nccl:send 0->1" as the trace's op names.
std::string OpName(const std::string& profiling_name, int self, int* peer) {
  std::string name =
      profiling_name.substr(profiling_name.find(':') == std::string::npos ? 0 : profiling_name.find(':') + 1);
  std::string rest;
  if (size_t sp = name.find(' '); sp != std::string::npos) rest = name.substr(sp + 1), name.resize(sp);
  if (size_t arrow = rest.find("->"); arrow != std::string::npos) {  // "0->1": the other end is the peer
    int from = SafeInt(rest.substr(0, arrow)), to = SafeInt(rest.substr(arrow + 2));
    *peer = from == self ? to : from;
  }
  std::string n = ToLower(name);
  if (n.find("coalesced") != std::string::npos && n.find("gather") == std::string::npos &&
      n.find("scatter") == std::string::npos && n.find("reduce") == std::string::npos)
    return n;
  if (n.find("allgather") != std::string::npos || n.find("all_gather") != std::string::npos) return "all_gather";
  if (n.find("reduce_scatter") != std::string::npos) return "reduce_scatter";
  if (n.find("allreduce") != std::string::npos || n.find("all_reduce") != std::string::npos) return "all_reduce";
  if (n.find("alltoall") != std::string::npos || n.find("all_to_all") != std::string::npos) return "all_to_all";
  for (const char* plain : {"broadcast", "barrier", "send", "recv", "gather", "scatter", "reduce"})
    if (n.find(plain) != std::string::npos) return plain;
  return n;
}

// Frames of torch, installed packages and the standard library are not the program's (a dump has
// file names only, no modules).
bool LibraryFile(const std::string& f) {
  return f.find("/site-packages/") != std::string::npos || f.find("/dist-packages/") != std::string::npos ||
         f.find("/torch/distributed/") != std::string::npos || f.find("/lib/python3") != std::string::npos ||
         StartsWith(f, "<");
}

// dsdoctor's own Python tracer (python/dsdoctor_tracer.py, its generated wrappers "<dsdoctor
// tracer: barrier>", sitecustomize.py beside it): in a dump `dsdoctor run` asked for, never the
// program's frame nor the function it called.
bool TracerFrame(const std::string& f) {
  return StartsWith(f, "<dsdoctor tracer") || EndsWith(f, "/dsdoctor_tracer.py") ||
         EndsWith(f, "/dsdoctor/python/sitecustomize.py");
}

// "train.py:92 (engine.save_checkpoint)" from the entry's frames (innermost first), as the tracer's.
std::string Callsite(const nlohmann::json& frames) {
  if (!frames.is_array()) return "";
  std::string inner;
  for (const auto& fr : frames) {
    if (!fr.is_object()) continue;
    std::string file = JsonString(fr, "filename"), name = JsonString(fr, "name");
    int line = fr.contains("line") && fr["line"].is_number_integer() ? fr["line"].get<int>() : 0;
    std::string base = file.substr(file.rfind('/') == std::string::npos ? 0 : file.rfind('/') + 1);
    if (TracerFrame(file)) continue;
    if (!LibraryFile(file)) {
      std::string site = base + ":" + std::to_string(line);
      std::string fn = !inner.empty() ? inner : name == "<module>" ? "" : name;
      return fn.empty() ? site : site + " (" + fn + ")";
    }
    static const char* kWrappers[] = {"wrapper",          "wrapped",    "wrapped_fn",         "log_wrapper", "inner",
                                      "decorate_context", "_call_impl", "_wrapped_call_impl", "forward_call"};
    if (std::none_of(std::begin(kWrappers), std::end(kWrappers), [&](const char* w) { return name == w; }) &&
        file.find("/torch/distributed/") == std::string::npos) {
      std::string mod =
          base.size() > 3 && base.substr(base.size() - 3) == ".py" ? base.substr(0, base.size() - 3) : base;
      if (mod == "__init__") {  // a package's: the package's name
        std::string dir = file.substr(0, file.rfind('/'));
        mod = dir.substr(dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/') + 1);
      }
      inner = mod + "." + name;
    }
  }
  return "";
}

uint32_t CommOf(const nlohmann::json& pg) {
  std::string name = pg.is_array() && !pg.empty() && pg[0].is_string() ? pg[0].get<std::string>() : "0";
  if (name == "0" || name.empty()) return 0;  // the default group: the trace's world
  uint32_t h = 2166136261u;                   // FNV-1a: the same on every rank's dump
  for (unsigned char c : name) h = (h ^ c) * 16777619u;
  return (h & 0x7FFFFFFF) | 1;
}

int64_t Int(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

// The world size the default group's ranks say ("[0, 1, 2]"), 0 when not given.
int WorldOf(const nlohmann::json& doc) {
  auto cfg = doc.find("pg_config");
  if (cfg == doc.end() || !cfg->is_object()) return 0;
  for (const auto& [name, pg] : cfg->items()) {
    if (!(name.empty() || name == "0") || !pg.is_object()) continue;
    std::string ranks = JsonString(pg, "ranks");
    if (ranks.empty()) continue;
    return static_cast<int>(std::count(ranks.begin(), ranks.end(), ',')) + 1;
  }
  return 0;
}

}  // namespace

bool LooksLikeFlightRecorderDump(std::string_view head) {
  if (head.size() >= 2 && static_cast<uint8_t>(head[0]) == 0x80 && head[1] >= 2 && head[1] <= 5)
    return head.find("version") != std::string_view::npos || head.find("entries") != std::string_view::npos ||
           head.find("pg_config") != std::string_view::npos;
  std::string_view t = Trim(head);
  return StartsWith(t, "{") &&
         (t.find("\"pg_config\"") != std::string_view::npos ||
          (t.find("\"entries\"") != std::string_view::npos && t.find("\"version\"") != std::string_view::npos));
}

Result<FlightRecorderDump> ReadFlightRecorderDump(const std::string& path, size_t keep_entries) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return NotFound(path + ": no such file");
  if (static_cast<size_t>(st.st_size) > kMaxDumpBytes)
    return InvalidArgument(path + ": " + std::to_string(st.st_size) + " bytes, more than a Flight Recorder dump has");
  auto bytes = ReadFile(path, kMaxDumpBytes);
  if (!bytes.ok()) return bytes.status();
  FlightRecorderDump d;
  d.path = path;
  if (!bytes->empty() && static_cast<uint8_t>((*bytes)[0]) == 0x80) {
    PickleLimits limits;
    limits.tail_key = "entries";  // only the newest are read: the rest is parsed, never converted
    limits.tail_items = keep_entries;
    auto doc = ParsePickle(*bytes, limits);
    if (!doc.ok()) return InvalidArgument(path + ": " + doc.status().message());
    d.doc = std::move(*doc);
  } else {
    d.doc = nlohmann::json::parse(*bytes, nullptr, false);
    if (d.doc.is_discarded()) return InvalidArgument(path + ": neither a pickle nor JSON");
  }
  if (!d.doc.is_object()) return InvalidArgument(path + ": not a Flight Recorder dump (its top is not a dict)");
  if (!d.doc.contains("entries") || !d.doc["entries"].is_array())
    return InvalidArgument(path + ": field 'entries' is missing or not a list");
  if (d.doc.contains("version") && d.doc["version"].is_string()) d.version = d.doc["version"].get<std::string>();
  // The rank is the name's trailing number (<prefix><rank>, as torch writes them).
  std::string name = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  size_t digits = name.size();
  while (digits > 0 && std::isdigit(static_cast<unsigned char>(name[digits - 1]))) --digits;
  if (digits == name.size() || name.size() - digits > 7)
    return InvalidArgument(path + ": the file name does not end in its rank (<prefix><rank>, as torch names dumps)");
  d.rank = SafeInt(name.substr(digits));
  return d;
}

diagnosis::RankState RankStateFromDump(const FlightRecorderDump& dump, size_t keep) {
  diagnosis::RankState r;
  r.rank = dump.rank;
  r.status = diagnosis::RankStatus::kRunning;  // a dump is a snapshot of a live rank
  r.has_trace = true;
  const auto& entries = dump.doc["entries"];
  size_t first = entries.size() > keep ? entries.size() - keep : 0;
  for (size_t i = first; i < entries.size(); ++i) {
    const auto& e = entries[i];
    if (!e.is_object()) continue;
    diagnosis::OpRecord rec;
    int peer = -1;
    rec.op = OpName(JsonString(e, "profiling_name"), dump.rank, &peer);
    bool p2p = JsonBool(e, "is_p2p") || rec.op == "send" || rec.op == "recv";
    rec.seq = static_cast<uint64_t>(std::max<int64_t>(0, Int(e, p2p ? "p2p_seq_id" : "collective_seq_id")));
    rec.peer = p2p ? peer : -1;
    rec.comm = CommOf(e.contains("process_group") ? e["process_group"] : nlohmann::json());
    if (e.contains("input_dtypes") && e["input_dtypes"].is_array() && !e["input_dtypes"].empty() &&
        e["input_dtypes"][0].is_string())
      rec.dtype = DtypeName(e["input_dtypes"][0].get<std::string>());
    if (e.contains("input_sizes") && e["input_sizes"].is_array()) {
      for (const auto& shape : e["input_sizes"]) {
        if (!shape.is_array()) continue;
        uint64_t n = 1;
        for (const auto& dim : shape)
          n *= dim.is_number_integer() ? static_cast<uint64_t>(std::max<int64_t>(0, dim.get<int64_t>())) : 0;
        rec.count += n;
      }
    }
    rec.callsite = Callsite(e.contains("frames") ? e["frames"] : nlohmann::json());
    rec.started_ns = Int(e, "time_created_ns");
    std::string state = JsonString(e, "state");
    bool done = state == "completed" || (e.contains("retired") && e["retired"] == true);
    rec.state = done ? "completed" : state == "started" ? "started" : "enqueued";
    rec.ended_ns = done ? std::max(Int(e, "time_discovered_completed_ns"), rec.started_ns) : 0;
    r.recent.push_back(std::move(rec));
  }
  if (!r.recent.empty()) r.last = r.recent.back();
  for (auto it = r.recent.rbegin(); it != r.recent.rend(); ++it)
    if (it->in_flight()) {
      r.in_flight = *it;
      break;
    }
  return r;
}

Result<diagnosis::JobState> LoadFlightRecorderDir(const std::string& dir, std::vector<std::string>* warnings) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return NotFound(dir + ": cannot be read");
  std::vector<std::string> files;
  while (dirent* ent = ::readdir(d)) {
    std::string name = ent->d_name;
    if (name.empty() || name[0] == '.' || !std::isdigit(static_cast<unsigned char>(name.back()))) continue;
    files.push_back(dir + "/" + name);
    if (files.size() > static_cast<size_t>(kMaxRanks)) break;
  }
  ::closedir(d);
  std::sort(files.begin(), files.end());
  // Each file on its own (read, parse, its rank's state), on a few threads: thousands of dumps of
  // a full ring each take ~2 ms apiece. Merged below in file order, so the result never depends on
  // which thread was first.
  struct Parsed {
    bool dump = false;  // a Flight Recorder dump by its head
    Result<FlightRecorderDump> read = NotFound("");
    diagnosis::RankState state;
    int world = 0;
    int64_t mtime_ns = 0;
  };
  std::vector<Parsed> parsed(files.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < files.size();) {
      const std::string& f = files[i];
      Parsed& p = parsed[i];
      auto head = ReadFileRange(f, 0, 4096);
      if (!head.ok() || !LooksLikeFlightRecorderDump(*head)) continue;
      p.dump = true;
      p.read = ReadFlightRecorderDump(f, kKeepEntries);
      if (!p.read.ok()) continue;
      p.world = WorldOf(p.read->doc);
      p.state = RankStateFromDump(*p.read);
      p.read->doc = nlohmann::json();  // what was needed is in the state: memory stays bounded
      struct stat st;
      if (::stat(f.c_str(), &st) == 0)  // when it was dumped: the moment the waits are measured to
        p.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    }
  };
  const size_t threads =
      std::min<size_t>({std::max(1u, std::thread::hardware_concurrency()), 8, files.size() / 32 + 1});
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();

  diagnosis::JobState job;
  std::map<int, diagnosis::RankState> ranks;
  int world = 0;
  int64_t now = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string& f = files[i];
    Parsed& p = parsed[i];
    if (!p.dump) continue;
    if (!p.read.ok()) {
      if (warnings) warnings->push_back(p.read.status().message());
      job.evidence_missing.push_back(p.read.status().message());
      continue;
    }
    if (p.read->rank >= kMaxRanks || ranks.count(p.read->rank)) {
      if (warnings) warnings->push_back(f + ": a second dump of rank " + std::to_string(p.read->rank) + ", left out");
      continue;
    }
    world = std::max(world, p.world);
    ranks[p.read->rank] = std::move(p.state);
    now = std::max(now, p.mtime_ns);
  }
  if (ranks.empty()) return NotFound(dir + ": no Flight Recorder dump (files named <prefix><rank>)");
  world = std::max(world, ranks.rbegin()->first + 1);
  job.world_size = world;
  job.ranks.resize(world);
  for (int r = 0; r < world; ++r) {
    auto it = ranks.find(r);
    if (it != ranks.end()) {
      job.ranks[r] = std::move(it->second);
      for (const auto& rec : job.ranks[r].recent) now = std::max(now, rec.started_ns);
    } else {
      job.ranks[r].rank = r;
      job.ranks[r].status = diagnosis::RankStatus::kRunning;
      job.evidence_missing.push_back("rank " + std::to_string(r) + ": no Flight Recorder dump in " + dir +
                                     " (the rank died, or never reached torch's dump): where it was is unknown");
    }
  }
  job.now_ns = now;
  return job;
}

}  // namespace dsd::collectors
