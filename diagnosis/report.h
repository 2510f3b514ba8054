// The report of a run (`dsdoctor run` at the end or on a hang, `dsdoctor analyze`): findings
// with evidence and remedy, then the ranks grouped into equivalence classes. Text for people,
// JSON for tools (docs/run.md). Pure; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "diagnosis/state.h"

namespace dsd::diagnosis {

std::string RenderRunText(const JobState& job, const Diagnosis& d, bool color = false);
// {"world_size","hang","findings":[…],"classes":[…],"ranks":[…]}
nlohmann::json RunJson(const JobState& job, const Diagnosis& d);

}  // namespace dsd::diagnosis
