#include "collectors/pickle.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace dsd::collectors {
namespace {

// Values live in an arena and the memo holds their indices, so a memo reference sees the container
// as it is at the end (pickle's references are to objects, filled after they were memoized).
// Scalars are kept as read (a string as a view of the input) and become JSON only in Convert, for the
// parts converted: most of a big dump's values are never looked at (PickleLimits::tail_key).
struct Node {
  enum Kind : uint8_t { kNull, kBool, kInt, kFloat, kText, kList, kDict } kind = kNull;
  union {
    bool boolean;
    int64_t integer = 0;
    double real;
  };
  std::string_view text;
  std::vector<uint32_t> items;  // list items, or dict key, value, key, value…

  static Node Of(bool v) {
    Node n;
    n.kind = kBool;
    n.boolean = v;
    return n;
  }
  static Node Of(int64_t v) {
    Node n;
    n.kind = kInt;
    n.integer = v;
    return n;
  }
  static Node Of(double v) {
    Node n;
    n.kind = kFloat;
    n.real = v;
    return n;
  }
  static Node Of(std::string_view v) {
    Node n;
    n.kind = kText;
    n.text = v;
    return n;
  }
  static Node Container(Kind k) {
    Node n;
    n.kind = k;
    return n;
  }
};

class Parser {
 public:
  Parser(std::string_view data, const PickleLimits& limits) : data_(data), limits_(limits) {}

  Result<nlohmann::json> Run() {
    if (data_.size() > limits_.max_bytes)
      return InvalidArgument("pickle: " + std::to_string(data_.size()) + " bytes, more than the " +
                             std::to_string(limits_.max_bytes) + " read");
    // About one value per 3 bytes in a dump: growing the arena by doubling cost a quarter of the time.
    nodes_.reserve(std::min<size_t>(data_.size() / 3 + 16, size_t{1} << 22));
    while (pos_ < data_.size()) {
      const size_t at = pos_;
      const uint8_t op = static_cast<uint8_t>(data_[pos_++]);
      if (op == '.') {  // STOP
        if (stack_.empty()) return Error(at, op, "nothing to return");
        uint32_t root = stack_.back();
        size_t made = 0;
        nlohmann::json out;
        if (Status st = Convert(root, 0, &made, &out); !st.ok()) return st;
        return out;
      }
      if (Status st = Step(at, op); !st.ok()) return st;
    }
    return InvalidArgument("pickle: ends at byte " + std::to_string(data_.size()) + " before its STOP (a torn file?)");
  }

 private:
  Status Error(size_t at, uint8_t op, const std::string& what) const {
    char code[8];
    std::snprintf(code, sizeof code, "0x%02x", op);
    return InvalidArgument("pickle: opcode " + std::string(code) + " at byte " + std::to_string(at) + ": " + what);
  }

  bool Take(size_t n, std::string_view* out) {
    if (data_.size() - pos_ < n) return false;
    *out = data_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool TakeUint(size_t n, uint64_t* out) {
    std::string_view b;
    if (!Take(n, &b)) return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(b[i])) << (8 * i);
    *out = v;
    return true;
  }

