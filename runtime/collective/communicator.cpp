// The world of one rank, and the variable-length broadcast of the host-memory communicators
// (communicator.h).
#include "runtime/collective/communicator.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/check.h"

namespace inferlab::parallel {

namespace {

class SingleCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "single"; }
  void all_reduce_sum(std::span<float>) override {}
  void all_gather(std::span<const float> mine, std::span<float> all) override {
    require(all.size() == mine.size(), "all.size()", all.size(),
            "must be size() · mine.size() = " + std::to_string(mine.size()));
    std::copy(mine.begin(), mine.end(), all.begin());
  }
  void broadcast(std::span<uint8_t>, int root) override { require(root == 0, "root", root, "must be 0 (one rank)"); }
  void send(std::span<const float>, int to) override {
    require(false, "to", to, "names no other rank: a world of one rank cannot send");
  }
  void recv(std::span<float>, int from) override {
    require(false, "from", from, "names no other rank: a world of one rank cannot receive");
  }
  void barrier() override {}
};

}  // namespace

std::unique_ptr<Communicator> make_single_communicator() { return std::make_unique<SingleCommunicator>(); }

void broadcast_vector(Communicator& comm, std::vector<uint8_t>& bytes, int root) {
  uint64_t size = bytes.size();
  comm.broadcast(std::span(reinterpret_cast<uint8_t*>(&size), sizeof size), root);
  if (comm.rank() != root) bytes.resize(size);
  if (size > 0) comm.broadcast(std::span(bytes), root);
}

}  // namespace inferlab::parallel
