#pragma once
/// @file ch10.h
/// Chapter 10 exercises — the contract: the two pieces of tensor parallelism that every split
/// model is built on, written without the lab's code (student code links only inferlab::common,
/// so everything they need is declared here):
///
///   10.1  Megatron's sharding of a weight matrix (shard.cpp): the block of rows a rank holds in a
///         column-parallel layer, and the block of columns it holds in a row-parallel layer;
///   10.2  a ring all-reduce (ring_all_reduce.cpp) — a reduce-scatter, then an all-gather, one
///         chunk per step to the next rank — written on nothing but send and receive (Link).
///
/// Graded by tests/10-parallelism/test_student.cpp (checks in tests/10-parallelism/student_check.h):
/// hand-worked cases that each teach one rule, then fresh random inputs (the seed is printed on
/// failure; INFERLAB_SEED replays it) — 10.1 against a float64 product and bit for bit against the
/// lab's own Weight::take_rows / Weight::take_columns (kernels/layers/weight.h), the very copies
/// `inferlab generate --tp N` makes; 10.2 on p = 1 … 5 ranks that are threads of one process
/// (tests/10-parallelism/thread_world.h), against a float64 sum, with the traffic each rank sends
/// counted. Run them with `./inferlab student test ch10` (it builds only this chapter and prints
/// each failing test's output), or `./inferlab grade`. Each stub throws `NotImplemented(...)`:
/// delete that line once your code is written.
///
/// ## Exercise 10.1 — shard a weight matrix (shard.cpp)
///
/// The lab stores a linear layer's weight W row-major as [out][in] — each output feature's
/// weights contiguous, llama2.c's and GGUF's layout — and computes y = W · x:
///
///     y[o] = Σ_i W[o][i] · x[i],   W[o][i] at flat index o · in + i.
///
/// Megatron-LM (Shoeybi et al. 2019) splits a layer over p ranks in one of two ways:
///
///   - **column-parallel**: each rank computes some OUTPUTS whole. Rank r of p holds the
///     outputs [r · out/p, (r + 1) · out/p): in the lab's [out][in] layout that is a block of
///     ROWS of W, a matrix [out/p][in], and its y_r = W_r · x is its slice of y; the slices side
///     by side are y. (Megatron's paper writes Y = X · A with A = Wᵀ, [in][out]: the outputs
///     are A's COLUMNS — hence the name, and hence the classic slip of cutting W's columns.)
///   - **row-parallel**: each rank computes a PARTIAL SUM of every output. Rank r holds the
///     inputs [r · in/p, (r + 1) · in/p): a block of COLUMNS of W, returned as a matrix
///     [out][in/p] (row-major, each output's in/p weights contiguous), and it multiplies it by
///     ITS slice x_r of the input: the p partials W_r · x_r summed are y (one all-reduce).
///
/// A column-parallel layer followed by a row-parallel one needs no communication between them:
/// the first leaves each rank exactly the slice of activations the second's shard multiplies
/// (W_q, W_k, W_v then W_o; W_gate, W_up then W_down — the lesson's drawing).
///
/// Worked example: W [4][6] with W[o][i] = 10 · o + i, p = 2, rank 1:
///     column_parallel_shard → rows 2 and 3:       {20 21 22 23 24 25, 30 31 32 33 34 35}
///     row_parallel_shard    → columns 3, 4, 5:    {3 4 5, 13 14 15, 23 24 25, 33 34 35}
///
/// Refuse what cannot be split with std::invalid_argument, through common/check.h's require():
/// the message is "<name> = <value>: <rule>", naming the first bad argument in this order:
///   "ranks" when ranks < 1; "rank" when it is outside [0, ranks); "out" or "in" when < 1;
///   "out" when ranks does not divide it (column-parallel) — "in" for row-parallel (the other
///   dimension need not be divisible: a row-parallel layer of 7 outputs splits over 3 ranks by
///   its inputs); "w.size()" when it is not out · in.
/// Graded: the worked example; random fp32 matrices of odd shapes over p = 1 … 5 (fresh seeds),
/// every rank's shard equal bit for bit to the lab's Weight::take_rows / take_columns of the
/// same block, the shards' outputs side by side (column-parallel) or the partials summed
/// (row-parallel, each on its slice of x) equal to W · x within 1e-12 of a float64 product; and
/// the refusals, each naming its argument and value. Size hint: roughly 8 lines each, the checks
/// included.
///
/// ## Exercise 10.2 — a ring all-reduce on send and receive (ring_all_reduce.cpp)
///
/// All-reduce: every rank holds n floats; afterwards every rank holds their element-wise sum over
/// the p ranks. The row-parallel layers of 10.1 need one after each of them. Sending everything
/// to one rank, which adds and sends the sums back, costs that rank (p − 1) · n floats each way:
/// its link is the bottleneck, and more ranks make it worse. A ring costs every rank
/// 2 (p − 1)/p · n floats, whatever p (Patarasuk & Yuan 2009; what NCCL and Open MPI do for large
/// messages). Cut the data into p chunks — chunk c is the elements [c · n / p, (c + 1) · n / p)
/// (integer division: sizes ⌊n/p⌋ or ⌈n/p⌉, together exactly [0, n), some empty when n < p) —
/// and arrange the ranks in a ring: rank r sends only to next = (r + 1) % p and receives only
/// from prev = (r − 1 + p) % p.
///
///   1. **reduce-scatter**, p − 1 steps: at step s (0 … p − 2) rank r sends its chunk
///      (r − s) mod p to next, receives chunk (r − s − 1) mod p from prev into a scratch buffer and
///      ADDS it to its own copy of that chunk. After the last step rank r's chunk (r + 1) mod p
///      holds the sum over all ranks: each chunk has travelled once around the ring, gathering one
///      addend at each rank.
///   2. **all-gather**, p − 1 steps: at step s rank r sends chunk (r + 1 − s) mod p (the complete
///      one it holds or last received) to next, receives chunk (r − s) mod p from prev and COPIES
///      it over its own. Afterwards every rank holds every complete chunk — the same bits on every
///      rank, since they are copies of one sum.
///
/// 2 (p − 1) steps, each one message of one chunk (at most ⌈n/p⌉ floats) to next and one from
/// prev. p = 1: nothing to do (no message). Every rank calls ring_all_reduce with the same n.
///
/// **Deadlock.** `send` may block until the matching `recv` is posted — MPI_Send does exactly that
/// for large messages (the rendezvous protocol), and the graded test's Link does it for every
/// message. If every rank sends first, every rank waits in send for a receiver that is itself
/// waiting in send: nothing ever moves. Order each step's pair of calls so that some rank is
/// always receiving — even ranks send then receive, odd ranks receive then send (with p odd the
/// last rank and rank 0 are both even: rank 0's send completes against rank 1's receive first,
/// then rank 0 receives, and the ring unwinds). The graded test detects a deadlock the moment
/// every rank is blocked and fails it, naming what each rank waits for — never a hang.
///
/// Worked example: p = 3, n = 7: chunks [0, 2), [2, 4), [4, 7). Rank r's data is x_r; after the
/// call every rank holds x_0 + x_1 + x_2. Rank 0 at step 0 sends chunk 0 (2 floats) to rank 1 and
/// receives chunk 2 (3 floats) from rank 2; in all each rank sends 4 messages of at most 3 floats.
/// Graded: the worked example; n = 0, 1 and p − 1 (fewer floats than ranks: empty chunks); fresh
/// random data of n = 7, 1000, 65537 and random sizes over p = 1 … 5 — every rank's every element
/// within (p − 1) · 2⁻²⁴ · Σ_r |x_r[i]| of the float64 sum (p − 1 fp32 additions in any order),
/// every rank's result the same bits as every other's, and the traffic the Link counts: at most
/// 2 (p − 1) messages of at most 2 (p − 1) · ⌈n/p⌉ floats in all from each rank, sent only to next
/// and received only from prev. Budget: one scratch buffer of ⌈n/p⌉ floats; O(n) additions per
/// rank. Size hint: roughly 30 lines.

