// safetensors (https://github.com/huggingface/safetensors) read and write:
// an 8-byte little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
//    ..., "__metadata__": {"key": "value"}}
// then the raw little-endian tensor bytes, offsets relative to the data start.
//
// Files are untrusted input (downloaded checkpoints, frozen plans): the reader
// validates everything the reference implementation does before touching a
// tensor byte, and every defect is a frost::Error naming the file and the
// problem. The JSON itself goes through nlohmann/json, never a hand parser.
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "../tensor.hpp"

namespace frost {

static_assert(std::endian::native == std::endian::little,
              "frost safetensors I/O copies tensor bytes as they are: it needs a little-endian host");

/// What a safetensors header says about one tensor.
struct SafetensorsInfo {
  std::string dtype;        ///< the file's dtype string: "F32", "BF16", "I64", ...
  Shape shape;
  std::uint64_t begin = 0;  ///< byte range [begin, end) relative to the data section
  std::uint64_t end = 0;
};

namespace detail::safetensors {

/// The reference implementation's limit on the JSON header.
inline constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

enum class Kind { floating, integer, unsigned64, opaque };

struct DTypeDesc {
  std::string_view name;
  std::uint64_t size;
  Kind kind;
};

/// Every dtype the format defines, so a file holding, say, U8 tensors still
/// opens (and its other tensors load); opaque ones have no conversion here.
inline constexpr DTypeDesc kDTypes[] = {
    {"BOOL", 1, Kind::integer},  {"U8", 1, Kind::integer},   {"I8", 1, Kind::integer},
    {"I16", 2, Kind::integer},   {"U16", 2, Kind::integer},  {"I32", 4, Kind::integer},
    {"U32", 4, Kind::integer},   {"I64", 8, Kind::integer},  {"U64", 8, Kind::unsigned64},
    {"F16", 2, Kind::floating},  {"BF16", 2, Kind::floating}, {"F32", 4, Kind::floating},
    {"F64", 8, Kind::floating},  {"F8_E5M2", 1, Kind::opaque}, {"F8_E4M3", 1, Kind::opaque},
};

inline const DTypeDesc* find_dtype(std::string_view name) {
  for (const auto& d : kDTypes)
    if (d.name == name) return &d;
  return nullptr;
}

template <Scalar T>
constexpr std::string_view dtype_string() {
  if constexpr (std::same_as<T, float>) return "F32";
  else if constexpr (std::same_as<T, double>) return "F64";
  else return "I64";
}

/// IEEE binary16 to float (exact: every half is a float).
inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    const float f = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -f : f;
  }
  const std::uint32_t bits = exp == 31 ? (sign | 0x7f800000u | (mant << 13)) : (sign | ((exp + 112) << 23) | (mant << 13));
  return std::bit_cast<float>(bits);
}

/// bfloat16 is the top half of a float.
inline float bf16_to_float(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

/// Reads element i of type U from unaligned bytes.
template <class U>
U load(const std::uint8_t* p, std::int64_t i) {
  U v;
  std::memcpy(&v, p + static_cast<std::size_t>(i) * sizeof(U), sizeof(U));
  return v;
}

template <class U, class T, class F>
void convert(const std::uint8_t* src, T* dst, std::int64_t n, F&& f) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(f(load<U>(src, i)));
}

}  // namespace detail::safetensors

/// A parsed and fully validated safetensors file (or in-memory buffer).
/// \code
/// auto f = frost::SafetensorsFile::open("model.safetensors");
/// for (const auto& name : f.names()) std::cout << name << " " << f.info(name).shape << "\n";
/// auto w = f.get<float>("fc1.weight");   // F16 / BF16 / F32 / F64 convert to float
/// \endcode
class SafetensorsFile {
 public:
  /// Reads and validates the file at `path`.
  static SafetensorsFile open(const std::string& path) {
    std::error_code ec;
    FROST_CHECK(!std::filesystem::exists(path, ec) || std::filesystem::is_regular_file(path, ec),
                "frost::safetensors: ", path, ": is not a regular file");
    std::ifstream in(path, std::ios::binary);
    FROST_CHECK(in.is_open(), "frost::safetensors: ", path, ": cannot open the file for reading");
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    FROST_CHECK(size >= 0, "frost::safetensors: ", path, ": cannot determine the file size (is it a regular file?)");
    in.seekg(0, std::ios::beg);
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
    if (size > 0) in.read(reinterpret_cast<char*>(bytes.data()), size);
    FROST_CHECK(in.good() || size == 0, "frost::safetensors: ", path, ": read error after ", in.gcount(), " of ", size,
                " bytes");
    return from_bytes(std::move(bytes), path);
  }

