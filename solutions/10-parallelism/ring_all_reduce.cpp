// Exercise 10.2 — a ring all-reduce on send and receive: a straightforward answer. See
// exercises/10-parallelism/ch10.h.
#include <cstdint>
#include <span>
#include <vector>

#include "10-parallelism/ch10.h"
#include "common/check.h"

namespace inferlab::student {

void ring_all_reduce(Link& link, std::span<float> data) {
  const int64_t p = link.size(), r = link.rank(), n = int64_t(data.size());
  if (p == 1) return;
  const int next = int((r + 1) % p), prev = int((r + p - 1) % p);
  const auto mod = [p](int64_t x) { return ((x % p) + p) % p; };
  const auto chunk = [&](int64_t c) {  // [c · n / p, (c + 1) · n / p)
    const int64_t begin = c * n / p, end = (c + 1) * n / p;
    return data.subspan(size_t(begin), size_t(end - begin));
  };
  // One step: send to next, receive from prev. Even ranks send first and odd ranks receive first,
  // so that a send that waits for its receiver (MPI's rendezvous) always finds one.
  const auto step = [&](std::span<const float> out, std::span<float> in) {
    if (r % 2 == 0) {
      link.send(out, next);
      link.recv(in, prev);
    } else {
      link.recv(in, prev);
      link.send(out, next);
    }
  };
  std::vector<float> scratch(size_t((n + p - 1) / p));
  // Reduce-scatter: after p − 1 steps chunk (r + 1) mod p holds every rank's sum.
  for (int64_t s = 0; s + 1 < p; ++s) {
    const std::span<float> mine = chunk(mod(r - s - 1));
    const std::span<float> received(scratch.data(), mine.size());
    step(chunk(mod(r - s)), received);
    for (size_t i = 0; i < mine.size(); ++i) mine[i] += received[i];
  }
  // All-gather: the complete chunks go around the ring once more, copied.
  for (int64_t s = 0; s + 1 < p; ++s) step(chunk(mod(r + 1 - s)), chunk(mod(r - s)));
}

}  // namespace inferlab::student
