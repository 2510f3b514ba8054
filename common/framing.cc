#include "common/framing.h"

#include <cstring>

#include "common/log.h"

namespace dsd::wire {

namespace {
constexpr size_t kIdleBufferBytes = 16u << 10;
}  // namespace

Result<std::string> EncodeFrame(const nlohmann::json& message, size_t max_frame_bytes) {
  if (!message.is_object()) return InvalidArgument("frame payload must be a JSON object");
  std::string payload;
  try {
    // Strings from the outside (a callsite cut mid-character, a log line) may hold invalid UTF-8:
    // such bytes become U+FFFD rather than costing the whole frame.
    payload = message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("cannot encode frame: ") + e.what());
  }
  return EncodeFrameText(payload, max_frame_bytes);
}

Result<std::string> EncodeFrameText(std::string_view payload, size_t max_frame_bytes) {
  if (payload.empty() || payload.front() != '{') return InvalidArgument("frame payload must be a JSON object");
  if (payload.size() > max_frame_bytes) {
    return InvalidArgument("frame of " + std::to_string(payload.size()) + " bytes exceeds the maximum of " +
                           std::to_string(max_frame_bytes));
  }
  std::string frame(kHeaderSize, '\0');
  std::memcpy(frame.data(), kMagic, 3);
  frame[3] = static_cast<char>(kProtocolVersion);
  uint32_t n = static_cast<uint32_t>(payload.size());
  frame[4] = static_cast<char>(n >> 24);
  frame[5] = static_cast<char>(n >> 16);
  frame[6] = static_cast<char>(n >> 8);
  frame[7] = static_cast<char>(n);
  frame += payload;
  return frame;
}

Result<nlohmann::json> ParseJsonBounded(std::string_view text, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return Corruption("JSON nested deeper than " + std::to_string(max_depth) + " levels at byte " +
                          std::to_string(i));
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e999
    return Corruption(std::string("invalid JSON: ") + e.what());
  }
  return value;
}

void FrameDecoder::Feed(std::string_view bytes) {
  // Drop consumed bytes before growing, so a long-lived connection's buffer stays bounded.
  if (consumed_ > 0 && consumed_ >= buffer_.size() / 2) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  buffer_.append(bytes);
}

std::string FrameDecoder::TakeBuffered() {
  std::string rest = buffer_.substr(consumed_);
  buffer_.clear();
  consumed_ = 0;
  return rest;
}

Result<nlohmann::json> ParseFramePayload(std::string_view payload) {
  auto parsed = ParseJsonBounded(payload);
  if (!parsed.ok()) return parsed.status();
  if (!parsed->is_object()) return Corruption("frame payload is not a JSON object");
  return std::move(parsed).value();
}

Result<std::optional<nlohmann::json>> FrameDecoder::Next() {
  auto text = NextText();
  if (!text.ok()) return text.status();
  if (!text->has_value()) return std::optional<nlohmann::json>();
  auto parsed = ParseFramePayload(**text);
  if (!parsed.ok()) return parsed.status();
  return std::optional<nlohmann::json>(std::move(parsed).value());
}

Result<std::optional<std::string>> FrameDecoder::NextText() {
  if (!broken_.ok()) return broken_;
  if (buffered() < kHeaderSize) return std::optional<std::string>();
  const auto* h = reinterpret_cast<const unsigned char*>(buffer_.data() + consumed_);
  if (std::memcmp(h, kMagic, 3) != 0) {
    broken_ = Corruption("bad frame magic (not a dsdoctor peer?)");
  } else if (h[3] != kProtocolVersion) {
    broken_ = Corruption("unsupported protocol version " + std::to_string(h[3]) + " (this side speaks " +
                         std::to_string(kProtocolVersion) + ")");
  }
  uint32_t n = (uint32_t(h[4]) << 24) | (uint32_t(h[5]) << 16) | (uint32_t(h[6]) << 8) | uint32_t(h[7]);
  if (broken_.ok() && n > max_frame_bytes_) {
    broken_ = Corruption("frame of " + std::to_string(n) + " bytes exceeds the maximum of " +
                         std::to_string(max_frame_bytes_));
  }
  if (!broken_.ok()) {
    log::Get("wire")->debug("frame stream broken: {}", broken_.message());
    return broken_;
  }
  if (buffered() < kHeaderSize + n) return std::optional<std::string>();
  std::string payload(buffer_.data() + consumed_ + kHeaderSize, n);
  consumed_ += kHeaderSize + n;
  if (consumed_ == buffer_.size()) {
    // Everything read: an idle connection gives back the room a big frame took (a coordinator
    // holds thousands of connections).
    consumed_ = 0;
    if (buffer_.capacity() > kIdleBufferBytes)
      std::string().swap(buffer_);
    else
      buffer_.clear();
  }
  return std::optional<std::string>(std::move(payload));
}

}  // namespace dsd::wire
