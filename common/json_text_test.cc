#include "common/json_text.h"

#include <gtest/gtest.h>

#include <limits>

namespace dsd::jsontext {
namespace {

using nlohmann::json;

// Each value's text is what nlohmann writes for it, and it reads back as the same value.
template <typename T, typename F>
void ExpectLikeDump(const T& v, F append) {
  std::string out;
  append(&out, v);
  EXPECT_EQ(out, json(v).dump(-1, ' ', false, json::error_handler_t::replace)) << out;
}

TEST(JsonTextTest, StringsAreWrittenAsNlohmannWritesThem) {
  for (std::string s : {"", "all_reduce", "train.py:42 in <module>", "say \"hi\"", "back\\slash", "tab\there",
                        "line\nbreak", "\x01\x1f", "\x7f", "caf\xc3\xa9", "cut \xe2\x82", "\xff\xfe"})
    ExpectLikeDump(s, [](std::string* o, const std::string& v) { AppendString(o, v); });
}

TEST(JsonTextTest, EveryAsciiCharacterIsEscapedAsNlohmannEscapesIt) {
  std::string all;
  for (int c = 0; c < 0x80; ++c) all += static_cast<char>(c);
  ExpectLikeDump(all, [](std::string* o, const std::string& v) { AppendString(o, v); });
  // A rank's output: lines, tabs, carriage returns and quotes among plain text.
  ExpectLikeDump(std::string("step 1\tloss \"0.5\"\r\nC:\\path\n\x1b[0m"),
                 [](std::string* o, const std::string& v) { AppendString(o, v); });
}

TEST(JsonTextTest, InvalidUtf8BecomesTheReplacementCharacter) {
  std::string out;
  AppendString(&out, "cut \xe2\x82");
  EXPECT_EQ(json::parse(out).get<std::string>(), "cut \xef\xbf\xbd");
}

TEST(JsonTextTest, IntegersAtTheirLimits) {
  for (int64_t v :
       {int64_t{0}, int64_t{-1}, int64_t{42}, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()})
    ExpectLikeDump(v, [](std::string* o, int64_t x) { AppendInt(o, x); });
  for (uint64_t v : {uint64_t{0}, uint64_t{7}, std::numeric_limits<uint64_t>::max()})
    ExpectLikeDump(v, [](std::string* o, uint64_t x) { AppendUInt(o, x); });
}

TEST(JsonTextTest, BooleansAndKeys) {
  std::string out = "{";
  bool first = true;
  AppendKey(&out, "a", &first);
  AppendBool(&out, true);
  AppendKey(&out, "b\"", &first);
  AppendBool(&out, false);
  out += '}';
  EXPECT_EQ(out, R"({"a":true,"b\"":false})");
}

TEST(JsonTextTest, DoublesReadBackExactlyAndAsFloats) {
  for (double v : {0.0, -0.0, 1.0, 0.5, 0.1, 1.0 / 3, 123456789.0, 1e-7, 1e300, 2.5e-310,
                   std::numeric_limits<double>::max(), std::numeric_limits<double>::denorm_min()}) {
    std::string out;
    AppendDouble(&out, v);
    const json back = json::parse(out);
    EXPECT_TRUE(back.is_number_float()) << out;
    EXPECT_EQ(back.get<double>(), v) << out;
  }
}

TEST(JsonTextTest, NonFiniteDoublesAreNull) {
  for (double v : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                   -std::numeric_limits<double>::infinity()})
    ExpectLikeDump(v, [](std::string* o, double x) { AppendDouble(o, x); });
}

}  // namespace
}  // namespace dsd::jsontext
