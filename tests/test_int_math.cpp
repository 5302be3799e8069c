// Integer and bool math against PyTorch 2.15's values
// (tests/reference/int_math_reference.py): arithmetic with wraparound,
// rounded division, remainder / fmod, bitwise ops and shifts, reductions
// into int64, comparisons into bool; torch.result_type's promotion table;
// floating remainder / fmod / floor division with their gradients; and the
// errors (division by zero, scalars that do not fit, negative powers).
#include <cmath>
#include <cstring>

#include "support.hpp"

using namespace frost;
using namespace frost::test;

namespace {

const SafetensorsFile& reference() {
  static const SafetensorsFile f = SafetensorsFile::open(test_data_path("int_math_reference.safetensors"));
  return f;
}

template <class T>
Tensor<T> ref(const std::string& name) {
  return reference().get<T>(name);
}

/// Exactly equal: same dtype (static), shape and every element.
template <class T>
void check_equal(const Tensor<T>& got, const Tensor<T>& want, const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  const auto g = got.to_vector(), w = want.to_vector();
  std::size_t bad = 0;
  for (std::size_t i = 0; i < g.size(); ++i)
    if (!(g[i] == w[i] || (std::isnan(double(g[i])) && std::isnan(double(w[i]))))) {
      if (bad++ == 0) FAIL_CHECK(what << ": element " << i << " is " << +g[i] << ", PyTorch's " << +w[i]);
    }
  CHECK(bad == 0);
}

template <class T>
void check_int_dtype(const std::string& n) {
  const auto a = ref<T>("a." + n), b = ref<T>("b." + n);
  check_equal(a + b, ref<T>("add." + n), "add." + n);
  check_equal(a - b, ref<T>("sub." + n), "sub." + n);
  check_equal(a * b, ref<T>("mul." + n), "mul." + n);
  check_equal(div(a, b, "floor"), ref<T>("floordiv." + n), "floordiv." + n);
  check_equal(floor_divide(a, b), ref<T>("floordiv." + n), "floor_divide." + n);
  check_equal(div(a, b, "trunc"), ref<T>("truncdiv." + n), "truncdiv." + n);
  check_equal(remainder(a, b), ref<T>("remainder." + n), "remainder." + n);
  check_equal(a % b, ref<T>("remainder." + n), "operator%." + n);
  check_equal(fmod(a, b), ref<T>("fmod." + n), "fmod." + n);
  check_close(a / b, ref<float>("truediv." + n), 0, 0);
  check_equal(a & b, ref<T>("and." + n), "and." + n);
  check_equal(a | b, ref<T>("or." + n), "or." + n);
  check_equal(a ^ b, ref<T>("xor." + n), "xor." + n);
  check_equal(maximum(a, b), ref<T>("maximum." + n), "maximum." + n);
  check_equal(minimum(a, b), ref<T>("minimum." + n), "minimum." + n);

  const auto v = ref<T>("v." + n);
  check_equal(~v, ref<T>("not." + n), "not." + n);
  check_equal(-v, ref<T>("neg." + n), "neg." + n);
  check_equal(v.abs(), ref<T>("abs." + n), "abs." + n);
  check_equal(v.sign(), ref<T>("sign." + n), "sign." + n);
  const T lo = std::is_same_v<T, std::uint8_t> ? T(2) : T(-100);
  check_equal(v.clamp(lo, T(100)), ref<T>("clamp." + n), "clamp." + n);
  check_equal(v * 3, ref<T>("mulscalar." + n), "mulscalar." + n);
  check_close(v * 2.5, ref<float>("mulfloat." + n), 0, 0);

  const auto sx = ref<T>("shx." + n), sh = ref<T>("shift." + n);
  check_equal(sx << sh, ref<T>("lshift." + n), "lshift." + n);
  check_equal(sx >> sh, ref<T>("rshift." + n), "rshift." + n);
  check_equal(pow(ref<T>("powx." + n), ref<T>("powe." + n)), ref<T>("pow." + n), "pow." + n);

  check_equal(v.sum(), ref<std::int64_t>("sum." + n), "sum." + n);
  check_equal(v.narrow(0, 0, 6).prod(), ref<std::int64_t>("prod." + n), "prod." + n);
  check_equal(v.max(), ref<T>("max." + n), "max." + n);
  check_equal(v.min(), ref<T>("min." + n), "min." + n);
  check_equal(v.argmax(), ref<std::int64_t>("argmax." + n), "argmax." + n);
  check_equal(v.argmin(), ref<std::int64_t>("argmin." + n), "argmin." + n);

  // Comparisons give bool, and agree with the ordering of the values.
  const auto lt = a < b, ge = a >= b, eq = a == b;
  static_assert(std::is_same_v<decltype(lt), const Tensor<bool>>);
  const auto av = a.to_vector(), bv = b.to_vector();
  const auto ltv = lt.to_vector(), gev = ge.to_vector(), eqv = eq.to_vector();
  for (std::size_t i = 0; i < av.size(); ++i) {
    CHECK(ltv[i] == (av[i] < bv[i]));
    CHECK(gev[i] == (av[i] >= bv[i]));
    CHECK(eqv[i] == (av[i] == bv[i]));
  }
}

}  // namespace

