// Every element type: the DType table, float16 / bfloat16 rounding, factories
// and printing per dtype, casts between every pair against PyTorch's
// (tests/reference/dtypes_reference.py), AnyTensor and safetensors of mixed
// dtypes, and the clear errors where a dtype has no kernel yet.
#include <bit>
#include <cstring>
#include <sstream>

#include "support.hpp"

using namespace frost;
using namespace frost::test;

namespace {

std::string reference_path() { return test_data_path("dtypes_reference.safetensors"); }

template <class T>
std::vector<std::uint8_t> bytes_of(const Tensor<T>& t) {
  const Tensor<T> c = t.contiguous();
  std::vector<std::uint8_t> b(static_cast<std::size_t>(c.numel()) * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), static_cast<const void*>(c.data()), b.size());
  return b;
}

std::vector<std::uint8_t> bytes_of(const AnyTensor& t) {
  return t.visit([](const auto& x) { return bytes_of(x); });
}

/// Bit for bit, but any NaN equals any NaN (PyTorch's vector conversions
/// give other NaN payloads than its scalar ones: 0xffff for bfloat16).
bool same_values(const AnyTensor& a, const AnyTensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  if (!is_floating_point(a.dtype())) return bytes_of(a) == bytes_of(b);
  const auto x = a.to<double>().to_vector(), y = b.to<double>().to_vector();  // exact for every floating dtype
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!(std::isnan(x[i]) && std::isnan(y[i])) && std::bit_cast<std::uint64_t>(x[i]) != std::bit_cast<std::uint64_t>(y[i]))
      return false;
  return true;
}

template <class T>
std::string str(const Tensor<T>& t) {
  std::ostringstream o;
  o << t;
  return o.str();
}

/// Round to nearest even of a double onto a grid: the slow reference the
/// 16-bit conversions are checked against (value, ulp at it, max finite).
double rne(double v, double ulp) {
  const double q = v / ulp, f = std::floor(q), r = q - f;
  double n = r > 0.5 ? f + 1 : r < 0.5 ? f : (std::fmod(f, 2) == 0 ? f : f + 1);
  return n * ulp;
}

}  // namespace

TEST_CASE("dtypes: every dtype's name, size and enumerator, as PyTorch names them") {
  CHECK(kDTypeCount == 10);
  CHECK(std::string(dtype_name<bool>()) == "bool");
  CHECK(std::string(dtype_name<std::uint8_t>()) == "uint8");
  CHECK(std::string(dtype_name<std::int8_t>()) == "int8");
  CHECK(std::string(dtype_name<std::int16_t>()) == "int16");
  CHECK(std::string(dtype_name<std::int32_t>()) == "int32");
  CHECK(std::string(dtype_name<std::int64_t>()) == "int64");
  CHECK(std::string(dtype_name<half>()) == "float16");
  CHECK(std::string(dtype_name<bfloat16>()) == "bfloat16");
  CHECK(std::string(dtype_name<float>()) == "float32");
  CHECK(std::string(dtype_name<double>()) == "float64");
  // Saved plans keep the first three numbers.
  CHECK(static_cast<int>(DType::float32) == 0);
  CHECK(static_cast<int>(DType::float64) == 1);
  CHECK(static_cast<int>(DType::int64) == 2);
  for (int i = 0; i < kDTypeCount; ++i) {
    const auto d = static_cast<DType>(i);
    DType back{};
    REQUIRE(dtype_from_name(dtype_name(d), back));
    CHECK(back == d);
    CHECK(dtype_from_name(std::string("torch.") + dtype_name(d), back));
    CHECK(back == d);
    visit_dtype(d, [&](auto tag) {
      using T = decltype(tag);
      CHECK(dtype_of<T>() == d);
      CHECK(dtype_size(d) == sizeof(T));
      CHECK(is_floating_point(d) == FloatingScalar<T>);
      CHECK(Tensor<T>::dtype() == d);
    });
  }
  DType d{};
  CHECK((dtype_from_name("half", d) && d == DType::float16));
  CHECK((dtype_from_name("long", d) && d == DType::int64));
  CHECK_FALSE(dtype_from_name("complex64", d));
  CHECK(dtype_size(DType::bool_) == 1);
  CHECK(dtype_size(DType::bfloat16) == 2);
}

