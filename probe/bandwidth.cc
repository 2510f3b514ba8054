#include "probe/bandwidth.h"

#include <cctype>
#include <charconv>
#include <cstdio>

#include "common/strings.h"

namespace dsd::probe {

double BusBwFactor(CollectiveOp op, int n) {
  if (n <= 0) return 0;
  switch (op) {
    case CollectiveOp::kAllReduce:
      return 2.0 * (n - 1) / n;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllToAll:
      return static_cast<double>(n - 1) / n;
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kReduce:
    case CollectiveOp::kSendRecv:
      return 1.0;
  }
  return 0;
}

double AlgBwGBps(double bytes, double seconds) { return seconds > 0 ? bytes / seconds / 1e9 : 0; }

void ComputeBandwidth(CollectiveOp op, int nranks, SizeResult* r) {
  r->algbw = AlgBwGBps(static_cast<double>(r->bytes), r->time_us / 1e6);
  r->busbw = r->algbw * BusBwFactor(op, nranks);
}

double AvgBusBw(const std::vector<SizeResult>& rows) {
  if (rows.empty()) return 0;
  double sum = 0;
  for (const auto& r : rows) sum += r.busbw;
  return sum / static_cast<double>(rows.size());
}

namespace {

Result<size_t> ParseSize(std::string_view s) {
  std::string t(Trim(s));
  if (t.empty()) return InvalidArgument("empty size");
  size_t mult = 1;
  char last = static_cast<char>(std::toupper(static_cast<unsigned char>(t.back())));
  if (last == 'K' || last == 'M' || last == 'G') {
    mult = last == 'K' ? 1u << 10 : last == 'M' ? 1u << 20 : 1u << 30;
    t.pop_back();
  } else if (last == 'B') {
    t.pop_back();
  }
  if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument("size '" + std::string(s) + "' is not a number with an optional K/M/G suffix");
  }
  size_t v = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size() || v > (size_t{1} << 40) / mult)
    return InvalidArgument("size '" + std::string(s) + "' is too large");
  return v * mult;
}

}  // namespace

Result<std::vector<size_t>> ParseSizes(const std::string& text, size_t align) {
  std::vector<size_t> out;
  auto add = [&](size_t v, const std::string& what) -> Status {
    v -= v % align;
    if (v < align)
      return InvalidArgument("--sizes: '" + what + "' is smaller than one element (" + std::to_string(align) +
                             " bytes)");
    out.push_back(v);
    return Status::Ok();
  };
  if (text.find('-') != std::string::npos && text.find(',') == std::string::npos) {
    auto parts = Split(text, '-');
    if (parts.size() != 2) return InvalidArgument("--sizes '" + text + "': expected MIN-MAX");
    auto lo = ParseSize(parts[0]);
    auto hi = ParseSize(parts[1]);
    if (!lo.ok()) return lo.status().WithContext("--sizes");
    if (!hi.ok()) return hi.status().WithContext("--sizes");
    if (*lo > *hi) return InvalidArgument("--sizes '" + text + "': minimum above maximum");
    for (size_t v = std::max(*lo, align); v <= *hi; v *= 2) DSD_RETURN_IF_ERROR(add(v, std::to_string(v)));
  } else {
    for (const auto& part : Split(text, ',')) {
      auto v = ParseSize(part);
      if (!v.ok()) return v.status().WithContext("--sizes");
      DSD_RETURN_IF_ERROR(add(*v, part));
    }
  }
  if (out.empty()) return InvalidArgument("--sizes '" + text + "': no sizes");
  return out;
}

std::string RenderBandwidthTable(const std::vector<SizeResult>& rows) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%12s %12s %8s %6s %10s %8s %8s %8s\n", "size", "count", "type", "redop", "time",
                "algbw", "busbw", "#wrong");
  out += line;
  std::snprintf(line, sizeof line, "%12s %12s %8s %6s %10s %8s %8s %8s\n", "(B)", "(elements)", "", "", "(us)",
                "(GB/s)", "(GB/s)", "");
  out += line;
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "%12zu %12zu %8s %6s %10.1f %8.2f %8.2f %8ld\n", r.bytes, r.count, r.type.c_str(),
                  r.redop.c_str(), r.time_us, r.algbw, r.busbw, r.wrong);
    out += line;
  }
  std::snprintf(line, sizeof line, "# Avg bus bandwidth    : %.3f GB/s\n", AvgBusBw(rows));
  out += line;
  return out;
}

nlohmann::json ToJson(const SizeResult& r) {
  return {{"bytes", r.bytes},     {"count", r.count},      {"type", r.type},        {"redop", r.redop},
          {"time_us", r.time_us}, {"algbw_gbps", r.algbw}, {"busbw_gbps", r.busbw}, {"wrong", r.wrong}};
}

}  // namespace dsd::probe
