// The job token that authenticates every connection to an agent. Tokens travel in files (mode
// 0600) or over an inherited pipe, never on a command line where `ps` would show them.
// Free functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "common/net.h"
#include "common/status.h"
#include "common/tls_link.h"

namespace dsd::agent {

// 32 random bytes from the kernel, hex-encoded.
Result<std::string> GenerateToken();

// Reads a token file: must be a regular file, not readable by group or others, and hold a token
// strong enough for CheckTokenStrength (surrounding whitespace ignored). Errors name the path and
// the problem.
Result<std::string> LoadTokenFile(const std::string& path);

// A token must carry at least 128 bits (16 random bytes), like GenerateToken's 256: counted as 4 bits
// per character when it is all hex, 6 otherwise, and refused when it uses fewer than 8 distinct
// characters ("aaaa…" is long and guessable). The error (kInvalidArgument) says how to make one;
// `where` names its source ("token file /x", "--token-file -").
Status CheckTokenStrength(std::string_view token, const std::string& where);

// Writes a token file with mode 0600, atomically.
Status WriteTokenFile(const std::string& path, const std::string& token);

// Compares in time that depends only on the lengths, so a remote peer cannot learn the token
// byte by byte from response times.
bool TokensEqual(std::string_view a, std::string_view b);

// The serving side of the hello/welcome exchange (docs/agent-protocol.md) on a link that the TLS
// handshake already authenticated: waits up to `timeout` for {"type":"hello","role"} and answers
// {"type":"welcome","name","pid","protocol"}. The token itself never travels.
Status AcceptHello(net::Link& link, wire::FrameDecoder& decoder, Duration timeout, const std::string& name);

}  // namespace dsd::agent
