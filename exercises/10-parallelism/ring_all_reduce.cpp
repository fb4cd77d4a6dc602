// Exercise 10.2 — a ring all-reduce on send and receive: a reduce-scatter, then an all-gather,
// 2 (p − 1) steps of one chunk to the next rank. See ch10.h for the schedule, the chunks, the
// deadlock to avoid and a worked example.
#include <cstdint>
#include <span>
#include <vector>

#include "10-parallelism/ch10.h"
#include "common/check.h"

namespace inferlab::student {

void ring_all_reduce(Link& link, std::span<float> data) {
  throw NotImplemented("ring_all_reduce");  // TODO(student): delete this line once written

  // TODO(student): p = link.size(), r = link.rank(); p == 1: return. next = (r + 1) % p,
  // prev = (r + p − 1) % p; chunk c = data.subspan(c · n / p, (c + 1) · n / p − c · n / p).
  // One step = send one chunk to next and receive one from prev: even ranks send first, odd
  // ranks receive first (send may block until the receiver is there).
  //   reduce-scatter, s = 0 … p − 2: send chunk (r − s) mod p, receive chunk (r − s − 1) mod p
  //     into a scratch buffer of ⌈n/p⌉ floats and add it to that chunk of data;
  //   all-gather, s = 0 … p − 2: send chunk (r + 1 − s) mod p, receive chunk (r − s) mod p
  //     straight into data.
  // Write (x mod p) as ((x % p) + p) % p: C++'s % of a negative number is negative.
  // (roughly 30 lines)
  (void)link, (void)data;
}

}  // namespace inferlab::student
