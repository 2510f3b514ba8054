// torchrun's error file (TORCHELASTIC_ERROR_FILE): the JSON a worker's `@record` entry point writes
// when it raises, and the copy torchrun's agent makes of the first failing worker's (with its exit
// code): {"message": {"message": "RuntimeError: …", "extraInfo": {"py_callstack": "Traceback …",
// "timestamp": "1700000000"}, "errorCode": 1}}, or the older {"message": "…", "timestamp": …}.
// `dsdoctor analyze error.json` reads one among its inputs as the log of the rank that wrote it
// (docs/analyze.md "torchrun's error file"). Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dsd::collectors {

struct TorchElasticError {
  std::string message;       // "RuntimeError: CUDA out of memory …"
  std::string py_callstack;  // the whole Python traceback, as the rank would have printed it
  int64_t timestamp_s = 0;   // when it was raised (Unix seconds); torchrun's root cause is the earliest
  int error_code = 0;        // the worker's exit code, when torchrun's agent copied the file
};

// The error a file's text holds, or nullopt when the text is not such a file (a JSON-lines log, any
// other JSON, a log). Never throws: fields of other types are left out.
std::optional<TorchElasticError> ParseTorchElasticError(std::string_view text);

// The rank's output it stands for: the traceback (or the message alone), and a line with the exit
// code when torchrun gave one, so the log classifier reads it as any rank's log.
std::string TorchElasticErrorAsLog(const TorchElasticError& error);

// The rank a file's name gives ("rank_3.json", "rank-3.error.json": 3), or -1: torchrun's own layout
// (attempt_0/<local rank>/error.json) names the node's local rank, not the job's.
int TorchElasticErrorRank(std::string_view path);

}  // namespace dsd::collectors