  /// Validates an in-memory safetensors image; `source` names it in errors.
  static SafetensorsFile from_bytes(std::vector<std::uint8_t> bytes, std::string source = "<memory>") {
    SafetensorsFile f;
    f.source_ = std::move(source);
    f.bytes_ = std::move(bytes);
    f.parse();
    return f;
  }

  /// The path (or the name given to from_bytes) errors refer to.
  const std::string& source() const { return source_; }
  /// Tensor names in data-section order (the order they were written in).
  const std::vector<std::string>& names() const { return names_; }
  bool contains(const std::string& name) const { return infos_.count(name) != 0; }
  /// dtype, shape and byte range of `name`.
  const SafetensorsInfo& info(const std::string& name) const {
    auto it = infos_.find(name);
    FROST_CHECK(it != infos_.end(), "frost::safetensors: ", source_, ": no tensor named '", name, "' (the file holds ",
                infos_.size(), " tensors)");
    return it->second;
  }
  /// The "__metadata__" string map (empty when the file has none).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  /// A fresh CPU tensor holding `name`. Floating dtypes (F16, BF16, F32,
  /// F64) load as float or double; integer dtypes (BOOL, U8, I8, I16, U16,
  /// I32, U32, I64, and U64 values that fit) load as int64. Crossing between
  /// floating and integer is an error rather than a silent cast.
  template <Scalar T>
  Tensor<T> get(const std::string& name) const {
    namespace st = detail::safetensors;
    const SafetensorsInfo& in = info(name);
    const st::DTypeDesc* d = st::find_dtype(in.dtype);  // validated by parse()
    const bool want_float = FloatScalar<T>;
    FROST_CHECK(d->kind != st::Kind::opaque && (d->kind == st::Kind::floating) == want_float,
                "frost::safetensors: ", source_, ": tensor '", name, "' has dtype ", in.dtype, " and shape ",
                in.shape.str(), ", which does not load as ", dtype_name<T>(),
                want_float ? " (expected F16, BF16, F32 or F64)" : " (expected an integer dtype: BOOL, U8, I8, I16, "
                                                                   "U16, I32, U32, I64 or U64)");
    auto out = Tensor<T>::empty(in.shape);
    const std::uint8_t* src = bytes_.data() + data_start_ + in.begin;
    const std::int64_t n = in.shape.numel();
    T* dst = out.data();
    auto id = [](auto v) { return v; };
    const std::string_view dt = in.dtype;
    if (dt == st::dtype_string<T>()) {
      if (n > 0) std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(T));
    } else if (dt == "F16") {
      st::convert<std::uint16_t>(src, dst, n, st::half_to_float);
    } else if (dt == "BF16") {
      st::convert<std::uint16_t>(src, dst, n, st::bf16_to_float);
    } else if (dt == "F32") {
      st::convert<float>(src, dst, n, id);
    } else if (dt == "F64") {
      st::convert<double>(src, dst, n, id);
    } else if (dt == "BOOL" || dt == "U8") {
      st::convert<std::uint8_t>(src, dst, n, id);
    } else if (dt == "I8") {
      st::convert<std::int8_t>(src, dst, n, id);
    } else if (dt == "I16") {
      st::convert<std::int16_t>(src, dst, n, id);
    } else if (dt == "U16") {
      st::convert<std::uint16_t>(src, dst, n, id);
    } else if (dt == "I32") {
      st::convert<std::int32_t>(src, dst, n, id);
    } else if (dt == "U32") {
      st::convert<std::uint32_t>(src, dst, n, id);
    } else {  // U64 into int64
      for (std::int64_t i = 0; i < n; ++i) {
        const auto v = st::load<std::uint64_t>(src, i);
        FROST_CHECK(v <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
                    "frost::safetensors: ", source_, ": tensor '", name, "' (U64) holds ", v,
                    " at element ", i, ", which does not fit in int64");
        dst[i] = static_cast<T>(v);
      }
    }
    return out;
  }

 private:
  SafetensorsFile() = default;

  template <class... A>
  [[noreturn]] void bad(const A&... parts) const {
    detail::fail("frost::safetensors: ", source_, ": ", parts...);
  }

  // The JSON side (safetensors_json.hpp): compiled once into frost::compiled,
  // so files that include frost.hpp do not parse nlohmann/json.
  nlohmann::json parse_header(const char* first, const char* last, std::vector<std::string>& key_order) const;
  std::uint64_t as_u64(const nlohmann::json& v, const std::string& name, const char* what) const;
  SafetensorsInfo parse_entry(const std::string& name, const nlohmann::json& e, std::uint64_t data_size) const;
  void parse();

  std::string source_;
  std::vector<std::uint8_t> bytes_;
  std::size_t data_start_ = 0;
  std::vector<std::string> names_;
  std::map<std::string, SafetensorsInfo> infos_;
  std::map<std::string, std::string> metadata_;
};

