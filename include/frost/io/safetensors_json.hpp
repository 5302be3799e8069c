// safetensors' JSON half: parsing and validating the header, and writing
// one. Included by safetensors.hpp in header-only mode (inline) and compiled
// once into frost::compiled (src/) otherwise.
#pragma once
#include <nlohmann/json.hpp>

#include "safetensors.hpp"

// frost::compiled's one definition (src/) is out of line.
#if defined(FROST_CPU_BACKEND_IMPLEMENTATION)
#define FROST_IO_INLINE
#else
#define FROST_IO_INLINE inline
#endif

namespace frost {

namespace detail::safetensors {
/// The header's shape checked in one SAX pass before any DOM is built:
/// duplicate keys (nlohmann would keep the last silently), nesting deeper
/// than a valid header's three levels and arrays longer than kMaxDims, so a
/// hostile header cannot make the DOM large or deep; it also records the
/// order of the top-level keys. (nlohmann's parser callback did this too,
/// but its DOM parser scans the parent object at every object's end: open()
/// was quadratic in the number of tensors, 140 s for 81k.)
template <class Bad>
struct HeaderShapeCheck {
  struct Frame {
    bool object;
    std::size_t count = 0;
    std::set<std::string> keys;
  };
  std::vector<Frame> frames;
  std::vector<std::string>& key_order;
  const Bad& bad;

  std::string under() const { return key_order.empty() ? std::string() : key_order.back(); }
  void element() {
    if (frames.empty() || frames.back().object) return;
    if (++frames.back().count > static_cast<std::size_t>(kMaxDims))
      bad("header array under '", under(), "' has more than ", kMaxDims, " elements (a shape has at most ", kMaxDims,
          " dims, data_offsets has 2)");
  }
  bool open(bool object) {
    element();
    if (frames.size() >= 3)
      bad("header nests deeper than a safetensors header (name -> entry -> shape) under '", under(), "'");
    frames.push_back(Frame{object, 0, {}});
    return true;
  }
  bool close() {
    frames.pop_back();
    return true;
  }
  // nlohmann's SAX interface.
  bool null() { return element(), true; }
  bool boolean(bool) { return element(), true; }
  bool number_integer(std::int64_t) { return element(), true; }
  bool number_unsigned(std::uint64_t) { return element(), true; }
  bool number_float(double, const std::string&) { return element(), true; }
  bool string(std::string&) { return element(), true; }
  bool binary(std::vector<std::uint8_t>&) { return element(), true; }
  bool start_object(std::size_t) { return open(true); }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(false); }
  bool end_array() { return close(); }
  bool key(std::string& k) {
    if (frames.size() == 1) key_order.push_back(k);
    if (!frames.back().keys.insert(k).second)
      bad("duplicate key '", k, "' in the header", frames.size() == 1 ? "" : " (inside an entry or __metadata__)");
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& e) {
    bad("header is not valid JSON: ", e.what());
    return false;
  }
};
}  // namespace detail::safetensors

/// Parses the JSON header: its shape checked by a SAX pass
/// (HeaderShapeCheck), then the DOM built without a callback. Both passes
/// are linear in the header's size.
FROST_IO_INLINE nlohmann::json SafetensorsFile::parse_header(const char* first, const char* last, std::vector<std::string>& key_order) const {
  auto fail = [this](const auto&... parts) { bad(parts...); };
  detail::safetensors::HeaderShapeCheck<decltype(fail)> check{{}, key_order, fail};
  try {
    nlohmann::json::sax_parse(first, last, &check, nlohmann::json::input_format_t::json, /*strict=*/true,
                              /*ignore_comments=*/false);
    return nlohmann::json::parse(first, last, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {
    bad("header is not valid JSON: ", e.what());
  }
}

/// A JSON value as a non-negative integer, or an error naming `what`.
FROST_IO_INLINE std::uint64_t SafetensorsFile::as_u64(const nlohmann::json& v, const std::string& name, const char* what) const {
  if (!v.is_number_unsigned())
    bad("tensor '", name, "': ", what, " must be non-negative integers, got ", v.dump(-1, ' ', true));
  return v.get<std::uint64_t>();
}

FROST_IO_INLINE SafetensorsInfo SafetensorsFile::parse_entry(const std::string& name, const nlohmann::json& e, std::uint64_t data_size) const {
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

FROST_IO_INLINE void SafetensorsFile::parse() {
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


namespace detail::safetensors {

FROST_IO_INLINE std::vector<std::uint8_t> serialize(const std::vector<OutEntry>& entries,
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

}  // namespace detail::safetensors

}  // namespace frost

#undef FROST_IO_INLINE