#include <cstdint>
#include <span>
#include <vector>

namespace inferlab::student {

// ---- 10.1 ----

/// Exercise 10.1 — rank @p rank of @p ranks's shard of a column-parallel layer: the rows
/// [rank · out/ranks, (rank + 1) · out/ranks) of @p w ([@p out][@p in], row-major), a matrix
/// [out/ranks][in]. Throws std::invalid_argument naming the bad argument (see the file's
/// documentation for the rules and their order).
std::vector<float> column_parallel_shard(std::span<const float> w, int64_t out, int64_t in, int rank, int ranks);

/// Exercise 10.1 — rank @p rank of @p ranks's shard of a row-parallel layer: the columns
/// [rank · in/ranks, (rank + 1) · in/ranks) of every row of @p w ([@p out][@p in], row-major), a
/// matrix [out][in/ranks]. Throws std::invalid_argument naming the bad argument.
std::vector<float> row_parallel_shard(std::span<const float> w, int64_t out, int64_t in, int rank, int ranks);

// ---- 10.2 ----

/// What a rank of a world can do, and all exercise 10.2 may use: send floats to another rank and
/// receive them from one. The graded test's implementation runs each rank as a thread and counts
/// the floats sent; tests/10-parallelism/test_ring_mpi.cpp's is MPI's (the lab's Communicator).
class Link {
 public:
  virtual ~Link() = default;
  /// This rank: 0 … size() − 1.
  virtual int rank() const = 0;
  /// The number of ranks p.
  virtual int size() const = 0;
  /// Sends @p data to rank @p to. MAY BLOCK until rank @p to has posted the matching recv (MPI's
  /// rendezvous; the graded test's Link always does): see the file's documentation on deadlock.
  virtual void send(std::span<const float> data, int to) = 0;
  /// Receives exactly data.size() floats from rank @p from, blocking until they arrive; a message
  /// of another size is an error (the graded test's Link fails the run, naming both ranks).
  virtual void recv(std::span<float> data, int from) = 0;
};

/// Exercise 10.2 — sums @p data element-wise over all the ranks of @p link, in place: a ring
/// reduce-scatter then a ring all-gather, 2 (p − 1) steps of one chunk to the next rank and one
/// from the previous (see the file's documentation). Any n ≥ 0 (n < p too); p = 1 changes
/// nothing and sends nothing. Every rank calls it with the same data.size().
void ring_all_reduce(Link& link, std::span<float> data);

}  // namespace inferlab::student
