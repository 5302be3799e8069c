// safetensors: round trips, a file laid out by PyTorch's bytes
// (tests/data/make_reference_safetensors.py), every rejection of a hostile
// header built in memory, and a byte-flip fuzz loop that must never crash.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "support.hpp"

#include <frost/io/safetensors.hpp>

using namespace frost;
using namespace frost::test;

namespace {

using Bytes = std::vector<std::uint8_t>;

/// A safetensors image from a header string (not padded) and raw data.
Bytes image(const std::string& header, const Bytes& data = {}) {
  // Sized once and filled with memcpy: GCC 12 misreads insert() after an
  // 8-byte vector as an out-of-bounds copy (-Warray-bounds).
  Bytes b(8 + header.size() + data.size());
  const std::uint64_t n = header.size();
  std::memcpy(b.data(), &n, 8);
  if (!header.empty()) std::memcpy(b.data() + 8, header.data(), header.size());
  if (!data.empty()) std::memcpy(b.data() + 8 + header.size(), data.data(), data.size());
  return b;
}

Bytes zeros(std::size_t n) { return Bytes(n, 0); }

SafetensorsFile hostile(const Bytes& b) { return SafetensorsFile::from_bytes(b, "hostile.safetensors"); }

std::string reference_path() { return test_data_path("reference.safetensors"); }

std::string temp_path(const char* tag) {
  return (std::filesystem::temp_directory_path() /
          ("frost_test_safetensors_" + std::to_string(::getpid()) + "_" + tag + ".safetensors"))
      .string();
}

template <class T>
using Named = std::vector<std::pair<std::string, Tensor<T>>>;

}  // namespace

TEST_CASE("safetensors: float, double and int64 round trip through memory and files") {
  const auto w = TF::randn({3, 4});
  const auto b = TF::from({0.5f, -1.25f});
  const auto s = TF::scalar(7.0f);
  const auto e = TF::empty({0, 5});
  const Named<float> named = {{"layer.weight", w}, {"layer.bias", b}, {"scale", s}, {"nothing", e}};
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"epoch", "3"}};

  const Bytes bytes = serialize_safetensors(named, meta);
  const auto f = SafetensorsFile::from_bytes(bytes);
  CHECK(f.names() == std::vector<std::string>{"layer.weight", "layer.bias", "scale", "nothing"});
  CHECK(f.metadata() == meta);
  CHECK(f.info("layer.weight").dtype == "F32");
  CHECK(f.info("layer.weight").shape == Shape{3, 4});
  CHECK(f.info("layer.bias").begin == 48);
  CHECK(f.info("layer.bias").end == 56);
  CHECK(f.info("scale").shape == Shape{});
  CHECK(f.get<float>("layer.weight").to_vector() == w.to_vector());
  CHECK(f.get<float>("layer.bias").to_vector() == b.to_vector());
  CHECK(f.get<float>("scale").item() == 7.0f);
  CHECK(f.get<float>("nothing").shape() == Shape{0, 5});
  CHECK(f.get<double>("layer.bias").to_vector() == std::vector<double>{0.5, -1.25});  // F32 widens to double
  CHECK(f.contains("scale"));
  CHECK(!f.contains("missing"));

  // The header is padded with spaces so the data section starts 8-aligned.
  std::uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n % 8 == 0);
  CHECK(bytes[8] == '{');
  CHECK(bytes.size() == 8 + n + (12 + 2 + 1) * 4);

  const std::string path = temp_path("f64");
  const auto d = TD::from({1.0 / 3, -2.0, 1e300, -0.0}, {2, 2});
  save_safetensors<double>({{"d", d}}, path);
  const auto loaded = load_safetensors<double>(path);
  REQUIRE(loaded.size() == 1);
  CHECK(loaded[0].first == "d");
  CHECK(loaded[0].second.shape() == Shape{2, 2});
  CHECK(loaded[0].second.to_vector() == d.to_vector());
  CHECK(std::signbit(loaded[0].second.to_vector()[3]));
  CHECK(SafetensorsFile::open(path).metadata().empty());
  CHECK(!std::filesystem::exists(path + ".tmp"));
  // Saving again replaces the file.
  save_safetensors<double>({{"e", TD::ones({1})}}, path, {{"v", "2"}});
  CHECK(SafetensorsFile::open(path).names() == std::vector<std::string>{"e"});
  CHECK(SafetensorsFile::open(path).metadata().at("v") == "2");
  std::filesystem::remove(path);

  const auto i = IndexTensor::from({0, -1, std::numeric_limits<std::int64_t>::max(), 42}, {4, 1});
  const auto li = deserialize_safetensors<std::int64_t>(serialize_safetensors<std::int64_t>({{"idx", i}}));
  CHECK(li[0].second.to_vector() == i.to_vector());
  CHECK(SafetensorsFile::from_bytes(serialize_safetensors<std::int64_t>({{"idx", i}})).info("idx").dtype == "I64");
}

