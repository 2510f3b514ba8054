// Wire framing for the agent protocol: each message is a JSON object behind an 8-byte header.
//
//   offset 0  3 bytes  magic "DSD"
//   offset 3  1 byte   protocol version (kProtocolVersion)
//   offset 4  4 bytes  payload length, big-endian, at most the receiver's max frame size
//   offset 8  N bytes  payload: UTF-8 JSON object, nesting depth at most kMaxJsonDepth
//
// See docs/protocol.md. Malformed input is reported as a Status, never a crash or an exception.
// FrameDecoder is a single-owner value: not thread-safe, one per connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace dsd::wire {

inline constexpr char kMagic[3] = {'D', 'S', 'D'};
// 2: links are TLS, hello carries no token. 3: typed run stream (agent/run_protocol.h): run_dir and
// run_id, deltas with array records only, output and files as base64.
inline constexpr uint8_t kProtocolVersion = 3;
inline constexpr size_t kHeaderSize = 8;
inline constexpr size_t kDefaultMaxFrameBytes = 16u << 20;
inline constexpr size_t kMaxJsonDepth = 64;

// Serialises `message` (must be a JSON object) into one frame.
Result<std::string> EncodeFrame(const nlohmann::json& message, size_t max_frame_bytes = kDefaultMaxFrameBytes);

// Wraps JSON object text that the caller serialised (a table shared by many frames) in a header.
Result<std::string> EncodeFrameText(std::string_view payload, size_t max_frame_bytes = kDefaultMaxFrameBytes);

// Parses JSON text, rejecting nesting deeper than max_depth before the (recursive) parser runs,
// so hostile input cannot exhaust the stack. Errors name the byte offset.
Result<nlohmann::json> ParseJsonBounded(std::string_view text, size_t max_depth = kMaxJsonDepth);

// A frame's payload as Next reads it: a JSON object within the depth bound, else an error.
Result<nlohmann::json> ParseFramePayload(std::string_view payload);

class FrameDecoder {
 public:
  explicit FrameDecoder(size_t max_frame_bytes = kDefaultMaxFrameBytes) : max_frame_bytes_(max_frame_bytes) {}

  // Appends bytes read from the peer.
  void Feed(std::string_view bytes);

  // The next complete message; std::nullopt when more bytes are needed. A bad header (magic,
  // version, oversized length) breaks the stream for good: this and every later call return the
  // same error, since no resynchronisation is possible. A bad payload (not JSON, not an object)
  // is an error for that frame only; the decoder then continues with the next frame.
  Result<std::optional<nlohmann::json>> Next();
  // The same, with the payload left as text for a caller that reads it in place (ParseFramePayload
  // gives what Next would). Header errors as for Next.
  Result<std::optional<std::string>> NextText();

  size_t buffered() const { return buffer_.size() - consumed_; }
  // Hands over the bytes received beyond the last complete frame, for a connection that switches
  // from frames to a raw byte stream (the p2p bandwidth sink).
  std::string TakeBuffered();
  bool broken() const { return !broken_.ok(); }

 private:
  size_t max_frame_bytes_;
  std::string buffer_;
  size_t consumed_ = 0;
  Status broken_;
};

}  // namespace dsd::wire