TEST_CASE("integer arithmetic, division, bitwise ops and reductions match PyTorch for every integer dtype") {
  check_int_dtype<std::uint8_t>("uint8");
  check_int_dtype<std::int8_t>("int8");
  check_int_dtype<std::int16_t>("int16");
  check_int_dtype<std::int32_t>("int32");
  check_int_dtype<std::int64_t>("int64");
}

TEST_CASE("integer MIN / -1 wraps (PyTorch's CPU dies of SIGFPE there)") {
  const auto m32 = Tensor<std::int32_t>::full({2}, std::numeric_limits<std::int32_t>::min());
  const auto m1 = Tensor<std::int32_t>::full({2}, -1);
  CHECK(div(m32, m1, "trunc").to_vector()[0] == std::numeric_limits<std::int32_t>::min());
  CHECK(div(m32, m1, "floor").to_vector()[0] == std::numeric_limits<std::int32_t>::min());
  CHECK(remainder(m32, m1).to_vector()[0] == 0);
  CHECK(fmod(m32, m1).to_vector()[0] == 0);
  const auto m64 = Tensor<std::int64_t>::full({1}, std::numeric_limits<std::int64_t>::min());
  CHECK(div(m64, Tensor<std::int64_t>::full({1}, -1), "floor").item() == std::numeric_limits<std::int64_t>::min());
  CHECK((-m64).item() == std::numeric_limits<std::int64_t>::min());
  CHECK(m64.abs().item() == std::numeric_limits<std::int64_t>::min());
}

TEST_CASE("bool tensors: bitwise ops, sums into int64, promotion with scalars") {
  const auto a = ref<bool>("bool.a"), b = ref<bool>("bool.b");
  check_equal(a & b, ref<bool>("bool.and"), "and");
  check_equal(a | b, ref<bool>("bool.or"), "or");
  check_equal(a ^ b, ref<bool>("bool.xor"), "xor");
  check_equal(~a, ref<bool>("bool.not"), "not");
  check_equal(a.sum(), ref<std::int64_t>("bool.sum"), "sum");
  check_equal(a.prod(), ref<std::int64_t>("bool.prod"), "prod");
  check_equal(a + 2, ref<std::int64_t>("bool.addint"), "bool + int");
  check_equal(logical_and(a, b), ref<bool>("bool.and"), "logical_and");
  check_equal(logical_or(a, b.to<float>()), ref<bool>("bool.or"), "logical_or of bool and float");
  check_equal(logical_xor(a.to<std::int32_t>(), b), ref<bool>("bool.xor"), "logical_xor");
  check_equal(logical_not(a.to<double>()), ref<bool>("bool.not"), "logical_not");
  CHECK(any(a).item());
  CHECK_FALSE(all(a).item());
  CHECK(all(Tensor<float>::ones({3})).item());
  CHECK_FALSE(any(Tensor<std::int32_t>::zeros({0})).item());
  CHECK(all(Tensor<std::int32_t>::zeros({0})).item());
  const auto m = Tensor<std::int32_t>::from({1, 0, 0, 3, 0, 0}, {2, 3});
  CHECK(any(m, {1}).to_vector() == std::vector<bool>{true, true});
  CHECK(all(m, {0}, true).shape() == Shape{1, 3});
  CHECK(all(m, {0}).to_vector() == std::vector<bool>{true, false, false});
}