TEST_CASE("dtypes: float16 and bfloat16 hold every value of theirs exactly and round floats to nearest even") {
  // Every bit pattern back and forth: 16 bits -> float -> 16 bits is the identity (NaNs stay NaNs).
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto h = half::from_bits(static_cast<std::uint16_t>(b));
    const auto g = bfloat16::from_bits(static_cast<std::uint16_t>(b));
    const float hf = h, gf = g;
    if (hf != hf) CHECK((half(hf).bits >> 9) == ((b | 0x200u) >> 9));  // still a quiet NaN, sign kept
    else REQUIRE(half(hf).bits == b);
    if (gf != gf) CHECK(std::isnan(float(bfloat16(gf))));
    else REQUIRE(bfloat16(gf).bits == b);
  }
  // Floats across the ranges, against a slow round-to-nearest-even in double.
  Generator gen(7);
  const auto u = Tensor<double>::rand({20000}, &gen).to_vector();
  for (std::size_t i = 0; i < u.size(); ++i) {
    const double mag = std::ldexp(1.0 + u[i], static_cast<int>(i % 44) - 28);  // 2^-28 .. 2^16
    const float f = static_cast<float>(i % 2 ? -mag : mag);
    const double a = std::fabs(static_cast<double>(f));
    // half: 10 mantissa bits, subnormal below 2^-14 (ulp 2^-24), inf from 65520.
    const int e = std::max(std::ilogb(a), -14);
    double want = a >= 65520.0 ? INFINITY : rne(a, std::ldexp(1.0, e - 10));
    CHECK(static_cast<double>(static_cast<float>(half(f))) == (f < 0 ? -want : want));
    // bfloat16: 7 mantissa bits, float's exponent range.
    want = rne(a, std::ldexp(1.0, std::ilogb(a) - 7));
    CHECK(static_cast<double>(static_cast<float>(bfloat16(f))) == (f < 0 ? -want : want));
  }
  CHECK(float(half(65504.0f)) == 65504.0f);
  CHECK(std::isinf(float(half(65520.0f))));
  CHECK(float(half(1e-8f)) == 0.0f);
  CHECK(std::signbit(float(half(-0.0f))));
  CHECK(std::isinf(float(bfloat16(3.4e38f))));
  // Arithmetic runs in float: a + b is a float, assigned back it rounds once.
  half a = 1.0f, b = 0.0004f;
  half c = a + b;
  CHECK(float(c) == 1.0f);
  a += 0.5f;
  CHECK(float(a) == 1.5f);
}

TEST_CASE("dtypes: factories, element access and printing for every dtype") {
  for (int i = 0; i < kDTypeCount; ++i) {
    visit_dtype(static_cast<DType>(i), [&](auto tag) {
      using T = decltype(tag);
      CAPTURE(dtype_name<T>());
      const auto z = Tensor<T>::zeros({2, 3});
      CHECK(z.dtype() == dtype_of<T>());
      CHECK(z.shape() == Shape{2, 3});
      for (const T v : z.to_vector()) CHECK(v == T(0));
      const auto o = ones_like(z);
      for (const T v : o.to_vector()) CHECK(v == T(1));
      CHECK(Tensor<T>::full({4}, T(1)).to_vector() == std::vector<T>(4, T(1)));
      CHECK(Tensor<T>::empty({0, 5}).numel() == 0);
      CHECK(full_like(z, T(1)).to_vector()[5] == T(1));
      const auto from = Tensor<T>::from({T(0), T(1), T(1)}, {3});
      CHECK(from.to_vector() == std::vector<T>{T(0), T(1), T(1)});
      CHECK(from.select(0, 1).item() == T(1));
      CHECK(bool(from.select(0, 2)));
      CHECK_FALSE(bool(from.select(0, 0)));
      CHECK(str(z).find(std::string("dtype=") + dtype_name<T>()) != std::string::npos);
      if constexpr (!std::is_same_v<T, bool>) {
        const auto r = Tensor<T>::arange(5);
        CHECK(r.to_vector() == std::vector<T>{T(0), T(1), T(2), T(3), T(4)});
      }
      if constexpr (std::is_integral_v<T>) {
        const auto d = Tensor<T>::randint(0, 2, {1000});
        std::int64_t ones = 0;
        for (const T v : d.to_vector()) {
          CHECK((v == T(0) || v == T(1)));
          ones += v == T(1);
        }
        CHECK(ones > 400);
        CHECK(ones < 600);
      } else {
        const auto n = Tensor<T>::randn({1000}).template to<double>();
        CHECK(std::abs(n.mean().item()) < 0.15);
        CHECK(std::abs(n.std().item() - 1) < 0.1);
      }
    });
  }
}

