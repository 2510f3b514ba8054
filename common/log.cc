#include "common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>

namespace dsd::log {
namespace {

std::shared_ptr<spdlog::sinks::sink> SharedSink() {
  static auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  return sink;
}

}  // namespace

std::optional<spdlog::level::level_enum> ParseLevel(std::string_view text) {
  std::string s(text);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "trace") return spdlog::level::trace;
  if (s == "debug") return spdlog::level::debug;
  if (s == "info") return spdlog::level::info;
  if (s == "warn" || s == "warning") return spdlog::level::warn;
  if (s == "error") return spdlog::level::err;
  if (s == "off") return spdlog::level::off;
  return std::nullopt;
}

LevelChoice ChooseLevel(const std::optional<std::string>& flag_value,
                        const std::optional<std::string>& env_value) {
  LevelChoice choice;
  choice.source = "default";
  std::string warnings;
  if (env_value && !env_value->empty()) {
    if (auto level = ParseLevel(*env_value)) {
      choice.level = *level;
      choice.source = kLevelEnvVar;
    } else {
      warnings = std::string("invalid ") + kLevelEnvVar + "='" + *env_value +
                 "' ignored; valid levels: " + kValidLevels;
    }
  }
  if (flag_value) {
    if (auto level = ParseLevel(*flag_value)) {
      choice.level = *level;
      choice.source = "--log-level";
    } else {
      if (!warnings.empty()) warnings += "; ";
      warnings += "invalid --log-level '" + *flag_value + "' ignored; valid levels: " + kValidLevels;
    }
  }
  choice.warning = warnings;
  return choice;
}

void Init(const std::optional<std::string>& flag_value) {
  std::optional<std::string> env;
  if (const char* v = std::getenv(kLevelEnvVar)) env = v;
  LevelChoice choice = ChooseLevel(flag_value, env);
  spdlog::set_level(choice.level);  // applies to every registered logger
  auto main = Get("dsdoctor");
  if (!choice.warning.empty()) main->warn("{}", choice.warning);
  main->debug("log level {} from {}", spdlog::level::to_string_view(choice.level), choice.source);
}

std::shared_ptr<spdlog::logger> Get(const std::string& component) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (auto existing = spdlog::get(component)) return existing;
  auto logger = std::make_shared<spdlog::logger>(component, SharedSink());
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%-5l%$ [%n] %v");
  logger->set_level(spdlog::get_level());
  spdlog::register_logger(logger);
  return logger;
}

}  // namespace dsd::log