TEST_CASE("where and masked_fill take bool conditions; mixed dtypes promote") {
  const auto cond = Tensor<std::int32_t>::from({1, 5, -2, 7}) > 2;
  const auto x = Tensor<float>::from({1, 2, 3, 4}).requires_grad_();
  const auto y = where(cond, x, Tensor<float>::zeros({4}));
  CHECK(y.to_vector() == std::vector<float>{0, 2, 0, 4});
  y.sum().backward();
  CHECK(x.grad().to_vector() == std::vector<float>{0, 1, 0, 1});
  const auto w = where(cond, Tensor<std::int32_t>::from({1, 2, 3, 4}), Tensor<double>::from({-1, -1, -1, -1}));
  static_assert(std::is_same_v<decltype(w), const Tensor<double>>);
  CHECK(w.to_vector() == std::vector<double>{-1, 2, -1, 4});
  CHECK(masked_fill(Tensor<std::int64_t>::from({1, 2, 3, 4}), cond, 9).to_vector() ==
        std::vector<std::int64_t>{1, 9, 3, 9});
  CHECK(Tensor<float>::from({1, 2, 3, 4}).masked_fill(cond.to<float>(), -1).to_vector() ==
        std::vector<float>{1, -1, 3, -1});
  CHECK(masked_fill(Tensor<float>::from({1, 2, 3, 4}), cond, -1.f).to_vector() == std::vector<float>{1, -1, 3, -1});

  // Tensor op Tensor of another dtype computes in torch.result_type.
  const auto i32 = Tensor<std::int32_t>::from({1, 2});
  const auto i64 = Tensor<std::int64_t>::from({10, 20});
  const auto s = i32 + i64;
  static_assert(std::is_same_v<decltype(s), const Tensor<std::int64_t>>);
  CHECK(s.to_vector() == std::vector<std::int64_t>{11, 22});
  const auto f = i32 * Tensor<float>::from({0.5f, 0.25f});
  static_assert(std::is_same_v<decltype(f), const Tensor<float>>);
  CHECK(f.to_vector() == std::vector<float>{0.5f, 0.5f});
  const auto u = Tensor<std::uint8_t>::from({200}) + Tensor<std::int8_t>::from({100});
  static_assert(std::is_same_v<decltype(u), const Tensor<std::int16_t>>);
  CHECK(u.item() == 300);
  // float with double: double, and the gradient reaches the float input.
  const auto xf = Tensor<float>::from({2}).requires_grad_();
  const auto z = xf * Tensor<double>::from({3});
  static_assert(std::is_same_v<decltype(z), const Tensor<double>>);
  z.sum().backward();
  CHECK(xf.grad().item() == 3.f);
  // Scalars: an int tensor with a double scalar is float32; with an int it keeps its dtype.
  static_assert(std::is_same_v<decltype(i32 * 2.5), Tensor<float>>);
  static_assert(std::is_same_v<decltype(i32 * 2), Tensor<std::int32_t>>);
  static_assert(std::is_same_v<decltype(i32 / 2), Tensor<float>>);
  CHECK((i32 / 2).to_vector() == std::vector<float>{0.5f, 1.f});
  CHECK((5 - i32).to_vector() == std::vector<std::int32_t>{4, 3});
  CHECK((i32 - 5).to_vector() == std::vector<std::int32_t>{-4, -3});
  CHECK((i32 > 1.5).to_vector() == std::vector<bool>{false, true});
  CHECK((i32 == 2).to_vector() == std::vector<bool>{false, true});
  CHECK((Tensor<std::int8_t>::from({1}) < 1000).item());  // beyond int8: compared exactly
  CHECK(pow(i32, 3).to_vector() == std::vector<std::int32_t>{1, 8});
  CHECK(pow(i32, 0.5).to_vector()[1] == doctest::Approx(std::sqrt(2.0)));
}

