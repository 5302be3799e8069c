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

#include "../any_tensor.hpp"
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

/// The file's name for frost's dtype d ("F32", "BOOL", ...).
constexpr std::string_view dtype_string(DType d) {
  switch (d) {
#define FROST_ST_NAME(type, e, name, st) \
  case DType::e: return st;
    FROST_FOR_EACH_DTYPE(FROST_ST_NAME)
#undef FROST_ST_NAME
  }
  return "?";
}
template <Scalar T>
constexpr std::string_view dtype_string() {
  return dtype_string(dtype_of<T>());
}

/// frost's dtype stored exactly as the file's `name`; false for U16, U32,
/// U64 (no frost dtype: they load as int64) and the F8 formats.
inline bool exact_dtype(std::string_view name, DType& out) {
  for (int i = 0; i < kDTypeCount; ++i)
    if (dtype_string(static_cast<DType>(i)) == name) {
      out = static_cast<DType>(i);
      return true;
    }
  return false;
}

/// Reads element i of type U from unaligned bytes.
template <class U>
U load(const std::uint8_t* p, std::int64_t i) {
  U v;
  std::memcpy(&v, p + static_cast<std::size_t>(i) * sizeof(U), sizeof(U));
  return v;
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

  /// A fresh CPU tensor holding `name` as T. Stored as T, the bytes are
  /// copied as they are. Otherwise, as load_state_dict's copy would: a
  /// floating dtype (F16, BF16, F32, F64) converts to a floating T, rounding
  /// to nearest; an integer dtype (BOOL, U8, I8, I16, U16, I32, U32, I64, U64)
  /// to an integer T when every value fits, else an Error. Crossing between
  /// floating and integer is an Error rather than a silent cast.
  template <Scalar T>
  Tensor<T> get(const std::string& name) const {
    namespace st = detail::safetensors;
    const SafetensorsInfo& in = info(name);
    const st::DTypeDesc* d = st::find_dtype(in.dtype);  // validated by parse()
    constexpr bool want_float = FloatingScalar<T>;
    FROST_CHECK(d->kind != st::Kind::opaque && (d->kind == st::Kind::floating) == want_float,
                "frost::safetensors: ", source_, ": tensor '", name, "' has dtype ", in.dtype, " and shape ",
                in.shape.str(), ", which does not load as ", dtype_name<T>(),
                want_float ? " (expected F16, BF16, F32 or F64)" : " (expected an integer dtype: BOOL, U8, I8, I16, "
                                                                   "U16, I32, U32, I64 or U64)");
    auto out = Tensor<T>::empty(in.shape);
    const std::uint8_t* src = bytes_.data() + data_start_ + in.begin;
    const std::int64_t n = in.shape.numel();
    T* dst = out.data();
    const std::string_view dt = in.dtype;
    if (dt == st::dtype_string<T>()) {
      if constexpr (std::is_same_v<T, bool>) check_bools(name, src, n);
      if (n > 0) std::memcpy(static_cast<void*>(dst), src, static_cast<std::size_t>(n) * sizeof(T));
      return out;
    }
    DType stored;
    if (st::exact_dtype(dt, stored)) {
      visit_dtype(stored, [&](auto tag) {
        using S = decltype(tag);
        if constexpr (std::is_same_v<S, bool>) check_bools(name, src, n);
        for (std::int64_t i = 0; i < n; ++i) dst[i] = convert<T>(name, dt, st::load<S>(src, i), i);
      });
    } else if (dt == "U16") {
      for (std::int64_t i = 0; i < n; ++i) dst[i] = convert<T>(name, dt, st::load<std::uint16_t>(src, i), i);
    } else if (dt == "U32") {
      for (std::int64_t i = 0; i < n; ++i) dst[i] = convert<T>(name, dt, st::load<std::uint32_t>(src, i), i);
    } else {  // U64
      for (std::int64_t i = 0; i < n; ++i) dst[i] = convert<T>(name, dt, st::load<std::uint64_t>(src, i), i);
    }
    return out;
  }

  /// A fresh CPU tensor holding `name` in its stored dtype, bytes as they
  /// are. U16 and U32 (which frost has no dtype for) widen to int64, as do
  /// U64 values that fit; the F8 formats are an Error.
  AnyTensor get_any(const std::string& name) const;  // safetensors_any.hpp

 private:
  SafetensorsFile() = default;

  template <class... A>
  [[noreturn]] void bad(const A&... parts) const {
    detail::fail("frost::safetensors: ", source_, ": ", parts...);
  }

  /// A BOOL tensor's bytes are 0 or 1 (any other byte is not a bool).
  void check_bools(const std::string& name, const std::uint8_t* src, std::int64_t n) const {
    for (std::int64_t i = 0; i < n; ++i)
      if (src[i] > 1) bad("tensor '", name, "' (BOOL) holds byte ", int(src[i]), " at element ", i, " (expected 0 or 1)");
  }
  /// Stored value v as T: floating values round; integers must fit.
  template <class T, class S>
  T convert(const std::string& name, std::string_view stored, S v, std::int64_t i) const {
    if constexpr (std::is_integral_v<T> && std::is_integral_v<S> && !std::is_same_v<S, bool>) {
      bool fits;
      if constexpr (std::is_same_v<T, bool>) fits = v == S(0) || v == S(1);
      else fits = std::in_range<T>(v);
      if (!fits) bad("tensor '", name, "' (", stored, ") holds ", +v, " at element ", i, ", which does not fit in ", dtype_name<T>());
    }
    return fn::cast<T>(v);  // floating values round to nearest
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
  if (!e.data.empty()) std::memcpy(e.data.data(), static_cast<const void*>(c.data()), e.data.size());
  return e;
}
/// The same for a tensor of a run-time dtype (safetensors_any.hpp).
OutEntry out_entry(const std::string& name, const AnyTensor& t);

/// The file image of `entries` (safetensors_json.hpp).
std::vector<std::uint8_t> serialize(const std::vector<OutEntry>& entries,
                                   const std::map<std::string, std::string>& metadata);

/// The file image of named tensors (Tensor<T> or AnyTensor).
template <class Named>
std::vector<std::uint8_t> image(const Named& named, const std::map<std::string, std::string>& metadata) {
  std::vector<OutEntry> entries;
  entries.reserve(named.size());
  for (const auto& [name, t] : named) entries.push_back(out_entry(name, t));
  return serialize(entries, metadata);
}

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
  return detail::safetensors::image(named, metadata);
}
/// The same for tensors of mixed dtypes, each written in its own.
std::vector<std::uint8_t> serialize_safetensors(const std::vector<std::pair<std::string, AnyTensor>>& named,
                                                const std::map<std::string, std::string>& metadata = {});