TEST_CASE("dtypes: printing as PyTorch does per kind") {
  CHECK(str(Tensor<bool>::from({true, false, true}, {3})) == "tensor([ True, False,  True], dtype=bool, shape=[3])");
  CHECK(str(Tensor<std::int8_t>::from({-128, 5, 127}, {3})) == "tensor([-128,    5,  127], dtype=int8, shape=[3])");
  CHECK(str(Tensor<std::uint8_t>::from({0, 255}, {2})) == "tensor([  0, 255], dtype=uint8, shape=[2])");
  CHECK(str(Tensor<half>::from({half(1.5f), half(-0.25f)}, {2})) == "tensor([ 1.5000, -0.2500], dtype=float16, shape=[2])");
  CHECK(str(Tensor<bfloat16>::full({2}, bfloat16(3.0f))) == "tensor([3., 3.], dtype=bfloat16, shape=[2])");
  CHECK(str(Tensor<std::int32_t>::scalar(7)) == "tensor(7, dtype=int32, shape=[])");
}

TEST_CASE("dtypes: casts between every pair of dtypes equal PyTorch's, bit for bit (NaN payloads aside)") {
  const auto f = SafetensorsFile::open(reference_path());
  int checked = 0;
  for (int s = 0; s < kDTypeCount; ++s) {
    const std::string sn = dtype_name(static_cast<DType>(s));
    const AnyTensor src = f.get_any("src." + sn);
    REQUIRE(src.dtype() == static_cast<DType>(s));  // the file's dtype, exactly as stored
    for (int d = 0; d < kDTypeCount; ++d) {
      const auto dt = static_cast<DType>(d);
      const std::string key = "cast." + sn + "." + dtype_name(dt);
      CAPTURE(key);
      const AnyTensor want = f.get_any(key);
      const AnyTensor got = src.to(dt);
      REQUIRE(got.dtype() == dt);
      CHECK(same_values(got, want));
      ++checked;
      if (f.contains("special." + sn + "." + dtype_name(dt))) {  // inf, -inf and NaN
        const AnyTensor sp = f.get_any("special." + sn);
        CHECK(same_values(sp.to(dt), f.get_any("special." + sn + "." + dtype_name(dt))));
      }
    }
  }
  CHECK(checked == 100);
}

