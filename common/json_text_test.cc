#include "common/json_text.h"

#include <gtest/gtest.h>

#include <cstring>
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

// Reader: what it takes it reads as nlohmann::json::parse does; the rest it refuses.
TEST(JsonTextReaderTest, StringsDecodeAsTheParserDecodesThem) {
  std::string all;
  for (int c = 0x20; c < 0x80; ++c) all += static_cast<char>(c);
  for (std::string text : std::vector<std::string>{R"("")", R"("plain")", R"("a\"b\\c\/d\b\f\n\r\t")",
                                                   R"("\u0000\u001f\u0041\u00e9\u20ac\uFFFF")", json(all).dump(),
                                                   json("line\none\ttwo\x01").dump()}) {
    SCOPED_TRACE(text);
    Reader in(text);
    std::string got = "stale";
    ASSERT_TRUE(in.String(&got));
    EXPECT_EQ(got, json::parse(text).get<std::string>());
    EXPECT_TRUE(in.AtEnd());
  }
  // Refused (the full parser reads or rejects them): bytes above 0x7f, escaped surrogates, control
  // characters, bad escapes, an unterminated string.
  for (std::string text : {"\"caf\xc3\xa9\"", R"("\ud83d\ude00")", "\"a\x01\"", R"("\x")", R"("\u12G4")", R"("\u12")",
                           R"("open)", R"(open")", R"("\)"}) {
    SCOPED_TRACE(text);
    std::string got;
    EXPECT_FALSE(Reader(text).String(&got));
  }
  std::string_view key;
  Reader keys(R"( "plain" : "esc\n" )");
  ASSERT_TRUE(keys.PlainString(&key));
  EXPECT_EQ(key, "plain");
  EXPECT_TRUE(keys.Consume(':'));
  EXPECT_FALSE(keys.PlainString(&key));  // an escape: not a view of the text
}

TEST(JsonTextReaderTest, NumbersReadAsTheParserConvertsThem) {
  for (std::string text :
       {"0", "-0", "1", "-1", "0.5", "-0.0", "1e3", "1E-3", "2.5e+2", "123456.789", "1e308", "4.9e-324",
        "9007199254740993", "-9223372036854775808", "9223372036854775807", "18446744073709551615",
        "18446744073709551616", "-9223372036854775809", "0.1000000000000000055511151231257827"}) {
    SCOPED_TRACE(text);
    double got = 0;
    ASSERT_TRUE(Reader(text).Number(&got));
    const double want = json::parse(text).get<double>();
    EXPECT_EQ(std::memcmp(&got, &want, sizeof got), 0) << got << " vs " << want;  // -0 included
  }
  for (std::string text : {"", "-", "01", "1.", ".5", "1e", "+1", "0x10", "1e999", "-1e999", "1e-400", "nan", "true"}) {
    SCOPED_TRACE(text);
    double got = 0;
    Reader in(text);
    EXPECT_FALSE(in.Number(&got) && in.AtEnd());
  }
  int64_t i = 0;
  uint64_t u = 0;
  int small = 0;
  uint32_t u32 = 0;
  EXPECT_TRUE(Reader("-9223372036854775808").Int(&i));
  EXPECT_EQ(i, std::numeric_limits<int64_t>::min());
  EXPECT_FALSE(Reader("9223372036854775808").Int(&i));
  EXPECT_TRUE(Reader("18446744073709551615").UInt(&u));
  EXPECT_EQ(u, std::numeric_limits<uint64_t>::max());
  EXPECT_FALSE(Reader("-1").UInt(&u));
  EXPECT_FALSE(Reader("1.0").Int(&i));
  EXPECT_FALSE(Reader("1e2").UInt(&u));
  EXPECT_TRUE(Reader("-2147483648").Integer(&small));
  EXPECT_EQ(small, std::numeric_limits<int>::min());
  EXPECT_FALSE(Reader("2147483648").Integer(&small));
  EXPECT_TRUE(Reader("-0").Integer(&u32));  // the parser reads "-0" as the integer 0
  EXPECT_EQ(u32, 0u);
  EXPECT_FALSE(Reader("4294967296").Integer(&u32));
  EXPECT_FALSE(Reader("-1").Integer(&u32));
  bool b = false;
  EXPECT_TRUE(Reader(" true").Bool(&b));
  EXPECT_TRUE(b);
  EXPECT_TRUE(Reader("false").Bool(&b));
  EXPECT_FALSE(b);
  EXPECT_FALSE(Reader("True").Bool(&b));
}

TEST(JsonTextReaderTest, SkipTakesExactlyOneValueAndItsSpan) {
  for (std::string value : {"1", "-2.5e3", "\"s\\\"]\"", "true", "false", "null", "[]", "{}", "[1,[2,[3]],{}]",
                            R"({"a":{"b":[1,"}",null]},"c":"{"})", R"([ 1 , { "k" : [ ] } ])"}) {
    SCOPED_TRACE(value);
    const std::string text = "  " + value + " ,rest";
    Reader in(text);
    std::string_view span;
    ASSERT_TRUE(in.Skip(&span));
    EXPECT_EQ(span, value);
    EXPECT_TRUE(in.Consume(','));
  }
  for (std::string bad : {"", "[", "[1,]", "[1 2]", "{\"a\"}", "{\"a\":}", "{1:2}", "{\"a\":1,}", "nul", "tru", "]",
                          "\"open", "[\"\x01\"]", "{\"a\":1]", "[1}", "[1e999]", "{\"a\":-1e400000}"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(Reader(bad).Skip());
  }
  // Nesting: as deep as the bound, not deeper.
  EXPECT_TRUE(Reader(std::string(3, '[') + std::string(3, ']')).Skip(nullptr, 3));
  EXPECT_FALSE(Reader(std::string(4, '[') + std::string(4, ']')).Skip(nullptr, 3));
  EXPECT_FALSE(Reader(std::string(100000, '[')).Skip());  // no recursion: nothing to exhaust
}

}  // namespace
}  // namespace dsd::jsontext
