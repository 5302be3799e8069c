// safetensors with run-time dtypes: a tensor in its stored dtype
// (SafetensorsFile::get_any), files of mixed dtypes read and written in one
// call. Each dispatches over every dtype, so it is included by
// safetensors.hpp in header-only mode (inline) and compiled once into
// frost::compiled (src/) otherwise, like the JSON half.
#pragma once
#include "safetensors.hpp"

#if defined(FROST_CPU_BACKEND_IMPLEMENTATION)
#define FROST_IO_ANY_INLINE
#else
#define FROST_IO_ANY_INLINE inline
#endif

namespace frost {

FROST_IO_ANY_INLINE AnyTensor SafetensorsFile::get_any(const std::string& name) const {
  const SafetensorsInfo& in = info(name);
  DType stored;
  if (detail::safetensors::exact_dtype(in.dtype, stored))
    return visit_dtype(stored, [&](auto tag) { return AnyTensor(get<decltype(tag)>(name)); });
  FROST_CHECK(in.dtype.starts_with("U"), "frost::safetensors: ", source_, ": tensor '", name, "' has dtype ", in.dtype,
              " and shape ", in.shape.str(), ", which frost has no dtype for");
  return get<std::int64_t>(name);  // U16, U32, U64: widened
}

namespace detail::safetensors {
FROST_IO_ANY_INLINE OutEntry out_entry(const std::string& name, const AnyTensor& t) {
  FROST_CHECK(t.defined(), "frost::save_safetensors: tensor '", name, "' is undefined");
  return t.visit([&](const auto& x) { return out_entry(name, x); });
}

inline std::vector<std::pair<std::string, AnyTensor>> all_any(const SafetensorsFile& f) {
  std::vector<std::pair<std::string, AnyTensor>> out;
  for (const auto& name : f.names()) out.emplace_back(name, f.get_any(name));
  return out;
}
}  // namespace detail::safetensors

FROST_IO_ANY_INLINE std::vector<std::uint8_t> serialize_safetensors(
    const std::vector<std::pair<std::string, AnyTensor>>& named, const std::map<std::string, std::string>& metadata) {
  return detail::safetensors::image(named, metadata);
}

FROST_IO_ANY_INLINE void save_safetensors(const std::vector<std::pair<std::string, AnyTensor>>& named,
                                          const std::string& path, const std::map<std::string, std::string>& metadata) {
  detail::safetensors::write_file(serialize_safetensors(named, metadata), path);
}

FROST_IO_ANY_INLINE std::vector<std::pair<std::string, AnyTensor>> load_safetensors_any(const std::string& path) {
  return detail::safetensors::all_any(SafetensorsFile::open(path));
}

FROST_IO_ANY_INLINE std::vector<std::pair<std::string, AnyTensor>> deserialize_safetensors_any(std::vector<std::uint8_t> bytes,
                                                                                              std::string source) {
  return detail::safetensors::all_any(SafetensorsFile::from_bytes(std::move(bytes), std::move(source)));
}

}  // namespace frost

#undef FROST_IO_ANY_INLINE
