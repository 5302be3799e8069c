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

#include <nlohmann/json.hpp>

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

  /// Parses the JSON header. A parser callback rejects duplicate keys
  /// (nlohmann would keep the last silently), nesting deeper than a valid
  /// header's three levels and arrays longer than kMaxDims, so a hostile
  /// header cannot make the DOM large or deep; it also records the order of
  /// the top-level keys.
  nlohmann::json parse_header(const char* first, const char* last, std::vector<std::string>& key_order) const {
    struct Frame {
      bool object;
      std::size_t count = 0;
      std::set<std::string> keys;
    };
    std::vector<Frame> frames;
    using Ev = nlohmann::json::parse_event_t;
    auto in_array_element = [&] {
      if (frames.empty() || frames.back().object) return;
      if (++frames.back().count > static_cast<std::size_t>(kMaxDims))
        bad("header array under '", key_order.empty() ? std::string() : key_order.back(), "' has more than ",
            kMaxDims, " elements (a shape has at most ", kMaxDims, " dims, data_offsets has 2)");
    };
    auto cb = [&](int, Ev ev, nlohmann::json& parsed) -> bool {
      switch (ev) {
        case Ev::object_start:
        case Ev::array_start:
          in_array_element();
          if (frames.size() >= 3)
            bad("header nests deeper than a safetensors header (name -> entry -> shape) under '",
                key_order.empty() ? std::string() : key_order.back(), "'");
          frames.push_back(Frame{ev == Ev::object_start});
          break;
        case Ev::object_end:
        case Ev::array_end: frames.pop_back(); break;
        case Ev::key: {
          std::string k = parsed.get<std::string>();
          if (frames.size() == 1) key_order.push_back(k);
          if (!frames.back().keys.insert(std::move(k)).second)
            bad("duplicate key '", parsed.get<std::string>(), "' in the header",
                frames.size() == 1 ? "" : " (inside an entry or __metadata__)");
          break;
        }
        case Ev::value: in_array_element(); break;
      }
      return true;
    };
    try {
      return nlohmann::json::parse(first, last, cb, /*allow_exceptions=*/true, /*ignore_comments=*/false);
    } catch (const nlohmann::json::exception& e) {
      bad("header is not valid JSON: ", e.what());
    }
  }

  /// A JSON value as a non-negative integer, or an error naming `what`.
  std::uint64_t as_u64(const nlohmann::json& v, const std::string& name, const char* what) const {
    if (!v.is_number_unsigned())
      bad("tensor '", name, "': ", what, " must be non-negative integers, got ", v.dump(-1, ' ', true));
    return v.get<std::uint64_t>();
  }

  SafetensorsInfo parse_entry(const std::string& name, const nlohmann::json& e, std::uint64_t data_size) const {
    namespace st = detail::safetensors;
    if (!e.is_object()) bad("entry '", name, "' must be an object with dtype, shape and data_offsets, got ", e.type_name());
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!e.contains(field)) bad("tensor '", name, "' has no \"", field, "\" field");
    const auto& jd = e.at("dtype");
    const auto& js = e.at("shape");
    const auto& jo = e.at("data_offsets");
    if (!jd.is_string()) bad("tensor '", name, "': dtype must be a string, got ", jd.type_name());
    SafetensorsInfo in;
    in.dtype = jd.get<std::string>();
    const st::DTypeDesc* d = st::find_dtype(in.dtype);
    if (!d)
      bad("tensor '", name, "' has unknown dtype '", in.dtype,
          "' (expected BOOL, U8, I8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64, F8_E5M2 or F8_E4M3)");
    if (!js.is_array()) bad("tensor '", name, "': shape must be an array, got ", js.type_name());
    // The parser callback already capped arrays at kMaxDims elements.
    std::uint64_t numel = 1, extent_product = 1;
    for (const auto& v : js) {
      const std::uint64_t dim = as_u64(v, name, "shape dims");
      // Frost computes strides over the non-zero extents, so their product
      // must fit int64 even when another dim makes the tensor empty.
      if (dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
          (dim > 0 && extent_product > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / dim))
        bad("tensor '", name, "': shape ", js.dump(), " has more elements than fit in int64");
      if (dim > 0) extent_product *= dim;
      numel *= dim;
      in.shape.push_back(static_cast<std::int64_t>(dim));
    }
    if (!jo.is_array() || jo.size() != 2)
      bad("tensor '", name, "': data_offsets must be an array [begin, end], got ", jo.dump(-1, ' ', true));
    in.begin = as_u64(jo[0], name, "data_offsets");
    in.end = as_u64(jo[1], name, "data_offsets");
    if (in.begin > in.end) bad("tensor '", name, "': data_offsets [", in.begin, ", ", in.end, "] has begin > end");
    if (in.end > data_size)
      bad("tensor '", name, "': data_offsets [", in.begin, ", ", in.end, "] end beyond the data section (", data_size,
          " bytes)");
    if (numel > std::numeric_limits<std::uint64_t>::max() / d->size || in.end - in.begin != numel * d->size)
      bad("tensor '", name, "': data_offsets [", in.begin, ", ", in.end, "] span ", in.end - in.begin,
          " bytes but shape ", in.shape.str(), " of ", in.dtype, " needs ", numel, " x ", d->size, " bytes");
    return in;
  }

  void parse() {
    const std::uint64_t size = bytes_.size();
    if (size < 8) bad("file is ", size, " bytes, shorter than the 8-byte header length");
    std::uint64_t n;
    std::memcpy(&n, bytes_.data(), 8);
    if (n > detail::safetensors::kMaxHeaderBytes)
      bad("header length ", n, " exceeds the ", detail::safetensors::kMaxHeaderBytes, "-byte limit");
    if (n > size - 8) bad("header length ", n, " runs past the end of the file (", size, " bytes)");
    if (n == 0 || bytes_[8] != '{') bad("header does not start with '{'");
    data_start_ = static_cast<std::size_t>(8 + n);
    const std::uint64_t data_size = size - 8 - n;

    std::vector<std::string> key_order;
    const char* first = reinterpret_cast<const char*>(bytes_.data() + 8);
    const nlohmann::json header = parse_header(first, first + n, key_order);
    if (!header.is_object()) bad("header must be a JSON object, got ", header.type_name());

    std::vector<std::pair<std::string, SafetensorsInfo>> entries;
    for (const auto& key : key_order) {
      const auto& v = header.at(key);
      if (key == "__metadata__") {
        if (v.is_null()) continue;
        if (!v.is_object()) bad("__metadata__ must be an object of strings, got ", v.type_name());
        for (const auto& [k, s] : v.items()) {
          if (!s.is_string()) bad("__metadata__ value of '", k, "' must be a string, got ", s.type_name());
          metadata_.emplace(k, s.get<std::string>());
        }
        continue;
      }
      entries.emplace_back(key, parse_entry(key, v, data_size));
    }
    // Like the reference implementation: the tensors, in offset order, tile
    // the data section exactly: no overlap (aliasing), no hole, no tail.
    std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
      return std::pair(a.second.begin, a.second.end) < std::pair(b.second.begin, b.second.end);
    });
    std::uint64_t expect = 0;
    const std::string* prev = nullptr;
    for (const auto& [name, in] : entries) {
      if (in.begin < expect)
        bad("tensor '", name, "' bytes [", in.begin, ", ", in.end, ") overlap tensor '", *prev, "' (which ends at ",
            expect, ")");
      if (in.begin > expect)
        bad("bytes [", expect, ", ", in.begin, ") of the data section belong to no tensor (a hole before '", name,
            "')");
      expect = in.end;
      prev = &name;
    }
    if (expect != data_size)
      bad("the data section is ", data_size, " bytes but the tensors cover only ", expect,
          " (trailing bytes belong to no tensor)");
    for (auto& [name, in] : entries) {
      names_.push_back(name);
      infos_.emplace(name, std::move(in));
    }
  }

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
  FROST_CHECK(t.device().is_cpu(), "frost::save_safetensors: tensor '", name, "' (shape ", t.shape().str(), ") is on ",
              t.device().str(), "; copy it to the CPU first");
  const Tensor<T> c = t.detach().contiguous();
  OutEntry e{name, dtype_string<T>(), c.shape(), std::vector<std::uint8_t>(static_cast<std::size_t>(c.numel()) * sizeof(T))};
  if (!e.data.empty()) std::memcpy(e.data.data(), c.data(), e.data.size());
  return e;
}