TEST_CASE("safetensors: non-contiguous and requires-grad tensors are written in row-major order") {
  const auto base = TD::from({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4}).requires_grad_();
  const Named<double> named = {{"t", base.t()}, {"every_other", base.slice(1, 0, 4, 2)}, {"row", base.select(0, 2)},
                               {"bcast", TD::from({1.0, 2.0}).expand({3, 2})}};
  const auto back = deserialize_safetensors<double>(serialize_safetensors(named));
  REQUIRE(back.size() == 4);
  CHECK(back[0].second.shape() == Shape{4, 3});
  CHECK(back[0].second.to_vector() == std::vector<double>{1, 5, 9, 2, 6, 10, 3, 7, 11, 4, 8, 12});
  CHECK(back[1].second.to_vector() == std::vector<double>{1, 3, 5, 7, 9, 11});
  CHECK(back[2].second.to_vector() == std::vector<double>{9, 10, 11, 12});
  CHECK(back[3].second.to_vector() == std::vector<double>{1, 2, 1, 2, 1, 2});
  CHECK(!back[0].second.requires_grad());
}

TEST_CASE("safetensors: reads a file laid out by PyTorch with F16, BF16, F32, F64, I32 and I64") {
  const auto f = SafetensorsFile::open(reference_path());
  CHECK(f.names() == std::vector<std::string>{"steps", "bias", "empty", "scalar", "weight", "count", "brain", "half"});
  CHECK(f.metadata() == std::map<std::string, std::string>{{"format", "pt"}, {"source", "frost test"}});
  CHECK(f.info("half").dtype == "F16");
  CHECK(f.info("brain").dtype == "BF16");
  CHECK(f.get<float>("weight").shape() == Shape{2, 3});
  CHECK(f.get<float>("weight").to_vector() == std::vector<float>{-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f});
  CHECK(f.get<double>("bias").to_vector() == std::vector<double>{0.1, -0.2, 0.3});
  CHECK(f.get<float>("bias").to_vector() == std::vector<float>{0.1f, -0.2f, 0.3f});
  CHECK(f.get<std::int64_t>("steps").to_vector() == std::vector<std::int64_t>{1, -2, 3, 1099511627776});
  CHECK(f.get<std::int64_t>("count").to_vector() == std::vector<std::int64_t>{7, -8, 2147483647});
  CHECK(f.get<double>("half").to_vector() ==
        std::vector<double>{1.0, -2.5, 65504.0, 5.960464477539063e-08, 0.333251953125});
  CHECK(f.get<float>("brain").to_vector() == std::vector<float>{1.0f, -3.140625f, 0.00099945068359375f});
  CHECK(f.get<float>("scalar").shape() == Shape{});
  CHECK(f.get<float>("scalar").item() == 42.0f);
  CHECK(f.get<double>("empty").shape() == Shape{0, 3});
  // Loading everything as one type refuses the integer tensors rather than casting them.
  CHECK_THROWS_WITH_AS(load_safetensors<double>(reference_path()),
                       doctest::Contains("reference.safetensors: tensor 'steps' has dtype I64 and shape [2, 2], which "
                                         "does not load as float64"),
                       Error);
}

