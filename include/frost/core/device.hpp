// Device: where a tensor's storage lives.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>

namespace frost {

enum class DeviceKind : std::uint8_t { cpu, cuda };

/// CUDA devices frost addresses: cuda:0 to cuda:15.
inline constexpr int kMaxCudaDevices = 16;

/// A device: kind and index (`cuda:1`). Runtime property of a tensor's storage.
struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;

  static constexpr Device cpu() { return {DeviceKind::cpu, 0}; }
  static constexpr Device cuda(int i = 0) { return {DeviceKind::cuda, i}; }
  constexpr bool is_cpu() const { return kind == DeviceKind::cpu; }
  constexpr bool is_cuda() const { return kind == DeviceKind::cuda; }
  constexpr bool operator==(const Device&) const = default;
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

inline std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace frost