  Status Push(Node n, size_t at, uint8_t op) {
    if (nodes_.size() >= limits_.max_values)
      return Error(at, op, "more than " + std::to_string(limits_.max_values) + " values");
    nodes_.push_back(std::move(n));
    stack_.push_back(static_cast<uint32_t>(nodes_.size() - 1));
    return Status::Ok();
  }
  template <typename T>
  Status PushScalar(T v, size_t at, uint8_t op) {
    return Push(Node::Of(v), at, op);
  }
  // The values above the newest mark, taken off the stack with the mark.
  bool PopMark(std::vector<uint32_t>* out) {
    if (marks_.empty() || marks_.back() > stack_.size()) return false;
    out->assign(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return true;
  }

  Status Step(size_t at, uint8_t op) {
    std::string_view b;
    uint64_t n = 0;
    auto truncated = [&] { return Error(at, op, "its argument runs past the end (a torn file?)"); };
    auto text = [&](size_t len_bytes) -> Status {
      if (!TakeUint(len_bytes, &n) || !Take(n, &b)) return truncated();
      return PushScalar(b, at, op);
    };
    switch (op) {
      case 0x80:  // PROTO
        if (!TakeUint(1, &n)) return truncated();
        if (n < 2 || n > 5) return Error(at, op, "protocol " + std::to_string(n) + " (2 to 5 are read)");
        return Status::Ok();
      case 0x95:  // FRAME: a length hint
        return TakeUint(8, &n) ? Status::Ok() : truncated();
      case '}':
        return Push(Node::Container(Node::kDict), at, op);
      case ']':
      case ')':
      case 0x8f:  // EMPTY_LIST, EMPTY_TUPLE, EMPTY_SET
        return Push(Node::Container(Node::kList), at, op);
      case '(':  // MARK
        if (marks_.size() >= 4096) return Error(at, op, "more than 4096 open marks");
        marks_.push_back(stack_.size());
        return Status::Ok();
      case 'X':  // BINUNICODE
      case 'T':  // BINSTRING
      case 'B':  // BINBYTES
        return text(4);
      case 0x8c:  // SHORT_BINUNICODE
      case 'U':   // SHORT_BINSTRING
      case 'C':   // SHORT_BINBYTES
        return text(1);
      case 0x8d:  // BINUNICODE8
      case 0x8e:  // BINBYTES8
      case 0x96:  // BYTEARRAY8
        return text(8);
      case 'K':  // BININT1
        if (!TakeUint(1, &n)) return truncated();
        return PushScalar(static_cast<int64_t>(n), at, op);
      case 'M':  // BININT2
        if (!TakeUint(2, &n)) return truncated();
        return PushScalar(static_cast<int64_t>(n), at, op);
      case 'J':  // BININT: signed 4 bytes
        if (!TakeUint(4, &n)) return truncated();
        return PushScalar(static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(n))), at, op);
      case 0x8a:    // LONG1
      case 0x8b: {  // LONG4
        uint64_t len;
        if (!TakeUint(op == 0x8a ? 1 : 4, &len) || !Take(len, &b)) return truncated();
        if (len == 0) return PushScalar(int64_t{0}, at, op);
        if (len <= 8) {
          uint64_t v = 0;
          for (size_t i = 0; i < len; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(b[i])) << (8 * i);
          if (len < 8 && (static_cast<uint8_t>(b[len - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * len);  // sign
          return PushScalar(static_cast<int64_t>(v), at, op);
        }
        double v = 0;  // beyond 64 bits: its magnitude, approximately
        for (size_t i = len; i-- > 0;) v = v * 256 + static_cast<uint8_t>(b[i]);
        if (static_cast<uint8_t>(b[len - 1]) & 0x80) v -= std::ldexp(1.0, static_cast<int>(8 * len));
        return PushScalar(v, at, op);
      }
      case 'G': {  // BINFLOAT: big-endian double
        if (!Take(8, &b)) return truncated();
        uint64_t bits = 0;
        for (size_t i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<uint8_t>(b[i]);
        double v;
        std::memcpy(&v, &bits, sizeof v);
        return PushScalar(v, at, op);
      }
      case 0x88:
        return PushScalar(true, at, op);
      case 0x89:
        return PushScalar(false, at, op);
      case 'N':
        return Push(Node(), at, op);
      case 'q':  // BINPUT
      case 'r':  // LONG_BINPUT
        if (!TakeUint(op == 'q' ? 1 : 4, &n)) return truncated();
        if (stack_.empty()) return Error(at, op, "nothing to memoize");
        Memoize(n, stack_.back());
        return Status::Ok();
      case 0x94:  // MEMOIZE: the next index
        if (stack_.empty()) return Error(at, op, "nothing to memoize");
        Memoize(memo_count_, stack_.back());
        return Status::Ok();
      case 'h':    // BINGET
      case 'j': {  // LONG_BINGET
        if (!TakeUint(op == 'h' ? 1 : 4, &n)) return truncated();
        const uint32_t id = Memo(n);
        if (id == kNone) return Error(at, op, "memo entry " + std::to_string(n) + " was never stored");
        if (stack_.size() >= limits_.max_values) return Error(at, op, "stack too deep");
        stack_.push_back(id);
        return Status::Ok();
      }
      case 's': {  // SETITEM
        if (stack_.size() < 3) return Error(at, op, "needs a dict, a key and a value");
        uint32_t v = stack_.back();
        stack_.pop_back();
        uint32_t k = stack_.back();
        stack_.pop_back();
        Node& d = nodes_[stack_.back()];
        if (d.kind != Node::kDict) return Error(at, op, "sets an item of something that is not a dict");
        d.items.push_back(k);
        d.items.push_back(v);
        return Status::Ok();
      }
      case 'u': {  // SETITEMS
        const size_t mark = marks_.empty() ? 0 : marks_.back();
        if (marks_.empty() || mark > stack_.size() || mark == 0 || (stack_.size() - mark) % 2 != 0)
          return Error(at, op, "needs a dict and key/value pairs after a mark");
        Node& d = nodes_[stack_[mark - 1]];
        if (d.kind != Node::kDict) return Error(at, op, "sets items of something that is not a dict");
        d.items.insert(d.items.end(), stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
        stack_.resize(mark);
        marks_.pop_back();
        return Status::Ok();
      }
      case 'a': {  // APPEND
        if (stack_.size() < 2) return Error(at, op, "needs a list and a value");
        uint32_t v = stack_.back();
        stack_.pop_back();
        Node& l = nodes_[stack_.back()];
        if (l.kind != Node::kList) return Error(at, op, "appends to something that is not a list");
        l.items.push_back(v);
        return Status::Ok();
      }
      case 'e':     // APPENDS
      case 0x90: {  // ADDITEMS
        const size_t mark = marks_.empty() ? 0 : marks_.back();
        if (marks_.empty() || mark > stack_.size() || mark == 0)
          return Error(at, op, "needs a list and values after a mark");
        Node& l = nodes_[stack_[mark - 1]];
        if (l.kind != Node::kList) return Error(at, op, "appends to something that is not a list");
        l.items.insert(l.items.end(), stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
        stack_.resize(mark);
        marks_.pop_back();
        return Status::Ok();
      }
      case 't':     // TUPLE
      case 0x91: {  // FROZENSET
        Node l = Node::Container(Node::kList);
        if (!PopMark(&l.items)) return Error(at, op, "no mark to build from");
        return Push(std::move(l), at, op);
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1, TUPLE2, TUPLE3
        size_t k = op - 0x84;
        if (stack_.size() < k) return Error(at, op, "needs " + std::to_string(k) + " values");
        Node l = Node::Container(Node::kList);
        l.items.assign(stack_.end() - static_cast<std::ptrdiff_t>(k), stack_.end());
        stack_.resize(stack_.size() - k);
        return Push(std::move(l), at, op);
      }
      case '0':  // POP
        if (stack_.empty()) return Error(at, op, "nothing to pop");
        stack_.pop_back();
        return Status::Ok();
      case '1': {  // POP_MARK
        std::vector<uint32_t> drop;
        return PopMark(&drop) ? Status::Ok() : Error(at, op, "no mark");
      }
      case '2':  // DUP
        if (stack_.empty()) return Error(at, op, "nothing to duplicate");
        stack_.push_back(stack_.back());
        return Status::Ok();
      case 'c':
      case 0x93:
      case 'R':
      case 'b':
      case 'i':
      case 'o':
      case 0x81:
      case 0x92:
      case 'P':
      case 'Q':
      case 0x82:
      case 0x83:
      case 0x84:
        return Error(at, op,
                     "names or calls a Python object (GLOBAL, REDUCE, BUILD, NEWOBJ…): not a Flight Recorder "
                     "dump's data, and never executed here");
      default:
        return Error(at, op, "not in the subset read (protocol 2-5 data: dict, list, tuple, str, int, float)");
    }
  }

  // The memo: pickle numbers its entries 0, 1, 2… (MEMOIZE; BINPUT as the pickler counts), so a
  // vector holds them; a sparse index from a strange writer goes to a map instead.
  static constexpr uint32_t kNone = UINT32_MAX;
  static constexpr uint64_t kDenseMemo = uint64_t{1} << 24;
  void Memoize(uint64_t index, uint32_t id) {
    if (index < kDenseMemo) {
      if (index >= memo_.size()) memo_.resize(std::max<size_t>(index + 1, memo_.size() * 2), kNone);
      memo_count_ += memo_[index] == kNone;  // Python's len(memo): distinct indices
      memo_[index] = id;
    } else {
      memo_count_ += sparse_memo_.insert_or_assign(index, id).second;
    }
  }
  uint32_t Memo(uint64_t index) const {
    if (index < memo_.size()) return memo_[index];
    auto it = sparse_memo_.find(index);
    return it == sparse_memo_.end() ? kNone : it->second;
  }

  Status Convert(uint32_t id, size_t depth, size_t* made, nlohmann::json* out) const {
    if (depth > limits_.max_depth)
      return InvalidArgument("pickle: nested deeper than " + std::to_string(limits_.max_depth) +
                             " (or a container holds itself)");
    if (++*made > limits_.max_values)
      return InvalidArgument("pickle: more than " + std::to_string(limits_.max_values) +
                             " values once its shared parts are expanded");
    const Node& n = nodes_[id];
    switch (n.kind) {
      case Node::kNull:
        *out = nullptr;
        return Status::Ok();
      case Node::kBool:
        *out = n.boolean;
        return Status::Ok();
      case Node::kInt:
        *out = n.integer;
        return Status::Ok();
      case Node::kFloat:
        *out = n.real;
        return Status::Ok();
      case Node::kText:
        *out = std::string(n.text);
        return Status::Ok();
      case Node::kList:
        return ConvertList(n.items, 0, depth, made, out);
      case Node::kDict:
        break;
    }
    *out = nlohmann::json::object();
    for (size_t i = 0; i + 1 < n.items.size(); i += 2) {
      nlohmann::json k, v;
      if (Status st = Convert(n.items[i], depth + 1, made, &k); !st.ok()) return st;
      const Node& value = nodes_[n.items[i + 1]];
      // The tail of a long list only (a Flight Recorder dump's newest entries).
      if (value.kind == Node::kList && !limits_.tail_key.empty() && k.is_string() &&
          k.get_ref<const std::string&>() == limits_.tail_key) {
        const size_t skip = value.items.size() > limits_.tail_items ? value.items.size() - limits_.tail_items : 0;
        if (++*made > limits_.max_values) return InvalidArgument("pickle: too many values");
        if (Status st = ConvertList(value.items, skip, depth + 1, made, &v); !st.ok()) return st;
      } else if (Status st = Convert(n.items[i + 1], depth + 1, made, &v); !st.ok()) {
        return st;
      }
      // A key that is not a string, by its JSON text (a str key with bytes that are not UTF-8 can be
      // inside it: replaced, never thrown on).
      (*out)[k.is_string() ? k.get<std::string>() : k.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)] =
          std::move(v);
    }
    return Status::Ok();
  }

  Status ConvertList(const std::vector<uint32_t>& items, size_t skip, size_t depth, size_t* made,
                     nlohmann::json* out) const {
    *out = nlohmann::json::array();
    out->get_ref<nlohmann::json::array_t&>().reserve(items.size() - skip);
    for (size_t i = skip; i < items.size(); ++i) {
      nlohmann::json v;
      if (Status st = Convert(items[i], depth + 1, made, &v); !st.ok()) return st;
      out->push_back(std::move(v));
    }
    return Status::Ok();
  }

  std::string_view data_;
  PickleLimits limits_;
  size_t pos_ = 0;
  std::vector<Node> nodes_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::vector<uint32_t> memo_;  // index → node (kNone: never stored)
  std::unordered_map<uint64_t, uint32_t> sparse_memo_;
  uint64_t memo_count_ = 0;
};

}  // namespace

Result<nlohmann::json> ParsePickle(std::string_view data, const PickleLimits& limits) {
  return Parser(data, limits).Run();
}

}  // namespace dsd::collectors