TEST_CASE("safetensors: integer dtypes load as int64, U64 only when it fits") {
  Bytes data;
  auto put = [&](const auto& v) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    data.insert(data.end(), p, p + sizeof(v));
  };
  put(std::uint8_t{1});  // BOOL [0, 1)
  put(std::uint8_t{200});  // U8 [1, 2)
  put(std::int8_t{-100});  // I8 [2, 3)
  put(std::int16_t{-30000});  // I16 [3, 5)
  put(std::uint16_t{65535});  // U16 [5, 7)
  put(std::uint32_t{4000000000u});  // U32 [7, 11)
  put(std::uint64_t{1} << 63);  // U64 [11, 19)
  put(std::uint64_t{5});  // U64 [19, 27)
  const auto f = hostile(image(R"({"b":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]},)"
                               R"("u8":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},)"
                               R"("i8":{"dtype":"I8","shape":[1],"data_offsets":[2,3]},)"
                               R"("i16":{"dtype":"I16","shape":[1],"data_offsets":[3,5]},)"
                               R"("u16":{"dtype":"U16","shape":[1],"data_offsets":[5,7]},)"
                               R"("u32":{"dtype":"U32","shape":[1],"data_offsets":[7,11]},)"
                               R"("big":{"dtype":"U64","shape":[1],"data_offsets":[11,19]},)"
                               R"("small":{"dtype":"U64","shape":[],"data_offsets":[19,27]}})",
                               data));
  CHECK(f.names() == std::vector<std::string>{"b", "u8", "i8", "i16", "u16", "u32", "big", "small"});
  CHECK(f.get<std::int64_t>("b").item() == 1);
  CHECK(f.get<std::int64_t>("u8").item() == 200);
  CHECK(f.get<std::int64_t>("i8").item() == -100);
  CHECK(f.get<std::int64_t>("i16").item() == -30000);
  CHECK(f.get<std::int64_t>("u16").item() == 65535);
  CHECK(f.get<std::int64_t>("u32").item() == 4000000000);
  CHECK(f.get<std::int64_t>("small").item() == 5);
  CHECK_THROWS_WITH_AS(f.get<std::int64_t>("big"),
                       doctest::Contains("tensor 'big' (U64) holds 9223372036854775808 at element 0, which does not "
                                         "fit in int64"),
                       Error);
  CHECK_THROWS_WITH_AS(f.get<float>("u8"), doctest::Contains("'u8' has dtype U8 and shape [1], which does not load as "
                                                             "float32 (expected F16, BF16, F32 or F64)"),
                       Error);
  CHECK_THROWS_WITH_AS(SafetensorsFile::open(reference_path()).get<std::int64_t>("weight"),
                       doctest::Contains("does not load as int64 (expected an integer dtype"), Error);
  CHECK_THROWS_WITH_AS(f.get<float>("nope"), doctest::Contains("hostile.safetensors: no tensor named 'nope' (the file "
                                                               "holds 8 tensors)"),
                       Error);
  const auto f8 = hostile(image(R"({"q":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", zeros(2)));
  CHECK(f8.info("q").shape == Shape{2});
  CHECK_THROWS_WITH_AS(f8.get<float>("q"), doctest::Contains("'q' has dtype F8_E4M3"), Error);
  // Header spacing, null metadata and unknown extra fields are accepted, as by the reference reader.
  const auto loose = hostile(image("{ \"__metadata__\" : null , \"a\" : {\"dtype\":\"F32\", \"shape\":[1], "
                                   "\"data_offsets\":[0,4], \"extra\": {\"x\": 1}} }    ",
                                   zeros(4)));
  CHECK(loose.get<float>("a").item() == 0.0f);
}

