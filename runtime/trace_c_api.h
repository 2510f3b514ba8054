// A C ABI over the trace writer (docs/trace.md) for tracers that are not C++: the Python tracer
// (python/dsdoctor_tracer.py) loads it as libdsdoctor_pytrace.so with ctypes and records every
// torch.distributed call of an unmodified program into the same per-rank ring the bundled runtime
// writes, so the agent, the diagnosis engine, `analyze` and the TUI read Python ranks unchanged.
//
// One trace per process. Every function is safe from any thread (a mutex orders Begin/End, which
// the writer needs one at a time, unless the producer promised one call at a time:
// dsd_trace_set_one_caller) and never fails the caller: before dsd_trace_open, after a
// failed open, or in a forked child (whose records would land in the parent's file) they do
// nothing. A heartbeat thread refreshes the header every 100 ms while the process runs.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Creates the trace file at `path` (truncating it). Returns 0, or a negative errno-like code; the
// reason is then in dsd_trace_error(). A second open in the same process returns 0 and keeps the
// first trace.
int dsd_trace_open(const char* path, int rank, int world_size, int local_rank, const char* backend, uint32_t capacity);
// Records a call as started; returns its index + 1 (0 when not tracing). Numbers are those of
// runtime/types.h (Op, DType, ReduceOp); `op | 0x100` marks an asynchronous call (it returned to
// the program at once: in flight then means unfinished, not waiting). `callsite` is truncated to
// the record's 47 bytes at a UTF-8 boundary.
uint64_t dsd_trace_begin(int op, int dtype, int reduce_op, uint64_t seq, uint64_t count, uint64_t bytes, int peer,
                         uint32_t comm, const char* callsite);
// The same as dsd_trace_begin in a form ctypes calls without argument conversion (every argument a
// C int, about 3x faster from Python): packed = op | dtype << 8 | reduce_op << 16 | element_bytes << 24
// (below 64) | async << 30,
// bytes = count * element_bytes, count, seq and comm below 2^31. Returns a handle below 2^31 for
// dsd_trace_end_fast (0 when not tracing).
int dsd_trace_begin_fast(int packed, int seq, int count, int peer, int comm, const char* callsite);
// Ends a dsd_trace_begin_fast call: completed when error is null, else failed with that error.
void dsd_trace_end_fast(int handle, const char* error);
// Ends the call dsd_trace_begin returned `handle` for: completed when ok != 0, else failed with
// `error` (may be null) as the trace's last error.
void dsd_trace_end(uint64_t handle, int ok, const char* error);
// Takes back a call the library refused before it communicated (an argument error): readers leave
// its record out (docs/trace.md, state withdrawn). For a handle of either begin function.
void dsd_trace_withdraw(uint64_t handle);
// Whether the program waits on the asynchronous call `handle` stands for (MPI_Wait on its
// request): while it does, its record is not async, so a hang shows the rank blocked in it.
void dsd_trace_set_waited(uint64_t handle, int waited);
void dsd_trace_withdraw_fast(int handle);
void dsd_trace_set_phase(int phase);
void dsd_trace_set_step(uint64_t step);
// Header flag bits (kTraceFlag*): 1 finished cleanly.
void dsd_trace_set_flags(uint32_t bits);
void dsd_trace_set_error(const char* error);
// The producer promises that from now on it calls the functions above one at a time, from one
// thread or with its own ordering (MPI below MPI_THREAD_MULTIPLE): they then skip their lock. Call it
// after dsd_trace_open; 0 takes the promise back. The heartbeat thread needs no lock either way.
void dsd_trace_set_one_caller(int yes);
// Why the last dsd_trace_open failed ("" when it did not).
const char* dsd_trace_error(void);

#ifdef __cplusplus
}
#endif
