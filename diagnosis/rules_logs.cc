#include <string.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <unordered_map>

#include "common/strings.h"
#include "diagnosis/rules.h"

namespace dsd::diagnosis::rules {

// ---- log events and watchdogs --------------------------------------------------------------------

void Watchdogs(Ctx& c) {
  std::vector<int> ranks;
  Finding f;
  for (const RankState& r : c.job.ranks) {
    if (!r.watchdog_fired) continue;
    ranks.push_back(r.rank);
    if (f.evidence.size() < 8)
      f.evidence.push_back("rank " + std::to_string(r.rank) + ": " +
                           (r.in_flight ? r.in_flight->Describe()
                            : r.last    ? r.last->Describe()
                                        : std::string("?")));
  }
  if (ranks.empty()) return;
  f.code = codes::kWatchdogTimeout;
  f.severity = Severity::kWarning;
  f.ranks = ranks;
  f.summary = "the runtime's watchdog fired on " + RankWord(ranks) + ": a call stayed in flight past its timeout";
  int aborted = 0;
  for (int r : ranks) aborted += c.job.ranks[r].signal == 6;
  if (aborted) f.summary += " (" + std::to_string(aborted) + " ended by its abort policy)";
  f.remedy =
      "See the finding that explains why the call could not finish; raise DSDOCTOR_TIMEOUT only if the call is "
      "legitimately slow.";
  f.proof = proof::kTrace;
  c.Add(std::move(f), false);
}

// "job.log:12 (rank 3, node-1): <text>"
std::string EventEvidence(const LogEvent& e) {
  std::string who;
  if (e.rank >= 0) who = "rank " + std::to_string(e.rank);
  if (!e.host.empty()) who += (who.empty() ? "" : ", ") + e.host;
  std::string fr = e.Field("flight_recorder");  // the record of the call it names (run_dir.cc JoinFlightRecorder)
  // The source format that read it (collectors/source_formats.h), for the reader to check the cause against.
  std::string src = e.Field("source");
  if (!src.empty() && !e.Field("topic").empty()) src += " [" + e.Field("topic") + "]";
  return e.Where() + (who.empty() ? "" : " (" + who + ")") + ": " + e.text.substr(0, 300) +
         (fr.empty() ? "" : " — " + fr) + (src.empty() ? "" : " (format: " + src + ")");
}

namespace {
// Two events of one combined log are ordered by their position; of different files only by
// timestamps.
bool Ordered(const LogEvent& a, const LogEvent& b) {
  return (a.file == b.file && !a.file.empty() && a.offset >= 0 && b.offset >= 0) || (a.time_ns && b.time_ns);
}
bool Before(const LogEvent& a, const LogEvent& b) {
  return a.file == b.file && !a.file.empty() && a.offset >= 0 && b.offset >= 0 ? a.offset < b.offset
                                                                               : a.time_ns < b.time_ns;
}
// A watchdog line of the default process group: "PG ID 0", or no group named (torch before 2.3).
bool InDefaultGroup(const LogEvent& e) {
  const std::string pg = e.Field("pg");
  return pg.empty() || pg == "0";
}
bool IsTimeout(const LogEvent& e) {
  return e.code == codes::kWatchdogTimeout || e.kind.find("timeout") != std::string::npos ||
         !e.Field("timeout_ms").empty() || e.summary.find("timed out") != std::string::npos ||
         e.summary.find("Timed out") != std::string::npos;
}
}  // namespace

// ---- watchdog reports: who timed out in a collective and who never got there ---------------------

void WatchdogCulprits(Ctx& c) {
  struct Report {
    const LogEvent* e;
    std::string op;
  };
  std::map<int, Report> first;  // rank → its first watchdog report (default process group)
  for (const LogEvent& e : c.job.events) {
    if ((e.kind != "torch_watchdog" && e.kind != "torch_blocking_wait_timeout") || e.rank < 0 || e.Field("seq").empty())
      continue;
    if (!InDefaultGroup(e)) continue;
    first.emplace(e.rank, Report{&e, e.Field("op")});
  }
  // torch >= 2.3 says "Timeout at NCCL work: N" beside the timeout line: where a rank printed both, the
  // second is the same timeout and no finding of its own.
  std::map<std::pair<int, std::string>, std::vector<std::string>> watchdog_pgs;  // (rank, seq) → its lines' groups
  for (const LogEvent& w : c.job.events)
    if (w.kind == "torch_watchdog" && w.rank >= 0) watchdog_pgs[{w.rank, w.Field("seq")}].push_back(w.Field("pg"));
  for (const LogEvent& e : c.job.events) {
    if (e.kind != "torch_work_timed_out" || e.rank < 0) continue;
    auto it = watchdog_pgs.find({e.rank, e.Field("seq")});
    if (it == watchdog_pgs.end()) continue;
    const std::string pg = e.Field("pg");
    if (std::any_of(it->second.begin(), it->second.end(),
                    [&](const std::string& w) { return w.empty() || pg.empty() || w == pg; }))
      c.quoted.insert(&e);
  }
  // A paste that holds only those lines: they are the ranks' timeout reports (the collective unnamed).
  if (first.empty())
    for (const LogEvent& e : c.job.events)
      if (e.kind == "torch_work_timed_out" && e.rank >= 0 && !e.Field("seq").empty() && InDefaultGroup(e))
        first.emplace(e.rank, Report{&e, ""});
  if (first.empty()) return;
  // The collective most ranks report timing out in.
  std::map<std::string, std::vector<int>> by_seq;
  for (auto& [rank, r] : first) by_seq[r.e->Field("seq")].push_back(rank);
  auto top = std::max_element(by_seq.begin(), by_seq.end(),
                              [](auto& a, auto& b) { return a.second.size() < b.second.size(); });
  const std::string seq = top->first;
  std::vector<int> reporters = top->second;
  // Different OpTypes at one SeqNum: the ranks called different collectives.
  std::map<std::string, std::vector<int>> by_op;
  for (int r : reporters) by_op[first[r].op].push_back(r);
  if (by_op.size() > 1) {
    Finding f;
    f.code = codes::kCollectiveMismatch;
    std::vector<std::string> sides;
    for (auto& [op, ranks] : by_op) {
      sides.push_back(RankWord(ranks) + " in " + op);
      f.ranks.insert(f.ranks.end(), ranks.begin(), ranks.end());
      f.evidence.push_back(EventEvidence(*first[ranks[0]].e));
    }
    std::sort(f.ranks.begin(), f.ranks.end());
    f.summary = "the ranks timed out in different collectives at SeqNum " + seq + ": " + Join(sides, ", ");
    f.remedy =
        "The ranks issued different collectives at the same position: a rank-dependent branch or uneven data. Every "
        "rank must call the same collectives in the same order; TORCH_DISTRIBUTED_DEBUG=DETAIL names the call sites.";
    f.proof = proof::kLog;
    for (int r : reporters) c.echoes[first[r].e] = "the ranks disagree on the collective (see above)";
    c.Add(std::move(f), false);
    return;
  }
  // "ALLREDUCE SeqNum=7", or "NCCL work 28" where only the work line named it.
  const auto collective_at = [](const std::string& op, const std::string& seq) {
    return op.empty() ? "NCCL work " + seq : op + " SeqNum=" + seq;
  };
  const std::string op = first[reporters[0]].op;
  const std::string collective = collective_at(op, seq);
  // "Exception (either an error or timeout) detected by watchdog at work: N, last enqueued NCCL work:
  // M": a rank whose watchdog saw work N fail had entered it, whether or not its timeout line is in
  // the logs at hand.
  for (const LogEvent& e : c.job.events)
    if ((e.kind == "torch_work_timeout" || e.kind == "torch_work_timed_out") && e.rank >= 0 && e.Field("seq") == seq &&
        !first.count(e.rank) && InDefaultGroup(e))
      reporters.push_back(e.rank);
  std::sort(reporters.begin(), reporters.end());
  reporters.erase(std::unique(reporters.begin(), reporters.end()), reporters.end());
  std::vector<const LogEvent*> timeout_lines;  // the evidence: the first three reporters' timeout lines
  for (int r : reporters)
    if (auto it = first.find(r); it != first.end() && timeout_lines.size() < 3) timeout_lines.push_back(it->second.e);
  std::vector<int> missing;
  // Ranks with an error of their own are explained by it (the first-failure rule), not missing.
  std::set<int> with_error;
  for (const LogEvent& e : c.job.events)
    if (e.rank >= 0 && e.severity == Severity::kError && !IsTimeout(e) && !e.consequence) with_error.insert(e.rank);
  for (int r = 0; r < static_cast<int>(c.job.ranks.size()); ++r)
    if (!std::binary_search(reporters.begin(), reporters.end(), r) && !with_error.count(r)) missing.push_back(r);
  if (missing.empty()) return;  // every rank waits in it: the collective itself is stuck (network), Events says so
  // Most ranks silent: the logs at hand are more likely partial than most ranks missing.
  if (missing.size() > reporters.size()) return;
  // Ranks that visibly failed before are named by Exits(); this rule is about silent ones.
  bool all_failed = std::all_of(missing.begin(), missing.end(), [&](int r) { return Failed(c.job.ranks[r]); });
  if (all_failed) return;
  const std::set<int> waiting(reporters.begin(), reporters.end());
  const std::string remedy =
      "The ranks that timed out are the consequence; look at what " + RankWord(missing) +
      " did instead (its last lines, or its stack on a live run: `dsdoctor run` captures it). Common causes: work only "
      "rank 0 does (saving, evaluation, logging) while the others continue into a collective, a rank-dependent branch "
      "that skips a collective, or uneven data. Every rank must make the same collective calls; raise "
      "init_process_group(timeout=...) only for legitimately slow rank-0 work.";
  // The records (a Flight Recorder's, or the tracer's) already named the same ranks missing: the
  // watchdog's lines are that finding's proof that the others then timed out, not a second finding.
  for (Finding& known : c.out.findings) {
    if (known.code != codes::kRankMissing || known.ranks != missing) continue;
    known.severity = Severity::kError;
    known.remedy = remedy;
    known.summary += "; " + RankWord(reporters) + " then timed out in " + collective + " (PyTorch's watchdog)";
    for (const LogEvent* e : timeout_lines) known.evidence.push_back(EventEvidence(*e));
    for (const LogEvent& e : c.job.events)
      if (waiting.count(e.rank) && (IsTimeout(e) || e.consequence)) c.echoes[&e] = "waited for " + RankWord(missing);
    return;
  }
  Finding f;
  f.code = codes::kRankMissing;
  f.ranks = missing;
  f.summary = RankWord(missing) + " never reached " + collective + ": " + RankWord(reporters) +
              " timed out waiting in it (PyTorch's watchdog), " + (missing.size() == 1 ? "it" : "they") + " did not";
  for (int r : missing) {
    std::string where = "rank " + std::to_string(r) + ": ";
    if (auto it = first.find(r); it != first.end())
      where += "timed out elsewhere (" + collective_at(it->second.op, it->second.e->Field("seq")) + ") at " +
               it->second.e->Where();
    else if (Failed(c.job.ranks[r]))
      where += "exited (" +
               std::string(c.job.ranks[r].signal ? std::string("signal ") + std::to_string(c.job.ranks[r].signal)
                                                 : "exit code " + std::to_string(c.job.ranks[r].exit_code)) +
               ")";
    else
      where +=
          "reported no timeout: it was elsewhere (a data loader, a rank-0-only step such as a checkpoint or "
          "evaluation, "
          "I/O, or a hang) when the others entered the collective";
    f.evidence.push_back(where);
  }
  for (const LogEvent* e : timeout_lines) f.evidence.push_back(EventEvidence(*e));
  f.remedy = remedy;
  f.proof = proof::kLog;
  for (int r : missing) c.explained.insert(r);
  for (const LogEvent& e : c.job.events)
    if (waiting.count(e.rank) && (IsTimeout(e) || e.consequence)) c.echoes[&e] = "waited for " + RankWord(missing);
  c.Add(std::move(f), false);
}

// ---- torchfrtrace's report: the ranks that never joined a collective -----------------------------

void FlightRecorderAnalysis(Ctx& c) {
  // A block: the header line, then (in the newer layout) its "collective:" and "missing ranks:" lines.
  struct Block {
    const LogEvent* head;
    std::string seq, op;
    const LogEvent* missing;  // the line whose "missing" field lists the ranks (the header's own, or null)
    std::vector<const LogEvent*> lines;
  };
  const auto lists = [](const LogEvent& e) { return e.Field("missing").empty() ? nullptr : &e; };
  std::vector<Block> blocks;
  for (const LogEvent& e : c.job.events) {
    if (e.kind == "fr_not_all_ranks") {
      std::string seq = e.Field("seq").empty() ? e.Field("seq2") : e.Field("seq");
      blocks.push_back({&e, seq, e.Field("op"), lists(e), {&e}});
    } else if ((e.kind == "fr_missing_ranks" || e.kind == "fr_collective") && !blocks.empty() &&
               blocks.back().head->file == e.file) {
      Block& b = blocks.back();
      if (e.kind == "fr_collective" && b.op.empty()) {
        b.op = e.Field("op");
        b.lines.push_back(&e);
      } else if (e.kind == "fr_missing_ranks" && !b.missing) {
        b.missing = &e;
        b.lines.push_back(&e);
      } else if (e.kind == "fr_missing_ranks") {
        blocks.push_back({&e, "", "", &e, {&e}});  // a block whose header was cut off
      }
    } else if (e.kind == "fr_missing_ranks") {
      blocks.push_back({&e, "", "", &e, {&e}});  // its header was not pasted
    }
  }
  // The analyzer prints a block per collective the missing ranks skipped (and again on every
  // periodic dump): one finding per set of missing ranks, led by its first collective.
  std::map<std::vector<int>, std::vector<const Block*>> by_missing;
  std::vector<std::vector<int>> order;
  for (const Block& b : blocks) {
    if (!b.missing) continue;
    std::vector<int> ranks = b.missing->RankList("missing");
    if (ranks.empty()) continue;
    auto& list = by_missing[ranks];
    if (list.empty()) order.push_back(ranks);
    list.push_back(&b);
  }
  for (const std::vector<int>& missing : order) {
    const std::vector<const Block*>& list = by_missing[missing];
    const Block& first = *list.front();
    std::string op = first.op;
    if (size_t colon = op.find(':'); colon != std::string::npos) op = op.substr(colon + 1);  // "nccl:all_reduce"
    Finding f;
    f.code = codes::kRankMissing;
    f.ranks = missing;
    f.summary = RankWord(missing) + " never joined " + (op.empty() ? std::string("a collective") : op) +
                (first.seq.empty() ? "" : " (sequence number " + first.seq + ")") +
                " the other ranks waited in (torchfrtrace's analysis of the Flight Recorder dumps)";
    if (list.size() > 1) f.summary += "; " + std::to_string(list.size() - 1) + " more report(s) name the same ranks";
    for (const Block* b : list)
      for (const LogEvent* e : b->lines) {
        if (f.evidence.size() < 4) f.evidence.push_back(EventEvidence(*e));
        c.quoted.insert(e);
      }
    f.remedy = "The other ranks' calls are the consequence; look at where " + RankWord(missing) +
               (missing.size() == 1 ? " was" : " were") +
               " instead (their stacks: `py-spy dump`, or their last log lines). Common causes: a rank-dependent "
               "branch that skips the collective, work only some ranks do (saving, evaluation, logging), or uneven "
               "data. Raising the timeout does not help.";
    f.proof = proof::kLog;
    for (int r : missing) c.explained.insert(r);
    c.Add(std::move(f), false);
  }
  // Lines of a block without its "missing ranks" (a cut paste) stay for Events() to report as they are.
}

// ---- Horovod's stall check -------------------------------------------------------------------------

void HorovodStalls(Ctx& c) {
  bool missing_named = false;
  std::vector<const LogEvent*> headers;
  for (const LogEvent& e : c.job.events) {
    if (e.kind == "horovod_missing_ranks") missing_named = true;
    if (e.kind == "horovod_stall") headers.push_back(&e);
  }
  if (headers.empty()) return;
  if (missing_named) {  // the "[missing ranks: …]" lines name them: the header would name its printer
    for (const LogEvent* h : headers) c.quoted.insert(h);
    return;
  }
  // Older releases list the ranks that did submit ("[ready ranks: 0, 2]"): the others had not.
  std::set<int> ready;
  for (const LogEvent* h : headers)
    for (int r : h->RankList("ready")) ready.insert(r);
  if (ready.empty() || c.job.world_size <= 0) return;  // Events() reports the stall as printed
  std::vector<int> missing;
  for (int r = 0; r < c.job.world_size; ++r)
    if (!ready.count(r)) missing.push_back(r);
  if (missing.empty()) return;
  Finding f;
  f.code = codes::kRankMissing;
  f.severity = Severity::kWarning;  // Horovod warns after 60 s; a slow rank may still catch up
  f.ranks = missing;
  f.summary = RankWord(missing) + " had not submitted tensors " +
              RankWord(std::vector<int>(ready.begin(), ready.end())) +
              " submitted and wait with (Horovod's stall check; the world is the ranks the logs show)";
  for (size_t i = 0; i < headers.size() && i < 3; ++i) f.evidence.push_back(EventEvidence(*headers[i]));
  f.remedy = headers.front()->remedy;
  f.proof = proof::kLog;
  for (const LogEvent* h : headers) c.quoted.insert(h);
  c.Add(std::move(f), false);
}

// ---- the watchdog's dump signal: which ranks had nothing in flight ------------------------------

void DumpSignals(Ctx& c) {
  struct Counters {
    const LogEvent* e = nullptr;
    bool idle = true;        // every report of the rank: last enqueued work == last completed
    int64_t completed = -1;  // its last completed work (the largest reported)
  };
  std::map<int, Counters> by_rank;
  std::set<int> origins;  // ranks whose watchdog timed out
  std::vector<const LogEvent*> reports;
  // The lowest work still in flight anywhere: a timed-out SeqNum, or a busy rank's last completed + 1.
  // A rank with nothing in flight that completed it or later did issue it (a send of a pipeline, a
  // rank ahead on another group): it is no culprit.
  int64_t lowest_in_flight = INT64_MAX;
  for (const LogEvent& e : c.job.events) {
    if (e.kind == "torch_watchdog" || e.kind == "torch_blocking_wait_timeout") {
      if (e.rank >= 0) origins.insert(e.rank);
      if (!e.Field("seq").empty())
        lowest_in_flight = std::min<int64_t>(lowest_in_flight, std::atoll(e.Field("seq").c_str()));
      continue;
    }
    if (e.kind != "torch_dump_signal" || e.rank < 0) continue;
    reports.push_back(&e);
    origins.insert(e.subject_rank >= 0 ? e.subject_rank : e.rank);  // "from this local rank"
    Counters& k = by_rank[e.rank];
    if (!k.e) k.e = &e;
    const std::string enq = e.Field("enqueued"), done = e.Field("completed");
    // Without its counters nothing is known of the rank's work.
    if (enq.empty() || done.empty()) {
      k.idle = false;
      continue;
    }
    const int64_t enqueued = std::atoll(enq.c_str()), completed = std::atoll(done.c_str());
    k.completed = std::max(k.completed, completed);
    if (enqueued > completed) {
      k.idle = false;
      lowest_in_flight = std::min(lowest_in_flight, completed + 1);
    }
  }
  std::vector<int> idle, busy;
  for (auto& [rank, k] : by_rank) {
    if (origins.count(rank) || c.explained.count(rank)) continue;
    if (k.idle && k.completed >= lowest_in_flight) continue;  // it got past the work the others wait in
    (k.idle ? idle : busy).push_back(rank);
  }
  if (idle.empty()) return;  // Events() reports the timeout as the ranks print it
  std::vector<int> origin(origins.begin(), origins.end());
  Finding f;
  f.code = codes::kRankMissing;
  f.ranks = idle;
  f.summary = RankWord(idle) + " had no NCCL work in flight when " + RankWord(origin) +
              "'s collective timed out (PyTorch's watchdog): " + (idle.size() == 1 ? "it" : "they") +
              " never issued the collective the others wait in";
  for (int r : idle) {
    const LogEvent& e = *by_rank[r].e;
    if (f.evidence.size() < 4)
      f.evidence.push_back("rank " + std::to_string(r) + ": last enqueued NCCL work " + e.Field("enqueued") +
                           " = last completed " + e.Field("completed") + " — " + EventEvidence(e));
  }
  if (!busy.empty()) f.evidence.push_back(RankWord(busy) + " had work in flight: waiting in the collective");
  f.remedy = "The timeout on " + RankWord(origin) + " is the consequence; look at where " + RankWord(idle) +
             (idle.size() == 1 ? " was" : " were") +
             " instead (its stack: `py-spy dump`, or its last log lines). Common causes: work only some ranks do "
             "(saving, evaluation, logging), a rank-dependent branch that skips a collective, or uneven data. A rank "
             "stuck inside the call before NCCL took it (setting up a new communicator) shows the same counters: its "
             "stack tells the two apart.";
  f.proof = proof::kLog;
  for (int r : idle) c.explained.insert(r);
  for (const LogEvent* e : reports) c.quoted.insert(e);
  c.Add(std::move(f), false);
}

// Ranks that timed out on the c10d store waited for a key its owner writes (rank 0, or the rank
// the message names): when that rank reported no failure of its own, it was busy elsewhere
// (preprocessing data before init_process_group, a slow first step) or hung.
void StoreCulprits(Ctx& c) {
  std::map<int, std::vector<const LogEvent*>> by_owner;  // owner → reports
  std::set<int> with_error;                              // ranks that logged an error of their own
  for (const LogEvent& e : c.job.events)
    if (e.rank >= 0 && e.severity == Severity::kError && e.kind != "torch_store_get_timeout" && !e.consequence)
      with_error.insert(e.rank);
  for (const LogEvent& e : c.job.events) {
    if (e.rank < 0 || c.echoes.count(&e)) continue;
    if (e.kind == "torch_store_get_timeout" ||
        (e.kind == "python_traceback" && e.Field("cause_kind") == "torch_store_get_timeout"))
      by_owner[0].push_back(&e);
    else if (e.kind == "torch_nccl_uniqueid_store" && e.subject_rank >= 0 &&
             e.Field("error").find("imeout") != std::string::npos)
      by_owner[e.subject_rank].push_back(&e);
  }
  for (auto& [key, reports] : by_owner) {
    const int owner = key;  // clang 14 cannot capture a structured binding
    if (owner >= static_cast<int>(c.job.ranks.size()) || c.explained.count(owner) || Failed(c.job.ranks[owner]))
      continue;
    if (with_error.count(owner)) continue;  // it failed itself: the first-failure rule says so
    std::vector<int> waiters;
    for (const LogEvent* e : reports)
      if (std::find(waiters.begin(), waiters.end(), e->rank) == waiters.end()) waiters.push_back(e->rank);
    std::sort(waiters.begin(), waiters.end());
    Finding f;
    f.code = codes::kRankMissing;
    f.ranks = {owner};
    f.summary = "rank " + std::to_string(owner) + " never wrote the c10d store key " + RankWord(waiters) +
                " timed out waiting for, and reported no error of its own";
    for (size_t i = 0; i < reports.size() && i < 4; ++i) f.evidence.push_back(EventEvidence(*reports[i]));
    f.remedy = "Rank " + std::to_string(owner) +
               " was busy or stuck while the others set up communication: slow work on it alone (tokenising or "
               "preprocessing a dataset, downloading a model, `main_process_first`) before init_process_group, "
               "new_group or the first collective, or a hang. Do that work before every rank reaches the setup (or "
               "cache it), or raise init_process_group(timeout=...); its own last lines say where it was.";
    f.proof = proof::kLog;
    c.explained.insert(owner);
    for (const LogEvent* e : reports) c.echoes[e] = "waited for rank " + std::to_string(owner);
    c.Add(std::move(f), false);
  }
}

// NCCL 2.14 to 2.18 report socket failures as ncclInternalError, its "Last error:" the socket's
// words: the error is the connection loss (a peer died or the network failed) or the socket NCCL
// could not open, not an internal check (NVIDIA/nccl#1092).
void InternalErrorsOfALostPeer(Ctx& c) {
  // The "Last error:" kinds that say what the internal error was: a lost connection, or a socket NCCL
  // could not open or connect (no address on NCCL_SOCKET_IFNAME, loopback, a refused connect).
  static const std::set<std::string> kSocketKinds = {"nccl_socket_closed", "nccl_socket_no_address",
                                                     "nccl_connect_failed", "nccl_connect_loopback",
                                                     "nccl_no_socket_interface"};
  std::vector<const LogEvent*> closed;
  for (const LogEvent& e : c.job.events)
    if (kSocketKinds.count(e.kind)) closed.push_back(&e);
  if (closed.empty()) return;
  // NCCL 2.19+ reports the same failures as a system error ("unhandled system error … Last error:
  // socketStartConnect: Connect to … failed"): the socket's line is the finding there too.
  const auto generic = [](std::string_view kind) {
    return kind == "nccl_internal_error" || kind == "nccl_system_error";
  };
  for (const LogEvent& e : c.job.events) {
    if (!generic(e.kind) && !(e.kind == "python_traceback" && generic(e.Field("cause_kind")))) continue;
    // The exception's line, NCCL's "ncclInternalError: …", "Last error:", the socket's words and the
    // traceback are a few lines of one report.
    // A traceback's event is on its first line and its exception (with "Last error:") at its end.
    const int after = e.kind == "python_traceback" ? 200 : 6;
    for (const LogEvent* s : closed)
      if (s->file == e.file && s->rank == e.rank && s->line >= e.line - 6 && s->line <= e.line + after) {
        c.echoes[&e] = e.kind == "nccl_system_error" || e.Field("cause_kind") == "nccl_system_error"
                           ? "NCCL reports the socket error beside it as a system error"
                           : "NCCL reports the socket error beside it as an internal error";
        break;
      }
  }
}

// The first failure of a combined log: the errors of other ranks after it (timeouts, lost
// connections, remote errors) are its echo.
void FirstFailure(Ctx& c) {
  const LogEvent* root = nullptr;
  for (const LogEvent& e : c.job.events) {
    if (e.severity != Severity::kError || e.consequence || IsTimeout(e) || e.code == codes::kRankExited || e.rank < 0)
      continue;
    if (c.echoes.count(&e)) continue;
    if (root && !Ordered(*root, e)) return;  // the logs do not say what came first
    if (!root || Before(e, *root)) root = &e;
  }
  if (!root) return;
  int echoes = 0;
  for (const LogEvent& e : c.job.events) {
    if (&e == root || c.echoes.count(&e) || !Ordered(*root, e) || !Before(*root, e)) continue;
    // Timeouts, lost connections, remote and store errors follow a death; a cause of its own (an IB
    // link error, a missing interface on another node) stays an error.
    bool echo = e.consequence || IsTimeout(e) || e.code == codes::kRendezvousError ||
                e.code == codes::kWatchdogTimeout || (e.kind == "python_traceback" && e.code == codes::kCommError);
    if (!echo) continue;
    c.echoes[&e] = "after rank " + std::to_string(root->rank) + " failed first (" + root->Where() + ")";
    echoes += e.rank != root->rank;
  }
  // Only worth saying when other ranks' errors followed it.
  if (echoes) c.first_failure = root->summary;
  // From logs alone, a launcher's exit line may name a rank whose only errors are such echoes (mpirun's
  // "first process to exit" is whichever exit its daemon saw first, which under load can be a peer
  // that lost its connection while the failing rank was still tearing down): that exit is a
  // consequence too.
  if (!echoes || !c.job.logs_only) return;
  const auto only_echoes = [&](int rank) {
    bool any = false;
    for (const LogEvent& e : c.job.events) {
      if (e.rank != rank || e.severity != Severity::kError || e.code == codes::kRankExited) continue;
      if (!c.echoes.count(&e) && !e.consequence) return false;
      any = true;
    }
    return any;
  };
  for (Finding& f : c.out.findings) {
    if (f.code != codes::kRankExited || f.severity != Severity::kError || f.ranks.empty()) continue;
    if (std::any_of(f.ranks.begin(), f.ranks.end(), [&](int r) { return r == root->rank || !only_echoes(r); }))
      continue;
    f.severity = Severity::kWarning;
    f.summary += " (a consequence: after rank " + std::to_string(root->rank) + " failed first (" + root->Where() + "))";
  }
}

void Events(Ctx& c) {
  struct Bucket {
    const LogEvent* first;
    std::vector<int> ranks;
    std::vector<std::string> evidence;
    std::set<std::string> hosts;
    std::string echo;  // why every event of the bucket is a consequence ("" when one is not)
    bool all_echo = true;
    std::set<int> rank_set;
    // Lines about a peer: the ranks that printed them (the peer is in ranks/hosts).
    bool about_peer = false;
    std::vector<int> reporters;
    std::set<int> reporter_set;
    // A watchdog's SeqNum per rank, the lowest it reported (ranks stuck at different collectives).
    std::map<int, int64_t> seq_of_rank;
  };
  std::vector<Bucket> buckets;
  std::map<std::string, size_t> index;
  // A mismatch the traces or watchdog reports proved: the ranks' own complaints about it (Gloo's
  // size check aborting a rank) are its echo.
  const bool mismatch_known = c.HasCode(codes::kCollectiveMismatch);
  // A line that usually follows a failure (srun's "Job step aborted" after a cancellation, a lost
  // connection after a crash) is a consequence wherever the logs also hold an error of a cause's kind.
  // Only a cause logged before it, a few lines after it (srun's notices reach the log before
  // slurmstepd's cancellation line), or where the logs cannot say which came first explains it.
  // A launcher's exit line is no cause; Ray's notice of a worker's death is, for the driver's
  // ActorDiedError: it says how the worker died.
  std::vector<const LogEvent*> causes;
  for (const LogEvent& e : c.job.events)
    if (e.severity == Severity::kError && !e.consequence && !c.echoes.count(&e) && !IsTimeout(e) &&
        (e.code != codes::kRankExited || e.kind == "ray_worker_died"))
      causes.push_back(&e);
  const auto caused = [&](const LogEvent& e) {
    return std::any_of(causes.begin(), causes.end(), [&](const LogEvent* cause) {
      return !Ordered(*cause, e) || Before(*cause, e) || (cause->file == e.file && cause->line - e.line <= 20);
    });
  };
  // PyTorch's reaction lines ("taking the entire process down", the heartbeat monitor's termination)
  // follow the rank's own timeout or error: after one of those they are its echo; alone (a paste cut
  // before the cause) they are the only sign the rank was ended, and stay errors.
  const auto after_own_error = [&](const LogEvent& e) {
    return std::any_of(c.job.events.begin(), c.job.events.end(), [&](const LogEvent& x) {
      if (&x == &e || x.severity != Severity::kError || x.consequence || c.echoes.count(&x)) return false;
      if (e.rank >= 0 ? x.rank != e.rank : x.file != e.file) return false;
      return Ordered(x, e) && Before(x, e);
    });
  };
  for (const LogEvent& e : c.job.events)
    if (mismatch_known && e.code == codes::kCollectiveMismatch && !c.echoes.count(&e))
      c.echoes[&e] = "the ranks' collectives differ (above)";
  for (const LogEvent& e : c.job.events) {
    if (c.quoted.count(&e)) continue;                       // another finding gives it as its cause
    if (!e.collective.empty() && mismatch_known) continue;  // already explained
    if (e.code == codes::kRankExited && e.subject_rank >= 0 && e.subject_rank < static_cast<int>(c.job.ranks.size()) &&
        c.job.ranks[e.subject_rank].status == RankStatus::kExited)
      continue;  // the launcher's line repeats what the rank's exit says (Exits() reports it)
    auto echo = c.echoes.find(&e);
    // Lines that differ only in numbers (ports, pids, sizes) are one finding.
    std::string shape;
    for (char ch : e.summary)
      if (!(ch >= '0' && ch <= '9'))
        shape += ch;
      else if (shape.empty() || shape.back() != '#')
        shape += '#';
    // A line naming a peer (an address, a host, a rank) is about that peer: one finding per peer,
    // the peer its culprit, the ranks that printed it its evidence.
    const std::string peer_host = e.Field("peer_host");
    std::string key = e.code + "\x1f" + e.kind + "\x1f" + shape +
                      (echo != c.echoes.end() ? "\x1f" + echo->second : "") + "\x1f" + peer_host + "\x1f" +
                      (e.subject_rank >= 0 ? std::to_string(e.subject_rank) : "");
    auto [it, inserted] = index.emplace(key, buckets.size());
    if (inserted)
      buckets.push_back({&e, {}, {}, {}, echo != c.echoes.end() ? echo->second : "", true, {}, false, {}, {}});
    Bucket& b = buckets[it->second];
    b.all_echo = b.all_echo && echo != c.echoes.end();
    // (A peer no rank is known to be stays in the line's words; the printer stays the culprit.)
    std::vector<int> subjects;
    if (e.subject_rank >= 0) {
      subjects.push_back(e.subject_rank);
    } else {
      subjects = e.RankList("peer_ranks");
    }
    const bool about_peer = !subjects.empty();
    if (subjects.empty() && e.rank >= 0) subjects.push_back(e.rank);
    for (int subject : subjects)
      if (subject >= 0 && subject < (1 << 20) && b.rank_set.insert(subject).second) b.ranks.push_back(subject);
    if (about_peer) {
      b.about_peer = true;
      if (!e.Field("peer_ranks").empty() && !peer_host.empty()) b.hosts.insert(peer_host);
      if (e.rank >= 0 && b.reporter_set.insert(e.rank).second) b.reporters.push_back(e.rank);
    } else if (!e.host.empty()) {
      b.hosts.insert(e.host);
    }
    if (const std::string seq = e.Field("seq"); !seq.empty() && e.rank >= 0 && seq.size() < 19 && InDefaultGroup(e)) {
      const int64_t n = std::atoll(seq.c_str());
      auto [at, fresh] = b.seq_of_rank.emplace(e.rank, n);
      if (!fresh) at->second = std::min(at->second, n);
    }
    if (b.evidence.size() < 4) b.evidence.push_back(EventEvidence(e));
  }
  // Of the peers the ranks name, the one most of them name leads (it is the likeliest culprit;
  // the others are often its echo): peer findings are reordered among themselves.
  {
    std::vector<size_t> slots;
    std::vector<Bucket> peers;
    for (size_t i = 0; i < buckets.size(); ++i)
      if (buckets[i].about_peer) slots.push_back(i), peers.push_back(buckets[i]);
    std::stable_sort(peers.begin(), peers.end(),
                     [](const Bucket& a, const Bucket& b) { return a.reporters.size() > b.reporters.size(); });
    for (size_t k = 0; k < slots.size(); ++k) buckets[slots[k]] = std::move(peers[k]);
  }
  for (Bucket& b : buckets) {
    Finding f;
    f.code = b.first->code;
    f.severity = b.first->severity;
    std::sort(b.ranks.begin(), b.ranks.end());
    f.ranks = b.ranks;
    f.nodes.assign(b.hosts.begin(), b.hosts.end());
    // A line about a node (srun's and slurmstepd's name their node, not a rank): the culprits a
    // user acts on are the ranks that ran there.
    if (f.ranks.empty() && !b.hosts.empty())
      for (const RankState& r : c.job.ranks)
        if (b.hosts.count(r.node)) f.ranks.push_back(r.rank);
    std::string who = !b.ranks.empty() ? RankWord(b.ranks)
                      : !b.hosts.empty()
                          ? (b.hosts.size() == 1 ? "node " : "nodes ") + Join({b.hosts.begin(), b.hosts.end()}, ", ")
                          : std::string("the log");
    f.summary = who + ": " + b.first->summary;
    // The ranks timed out at different collectives (of the default group): each rank's first, grouped by
    // SeqNum, not the first line's alone.
    std::map<int64_t, std::vector<int>> ranks_at;
    for (auto& [r, q] : b.seq_of_rank) ranks_at[q].push_back(r);
    if (ranks_at.size() > 1) {
      std::vector<std::string> each;
      for (auto& [q, ranks] : ranks_at)
        if (each.size() < 6) each.push_back(std::to_string(q) + " (" + RankWord(ranks) + ")");
      if (ranks_at.size() > each.size()) each.push_back("…");
      const std::string printed = "SeqNum=" + b.first->Field("seq");
      if (size_t at = f.summary.find(printed); at != std::string::npos)
        f.summary.replace(at, printed.size(), "at SeqNum " + Join(each, ", "));
    }
    if (b.about_peer && !b.reporters.empty()) {
      std::sort(b.reporters.begin(), b.reporters.end());
      f.summary += " (as " + RankWord(b.reporters) + (b.reporters.size() == 1 ? " reports" : " report") + ")";
    }
    if (b.all_echo && !b.echo.empty()) {
      f.severity = Severity::kWarning;
      f.summary += " (a consequence: " + b.echo + ")";
    } else if ((f.code == codes::kCommError || b.first->consequence) &&
               (c.HasCode(codes::kRankExited) || c.HasCode(codes::kCollectiveMismatch) ||
                c.HasCode(codes::kRankMissing) ||
                (b.first->consequence && f.severity == Severity::kError &&
                 (caused(*b.first) || after_own_error(*b.first))))) {
      // Connection errors after a rank died or the ranks diverged are the echo, not the cause.
      f.severity = Severity::kWarning;
      f.summary += " (a consequence of the error above)";
    }
    if (!c.first_failure.empty() && b.first->summary == c.first_failure && f.severity == Severity::kError)
      f.evidence.insert(f.evidence.begin(),
                        "the first failure in the log: the errors of other ranks after it follow from it");
    for (auto& ev : b.evidence) f.evidence.push_back(std::move(ev));
    f.remedy = b.first->remedy;
    f.proof = proof::kLog;
    c.Add(std::move(f), false);
  }
}

// Agents `run` lost sight of (docs/run.md "Agent liveness"). Their ranks' states are the last ones
// seen, so nothing about those ranks is proof: findings that rest only on them are dropped, and
// the job is never called hung (and so never stopped) while some of its ranks are out of sight.

}  // namespace dsd::diagnosis::rules
