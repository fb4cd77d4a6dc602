#pragma once
/// @file backend.h
/// The three backends: cpu (plain C++), sim (CUDA kernels on the SIMT emulator) and cuda (the
/// same kernels on a real GPU).

#include <string>
#include <string_view>

namespace inferlab {

/// Where an implementation runs.
enum class Backend {
  cpu,   ///< plain C++ on the host
  sim,   ///< CUDA kernels compiled by g++ and run by the SIMT emulator (common/simt)
  cuda,  ///< CUDA kernels compiled by nvcc, on an NVIDIA GPU
};

/// "cpu", "sim", "cuda".
std::string_view to_string(Backend backend);
/// Parses "cpu" | "sim" | "cuda"; throws std::invalid_argument naming @p text otherwise.
Backend parse_backend(std::string_view text);
/// Whether @p backend can run here (cuda: compiled with nvcc and a GPU is present).
bool backend_available(Backend backend);
/// Why @p backend cannot run here ("" when it can).
std::string backend_unavailable_reason(Backend backend);
/// Throws std::invalid_argument("backend = <name>: <why>") unless @p backend can run here.
void require_available(Backend backend);

}  // namespace inferlab
