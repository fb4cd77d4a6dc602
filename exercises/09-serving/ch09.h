#pragma once
/// @file ch09.h
/// Chapter 09 exercises — the contract: three small pieces of an OpenAI-compatible server
/// (`./inferlab serve`) that sit between the engine and the HTTP connection, where most serving
/// bugs live. Each is plain C++ and graded on its own:
///
///   9.1  a stop-string filter for a stream of text pieces (stop_filter.cpp): the OpenAI API's
///        `stop`, matched across token boundaries and never shown;
///   9.2  a Prometheus histogram (histogram.cpp): a value's bucket (le: less or equal) and the
///        cumulative text exposition that `GET /metrics` serves;
///   9.3  admission control (admission.cpp): a thread-safe count of the requests a server holds,
///        never above its capacity, and the Little's-law `Retry-After` of a refused one.
///
/// Graded by tests/09-serving/test_student.cpp (checks in tests/09-serving/student_check.h):
/// hand-worked cases that each teach one rule, then fresh random inputs (the seed is printed on
/// failure; INFERLAB_SEED replays it) compared with the lab's own implementations — the
/// server's StopStringMatcher (runtime/tokenizer/stop_strings.h) piece by piece for 9.1, its
/// Histogram and MetricsText (runtime/serving/prometheus.h) byte for byte for 9.2, its
/// AdmissionControl and retry_after_seconds (runtime/serving/admission.h) for 9.3, and threads
/// hammering your counter. Run them with `./inferlab student test ch09` (it builds only this
/// chapter and prints each failing test's output), or `./inferlab grade`. Each stub throws
/// `NotImplemented(...)` after the code that is given: delete that line once your code is
/// written.
///
/// ## Exercise 9.1 — stop strings in a stream (stop_filter.cpp)
///
/// A request may give up to 4 stop strings: generation ends where the *text* first contains one,
/// and the stop string itself is never sent. The text arrives a token's piece at a time, and a
/// stop string often spans pieces ("User:" as "User" + ":", "\n\n" as "\n" + "\n"), so the
/// server cannot send a piece as soon as it has it: the end of what it holds may be the
/// beginning of a stop string. StopStringFilter::push(piece) appends the piece to the text held
/// back (held_) and then, in this order:
///
///   1. *a match*: if the held text now contains a stop string, the match that COMPLETES first
///      wins (generation stops at the token that completes one) — the occurrence with the least
///      end; at one end the longer string (it starts earlier); equal strings: the first in the
///      list. Set matched_ to its index in stops_, clear held_, and return the text before the
///      match. From then on every push() returns "" and flush() returns "" (stopped() is true).
///      In "xaby" with stops {"aby", "b"}, "b" completes first: the text shown is "xa", although
///      "aby" starts earlier.
///   2. *no match*: hold back the LONGEST suffix of the held text that is a proper prefix of some
///      stop string (it may still become one), and return the rest. A suffix that can no longer
///      begin any stop string is shown at once: with stop "\n\n", "a\n" shows "a" and holds
///      "\n"; then "b" shows "\nb" ("\nb" cannot begin "\n\n").
///
/// flush() — the end of the text (the engine finished for another reason) — returns what is held
/// and empties it. Three classic bugs, three rules: showing a piece as soon as it arrives (a stop
/// across a boundary is then sent, half of it at least); a matcher that forgets what it held on
/// a mismatch (stop "aab" in "a" + "a" + "a" + "b": at the third 'a' "aaa" is no prefix, but its
/// last two characters "aa" are: the stop starts at the SECOND 'a', and the text shown is "a");
/// and the first *started* match instead of the first completed one. Valid UTF-8 stays whole:
/// a stop string starts on a character's first byte, so the held suffix does too — a filter
/// that holds "the last |longest stop| − 1 bytes" instead splits characters ("é" is 2 bytes).
/// Worked example: stops {"User:"}, pieces "Hello", " there.", "\nUs", "er", ": hi" → shown
/// "Hello", " there.", "\n" (holds "Us"), "" (holds "User"), "" (matched: stopped, matched() 0),
/// then flush() → "". The whole text shown: "Hello there.\n".
/// Graded: hand cases for each rule (a stop across a boundary; held text released when it can
/// no longer match; "aab" in "aaab"; the first completed wins; multi-byte characters; no stops;
/// a stop at the very start and inside one piece), then thousands of random texts over small
/// alphabets (so stops occur, overlap and nearly occur; UTF-8 ones too) cut at random (empty
/// pieces too), every push's shown text, stopped(), matched() and held() — and flush()'s text —
/// equal to the lab's StopStringMatcher after the same pieces. Budget: a push is
/// O((held + piece) · Σ|stop|); what is held is shorter than the longest stop. Size hint: roughly
/// 25 lines for push and flush.
///
/// ## Exercise 9.2 — a Prometheus histogram (histogram.cpp)
///
/// A histogram does not keep its observations: it counts how many fell in each bucket of a fixed
/// list of upper bounds b_0 < b_1 < … < b_{n−1}, plus their sum and their count. A value goes into
/// the FIRST bucket whose bound is ≥ it ("le": less or equal — a value exactly on b_i counts in
/// bucket i, not i + 1), or past every bound into the last bucket, +Inf. counts_ holds the
/// per-bucket counts (n + 1 of them, not cumulative); sum_ adds each value in the order observed;
/// count_ counts them. The exposition (Prometheus's text format 0.0.4, what a scraper reads) lists
/// the buckets *cumulatively* — line le = b_i counts every observation ≤ b_i, so the counts never
/// decrease and the last one, le = "+Inf", equals the count — which is what lets a scraper
/// estimate any quantile later (histogram_quantile) and add histograms from several servers:
///
///     # HELP <name> <help>
///     # TYPE <name> histogram
///     <name>_bucket{<labels>,le="<b_0>"} <observations ≤ b_0>
///     …
///     <name>_bucket{<labels>,le="+Inf"} <count>
///     <name>_sum{<labels>} <sum>
///     <name>_count{<labels>} <count>
///
/// each line ending in "\n"; the labels as `key="value"` joined by "," in the order given, value
/// escaped by escape_label_value(), `le` last; with no labels `{le="…"}` on the bucket lines and
/// no braces at all on _sum and _count; every number (bounds, counts, the sum) written by
/// prometheus_number() (both given below).
/// Worked example: bounds {0.5, 1}, observations 0.25, 0.5, 0.75, 3 → counts_ {2, 1, 1} (0.5 is
/// on the bound: bucket 0); with name "latency_seconds", help "Latency.", labels
/// {{"model_name", "smollm2"}}:
///
///     # HELP latency_seconds Latency.
///     # TYPE latency_seconds histogram
///     latency_seconds_bucket{model_name="smollm2",le="0.5"} 2
///     latency_seconds_bucket{model_name="smollm2",le="1"} 3
///     latency_seconds_bucket{model_name="smollm2",le="+Inf"} 4
///     latency_seconds_sum{model_name="smollm2"} 4.5
///     latency_seconds_count{model_name="smollm2"} 4
///
/// Graded: the worked example; values exactly on the bounds (and just above and below them);
/// histograms whose every bucket is used, none, or only +Inf; thousands of random observations
/// (values on the bounds included, negative ones, several label sets and none) — after every
/// observation the bucket it went to, then counts_, sum_ and count_ equal to the lab's Histogram,
/// and the exposition equal, byte for byte, to the lab's MetricsText::histogram on the same
/// observations. Budget: observe is O(log n) (a binary search) or O(n); no allocation. Size hint:
/// roughly 5 lines for observe, 15 for exposition.
///
/// ## Exercise 9.3 — admission control (admission.cpp)
///
/// The engine runs at most max_running requests at once; the server lets max_waiting more wait
/// behind them and refuses the rest at once — HTTP 429 with a `Retry-After` header — rather than
/// queueing without bound, where every request's latency grows with the queue until clients time
/// out (and a timed-out client's request still costs its compute). Write:
///   - `try_admit()`: when fewer than capacity() = max_running + max_waiting requests are held,
///     hold one more and return true; otherwise return false and change nothing. It is called
///     from many connection threads at once, and must NEVER let more than capacity() in: "load,
///     compare, then add" is a race (two threads both see capacity − 1 and both add). Make the
///     check and the increment one atomic step — a compare-exchange loop on in_flight_ (a
///     SharedCounter: std::atomic's operations, compare_exchange_weak among them), or a mutex
///     around both;
///   - `release()`: the caller gives back the place it held (it holds one: no check needed);
///   - `retry_after_seconds(in_flight, capacity, max_running, mean_service_seconds)`, Little's
///     law. With the engine full, L = max_running requests are in service, each for S seconds on
///     average (S = mean_service_seconds), so requests leave at λ = L / S per second; a client
///     refused now finds a place once ahead = in_flight − capacity + 1 requests have left (at
///     least 1): about ahead · S / max_running seconds. Return
///     ceil(double(ahead) · S / double(max_running)) — in that order of operations — clamped to
///     [1, 3600] (the header counts whole seconds; a client told 0 retries at once); 1 when S ≤ 0
///     or is NaN (nothing measured yet). The member StudentAdmission::retry_after_seconds(S)
///     (given) calls it with the object's own numbers.
/// Worked example: max_running 4, max_waiting 4 (capacity 8), 8 held, S = 2.5 s: ahead = 1, 1 ·
/// 2.5 / 4 = 0.625 → Retry-After 1; with 15 held (a burst admitted elsewhere), ahead = 8, 8 · 2.5
/// / 4 = 5 → 5; S = 30 s, 8 held → ceil(7.5) = 8.
/// Graded: scripted sequences, one thread (fill to capacity, refused, release one, admitted
/// again; max_waiting 0; capacity 1), every result and in_flight() equal to the lab's
/// AdmissionControl; then threads that call try_admit() and release() tens of thousands of times
/// at once, small capacities, and threads that race for the last free place thousands of times,
/// with the grader switching threads between in_flight_'s operations (SharedCounter's hook) —
/// while the test counts the places actually held: never more than capacity(), the free last
/// place always taken by exactly one, none lost (in_flight() is 0 at the end); Retry-After on hand cases (exact
/// quotients, the clamps, S ≤ 0 and NaN) and random ones equal to the lab's retry_after_seconds.
/// Budget: try_admit and release are lock-free or hold a lock for a few instructions; no
/// allocation. Size hint: roughly 6 lines for try_admit, 1 for release, 5 for
/// retry_after_seconds.

