#include "collectors/log_classifier.h"

#include <regex>

#include "common/strings.h"
#include "diagnosis/finding.h"

namespace dsd::collectors {
namespace {

using diagnosis::LogEvent;
using diagnosis::Severity;
namespace codes = diagnosis::codes;

bool Has(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

bool IsCollectiveFunction(const std::string& f) { return diagnosis::IsTorchCollective(f); }

bool IsLibraryFile(const std::string& file) {
  // dsdoctor_tracer.py is ours (injected by `dsdoctor run`), never the program's code.
  return Has(file, "/site-packages/") || Has(file, "/dist-packages/") || Has(file, "/lib/python3") || StartsWith(file, "<") ||
         Has(file, "/torch/") || Has(file, "/deepspeed/") || Has(file, "dsdoctor_tracer.py");
}

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

const char* kCommRemedy =
    "A peer's connection went away: usually a consequence of another rank dying or timing out first (see RANK_EXITED "
    "or the earliest error). If no rank died, check the network between the nodes (`dsdoctor check`).";

}  // namespace

LogEvent LogClassifier::Make(const char* code, const char* kind, std::string summary, std::string_view text, std::string remedy,
                             Severity severity) const {
  LogEvent e;
  e.rank = rank_;
  e.code = code;
  e.kind = kind;
  e.severity = severity;
  e.summary = std::move(summary);
  e.text = std::string(text.substr(0, 1000));
  e.line = line_no_;
  e.remedy = std::move(remedy);
  return e;
}

void LogClassifier::EmitTraceback(std::vector<LogEvent>& out, std::string_view exception_line) {
  in_traceback_ = false;
  std::string exc(Trim(exception_line));
  LogEvent e = Make(codes::kLogError, "python_traceback", "Python exception: " + exc.substr(0, 300), exc,
                    "The program raised an exception on this rank; the traceback in its log says where.");
  e.line = traceback_line_;
  // Innermost frame of the program itself (not a library), and the collective it was inside.
  for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
    if (e.collective.empty() && IsCollectiveFunction(it->function) && Has(it->file, "torch/distributed")) e.collective = it->function;
    if (!IsLibraryFile(it->file)) {
      e.location = Basename(it->file) + ":" + std::to_string(it->line);
      break;
    }
  }
  if (!e.location.empty()) e.summary += " (at " + e.location + (e.collective.empty() ? "" : " in " + e.collective + "()") + ")";
  if (Has(exc, "Timed out waiting") || Has(exc, "timed out") || Has(exc, "Timeout")) {
    e.remedy = "The rank waited in " + (e.collective.empty() ? std::string("a collective") : e.collective + "()") +
               " until the process group's timeout: another rank never made the matching call (compare where each rank "
               "failed) or the network between them is blocked.";
    e.code = e.collective.empty() ? codes::kCommError : codes::kLogError;
  } else if (Has(exc, "NCCL error") || Has(exc, "DistBackendError")) {
    e.code = codes::kNcclError;
    e.remedy = "NCCL failed: rerun with NCCL_DEBUG=INFO and read the NCCL WARN lines just before; `dsdoctor check` tests the interfaces, ports and versions.";
  } else if (Has(exc, "Connection closed by peer") || Has(exc, "Connection reset by peer")) {
    e.code = codes::kCommError;
    e.remedy = kCommRemedy;
  } else if (Has(exc, "out of memory")) {
    e.remedy = "The device ran out of memory: lower the micro batch size, enable ZeRO or activation checkpointing.";
  }
  out.push_back(std::move(e));
  frames_.clear();
}

std::vector<LogEvent> LogClassifier::Feed(std::string_view raw) {
  ++line_no_;
  std::vector<LogEvent> out;
  std::string_view line = raw;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);