inline std::vector<std::uint8_t> serialize(const std::vector<OutEntry>& entries,
                                           const std::map<std::string, std::string>& metadata) {
  std::set<std::string_view> seen;
  std::string header = "{";
  auto key = [](const std::string& s) { return nlohmann::json(s).dump() + ":"; };
  std::uint64_t offset = 0;
  try {
    if (!metadata.empty()) header += key("__metadata__") + nlohmann::json(metadata).dump();
    for (const auto& e : entries) {
      FROST_CHECK(e.name != "__metadata__", "frost::save_safetensors: '__metadata__' is reserved for the metadata map "
                  "and cannot name a tensor");
      FROST_CHECK(seen.insert(e.name).second, "frost::save_safetensors: duplicate tensor name '", e.name, "'");
      const std::uint64_t bytes = e.data.size();
      nlohmann::json j = {{"dtype", e.dtype}, {"shape", e.shape.vec()}, {"data_offsets", {offset, offset + bytes}}};
      if (header.size() > 1) header += ",";
      header += key(e.name) + j.dump();
      offset += bytes;
    }
  } catch (const nlohmann::json::exception& ex) {
    frost::detail::fail("frost::save_safetensors: a tensor name or metadata string is not valid UTF-8 (", ex.what(), ")");
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');

  std::vector<std::uint8_t> out(8 + header.size() + offset);
  const std::uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  std::uint8_t* dst = out.data() + 8 + header.size();
  for (const auto& e : entries) {
    if (!e.data.empty()) std::memcpy(dst, e.data.data(), e.data.size());
    dst += e.data.size();
  }
  return out;
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
