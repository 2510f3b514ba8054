// Terminal-wrapped pastes: a log copied from a terminal (screen, a serial console, a web shell, a
// fixed-width pager) often arrives hard-wrapped at the terminal's width, every long line broken
// into pieces of exactly that many columns. The pieces hide what the catalogue looks for (a
// watchdog's "WorkNCCL(SeqNum=2, OpType=ALLREDUCE" split over two lines) and a whole failure reads
// as no finding. DetectWrap recognises such a paste from its head; Unwrap joins the pieces back.
//
// A paste is taken as wrapped at W columns when no line is longer than W, at least three lines of
// exactly W columns are continued by a line that starts no record (no launcher prefix, timestamp,
// traceback or log level), and such continuations often end the record (are shorter than W): a
// table or a run of fixed-format lines, all of one width, has no such ends. Rules ("-----", "=====")
// are never broken lines. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "collectors/log_prefix.h"

namespace dsd::collectors {

// Display columns of a line as a terminal counts them: UTF-8 characters, a tab to the next multiple
// of 8, a trailing '\r' not at all.
int DisplayColumns(std::string_view line);

// Whether `line` begins a log record (a launcher prefix or timestamp, a traceback, a log level),
// rather than continuing a broken one.
bool StartsRecord(std::string_view line, const PrefixDialect& dialect);

struct WrapShape {
  int width = 0;      // 0: not wrapped
  int continued = 0;  // lines of the head seen continued at that width
};

// Looks at the first lines of a file (up to 20,000).
WrapShape DetectWrap(std::string_view head, const PrefixDialect& dialect);

// Where a line of the joined text began in the original.
struct LineOrigin {
  int64_t line = 0;
  int64_t offset = 0;
};

// Joins the broken lines of `text` ('\n'-separated lines, the last one may lack its '\n'): a line of
// exactly `width` columns is continued by the next one unless that one starts a record or is empty,
// up to `max_line_bytes` per joined line. `first_line`/`first_offset`: the original line number and
// byte offset of text's first line. Returns the joined text (no final '\n'); `origins` gets one entry
// per joined line; `joins` counts the line ends removed.
std::string Unwrap(std::string_view text, int width, const PrefixDialect& dialect, int64_t first_line,
                   int64_t first_offset, size_t max_line_bytes, std::vector<LineOrigin>* origins, int64_t* joins);

}  // namespace dsd::collectors