TEST_CASE("safetensors: hostile headers are rejected with the file and the problem named") {
  auto reject = [](const Bytes& b, const char* what) {
    CHECK_THROWS_WITH_AS(hostile(b), doctest::Contains("frost::safetensors: hostile.safetensors: "), Error);
    CHECK_THROWS_WITH_AS(hostile(b), doctest::Contains(what), Error);
  };
  const std::string f32x1 = R"("dtype":"F32","shape":[1],"data_offsets":)";
  // Framing.
  reject({1, 2, 3}, "file is 3 bytes, shorter than the 8-byte header length");
  reject({}, "file is 0 bytes");
  Bytes b = image("{}");
  b[0] = 0xe8, b[1] = 0x03;  // 1000
  reject(b, "header length 1000 runs past the end of the file (10 bytes)");
  b = image("{}");
  const std::uint64_t huge = 200'000'000;
  std::memcpy(b.data(), &huge, 8);
  reject(b, "header length 200000000 exceeds the 100000000-byte limit");
  std::uint64_t wraps = std::numeric_limits<std::uint64_t>::max() - 4;  // 8 + N would wrap around
  std::memcpy(b.data(), &wraps, 8);
  reject(b, "exceeds the 100000000-byte limit");
  reject(image(""), "header does not start with '{'");
  reject(image(" {}"), "header does not start with '{'");
  reject(image("[1, 2]"), "header does not start with '{'");
  // JSON.
  reject(image(R"({"a":)"), "header is not valid JSON: [json.exception.parse_error");
  reject(image("{\"\xff\":1}"), "header is not valid JSON");
  reject(image(R"({} {})"), "header is not valid JSON");
  reject(image(R"({"a":1,"a":2})"), "duplicate key 'a' in the header");
  reject(image(R"({"a":{"dtype":"F32","dtype":"F64"}})"), "duplicate key 'dtype' in the header (inside an entry");
  reject(image(R"({"__metadata__":{"k":"1","k":"2"}})"), "duplicate key 'k'");
  reject(image(R"({"a":{"shape":[[1]]}})"), "header nests deeper than a safetensors header");
  reject(image(R"({"a":{"shape":[1,1,1,1,1,1,1,1,1]}})"), "header array under 'a' has more than 8 elements");
  reject(image(R"({"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]})"),
         "nests deeper");
  // Entries.
  reject(image(R"({"a":5})"), "entry 'a' must be an object with dtype, shape and data_offsets, got number");
  reject(image(R"({"a":{"dtype":"F32","shape":[1]}})"), "tensor 'a' has no \"data_offsets\" field");
  reject(image(R"({"a":{"shape":[1],"data_offsets":[0,4]}})"), "tensor 'a' has no \"dtype\" field");
  reject(image(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})"), "tensor 'a' has no \"shape\" field");
  reject(image(R"({"a":{"dtype":32,"shape":[1],"data_offsets":[0,4]}})"), "tensor 'a': dtype must be a string, got number");
  reject(image(R"({"a":{"dtype":"F128","shape":[1],"data_offsets":[0,4]}})", zeros(4)),
         "tensor 'a' has unknown dtype 'F128' (expected BOOL");
  reject(image(R"({"a":{"dtype":"F32","shape":"1","data_offsets":[0,4]}})"), "tensor 'a': shape must be an array, got string");
  reject(image(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})"),
         "tensor 'a': shape dims must be non-negative integers, got -1");
  reject(image(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})"), "shape dims must be non-negative integers, got 1.5");
  reject(image(R"({"a":{"dtype":"F32","shape":[true],"data_offsets":[0,4]}})"), "shape dims must be non-negative integers, got true");
  reject(image(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})"),
         "tensor 'a': shape [4294967296,4294967296] has more elements than fit in int64");
  reject(image(R"({"a":{"dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})"),
         "has more elements than fit in int64");
  reject(image(R"({"a":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,4]}})"),
         "has more elements than fit in int64");
  reject(image(R"({"a":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,4]}})"),
         "shape dims must be non-negative integers");
  reject(image(R"({"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]}})", zeros(8)),
         "tensor 'a': data_offsets [0, 8] span 8 bytes but shape [4611686018427387904] of F64 needs");
  reject(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})"),
         "tensor 'a': data_offsets must be an array [begin, end], got [0]");
  reject(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":{"b":0}}})"), "data_offsets must be an array [begin, end]");
  reject(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":["0",4]}})", zeros(4)),
         "data_offsets must be non-negative integers, got \"0\"");
  reject(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,-4]}})", zeros(4)), "data_offsets must be non-negative");
  reject(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", zeros(8)),
         "tensor 'a': data_offsets [8, 4] has begin > end");
  reject(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,1000]}})", zeros(4)),
         "tensor 'a': data_offsets [0, 1000] end beyond the data section (4 bytes)");
  reject(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551612,18446744073709551616]}})", zeros(4)),
         "data_offsets must be non-negative integers");  // 2^64 parses as a float
  reject(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", zeros(4)),
         "tensor 'a': data_offsets [0, 4] span 4 bytes but shape [2] of F32 needs 2 x 4 bytes");
  // Layout of the data section.
  reject(image("{\"a\":{" + f32x1 + "[0,4]},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", zeros(8)),
         "tensor 'b' bytes [0, 8) overlap tensor 'a' (which ends at 4)");
  reject(image("{\"a\":{" + f32x1 + "[0,4]},\"b\":{" + f32x1 + "[0,4]}}", zeros(4)), "tensor 'b' bytes [0, 4) overlap tensor 'a'");
  reject(image("{\"a\":{" + f32x1 + "[0,4]},\"b\":{" + f32x1 + "[8,12]}}", zeros(12)),
         "bytes [4, 8) of the data section belong to no tensor (a hole before 'b')");
  reject(image("{\"a\":{" + f32x1 + "[4,8]}}", zeros(8)), "bytes [0, 4) of the data section belong to no tensor");
  reject(image("{\"a\":{" + f32x1 + "[0,4]}}", zeros(5)),
         "the data section is 5 bytes but the tensors cover only 4 (trailing bytes belong to no tensor)");
  reject(image("{}", zeros(1)), "the data section is 1 bytes but the tensors cover only 0");
  // Metadata.
  reject(image(R"({"__metadata__":{"k":1}})"), "__metadata__ value of 'k' must be a string, got number");
  reject(image(R"({"__metadata__":["k"]})"), "__metadata__ must be an object of strings, got array");
  // An empty header with no data is a valid (empty) file.
  CHECK(hostile(image("{}")).names().empty());
}

