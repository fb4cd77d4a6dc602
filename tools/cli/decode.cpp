// `inferlab decode`: one decode step of a registered version on .npy data (chapter 03), so that
// external data (a real model's cache) can be checked against the lab's kernels.
#include <iostream>
#include <stdexcept>

#include "common/npy.h"
#include "kernels/decode/registry.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"

namespace inferlab::cli {

int decode(const std::vector<std::string>& argv) {
  const Args args(argv, {});
  args.check_known({"q", "k-cache", "v-cache", "lengths", "out", "version", "backend"});
  const Tensor<float> q = read_npy_float(args.required("q"));
  const std::string k_path = args.required("k-cache"), v_path = args.required("v-cache");
  const Tensor<float> k = read_npy_float(k_path);
  const Tensor<float> v = read_npy_float(v_path);
  const Tensor<int64_t> lengths_tensor = read_npy_int64(args.required("lengths"));
  require(lengths_tensor.rank() == 1, "lengths.shape", to_string(lengths_tensor.shape()), "must be [batch]");
  const std::vector<int64_t> lengths(lengths_tensor.span().begin(), lengths_tensor.span().end());
  // The cache keeps the files' precision: float16 files give an fp16 cache, anything else fp32.
  const bool half = read_npy(k_path).dtype == NpyDType::f16 && read_npy(v_path).dtype == NpyDType::f16;
  const KvDtype dtype = half ? KvDtype::fp16 : KvDtype::fp32;

  const Backend backend = parse_backend(args.get_or("backend", "cpu"));
  require_available(backend);
  const DecodeVersion& version = find_decode_version(args.get_or("version", "cpu/decode"), backend, dtype);
  const KvCache cache = make_kv_cache(k, v, lengths, dtype);
  const DecodeShape shape = decode_shape(q, cache);
  Tensor<float> out(shape.query_shape());
  version.run(q, cache, out);
  write_npy(args.required("out"), out);
  std::cout << version.name << " (" << to_string(backend) << ", " << to_string(dtype)
            << " cache): " << to_string(out.shape()) << " written to " << args.required("out") << "\n";
  return 0;
}

}  // namespace inferlab::cli