#include <atomic>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inferlab::student {

/// Exercise 9.1 — finds stop strings in a text that arrives in pieces, showing only what can no
/// longer become one (see the file's documentation for the rules).
class StopStringFilter {
 public:
  /// The most stop strings a request may give (the OpenAI API's limit).
  static constexpr size_t kMaxStops = 4;
  /// matched() before a match.
  static constexpr size_t npos = static_cast<size_t>(-1);

  /// At most kMaxStops strings, each non-empty. Given: throws std::invalid_argument naming the
  /// bad one ("stop[1]: must not be empty"). No strings: nothing ever stops, nothing is held.
  explicit StopStringFilter(std::vector<std::string> stops);

  /// Adds @p piece; returns the text that can be shown now: everything before a match (then
  /// stopped() is true and every later push returns ""), or else everything but the longest
  /// suffix that is a proper prefix of a stop string, which is held back.
  std::string push(std::string_view piece);
  /// The end of the text: returns what is held back and empties it ("" after a match).
  std::string flush();

  /// True once a stop string has matched. Given.
  bool stopped() const { return matched_ != npos; }
  /// The index in stops() of the stop string that matched; npos before a match. Given.
  size_t matched() const { return matched_; }
  /// The text held back now. Given.
  const std::string& held() const { return held_; }
  /// The stop strings. Given.
  const std::vector<std::string>& stops() const { return stops_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;       // the text not shown yet: a proper prefix of some stop string
  size_t matched_ = npos;  // the stop that matched (npos: none yet)
};

/// A metric's labels, in the order they are written: {{"model_name", "smollm2"}}.
using Labels = std::vector<std::pair<std::string, std::string>>;

/// A number as the Prometheus exposition writes it: the shortest text that reads back to the
/// same double ("0.5", "1", "1e-05", "4.5"); "+Inf", "-Inf", "NaN". Given.
inline std::string prometheus_number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

/// @p value with backslash, double quote and newline escaped (\\, \", \n), as a label value
/// must be. Given.
inline std::string escape_label_value(std::string_view value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

/// Exercise 9.2 — a Prometheus histogram (one thread; the lab's adds a mutex): per-bucket
/// counts with le semantics, and the cumulative text exposition.
class StudentHistogram {
 public:
  /// Buckets with @p upper_bounds: finite and strictly increasing, at least one. Given: throws
  /// std::invalid_argument naming the first bad bound.
  explicit StudentHistogram(std::vector<double> upper_bounds);

  /// Counts @p value in the first bucket whose bound is ≥ it (the +Inf bucket when none), adds it
  /// to the sum and counts it. Given: NaN is refused (std::invalid_argument).
  void observe(double value);
  /// The histogram in the text exposition format: HELP and TYPE lines, the cumulative buckets,
  /// _sum and _count (see the file's documentation for the exact text).
  std::string exposition(const std::string& name, const std::string& help, const Labels& labels) const;

  /// The finite upper bounds. Given.
  const std::vector<double>& upper_bounds() const { return bounds_; }
  /// Per-bucket counts, NOT cumulative: upper_bounds().size() + 1 of them, the last one +Inf's.
  /// Given.
  const std::vector<uint64_t>& bucket_counts() const { return counts_; }
  /// The sum of the observations, added in order. Given.
  double sum() const { return sum_; }
  /// How many were observed. Given.
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket; the last one is (last bound, +Inf)
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

/// A counter shared between threads: std::atomic<int64_t>'s operations (sequentially consistent),
/// each first announced to a hook. In a server the hook is nullptr; the grader's switches threads
/// there, so that a race between two operations — a load(), then a fetch_add() — shows on any
/// machine, not only when two threads happen to run the same instructions at the same instant on
/// two cores. Given (exercise 9.3's in_flight_).
class SharedCounter {
 public:
  /// The value.
  int64_t load() const {
    announce();
    return value_.load();
  }
  /// Sets the value to @p value.
  void store(int64_t value) {
    announce();
    value_.store(value);
  }
  /// Adds @p delta in one atomic step; returns the value before.
  int64_t fetch_add(int64_t delta) {
    announce();
    return value_.fetch_add(delta);
  }
  /// Subtracts @p delta in one atomic step; returns the value before.
  int64_t fetch_sub(int64_t delta) {
    announce();
    return value_.fetch_sub(delta);
  }
  /// In one atomic step: when the value is @p expected, sets it to @p desired and returns true;
  /// otherwise stores the value into @p expected and returns false (the weak form may also fail
  /// spuriously: call it in a loop).
  bool compare_exchange_weak(int64_t& expected, int64_t desired) {
    announce();
    return value_.compare_exchange_weak(expected, desired);
  }
  /// compare_exchange_weak() without spurious failures.
  bool compare_exchange_strong(int64_t& expected, int64_t desired) {
    announce();
    return value_.compare_exchange_strong(expected, desired);
  }
  /// ++counter: fetch_add(1) + 1.
  int64_t operator++() { return fetch_add(1) + 1; }
  /// --counter: fetch_sub(1) − 1.
  int64_t operator--() { return fetch_sub(1) - 1; }

  /// Called before every operation when set (the grader sets it; leave it alone).
  static inline void (*hook)() = nullptr;

 private:
  static void announce() {
    if (void (*const h)() = hook) h();
  }
  std::atomic<int64_t> value_{0};
};

/// Exercise 9.3 — counts the requests a server holds (running and waiting) and refuses those
/// beyond its capacity; try_admit() and release() may be called from any thread at once.
class StudentAdmission {
 public:
  /// @p max_running ≥ 1 (the engine's max_num_seqs) and @p max_waiting ≥ 0. Given: throws
  /// std::invalid_argument naming the bad one.
  StudentAdmission(int64_t max_running, int64_t max_waiting);

  /// True, holding one more place, when fewer than capacity() are held; false (nothing changed)
  /// otherwise. Never lets more than capacity() in, whatever the threads.
  bool try_admit();
  /// Gives back a place the caller holds.
  void release();

  /// Requests held now. Given.
  int64_t in_flight() const { return in_flight_.load(); }
  /// max_running + max_waiting. Given.
  int64_t capacity() const { return max_running_ + max_waiting_; }
  /// Seconds a refused client should wait, by the free function below with this object's
  /// numbers. Given.
  int64_t retry_after_seconds(double mean_service_seconds) const;

 private:
  int64_t max_running_, max_waiting_;
  SharedCounter in_flight_;  // given: std::atomic's operations (see SharedCounter)
};

/// Exercise 9.3 — Little's law for a refused request: ceil(double(ahead) · @p mean_service_seconds
/// / double(@p max_running)), ahead = max(1, @p in_flight − @p capacity + 1), clamped to [1, 3600];
/// 1 when mean_service_seconds ≤ 0 or NaN.
int64_t retry_after_seconds(int64_t in_flight, int64_t capacity, int64_t max_running, double mean_service_seconds);

}  // namespace inferlab::student