TEST_CASE("safetensors: file and writer errors") {
  CHECK_THROWS_WITH_AS(SafetensorsFile::open("/nonexistent/dir/x.safetensors"),
                       doctest::Contains("frost::safetensors: /nonexistent/dir/x.safetensors: cannot open the file"),
                       Error);
  CHECK_THROWS_WITH_AS(SafetensorsFile::open(std::filesystem::temp_directory_path().string()),
                       doctest::Contains("is not a regular file"), Error);
  const std::string path = temp_path("bad");
  {
    std::ofstream out(path, std::ios::binary);
    out << "abc";
  }
  CHECK_THROWS_WITH_AS(load_safetensors<float>(path), doctest::Contains((path + ": file is 3 bytes").c_str()), Error);
  std::filesystem::remove(path);

  const auto t = TF::ones({2});
  CHECK_THROWS_WITH_AS(save_safetensors<float>({{"a", t}}, "/nonexistent/dir/x.safetensors"),
                       doctest::Contains("frost::save_safetensors: /nonexistent/dir/x.safetensors: cannot open"),
                       Error);
  CHECK_THROWS_WITH_AS(serialize_safetensors<float>({{"a", t}, {"b", t}, {"a", t}}),
                       doctest::Contains("duplicate tensor name 'a'"), Error);
  CHECK_THROWS_WITH_AS(serialize_safetensors<float>({{"__metadata__", t}}),
                       doctest::Contains("'__metadata__' is reserved"), Error);
  CHECK_THROWS_WITH_AS(serialize_safetensors<float>({{"a", TF()}}), doctest::Contains("tensor 'a' is undefined"), Error);
  CHECK_THROWS_WITH_AS(serialize_safetensors<float>({{"bad\xff", t}}), doctest::Contains("is not valid UTF-8"), Error);
  CHECK_THROWS_WITH_AS(serialize_safetensors<float>({{"a", t}}, {{"k", "\xc3"}}), doctest::Contains("is not valid UTF-8"),
                       Error);
  // Names and metadata with quotes, backslashes and Unicode survive.
  const std::string odd = "a \"quoted\" \\ name \xc3\xa9";
  const auto f = SafetensorsFile::from_bytes(serialize_safetensors<float>({{odd, t}}, {{odd, odd}}));
  CHECK(f.names() == std::vector<std::string>{odd});
  CHECK(f.metadata().at(odd) == odd);
}

TEST_CASE("safetensors: byte flips and truncations either load or throw frost::Error") {
  std::ifstream in(reference_path(), std::ios::binary);
  const Bytes good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(good.size() == 656);
  int loaded = 0, rejected = 0, other = 0;
  auto attempt = [&](const Bytes& b) {
    try {
      const auto f = SafetensorsFile::from_bytes(b, "fuzz");
      for (const auto& name : f.names()) {
        try {
          (void)f.get<double>(name);
        } catch (const Error&) {
        }
        try {
          (void)f.get<std::int64_t>(name);
        } catch (const Error&) {
        }
      }
      ++loaded;
    } catch (const Error& e) {
      ++rejected;
      if (std::string(e.what()).find("frost::safetensors: fuzz: ") != 0) ++other;
    } catch (...) {
      ++other;
    }
  };
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (std::uint8_t x : {0x01, 0x02, 0x20, 0x80, 0xff}) {
      Bytes b = good;
      b[i] ^= x;
      attempt(b);
    }
  }
  for (std::size_t n = 0; n < good.size(); ++n) attempt(Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n)));
  CHECK(other == 0);
  CHECK(loaded > 300);    // flips in tensor bytes and in string contents still load
  CHECK(rejected > 1000);
  MESSAGE("fuzz: ", loaded, " loaded, ", rejected, " rejected");
}