  // Python tracebacks span lines: "Traceback (most recent call last):", frames, the exception.
  if (in_traceback_) {
    static const std::regex kFrame(R"re(^\s*File "([^"]+)", line (\d+), in (\S+))re");
    std::cmatch m;
    if (std::regex_search(line.begin(), line.end(), m, kFrame)) {
      frames_.push_back({m[1].str(), m[3].str(), "", std::stoi(m[2].str())});
      return out;
    }
    if (StartsWith(line, "    ") || StartsWith(line, "\t") || Trim(line).empty() || Has(line, "^^^") || Has(line, "~~~")) return out;
    if (StartsWith(line, "During handling") || StartsWith(line, "The above exception")) {
      frames_.clear();
      return out;
    }
    EmitTraceback(out, line);
    return out;
  }
  if (Has(line, "Traceback (most recent call last):")) {
    in_traceback_ = true;
    traceback_line_ = line_no_;
    frames_.clear();
    return out;
  }

  // C++: terminate called after throwing an instance of 'X' / what():  msg
  if (!what_pending_.empty()) {
    std::string pending = std::move(what_pending_);
    what_pending_.clear();
    if (Has(line, "what():")) {
      auto e = Make(codes::kLogError, "cxx_terminate", pending + ": " + std::string(Trim(line.substr(line.find("what():") + 7))).substr(0, 300),
                    line, "An uncaught C++ exception ended the rank (abort): the message says which check failed.");
      e.line = what_line_;
      out.push_back(std::move(e));
      return out;
    }
    auto e = Make(codes::kLogError, "cxx_terminate", pending, pending, "An uncaught C++ exception ended the rank (abort).");
    e.line = what_line_;
    out.push_back(std::move(e));
  }
  if (Has(line, "terminate called after throwing an instance of")) {
    what_pending_ = std::string(Trim(line));
    what_line_ = line_no_;
    return out;
  }

  // The bundled runtime's watchdog: "watchdog: rank R: <call> in flight for X s (timeout Y s); policy P"
  if (StartsWith(Trim(line), "watchdog: rank ") || Has(line, "] watchdog: rank ")) {
    out.push_back(Make(codes::kWatchdogTimeout, "runtime_watchdog", std::string(Trim(line.substr(line.find("watchdog:")))),
                       line, "A call stayed in flight past DSDOCTOR_TIMEOUT; the other findings say why it could not finish.",
                       Severity::kWarning));
    return out;
  }
  // PyTorch's NCCL watchdog.
  if (Has(line, "Watchdog caught collective operation timeout")) {
    static const std::regex kWork(R"re(SeqNum=(\d+), OpType=(\w+))re");
    std::cmatch m;
    std::string what = "PyTorch watchdog: collective timed out";
    if (std::regex_search(line.begin(), line.end(), m, kWork)) what += " (SeqNum=" + m[1].str() + ", " + m[2].str() + ")";
    out.push_back(Make(codes::kWatchdogTimeout, "torch_watchdog", what, line,
                       "A collective ran past the process group's timeout: another rank never called it (compare the "
                       "ranks' SeqNum/OpType) or the network stalled. TORCH_NCCL_TRACE_BUFFER_SIZE and "
                       "TORCH_DISTRIBUTED_DEBUG=DETAIL show more."));
    return out;
  }
  if (Has(line, "Detected mismatch between collectives on ranks")) {
    out.push_back(Make(codes::kCollectiveMismatch, "torch_fingerprint", std::string(Trim(line)).substr(0, 400), line,
                       "Ranks issued different collectives (TORCH_DISTRIBUTED_DEBUG=DETAIL compared their fingerprints): "
                       "every rank must call the same collectives with the same shapes in the same order."));
    return out;
  }

  // NCCL.
  if (Has(line, "NCCL error in:") || Has(line, "ncclSystemError") || Has(line, "ncclInternalError") || Has(line, "ncclRemoteError") ||
      Has(line, "ncclInvalidUsage") || Has(line, "ncclUnhandledCudaError")) {
    std::string remedy = "NCCL failed: rerun with NCCL_DEBUG=INFO; the NCCL WARN lines before this one name the peer and the call.";
    if (Has(line, "remote") || Has(line, "ncclRemoteError")) remedy = "A remote peer failed or went away (often another rank died first): look for the first rank that failed.";
    else if (Has(line, "system error") || Has(line, "ncclSystemError")) remedy = "A system call failed inside NCCL (socket, shared memory, /dev/shm too small in containers: use --shm-size or --ipc=host).";
    else if (Has(line, "invalid usage") || Has(line, "ncclInvalidUsage")) remedy = "NCCL was called wrongly: mismatched ranks/devices (two ranks on one GPU), or a wrong world size.";
    out.push_back(Make(codes::kNcclError, "nccl_error", std::string(Trim(line)).substr(0, 300), line, remedy));
    return out;
  }
  if (Has(line, "NCCL WARN")) {
    std::string msg(Trim(line.substr(line.find("NCCL WARN") + 9)));
    std::string remedy = "See NCCL's message; `dsdoctor check` tests interfaces, ports and versions between the nodes.";
    if (Has(msg, "Connect to") || Has(msg, "connect returned") || Has(msg, "Connection refused") || Has(msg, "socketStartConnect"))
      remedy = "NCCL could not connect to a peer: a firewall between the nodes (NCCL uses random high ports unless "
               "NCCL_PORT_RANGE/NCCL_SOCKET_PORT is set), or NCCL_SOCKET_IFNAME picks an interface the peer cannot reach.";
    else if (Has(msg, "no socket interface") || Has(msg, "No usable listening interface") || Has(msg, "Bootstrap"))
      remedy = "NCCL found no usable network interface: NCCL_SOCKET_IFNAME names one that is missing or down on this node (`dsdoctor report` lists them).";
    else if (Has(msg, "shm") || Has(msg, "/dev/shm"))
      remedy = "Shared memory is too small (containers default to 64 MiB /dev/shm): run with --shm-size=1g or --ipc=host.";
    out.push_back(Make(codes::kNcclError, "nccl_warn", "NCCL WARN " + msg.substr(0, 300), line, remedy));
    return out;
  }

  // Gloo and sockets.
  if (Has(line, "Connection closed by peer") || Has(line, "Connection reset by peer")) {
    out.push_back(Make(codes::kCommError, "gloo_connection", Has(line, "closed") ? "connection closed by peer" : "connection reset by peer",
                       line, kCommRemedy));
    return out;
  }
  if (Has(line, "Connection refused") || Has(line, "No route to host") || Has(line, "Network is unreachable")) {
    out.push_back(Make(codes::kCommError, "socket_connect",
                       Has(line, "refused") ? "connection refused" : Has(line, "No route") ? "no route to host" : "network unreachable", line,
                       "A rank could not reach a peer or the rendezvous (MASTER_ADDR:MASTER_PORT): the peer is not listening "
                       "yet or died, a REJECT firewall rule, or the wrong interface (GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME). "
                       "`dsdoctor check` tells these apart."));
    return out;
  }
  if (Has(line, "Timed out waiting") && Has(line, "ms for")) {
    out.push_back(Make(codes::kCommError, "gloo_timeout", std::string(Trim(line.substr(line.find("Timed out waiting")))).substr(0, 200), line,
                       "Gloo waited for a peer's data until its timeout: the peer never made the matching call, or the link between them is blocked."));
    return out;
  }

  // OpenMPI.
  if (Has(line, "mpirun noticed that process rank")) {
    static const std::regex kNoticed(R"re(process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+))re");
    std::cmatch m;
    auto e = Make(codes::kRankExited, "mpirun_noticed", std::string(Trim(line)).substr(0, 300), line,
                  "mpirun saw this rank die; it ended the others. See the rank's own output for why.");
    if (std::regex_search(line.begin(), line.end(), m, kNoticed)) {
      e.subject_rank = std::stoi(m[1].str());
      e.signal = std::stoi(m[3].str());
    }
    out.push_back(std::move(e));
    return out;
  }
  if (Has(line, "MPI_ERR_") || Has(line, "An error occurred in MPI_") || Has(line, "MPI_ABORT was invoked")) {
    out.push_back(Make(codes::kCommError, "mpi_error", std::string(Trim(line)).substr(0, 300), line,
                       "An MPI call failed: the message names the call; with btl/tcp check the interfaces (--mca btl_tcp_if_include) and firewalls."));
    return out;
  }
  if (Has(line, "unable to complete a TCP connection") || Has(line, "ORTE was unable to reliably start")) {
    out.push_back(Make(codes::kCommError, "mpi_connect", std::string(Trim(line)).substr(0, 300), line,
                       "OpenMPI could not connect its daemons or ranks: a firewall between the nodes or the wrong interface "
                       "(--mca btl_tcp_if_include / oob_tcp_if_include)."));
    return out;
  }

  // torchrun's ChildFailedError table: "rank      : 1 (local_rank: 1)" then "exitcode  : -9 (pid: …)".
  if (Has(line, "ChildFailedError")) table_rank_ = -1, table_line_ = line_no_;
  {
    std::string_view t = Trim(line);
    if (StartsWith(t, "rank") && Has(t, ":") && Has(t, "(local_rank")) {
      try {
        table_rank_ = std::stoi(std::string(Trim(t.substr(t.find(':') + 1))));
      } catch (...) {
        table_rank_ = -1;
      }
      return out;
    }
    if (StartsWith(t, "exitcode") && table_rank_ >= 0) {
      int code = 0;
      try {
        code = std::stoi(std::string(Trim(t.substr(t.find(':') + 1))));
      } catch (...) {
      }
      auto e = Make(codes::kRankExited, "torchrun_failure", "torchrun reports rank " + std::to_string(table_rank_) +
                    (code < 0 ? " killed by signal " + std::to_string(-code) : " exited with code " + std::to_string(code)), line,
                    "torchrun saw this rank fail and stopped the others; the rank's own log says why.");
      e.subject_rank = table_rank_;
      if (code < 0) e.signal = -code; else e.exit_code = code;
      out.push_back(std::move(e));
      table_rank_ = -1;
      return out;
    }
  }

  // Crashes and memory.
  if (Has(line, "Segmentation fault") || Has(line, "Bus error") || Has(line, "Fatal Python error")) {
    out.push_back(Make(codes::kLogError, "crash", std::string(Trim(line)).substr(0, 300), line,
                       "The process crashed in native code: the stack in the log (or a core dump) says where."));
    return out;
  }
  if (Has(line, "CUDA out of memory") || Has(line, "CUBLAS_STATUS_ALLOC_FAILED")) {
    out.push_back(Make(codes::kLogError, "cuda_oom", std::string(Trim(line)).substr(0, 300), line,
                       "The GPU ran out of memory: lower the micro batch size, enable ZeRO stage 2/3 or activation checkpointing."));
    return out;
  }
  return out;
}

std::vector<LogEvent> LogClassifier::Finish() {
  std::vector<LogEvent> out;
  if (!what_pending_.empty()) {
    auto e = Make(codes::kLogError, "cxx_terminate", what_pending_, what_pending_, "An uncaught C++ exception ended the rank (abort).");
    e.line = what_line_;
    out.push_back(std::move(e));
    what_pending_.clear();
  }
  if (in_traceback_) EmitTraceback(out, "(traceback cut off: the process died while printing it)");
  return out;
}

std::vector<LogEvent> ClassifyLog(int rank, std::string_view content) {
  LogClassifier c(rank);
  std::vector<LogEvent> all;
  size_t pos = 0;
  while (pos < content.size()) {
    size_t nl = content.find('\n', pos);
    std::string_view line = content.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    for (auto& e : c.Feed(line)) all.push_back(std::move(e));
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  for (auto& e : c.Finish()) all.push_back(std::move(e));
  return all;
}

}  // namespace dsd::collectors
