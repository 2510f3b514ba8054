// Logging for every component, on spdlog. One logger per component ("probe", "agent", ...) shares a
// stderr sink, so stdout stays free for reports and JSON. The level comes from --log-level, else
// DSDOCTOR_LOG_LEVEL, else info; ranks started by dsdoctor inherit DSDOCTOR_LOG_LEVEL.
// Thread-safe: spdlog's registry and the mt sink are synchronised.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace dsd::log {

inline constexpr const char* kLevelEnvVar = "DSDOCTOR_LOG_LEVEL";
inline constexpr const char* kValidLevels = "trace|debug|info|warn|error|off";

// Parses trace|debug|info|warn|error|off (case-insensitive; "warning" accepted). nullopt if invalid.
std::optional<spdlog::level::level_enum> ParseLevel(std::string_view text);

struct LevelChoice {
  spdlog::level::level_enum level = spdlog::level::info;
  std::string source;   // "default", "DSDOCTOR_LOG_LEVEL" or "--log-level"
  std::string warning;  // non-empty when a given value was invalid and ignored
};

// Pure: picks the level from a flag value and an environment value (either may be absent).
LevelChoice ChooseLevel(const std::optional<std::string>& flag_value,
                        const std::optional<std::string>& env_value);

// Configures logging from the flag and the real environment; logs the warning, if any.
// Safe to call more than once (tests, subcommands).
void Init(const std::optional<std::string>& flag_value = std::nullopt);

// The logger of a component, created on first use with the shared sink and current level.
std::shared_ptr<spdlog::logger> Get(const std::string& component);

}  // namespace dsd::log