/// Writes `named` (in that order) to `path`, each tensor in its dtype
/// (through a temporary file renamed over it).
template <Scalar T>
void save_safetensors(const std::vector<std::pair<std::string, Tensor<T>>>& named, const std::string& path,
                      const std::map<std::string, std::string>& metadata = {}) {
  detail::safetensors::write_file(serialize_safetensors(named, metadata), path);
}
/// The same for tensors of mixed dtypes.
void save_safetensors(const std::vector<std::pair<std::string, AnyTensor>>& named, const std::string& path,
                      const std::map<std::string, std::string>& metadata = {});

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

/// Every tensor of the file at `path` in its stored dtype, in file order
/// (mixed dtypes in one call; see SafetensorsFile::get_any).
/// \code
/// for (auto& [name, t] : frost::load_safetensors_any("model.safetensors"))
///   std::cout << name << " " << frost::dtype_name(t.dtype()) << " " << t.shape() << "\n";
/// \endcode
std::vector<std::pair<std::string, AnyTensor>> load_safetensors_any(const std::string& path);
/// The same for an in-memory image.
std::vector<std::pair<std::string, AnyTensor>> deserialize_safetensors_any(std::vector<std::uint8_t> bytes,
                                                                          std::string source = "<memory>");

// frost::compiled: get<T> for every dtype is instantiated once, in src/.
#if defined(FROST_CPU_BACKEND_EXTERN) && !defined(FROST_CPU_BACKEND_IMPLEMENTATION)
#define FROST_EXTERN_GET(S, e, name, st) extern template Tensor<S> SafetensorsFile::get<S>(const std::string&) const;
FROST_FOR_EACH_DTYPE(FROST_EXTERN_GET)
#undef FROST_EXTERN_GET
#endif

}  // namespace frost

// The JSON-parsing half and the run-time dtype half: inline here in
// header-only mode; in frost::compiled compiled once, in src/.
#if !defined(FROST_CPU_BACKEND_EXTERN) || defined(FROST_CPU_BACKEND_IMPLEMENTATION)
#include "safetensors_any.hpp"
#include "safetensors_json.hpp"
#endif
