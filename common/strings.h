// Small string helpers shared by parsers. Pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dsd {

std::string_view Trim(std::string_view s);
std::vector<std::string> Split(std::string_view s, char sep);
// Splits on runs of spaces/tabs, dropping empty tokens.
std::vector<std::string> SplitWhitespace(std::string_view s);
bool StartsWith(std::string_view s, std::string_view prefix);
bool EndsWith(std::string_view s, std::string_view suffix);
// ASCII lower case (names and keywords; bytes above 127 are left alone).
std::string ToLower(std::string s);
// A decimal number of at most 9 digits, '-' allowed first; 0 for anything else (ranks, sequence
// numbers and codes read from logs and file names: never throws, never overflows).
int SafeInt(std::string_view digits);
std::string Join(const std::vector<std::string>& parts, std::string_view sep);
std::string HexEncode(std::string_view bytes);
// Errors on odd length or non-hex characters.
bool HexDecode(std::string_view hex, std::string* out);
// RFC 4648 base64 with padding: arbitrary bytes in a JSON string (a rank's raw output, a trace ring).
std::string Base64Encode(std::string_view bytes);
// Appends the decoded bytes to *out; false (with *out partly appended) on a character outside the
// alphabet, a length that is not a multiple of 4, or padding anywhere but the end.
bool Base64Decode(std::string_view text, std::string* out);
// Text from a file or a flag made safe to print on a terminal: control bytes (below 0x20, and 0x7f)
// become \xNN, so a hostfile cannot move the cursor or clear the screen through an error message.
std::string Printable(std::string_view s);
// "1.5 GiB", "512 MiB", "12 B".
std::string FormatBytes(double bytes);

}  // namespace dsd