TEST_CASE("torch.result_type over every pair of dtypes and scalar kinds") {
  const auto t = ref<std::uint8_t>("promote.tensor").to_vector(), w = ref<std::uint8_t>("promote.where").to_vector();
  const auto s = ref<std::uint8_t>("promote.scalar").to_vector();
  for (int i = 0; i < kDTypeCount; ++i) {
    const auto a = static_cast<DType>(i);
    for (int j = 0; j < kDTypeCount; ++j) {
      const auto b = static_cast<DType>(j);
      INFO(dtype_name(a), " with ", dtype_name(b));
      CHECK(dtype_name(promote_types(a, b)) == dtype_name(static_cast<DType>(t[std::size_t(i * kDTypeCount + j)])));
      CHECK(dtype_name(promote_types(a, b)) == dtype_name(static_cast<DType>(w[std::size_t(i * kDTypeCount + j)])));
    }
    const ScalarKind kinds[] = {ScalarKind::boolean, ScalarKind::integer, ScalarKind::floating};
    for (int k = 0; k < 3; ++k) {
      INFO(dtype_name(a), " with scalar kind ", k);
      CHECK(dtype_name(promote_scalar(a, kinds[k])) == dtype_name(static_cast<DType>(s[std::size_t(i * 3 + k)])));
    }
  }
  static_assert(std::is_same_v<promote_t<std::int32_t, std::int64_t>, std::int64_t>);
  static_assert(std::is_same_v<promote_t<bool, std::int8_t>, std::int8_t>);
  static_assert(std::is_same_v<promote_t<half, float>, float>);
  static_assert(std::is_same_v<promote_t<bfloat16, half>, float>);
  static_assert(std::is_same_v<promote_scalar_t<std::int32_t, double>, float>);
  static_assert(std::is_same_v<promote_scalar_t<half, double>, half>);
}

TEST_CASE("integer math errors: division by zero, scalars that do not fit, negative powers, float-only ops") {
  const auto a = Tensor<std::int32_t>::from({1, 2, 3}), z = Tensor<std::int32_t>::from({1, 0, 1});
  for (auto* op : {"div", "remainder", "fmod"}) {
    const std::string e = error_of([&] {
      if (std::string(op) == "div") (void)div(a, z, "floor");
      else if (std::string(op) == "remainder") (void)remainder(a, z);
      else (void)fmod(a, z);
    });
    CHECK(e.find(std::string("frost::") + op + ": integer division by zero") != std::string::npos);
    CHECK(e.find("int32") != std::string::npos);
  }
  CHECK(error_of([&] { (void)(a % 0); }).find("division by zero") != std::string::npos);
  CHECK(error_of([&] { (void)div(a, a, "round"); }).find("rounding_mode") != std::string::npos);
  CHECK(error_of([&] { (void)(Tensor<std::int8_t>::from({1}) + 300); }).find("does not fit the int8") != std::string::npos);
  CHECK(error_of([&] { (void)pow(a, -1); }).find("negative integer powers") != std::string::npos);
  CHECK(error_of([&] { (void)Tensor<std::int32_t>::from({1}).requires_grad_(); }).find("int32") != std::string::npos);
  // A kernel integers do not have, asked of the backend directly.
  const auto y = Tensor<std::int32_t>::empty({3});
  const std::string e = error_of([&] { cpu_backend<std::int32_t>().unary(UnaryOp::exp, a.view_of(), y.view_of(), 0, 0); });
  CHECK(e.find("frost::exp: not defined for int32 tensors") != std::string::npos);
}

TEST_CASE("floating remainder, fmod and rounded division match PyTorch, with gradients") {
  auto run = [](auto tag, const std::string& n) {
    using T = decltype(tag);
    const auto a = ref<T>("fa." + n), b = ref<T>("fb." + n);
    check_equal(remainder(a, b), ref<T>("fremainder." + n), "remainder." + n);
    check_equal(fmod(a, b), ref<T>("ffmod." + n), "fmod." + n);
    check_equal(div(a, b, "floor"), ref<T>("ffloordiv." + n), "floordiv." + n);
    check_equal(div(a, b, "trunc"), ref<T>("ftruncdiv." + n), "truncdiv." + n);
  };
  run(float{}, "float32");
  run(double{}, "float64");
  // Away from the jumps: d remainder = (1, -floor(a / b)), d fmod = (1, -trunc(a / b)), rounded division 0.
  const TD a = TD::from({5.3, -7.1, 2.2, 9.4}), b = TD::from({2.1, 1.7, -0.9, -4.4});
  CHECK(gradcheck([](const std::vector<TD>& x) { return remainder(x[0], x[1]); }, {a, b}));
  CHECK(gradcheck([](const std::vector<TD>& x) { return fmod(x[0], x[1]); }, {a, b}));
  CHECK(gradcheck([](const std::vector<TD>& x) { return div(x[0], x[1], "floor") * x[0]; }, {a, b}));
  CHECK(gradcheck([](const std::vector<TD>& x) { return remainder(x[0], 1.5); }, {a}));
}

