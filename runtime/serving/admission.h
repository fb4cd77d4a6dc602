#pragma once
/// @file admission.h
/// Admission control for `inferlab serve` (chapter 09): backpressure. The engine runs at most
/// max_running requests at once (EngineConfig::max_num_seqs); the server lets max_waiting more
/// wait behind them and refuses the rest at once — HTTP 429 with a `Retry-After` header —
/// rather than queueing without bound, where every request's latency would grow with the queue
/// until clients time out (and a timed-out client's request still costs its compute).
///
/// Retry-After comes from Little's law. With the engine full, L = max_running requests in
/// service, each taking S seconds on average (the mean end-to-end latency minus its queue time),
/// requests leave at λ = L / S per second; a client refused now finds a place once
/// ahead = in_flight − capacity + 1 requests have left: about ahead · S / max_running seconds,
/// rounded up to whole seconds (the header's unit), at least 1.

#include <atomic>
#include <cstdint>
#include <optional>

namespace inferlab::serving {

/// Counts the requests a server holds (running and waiting) and refuses those beyond its capacity.
class AdmissionControl {
 public:
  /// A place held by one admitted request, given back when it is destroyed.
  class Ticket {
   public:
    /// Takes @p other's place (@p other then holds none).
    Ticket(Ticket&& other) noexcept : owner_(other.owner_) { other.owner_ = nullptr; }
    Ticket& operator=(Ticket&&) = delete;
    Ticket(const Ticket&) = delete;
    /// Gives the place back.
    ~Ticket();

   private:
    friend class AdmissionControl;
    explicit Ticket(AdmissionControl* owner) : owner_(owner) {}
    AdmissionControl* owner_;
  };

  /// @p max_running ≥ 1 (the engine's max_num_seqs) and @p max_waiting ≥ 0; std::invalid_argument
  /// naming the bad one otherwise.
  AdmissionControl(int64_t max_running, int64_t max_waiting);

  /// A ticket when fewer than capacity() requests are held (any thread); nullopt: answer 429.
  std::optional<Ticket> try_admit();
  /// Requests held now.
  int64_t in_flight() const { return in_flight_.load(); }
  /// max_running + max_waiting.
  int64_t capacity() const { return max_running_ + max_waiting_; }
  /// Seconds a refused client should wait (Little's law, above) given @p mean_service_seconds,
  /// the mean time a request spends in service; ≤ 0 (nothing measured yet) gives 1.
  int64_t retry_after_seconds(double mean_service_seconds) const;

 private:
  int64_t max_running_, max_waiting_;
  std::atomic<int64_t> in_flight_ = 0;
};

/// Little's law for a refused request: ceil(ahead · @p mean_service_seconds / @p max_running),
/// ahead = @p in_flight − @p capacity + 1 (at least 1), clamped to [1, 3600]; 1 when
/// mean_service_seconds ≤ 0.
int64_t retry_after_seconds(int64_t in_flight, int64_t capacity, int64_t max_running, double mean_service_seconds);

}  // namespace inferlab::serving