TEST_CASE("dtypes: what C++ leaves undefined in float-to-integer casts is defined (frost's documented choice)") {
  const auto x = TD::from({NAN, INFINITY, -INFINITY, 1e30, -1e30, 3e9, -3e9, -1.0, 300.0});
  // int64 and int32: NaN is the lowest value, beyond the range saturates.
  CHECK(x.to<std::int64_t>().to_vector() ==
        std::vector<std::int64_t>{INT64_MIN, INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN, 3000000000, -3000000000, -1, 300});
  CHECK(x.to<std::int32_t>().to_vector() == std::vector<std::int32_t>{INT32_MIN, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN,
                                                                       INT32_MAX, INT32_MIN, -1, 300});
  // Narrower: through int32, then wrapped, as PyTorch's CPU (uint8(-1.0) = 255, uint8(300.0) = 44).
  CHECK(x.to<std::uint8_t>().to_vector() == std::vector<std::uint8_t>{0, 255, 0, 255, 0, 255, 0, 255, 44});
  CHECK(x.to<std::int8_t>().to_vector() == std::vector<std::int8_t>{0, -1, 0, -1, 0, -1, 0, -1, 44});
  CHECK(x.to<std::int16_t>().to_vector() == std::vector<std::int16_t>{0, -1, 0, -1, 0, -1, 0, -1, 300});
  CHECK(x.to<bool>().to_vector() == std::vector<bool>{true, true, true, true, true, true, true, true, true});
  // Through float16 and bfloat16 the same rules apply to the float value.
  CHECK(x.to<half>().to<std::int32_t>().to_vector() == std::vector<std::int32_t>{INT32_MIN, INT32_MAX, INT32_MIN, INT32_MAX,
                                                                                  INT32_MIN, INT32_MAX, INT32_MIN, -1, 300});
  // Integer to narrower integer wraps (two's complement); int64 to float rounds.
  CHECK(Tensor<std::int64_t>::from({257, -1, 65536 + 5}).to<std::uint8_t>().to_vector() == std::vector<std::uint8_t>{1, 255, 5});
  CHECK(Tensor<std::int64_t>::from({16777217}).to<float>().item() == 16777216.0f);
}

TEST_CASE("dtypes: AnyTensor holds a tensor of any dtype, checked on the way out") {
  const auto x = TF::from({1.5f, -2.25f, 0.0f});
  const AnyTensor a = x.to(DType::bfloat16);
  CHECK(a.dtype() == DType::bfloat16);
  CHECK(a.is<bfloat16>());
  CHECK(a.shape() == Shape{3});
  CHECK(a.numel() == 3);
  CHECK(a.device() == Device::cpu());
  CHECK(a.to<float>().to_vector() == std::vector<float>{1.5f, -2.25f, 0.0f});
  CHECK(a.to(DType::bool_).as<bool>().to_vector() == std::vector<bool>{true, true, false});
  CHECK(a.visit([](const auto& t) { return t.numel(); }) == 3);
  const std::string m = error_of([&] { (void)a.as<float>(); });
  CHECK(m.find("AnyTensor::as: the tensor is bfloat16, not float32") != std::string::npos);
  const AnyTensor same = x;
  CHECK(same.as<float>().is_same(x));  // shared, not copied
  CHECK(error_of([] { (void)AnyTensor().shape(); }).find("undefined") != std::string::npos);
  std::ostringstream o;
  o << a;
  CHECK(o.str() == "tensor([ 1.5000, -2.2500,  0.0000], dtype=bfloat16, shape=[3])");
  // A strided view converts in row-major order.
  const auto t = Tensor<std::int32_t>::from({1, 2, 3, 4, 5, 6}, {2, 3}).t();
  CHECK(t.to<double>().to_vector() == std::vector<double>{1, 4, 2, 5, 3, 6});
}

TEST_CASE("dtypes: safetensors files keep every dtype exactly, mixed in one file") {
  std::vector<std::pair<std::string, AnyTensor>> named;
  for (int i = 0; i < kDTypeCount; ++i) {
    const auto d = static_cast<DType>(i);
    named.emplace_back(std::string("t.") + dtype_name(d), TD::from({0.0, 1.0, -2.5, 300.75, 1e-6, -65504.0}, {2, 3}).to(d));
  }
  const std::string path = temp_path("dtypes.safetensors");
  save_safetensors(named, path);
  const auto f = SafetensorsFile::open(path);
  const auto back = load_safetensors_any(path);
  REQUIRE(back.size() == named.size());
  for (std::size_t i = 0; i < named.size(); ++i) {
    CAPTURE(named[i].first);
    CHECK(back[i].first == named[i].first);
    CHECK(back[i].second.dtype() == named[i].second.dtype());
    CHECK(back[i].second.shape() == Shape{2, 3});
    CHECK(bytes_of(back[i].second) == bytes_of(named[i].second));
    CHECK(f.info(named[i].first).dtype == detail::safetensors::dtype_string(named[i].second.dtype()));
  }
  std::filesystem::remove(path);
  // Typed reads convert within a kind: F16 to float, I8 to int64, U8 to int32.
  CHECK(f.get<float>("t.float16").to_vector() == std::vector<float>{0, 1, -2.5f, 300.75f, float(half(1e-6f)), -65504});
  CHECK(f.get<std::int64_t>("t.int8").to_vector() == std::vector<std::int64_t>{0, 1, -2, 44, 0, 32});
  CHECK(f.get<bfloat16>("t.float64").to<double>().to_vector()[3] == 300.0);
  // ... and refuse values that do not fit, or crossing kinds.
  CHECK(error_of([&] { (void)f.get<std::int8_t>("t.int16"); }).find("holds 300 at element 3, which does not fit in int8") !=
        std::string::npos);
  CHECK(error_of([&] { (void)f.get<bool>("t.int32"); }).find("does not fit in bool") != std::string::npos);
  CHECK(error_of([&] { (void)f.get<half>("t.int32"); }).find("does not load as float16") != std::string::npos);
}