TEST_CASE("int64 math in a traced forward freezes into plan steps equal to eager") {
  // Hashing token ids into buckets, the integer work a language model does on
  // its inputs: wraps, rounded division, remainder, shifts and bitwise ops.
  auto f = [](const TF& x) {
    const auto ids = (x * 1000.0f).to<std::int64_t>();
    auto h = (ids * 2654435761LL) ^ (ids >> 3);
    h = remainder(h, 97) + div(ids, Tensor<std::int64_t>::full({}, 7), "floor") - (ids & 15) + (ids << 2);
    return h.to<float>() + maximum(ids, -ids).to<float>() + x;
  };
  manual_seed(9);
  const auto x = TF::randn({8});
  const auto g = jit::trace(f, x);
  auto plan = jit::freeze<float>(g);
  for (const auto& in : {x, TF::randn({8}), TF::randn({8}) * 100.0f}) CHECK(plan.run(in).to_vector() == f(in).to_vector());
  // The zero-divisor check is a guard: a plan run with a zero divisor is an Error.
  auto divide = [](const TF& v) { return remainder(Tensor<std::int64_t>::full({3}, 10), v.to<std::int64_t>()).to<float>(); };
  auto pd = jit::freeze<float>(jit::trace(divide, TF::from({3, 4, 6})));
  CHECK(pd.run(TF::from({7, 2, 3})).to_vector() == std::vector<float>{3, 0, 1});
  CHECK_THROWS_AS(pd.run(TF::from({7, 0, 3})), Error);
  // int32 work freezes too, wrapping as eager does.
  auto narrow = [](const TF& v) { return (v.to<std::int32_t>() * 1000000 + 1).to<float>(); };
  const auto pn = jit::freeze(narrow, x);
  for (const auto& in : {x, TF::randn({8}) * 3000.0f}) CHECK(pn.run(in).to_vector() == narrow(in).to_vector());
}

TEST_CASE("bool masks select: nonzero, masked_select, x.index(mask), with gradients") {
  const auto x = TD::from({1, -2, 3, -4, 5, -6}, {2, 3}).requires_grad_();
  const auto pos = x > 0.0;  // float comparisons still give 0/1 floats
  const auto mask = pos.to<bool>();
  CHECK(nonzero(mask).to_vector() == std::vector<std::int64_t>{0, 0, 0, 2, 1, 1});
  CHECK(nonzero(mask).shape() == Shape{3, 2});
  CHECK(nonzero(Tensor<std::int32_t>::zeros({4})).shape() == Shape{0, 1});
  const auto sel = masked_select(x, mask);
  CHECK(sel.to_vector() == std::vector<double>{1, 3, 5});
  sel.sum().backward();
  CHECK(x.grad().to_vector() == std::vector<double>{1, 0, 1, 0, 1, 0});
  // The mask broadcasts to x in masked_select; x.index(mask) takes x's leading dims.
  const auto row = Tensor<std::int64_t>::from({1, 0, 1}) == 1;
  CHECK(masked_select(x.detach(), row).to_vector() == std::vector<double>{1, 3, -4, -6});
  const auto rows = Tensor<std::int64_t>::from({0, 1}) != 0;
  CHECK(x.index(rows).to_vector() == std::vector<double>{-4, 5, -6});
  CHECK(x.index(rows).shape() == Shape{1, 3});
  CHECK(x.detach().index(mask).to_vector() == std::vector<double>{1, 3, 5});
  CHECK(index(Tensor<std::int32_t>::from({7, 8, 9}), Tensor<std::int32_t>::from({1, 0, 1}) > 0).to_vector() ==
        std::vector<std::int32_t>{7, 9});
  CHECK(gradcheck([&](const std::vector<TD>& v) { return masked_select(v[0], mask); }, {x.detach()}));
  CHECK(error_of([&] { (void)x.index(Tensor<bool>::ones({3})); }).find("does not match the leading dims") !=
        std::string::npos);
}
