// The run diagnosis engine: pure rules from a JobState (diagnosis/state.h) to findings and rank
// equivalence classes (docs/run.md lists every rule). No I/O, no clock: JobState::now_ns is the
// time. Deterministic; thread-safe (free function over its argument).
//
// Rules, most decisive first:
//  - COLLECTIVE_MISMATCH: ranks recorded different calls for the same (communicator, seq), or
//    tracebacks show ranks failed inside different collectives. Proven by the traces alone, so it
//    is reported at once, without waiting for any timeout.
//  - RANK_EXITED: a rank exited with an error or a signal (or with 0 while others still wait); the
//    first to go is the culprit, later exits are its consequences.
//  - RANK_MISSING: ranks wait in a collective that a live rank has not joined for hang_after_s
//    (or has provably skipped: it is already past that seq); says where that rank is instead.
//  - P2P_DEADLOCK: a cycle of ranks each blocked in send/recv on a peer that is not doing the
//    matching call.
//  - COLLECTIVE_STALL: every live rank in the same consistent collective for stall_after_s (a
//    network or library problem), correlated with COMM/NCCL events and check findings; also every
//    untraced rank blocked with flat CPU for hang_after_s.
//  - STRAGGLER: one rank arrives last at most recent collectives by a wide margin.
//  - WATCHDOG_TIMEOUT, NCCL_ERROR, COMM_ERROR, LOG_ERROR: log events, grouped across ranks.
//  - AGENT_LOST, LOG_DIR_FULL: what the nodes report about themselves.
// This list is the index; each family of rules is a file of its own (diagnosis/rules.h names them).
#pragma once

#include "diagnosis/state.h"

namespace dsd::diagnosis {

Diagnosis Diagnose(const JobState& job);

// Whether `rank` (one of job's) was ended by a launcher tearing the job down after another rank's
// failure: in a job whose launcher does that (JobState::launcher_teardown), killed by SIGTERM or
// SIGKILL after that failure. Such a rank is no culprit, and its status is not the job's.
bool EndedByTeardown(const JobState& job, const RankState& rank);

// The equivalence classes alone (the TUI shows them for large jobs).
std::vector<RankClass> ClassifyRanks(const JobState& job);

}  // namespace dsd::diagnosis