namespace detail::safetensors {

/// One tensor to write, whatever its element type: its header fields and
/// a contiguous copy of its bytes.
struct OutEntry {
  std::string name;
  std::string_view dtype;
  Shape shape;
  std::vector<std::uint8_t> data;
};

template <Scalar T>
OutEntry out_entry(const std::string& name, const Tensor<T>& t) {
  FROST_CHECK(t.defined(), "frost::save_safetensors: tensor '", name, "' is undefined");
  const Tensor<T> c = t.detach().cpu().contiguous();  // a device tensor is copied to the host first
  OutEntry e{name, dtype_string<T>(), c.shape(), std::vector<std::uint8_t>(static_cast<std::size_t>(c.numel()) * sizeof(T))};
  if (!e.data.empty()) std::memcpy(e.data.data(), c.data(), e.data.size());
  return e;
}

/// The file image of `entries` (safetensors_json.hpp).
std::vector<std::uint8_t> serialize(const std::vector<OutEntry>& entries,
                                   const std::map<std::string, std::string>& metadata);

/// Writes `bytes` beside `path` and renames the file over it, so a crash
/// never leaves a half-written checkpoint under the final name.
inline void write_file(const std::vector<std::uint8_t>& bytes, const std::string& path) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    FROST_CHECK(out.is_open(), "frost::save_safetensors: ", path, ": cannot open '", tmp, "' for writing");
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      frost::detail::fail("frost::save_safetensors: ", path, ": writing ", bytes.size(), " bytes to '", tmp, "' failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    frost::detail::fail("frost::save_safetensors: ", path, ": cannot rename '", tmp, "' over it: ", ec.message());
  }
}

}  // namespace detail::safetensors

/// The safetensors image of `named` (in that order) with `metadata`: what
/// save_safetensors writes, for in-memory use. Non-contiguous tensors are
/// written in row-major order; the header is padded with spaces to a
/// multiple of 8 bytes, as the reference implementation does, so the data
/// section starts aligned.
template <Scalar T>
std::vector<std::uint8_t> serialize_safetensors(const std::vector<std::pair<std::string, Tensor<T>>>& named,
                                                const std::map<std::string, std::string>& metadata = {}) {
  std::vector<detail::safetensors::OutEntry> entries;
  entries.reserve(named.size());
  for (const auto& [name, t] : named) entries.push_back(detail::safetensors::out_entry(name, t));
  return detail::safetensors::serialize(entries, metadata);
}

/// Writes `named` (in that order) as F32 / F64 / I64 tensors to `path`
/// (through a temporary file renamed over it).
template <Scalar T>
void save_safetensors(const std::vector<std::pair<std::string, Tensor<T>>>& named, const std::string& path,
                      const std::map<std::string, std::string>& metadata = {}) {
  detail::safetensors::write_file(serialize_safetensors(named, metadata), path);
}

/// Every tensor of an in-memory safetensors image as Tensor<T>, in file order.
template <Scalar T>
std::vector<std::pair<std::string, Tensor<T>>> deserialize_safetensors(std::vector<std::uint8_t> bytes,
                                                                      std::string source = "<memory>") {
  const auto f = SafetensorsFile::from_bytes(std::move(bytes), std::move(source));
  std::vector<std::pair<std::string, Tensor<T>>> out;
  for (const auto& name : f.names()) out.emplace_back(name, f.template get<T>(name));
  return out;
}

/// Every tensor of the file at `path` as Tensor<T>, in file order (see
/// SafetensorsFile::get for the dtype conversions).
template <Scalar T>
std::vector<std::pair<std::string, Tensor<T>>> load_safetensors(const std::string& path) {
  const auto f = SafetensorsFile::open(path);
  std::vector<std::pair<std::string, Tensor<T>>> out;
  for (const auto& name : f.names()) out.emplace_back(name, f.template get<T>(name));
  return out;
}

}  // namespace frost

// The JSON-parsing half: inline here in header-only mode; in frost::compiled
// it is compiled once, in src/cpu_backend.cpp.
#if !defined(FROST_CPU_BACKEND_EXTERN) || defined(FROST_CPU_BACKEND_IMPLEMENTATION)
#include "safetensors_json.hpp"
#endif