TEST_CASE("dtypes: a file PyTorch wrote loads in its own dtypes; a BOOL byte other than 0 or 1 is rejected") {
  const auto all = load_safetensors_any(reference_path());
  CHECK(all.size() == 134);
  const auto f = SafetensorsFile::open(reference_path());
  CHECK(f.get_any("src.bfloat16").dtype() == DType::bfloat16);
  CHECK(f.get_any("src.bool").as<bool>().to_vector() == std::vector<bool>{false, true, true, false});
  CHECK(f.get_any("src.int16").as<std::int16_t>().to_vector()[4] == 127);
  // A BOOL tensor whose byte is 2.
  std::vector<std::pair<std::string, AnyTensor>> one{{"m", Tensor<std::uint8_t>::from({0, 2, 1})}};
  auto bytes = serialize_safetensors(one);
  const std::string header(bytes.begin() + 8, bytes.end() - 3);
  std::string patched = header;
  patched.replace(patched.find("\"U8\""), 4, "\"BOOL\"");
  std::vector<std::uint8_t> img(8);
  const std::uint64_t n = patched.size();
  std::memcpy(img.data(), &n, 8);
  img.insert(img.end(), patched.begin(), patched.end());
  img.insert(img.end(), {0, 2, 1});
  const auto g = SafetensorsFile::from_bytes(img, "patched");
  CHECK(error_of([&] { (void)g.get_any("m"); }).find("tensor 'm' (BOOL) holds byte 2 at element 1 (expected 0 or 1)") !=
        std::string::npos);
  CHECK(error_of([&] { (void)g.get<std::int64_t>("m"); }).find("holds byte 2") != std::string::npos);
}

TEST_CASE("dtypes: integer and bool tensors refuse gradients; casts among floating dtypes carry them") {
  auto i = Tensor<std::int32_t>::zeros({2});
  CHECK(error_of([&] { i.requires_grad_(); }).find("a tensor of dtype int32 (shape [2]) cannot require grad: only "
                                                   "floating-point tensors (float16, bfloat16, float32, float64) can") !=
        std::string::npos);
  CHECK(Tensor<half>::zeros({2}).requires_grad_().requires_grad());
  // A cast to an integer dtype gives a result with no history; one to a
  // floating dtype hands the gradient back, cast to the source's dtype.
  auto x = TF::ones({2}).requires_grad_();
  CHECK_FALSE(x.to<std::int32_t>().requires_grad());
  auto y = x.to<half>();
  REQUIRE(y.requires_grad());
  (y.to<bfloat16>() * 3.0f).sum().backward();
  CHECK(x.grad().to_vector() == std::vector<float>{3.0f, 3.0f});
}

TEST_CASE("dtypes: a traced forward that makes a bool tensor freezes into a plan holding it") {
  auto f = [](const TF& x) { return x * Tensor<bool>::ones({1}).to<float>(); };
  const auto plan = jit::freeze(f, TF::ones({2}));
  CHECK(jit::trace(f, TF::ones({2})).str().find("Bool[1]") != std::string::npos);
  CHECK(plan.run(TF::full({2}, 3.0f)).to_vector() == std::vector<float>{3.0f, 3.0f});
}
