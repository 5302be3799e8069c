// nn::functional normalization, dropout and embedding: values and gradients
// against PyTorch (tests/reference/functional_reference.py), plain-loop
// references, running-stat updates, gradchecks in double, dropout statistics
// and bad input.
#include "support.hpp"

#include <frost/nn/functional/dropout.hpp>
#include <frost/nn/functional/embedding.hpp>
#include <frost/nn/functional/normalization.hpp>

using namespace frost;
using namespace frost::test;
namespace F = frost::nn::functional;

namespace {

// Closed-form inputs shared with the reference script: sin(a i + b) (1 + scale i) + shift.
TD wave(std::int64_t n, double a, double b, double scale, double shift, const Shape& s) {
  auto i = TD::arange(static_cast<double>(n));
  return ((i * a + b).sin() * (i * scale + 1.0) + shift).reshape(s);
}

// y and the gradients of sum(y * cos(0.3 i)) w.r.t. each input, as the script computes them.
std::vector<TD> value_and_grads(const std::function<TD(const std::vector<TD>&)>& f, std::vector<TD> xs) {
  for (auto& x : xs) x = x.detach().clone().requires_grad_();
  auto y = f(xs);
  (y * (TD::arange(static_cast<double>(y.numel())) * 0.3).cos().reshape(y.shape())).sum().backward();
  std::vector<TD> out{y};
  for (auto& x : xs) out.push_back(x.grad());
  return out;
}

void check_against(const std::vector<TD>& got, const std::vector<std::vector<double>>& expect) {
  REQUIRE(got.size() == expect.size());
  for (std::size_t k = 0; k < got.size(); ++k) {
    CAPTURE(k);
    check_close(got[k], expect[k], 1e-10, 1e-9);
  }
}

// PyTorch reference values (tests/reference/functional_reference.py).
const std::vector<double> bn_train_y = {
    0.6988745847672629, 1.1818683330110957, 1.6235683764511755, 1.9537742397522104, 2.1131759371760777,
    2.0633598018115533, -0.06928701001139166, 0.06030647930551054, 0.23000870956070585, 0.41810332925264143,
    0.5986420372693902, 0.7450229609739526, -1.4559311676725057, -1.5094168667608094, -1.2722645215781543,
    -0.7607052623490804, -0.03149264708087983, 0.8240890712110999, -0.04074593843764302, -0.25111876913219333,
    -0.3994130578671618, -0.46147904941434775, -0.4242315120421546, -0.28805484025583133, 1.7874287610411432,
    0.7866294817581946, -0.2897770444917878, -1.294222931931921, -2.0828599673393957, -2.536098177775277,
    1.1452769777785299, 1.035529732271562, 0.8152567372961169, 0.5108241854940078, 0.16140538982742847,
    -0.18604636186912243};
const std::vector<double> bn_train_g0 = {
    0.9278092035838899, 0.6667744145824839, 0.31343867836776573, -0.0876745214299767, -0.48816638395872375,
    -0.8420707981112696, 0.13059224865187694, 0.16661584578651029, 0.1669806718167121, 0.1348501101223956,
    0.07755211190765225, 0.005310263590868016, -0.6022490438985588, -0.3600881866351489, -0.15708684616260132,
    -0.01346655654035982, 0.06260501697896773, 0.07535493872356977, -0.19122249940366354, -0.16014476460367094,
    -0.13268657472964296, -0.11661470473451305, -0.11704022433484482, -0.13535941472510893, -0.03459349040995372,
    0.05085316980968235, 0.1283665980115494, 0.16934743442739086, 0.14731790480632576, 0.043528467854967154,
    -0.21704362275313324, -0.13458373296348394, -0.029918171308217195, 0.0843430456910897, 0.19215476504399387,
    0.2762146469451805};
const std::vector<double> bn_train_g1 = {
    8.853804103079712, 12.278786226008474};
const std::vector<double> bn_train_g2 = {
    1.4745690127770406, -4.1226312232410605};
const std::vector<double> bn_eval_y = {
    0.607677081896021, 1.0694621970082736, 1.491766846181688, 1.8074731118417346, 1.959875356097717,
    1.9122466861876026, -0.47748525739858944, -0.3009647417452282, -0.06981173128094768, 0.18639372652913777,
    0.4323072056899435, 0.6316940442598854, -1.4525094651410262, -1.5036465653626272, -1.2769077650831115,
    -0.7878114729079614, -0.09061915373753922, 0.7273933023366178, -0.4386091942718556, -0.7251600136795397,
    -0.9271530648268318, -1.011693738051976, -0.9609585156390714, -0.7754709849738626, 1.6484319931641207,
    0.6915785927457293, -0.3375620813091031, -1.2979019644692642, -2.051909331027505, -2.485245497262401,
    1.1768838204677108, 1.0273960609317898, 0.7273601342619417, 0.31268968045259227, -0.16325696096557743,
    -0.6365242732158043};
const std::vector<double> bn_eval_g0 = {
    1.2291418088987527, 1.1742440203508306, 1.0144545106586462, 0.7640468008297008, 0.4453890658059486,
    0.08694605201427621, 0.1105568335504482, 0.24565876837638537, 0.3588167370567845, 0.4399226752622831,
    0.48173163108684297, 0.4805089350242292, -1.1022432619981344, -0.8922737455225999, -0.6026000727748955,
    -0.2590979302206072, 0.10754865878156314, 0.4645882464016998, -0.3088423754896838, -0.4061723222250819,
    -0.4672201050993241, -0.486532507483888, -0.4623844099909464, -0.39693289025044304, 0.7477500351901102,
    0.4260639615919377, 0.06631886323026827, -0.29935030166952614, -0.6382793956615815, -0.9201928921955699,
    0.4433571655315618, 0.4828181284982692, 0.47915038599990273, 0.43268156655038253, 0.3475625913953172,
    0.23139688507961667};
const std::vector<double> bn_eval_g1 = {
    8.401226512346735, 14.163355829290802};
const std::vector<double> bn_eval_g2 = {
    1.4745690127770406, -4.1226312232410605};
const std::vector<double> ln_y = {
    -0.45611623491976516, 0.43898990790537584, 1.300277938253251, 1.6626265933037083, 1.4708119396676436,
    0.9496067881876475, 0.19492337522069375, -0.6690270400875264, -1.2010908683019068, -1.0219594600363375,
    -0.27868227619060126, 0.6537383546130426, 0.6459101584039388, 1.2715219252514522, 1.3676635893536297,
    0.8848044715567072, 0.16321314279279056, -0.5281190296497533, -1.0982502283085318, -1.3059786795678308,
    -0.8648330394198461, 0.07278227884027538, 1.0050434839805416, 1.6414535715075982};
const std::vector<double> ln_g0 = {
    1.7078386886009282, 1.1978212091282463, 0.5065987453370183, -0.12701312475445672, -0.4469499259124791,
    -0.40190380511900486, -0.18313483637416458, -0.03131503470338532, -0.05683472312055893, -0.26376205891340293,
    -0.6611421157436203, -1.2402030184251203, -0.9411768625732838, -0.6137245290548707, -0.33290794498039783,
    -0.18808054395213317, -0.21522310114256238, -0.30281261393325687, -0.2681053661330524, -0.03228502403443401,
    0.31959672177114895, 0.6525483208502165, 0.8979124700378105, 1.0242584731448157};
const std::vector<double> ln_g1 = {
    -1.0353416056642195, -0.4751439851907616, 0.33837773716099895, 0.7744411584101011, 0.4947094855199505,
    -0.2705689625398977, -0.8884093639425072, -0.8143153184508639, -0.03077591700015542, 0.9158493029545709,
    1.3227592871843747, 0.8754285444552184};
const std::vector<double> ln_g2 = {
    0.10324158366585279, 0.22940418492546577, 0.3350747935689789, 0.4108141688398848, 0.44985673791612,
    0.44871494438068316, 0.407490781249547, 0.3298666802393022, 0.22277657110912052, 0.09578649436635411,
    -0.03975990464191581, -0.1717546697835075};
const std::vector<double> gn_y = {
    -2.055882724024949, -0.8663338320587068, 0.09174353102873227, 0.7500903109736975, 0.6271736972668205,
    0.5839776749027255, 0.3375807169149339, -0.10854073204386966, -1.2916144123346576, -0.9215315950419383,
    -0.49449917296192714, -0.03178258188462406, -0.7847530980965035, -1.7040607516182305, -2.5418856027761416,
    -3.248156071955419, 0.01774708807461054, -0.1885342290633078, -0.23932682664273636, -0.1256752375319386,
    0.07576870934031939, 0.8192584793997815, 1.7983712920135564, 2.9679544423835535, -1.7182875696969753,
    -1.147576896416958, -0.5794610442233705, -0.0451092213627146, 0.31256883489628734, 0.501740385152136,
    0.6331435270307906, 0.6977646187707951, -0.9934192387066412, -0.8560071674672863, -0.597898285268041,
    -0.22948333447383337, -0.3650086810677469, -1.431458936387612, -2.5866520901072767, -3.7704963442689676,
    1.8430357334549916, 1.152309604523682, 0.5649991032239152, 0.1156489550434817, -0.47335269638244104,
    -0.6411211973950066, -0.4734752382431865, 0.02910330988451891};
const std::vector<double> gn_g0 = {
    0.41124568949916274, 2.13138257025701, 2.9003745379483163, 2.678843844493846, 0.30634189486309715,
    -0.7957473863651856, -2.6062571112207564, -5.0261840394754875, -0.4474147893420334, 0.25033260705578286,
    0.8918131793109518, 1.4398593026830226, -2.2713479003100305, -1.1976796003335128, 0.026839321811360284,
    1.3075978791244594, -1.5047507615415006, -0.7068388279376308, -0.13983794616355016, 0.140961501069663,
    1.4719211295246897, 1.1524028508713204, 0.38213820297423773, -0.795996148797232, 0.10941466200087424,
    0.03646735953745328, -0.08211884058588825, -0.22541694539251356, -0.00023188322763822988, 0.03550608428365676,
    0.05806731678627319, 0.06831224659778279, 0.500998269301653, 0.3791339897257213, 0.15556054134063446,
    -0.15044162237192416, -1.2106317785780027, -0.524562280259176, 0.13678478688141915, 0.713158093959674,
    -0.028111933499449293, 0.1723490411578159, 0.23566026394711592, 0.15643175945299315, 0.8478027750975499,
    0.28011525634099743, -0.4338385743054697, -1.2304085881915527};
const std::vector<double> gn_g1 = {
    -3.8049323887520616, -2.4269274550023283, -5.9185663320174395, -0.03901801039403057, 1.0560847104581272,
    1.1299853460955804};
const std::vector<double> gn_g2 = {
    4.167679971500089, -3.4702441301999327, -6.682619712510297, -1.3727540158936398, 5.687763587214187,
    5.494764498807886};
const std::vector<double> emb_y = {
    0.0, 0.479425538604203, 0.8414709848078965, 0.1411200080598672, -0.35078322768961984, -0.7568024953079282,
    -0.27941549819892586, 0.21511998808781552, 0.6569865987187891, 0.1411200080598672, -0.35078322768961984,
    -0.7568024953079282, 0.9974949866040544, 0.9092974268256817, 0.5984721441039564, 0.0, 0.479425538604203,
    0.8414709848078965};
const std::vector<double> emb_g0 = {
    0.7892042005692204, 1.0428354725650524, 1.2033133576226587, -0.8967584163341472, -0.7259323042001402,
    -0.4902608213406994, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.2272020946930869, -0.5048461045998576, -0.7373937155412454};

/// Batch norm by loops: x [N, C, L] in double, biased variance.
std::vector<double> batch_norm_loop(const TD& x, const std::vector<double>& w, const std::vector<double>& b, double eps,
                                    std::vector<double>* mean_out = nullptr, std::vector<double>* var_out = nullptr) {
  const auto n = x.size(0), c = x.size(1), l = x.numel() / (x.size(0) * x.size(1));
  const auto v = x.contiguous().to_vector();
  std::vector<double> y(v.size());
  for (std::int64_t ch = 0; ch < c; ++ch) {
    double s = 0, ss = 0;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < l; ++j) s += v[static_cast<std::size_t>((i * c + ch) * l + j)];
    const double mean = s / double(n * l);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < l; ++j) {
        const double d = v[static_cast<std::size_t>((i * c + ch) * l + j)] - mean;
        ss += d * d;
      }
    const double var = ss / double(n * l);
    if (mean_out) mean_out->push_back(mean);
    if (var_out) var_out->push_back(var);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < l; ++j) {
        const auto k = static_cast<std::size_t>((i * c + ch) * l + j);
        y[k] = (v[k] - mean) / std::sqrt(var + eps) * w[static_cast<std::size_t>(ch)] + b[static_cast<std::size_t>(ch)];
      }
  }
  return y;
}

}  // namespace

TEST_CASE("batch_norm: training matches PyTorch, including gradients and running-stat updates") {
  const auto x = wave(36, 0.37, 0.1, 0.05, 0.5, {3, 2, 2, 3});
  const auto w = TD::from({1.5, -0.5}), b = TD::from({0.1, 0.2});
  auto rm = TD::from({0.2, -0.1}), rv = TD::from({1.5, 0.8});
  const auto got = value_and_grads(
      [&](const std::vector<TD>& in) { return F::batch_norm(in[0], rm, rv, in[1], in[2], true, 0.2, 1e-5); }, {x, w, b});
  check_against(got, {bn_train_y, bn_train_g0, bn_train_g1, bn_train_g2});
  check_close(rm, {0.18679964119428435, 0.059620864675411944}, 1e-12, 1e-12);
  check_close(rv, {1.4882874694661523, 1.0548287596073809}, 1e-12, 1e-12);
  CHECK(got[0].grad_fn_name() == std::string("batch_norm"));
  CHECK_FALSE(rm.requires_grad());

  // Evaluation with those running statistics (and another eps).
  check_against(value_and_grads(
                    [&](const std::vector<TD>& in) { return F::batch_norm(in[0], rm, rv, in[1], in[2], false, 0.2, 1e-3); },
                    {x, w, b}),
                {bn_eval_y, bn_eval_g0, bn_eval_g1, bn_eval_g2});
  // Evaluation leaves the running statistics alone.
  check_close(rm, {0.18679964119428435, 0.059620864675411944}, 1e-12, 1e-12);
}

TEST_CASE("batch_norm: plain-loop reference for [N, C], [N, C, L] and [N, C, H, W], float and double") {
  const std::vector<double> w{0.5, 2.0, -1.0}, b{0.25, -0.5, 1.0};
  for (const Shape& s : {Shape{5, 3}, Shape{4, 3, 7}, Shape{2, 3, 4, 5}}) {
    CAPTURE(s.str());
    const auto x = TD::randn(s) * 3.0 + 1.5;
    std::vector<double> mean, var;
    const auto expect = batch_norm_loop(x.reshape({s[0], 3, -1}), w, b, 1e-5, &mean, &var);
    auto rm = TD::zeros({3}), rv = TD::ones({3});
    check_close(F::batch_norm(x, rm, rv, TD::from(w), TD::from(b), true, 0.1), expect, 1e-10, 1e-10);
    const double n = double(x.numel() / 3);
    for (std::size_t c = 0; c < 3; ++c) {
      CHECK(rm.to_vector()[c] == doctest::Approx(0.1 * mean[c]).epsilon(1e-12));
      CHECK(rv.to_vector()[c] == doctest::Approx(0.9 + 0.1 * var[c] * n / (n - 1)).epsilon(1e-12));
    }
    // No running statistics: batch statistics in training and in evaluation alike.
    check_close(F::batch_norm(x, TD(), TD(), TD::from(w), TD::from(b), false), expect, 1e-10, 1e-10);
    // Float, with no affine parameters.
    const auto ones = std::vector<double>(3, 1.0), zeros = std::vector<double>(3, 0.0);
    const auto plain = batch_norm_loop(x.reshape({s[0], 3, -1}), ones, zeros, 1e-5);
    const auto yf = F::batch_norm(x.to<float>(), TF(), TF(), TF(), TF(), true);
    CHECK(closeness(yf.to<double>().to_vector(), plain, 1e-5, 1e-4) <= 1.0);
  }
  // A non-contiguous input (channels-last memory seen as [N, C, H, W]).
  const auto xt = TD::randn({2, 4, 5, 3}).permute({0, 3, 1, 2});
  check_close(F::batch_norm(xt, TD(), TD(), TD(), TD(), true),
              batch_norm_loop(xt.contiguous().reshape({2, 3, -1}), {1, 1, 1}, {0, 0, 0}, 1e-5), 1e-10, 1e-10);
}

TEST_CASE("batch_norm: nothing is recorded without requires_grad or under NoGradGuard") {
  const auto x = TD::randn({4, 3, 2});
  CHECK_FALSE(F::batch_norm(x, TD(), TD(), TD::ones({3}), TD::zeros({3}), true).requires_grad());
  NoGradGuard ng;
  const auto w = TD::ones({3}).requires_grad_();
  CHECK_FALSE(F::batch_norm(x, TD(), TD(), w, TD(), true).requires_grad());
}

TEST_CASE("layer_norm and group_norm match PyTorch") {
  const auto xl = wave(24, 0.61, -0.4, 0.02, 0.0, {2, 3, 4});
  auto wl = (TD::arange(12.0).sin() * 0.1 + 1.0).reshape({3, 4}), bl = (TD::arange(12.0) * 0.05).reshape({3, 4});
  check_against(value_and_grads([](const std::vector<TD>& in) { return F::layer_norm(in[0], {3, 4}, in[1], in[2]); },
                                {xl, wl, bl}),
                {ln_y, ln_g0, ln_g1, ln_g2});

  const auto xg = wave(48, 0.23, 0.7, 0.03, -0.2, {2, 6, 2, 2});
  const auto wg = TD::from({1.0, 0.5, -1.0, 2.0, 0.7, 1.2}), bg = TD::from({0.0, 0.1, 0.2, -0.3, 0.4, 0.5});
  check_against(value_and_grads([](const std::vector<TD>& in) { return F::group_norm(in[0], 3, in[1], in[2]); },
                                {xg, wg, bg}),
                {gn_y, gn_g0, gn_g1, gn_g2});
}

TEST_CASE("layer_norm and group_norm: plain-loop references") {
  const auto x = TD::randn({4, 6}) * 2.0 + 0.5;
  const auto xv = x.to_vector();
  std::vector<double> expect;
  for (std::size_t r = 0; r < 4; ++r) {
    double m = 0, v = 0;
    for (std::size_t j = 0; j < 6; ++j) m += xv[r * 6 + j] / 6;
    for (std::size_t j = 0; j < 6; ++j) v += (xv[r * 6 + j] - m) * (xv[r * 6 + j] - m) / 6;
    for (std::size_t j = 0; j < 6; ++j) expect.push_back((xv[r * 6 + j] - m) / std::sqrt(v + 1e-5));
  }
  check_close(F::layer_norm(x, {6}), expect, 1e-10, 1e-10);
  // Over all trailing dims of [N, C, L], layer_norm is group_norm with one group.
  const auto x3 = TD::randn({3, 4, 5});
  check_close(F::layer_norm(x3, {4, 5}), F::group_norm(x3, 1), 1e-12, 1e-12);
  // group_norm with C groups is instance normalization: batch norm of each sample alone.
  const auto xi = TD::randn({2, 3, 4, 4});
  for (std::int64_t i = 0; i < 2; ++i)
    check_close(F::group_norm(xi, 3).select(0, i).reshape({-1}),
                batch_norm_loop(xi.narrow(0, i, 1), {1, 1, 1}, {0, 0, 0}, 1e-5), 1e-10, 1e-10);
  // float agrees with double
  check_close(F::layer_norm(x3.to<float>(), {5}).to<double>(), F::layer_norm(x3, {5}), 1e-5, 1e-4);
}

TEST_CASE("normalization: gradcheck in double for input, weight and bias") {
  const auto x = TD::randn({3, 4, 2, 2}) * 1.5 + 0.3;
  const auto w = TD::randn({4}), b = TD::randn({4});
  CHECK(gradcheck([](const std::vector<TD>& in) { return F::batch_norm(in[0], TD(), TD(), in[1], in[2], true); },
                  {x, w, b}));
  CHECK(gradcheck([](const std::vector<TD>& in) { return F::batch_norm(in[0], TD(), TD(), TD(), TD(), true); }, {x}));
  CHECK(gradcheck([](const std::vector<TD>& in) { return F::batch_norm(in[0], TD(), TD(), TD(), in[1], true); },
                  {TD::randn({5, 4}), b}));
  const auto rm = TD::randn({4}), rv = TD::rand({4}) + 0.5;
  CHECK(gradcheck([&](const std::vector<TD>& in) { return F::batch_norm(in[0], rm, rv, in[1], in[2], false); },
                  {x, w, b}));
  CHECK(gradcheck([](const std::vector<TD>& in) { return F::layer_norm(in[0], {2, 2}, in[1], in[2]); },
                  {x, TD::randn({2, 2}), TD::randn({2, 2})}));
  CHECK(gradcheck([](const std::vector<TD>& in) { return F::layer_norm(in[0], {4}, in[1]); },
                  {TD::randn({3, 4}), TD::randn({4})}));
  CHECK(gradcheck([](const std::vector<TD>& in) { return F::group_norm(in[0], 2, in[1], in[2]); }, {x, w, b}));
}

TEST_CASE("normalization: second derivatives (gradcheck of the create_graph gradient)") {
  // f(x) = d/dx sum(c y^3): its own gradient needs the backward rule to be
  // differentiable in x, weight and the incoming gradient.
  auto grad_of = [](auto norm) {
    return [norm](const std::vector<TD>& in) {
      AutoGradMode on(true);
      std::vector<TD> xs = in;
      for (auto& t : xs)
        if (!t.requires_grad()) t = t.detach().requires_grad_();
      auto y = norm(xs);
      auto c = (TD::arange(static_cast<double>(y.numel())) * 0.7).sin().reshape(y.shape());
      return autograd::grad({(y * y * y * c).sum()}, {xs[0], xs[1]}, {}, true, true)[0];
    };
  };
  const auto x = TD::randn({4, 3, 2}) + 0.2;
  CHECK(gradcheck(grad_of([](const std::vector<TD>& in) { return F::batch_norm(in[0], TD(), TD(), in[1], TD(), true); }),
                  {x, TD::randn({3})}));
  CHECK(gradcheck(grad_of([](const std::vector<TD>& in) { return F::layer_norm(in[0], {3, 2}, in[1]); }),
                  {x, TD::randn({3, 2})}));
}

TEST_CASE("dropout: statistics, scaling, reproducibility and gradient") {
  const auto x = TF::ones({200000});
  manual_seed(7);
  const auto y = F::dropout(x, 0.3);
  const auto v = y.to_vector();
  std::size_t zeros = 0;
  bool scaled = true;
  for (float e : v) {
    if (e == 0) ++zeros;
    else scaled = scaled && e == doctest::Approx(1 / 0.7f).epsilon(1e-6);
  }
  CHECK(scaled);
  CHECK(double(zeros) / double(v.size()) == doctest::Approx(0.3).epsilon(0.02));
  CHECK(y.mean().item() == doctest::Approx(1.0).epsilon(0.01));
  manual_seed(7);
  CHECK(F::dropout(x, 0.3).to_vector() == v);  // same seed, same mask
  CHECK(F::dropout(x, 0.3).to_vector() != v);  // the generator moved on
  Generator g1(99), g2(99);
  CHECK(F::dropout(x, 0.5, true, &g1).to_vector() == F::dropout(x, 0.5, true, &g2).to_vector());

  // Identity when not training or p == 0 (the same tensor, as in PyTorch), zeros when p == 1.
  CHECK(F::dropout(x, 0.3, false).is_same(x));
  CHECK(F::dropout(x, 0.0).is_same(x));
  const auto xg = TD::randn({6}).requires_grad_();
  const auto z = F::dropout(xg, 1.0);
  check_close(z, std::vector<double>(6, 0.0), 0, 0);
  z.sum().backward();
  check_close(xg.grad(), std::vector<double>(6, 0.0), 0, 0);

  // The gradient is the scaled mask.
  const auto xr = TD::randn({1000}).requires_grad_();
  const auto yr = F::dropout(xr, 0.4);
  yr.sum().backward();
  const auto yv = yr.to_vector(), xv = xr.to_vector(), gv = xr.grad().to_vector();
  for (std::size_t i = 0; i < yv.size(); ++i) CHECK(gv[i] == doctest::Approx(yv[i] == 0 ? 0.0 : 1 / 0.6));
  CHECK(gradcheck(
      [](const std::vector<TD>& in) {
        Generator g(5);  // the same mask on every evaluation
        return F::dropout(in[0], 0.4, true, &g);
      },
      {TD::randn({3, 5})}));
}

TEST_CASE("dropout2d zeroes whole channels") {
  for (const Shape& s : {Shape{8, 16, 3, 4}, Shape{64, 3, 2}}) {
    CAPTURE(s.str());
    manual_seed(3);
    const auto y = F::dropout2d(TD::ones(s), 0.5);
    const auto v = y.to_vector();
    const std::int64_t plane = s[s.ndim() - 1] * s[s.ndim() - 2], planes = y.numel() / plane;
    std::int64_t dropped = 0;
    for (std::int64_t p = 0; p < planes; ++p) {
      const double first = v[static_cast<std::size_t>(p * plane)];
      CHECK((first == 0 || first == 2));
      for (std::int64_t k = 1; k < plane; ++k) CHECK(v[static_cast<std::size_t>(p * plane + k)] == first);
      dropped += first == 0;
    }
    CHECK(double(dropped) / double(planes) == doctest::Approx(0.5).epsilon(0.3));
    CHECK(dropped > 0);
    CHECK(dropped < planes);
  }
  const auto x = TD::ones({2, 3, 2, 2});
  CHECK(F::dropout2d(x, 0.5, false).is_same(x));
  CHECK(gradcheck(
      [](const std::vector<TD>& in) {
        Generator g(11);
        return F::dropout2d(in[0], 0.5, true, &g);
      },
      {TD::randn({2, 3, 2, 2})}));
}

TEST_CASE("embedding: lookup, accumulated gradient, padding_idx") {
  const auto w = wave(15, 0.5, 0.0, 0.0, 0.0, {5, 3});
  const auto idx = IndexTensor::from({0, 2, 4, 2, 1, 0}, {2, 3});
  const auto got = value_and_grads([&](const std::vector<TD>& in) { return F::embedding(idx, in[0], 2); }, {w});
  CHECK(got[0].shape() == Shape{2, 3, 3});
  check_against(got, {emb_y, emb_g0});

  // Plain loop: rows picked by index; without padding every use adds its gradient.
  const auto wv = w.to_vector();
  const auto y = F::embedding(idx, w);
  const auto yv = y.to_vector();
  const std::vector<std::int64_t> iv{0, 2, 4, 2, 1, 0};
  for (std::size_t i = 0; i < iv.size(); ++i)
    for (std::size_t j = 0; j < 3; ++j) CHECK(yv[i * 3 + j] == wv[static_cast<std::size_t>(iv[i]) * 3 + j]);
  auto wg = w.clone().requires_grad_();
  F::embedding(idx, wg).sum().backward();
  check_close(wg.grad(), {2, 2, 2, 1, 1, 1, 2, 2, 2, 0, 0, 0, 1, 1, 1}, 0, 0);
  // padding_idx counts from the end when negative: -1 is row 4.
  auto wp = w.clone().requires_grad_();
  F::embedding(IndexTensor::from({4, 3, 4}, {3}), wp, -1).sum().backward();
  check_close(wp.grad(), {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0}, 0, 0);
  // A 0-dim index gives one row.
  check_close(F::embedding(IndexTensor::from({3}, Shape{}), w), {wv[9], wv[10], wv[11]}, 0, 0);
  // Row 3 is never looked up, so with padding_idx 3 the masked rule must still be exact.
  CHECK(gradcheck([&](const std::vector<TD>& in) { return F::embedding(idx, in[0], 3); }, {w}));
  CHECK(gradcheck([&](const std::vector<TD>& in) { return F::embedding(idx, in[0]); }, {w}));
}

TEST_CASE("embedding: max_norm renormalises the looked-up rows in place, as torch.embedding_renorm_") {
  auto w = TF::from({3, 4, 0.3f, 0.4f, 6, 8, 1, 0}, {4, 2});  // row norms 5, 0.5, 10, 1
  const auto before = w.clone();
  const auto idx = IndexTensor::from({0, 1, 0, 3}, {4});
  const auto y = F::embedding(idx, w, std::nullopt, 2.0);
  // Rows 0 (norm 5) is scaled to norm 2; rows 1 and 3 are within the bound; row 2 was not looked up.
  const double s = 2.0 / (5.0 + 1e-7);
  CHECK(w.to_vector()[0] == doctest::Approx(3 * s));
  CHECK(w.to_vector()[1] == doctest::Approx(4 * s));
  CHECK((w.narrow(0, 1, 1) - before.narrow(0, 1, 1)).abs().max().item() == 0);
  CHECK((w.narrow(0, 2, 2) - before.narrow(0, 2, 2)).abs().max().item() == 0);
  CHECK((y.select(0, 0) - w.select(0, 0)).abs().max().item() == 0);
  CHECK(y.select(0, 0).norm().item() == doctest::Approx(2.0).epsilon(1e-6));
  // The layer's option, with the 1-norm.
  auto emb = nn::Embedding(4, 2, {.max_norm = 1.0, .norm_type = 1.0});
  {
    NoGradGuard ng;
    emb->weight.copy_(before);
  }
  emb(IndexTensor::from({2}, {1}));
  CHECK(emb->weight.select(0, 2).abs().sum().item() == doctest::Approx(1.0).epsilon(1e-6));
  CHECK_THROWS_WITH_AS(F::embedding(idx, w, std::nullopt, -1.0), doctest::Contains("max_norm must be positive"), Error);
}

TEST_CASE("nn::functional normalization, dropout, embedding: bad input is a frost::Error naming the op") {
  const auto x = TD::randn({2, 3, 4});
  CHECK_THROWS_WITH_AS(F::batch_norm(TD::randn({1, 3}), TD(), TD(), TD(), TD(), true),
                       doctest::Contains("batch_norm: expected more than 1 value per channel when training, got input "
                                         "of shape [1, 3]"),
                       Error);
  CHECK_THROWS_WITH_AS(F::batch_norm(x, TD(), TD(), TD::ones({4})),
                       doctest::Contains("batch_norm: weight of shape [4] does not match input of shape [2, 3, 4] "
                                         "(expected [3]"),
                       Error);
  CHECK_THROWS_WITH_AS(F::batch_norm(x, TD::zeros({3}), TD::ones({2})),
                       doctest::Contains("batch_norm: running_var of shape [2]"), Error);
  CHECK_THROWS_WITH_AS(F::batch_norm(x, TD::zeros({3}), TD()),
                       doctest::Contains("running_mean and running_var must both be given"), Error);
  CHECK_THROWS_WITH_AS(F::batch_norm(TD::randn({3}), TD(), TD()),
                       doctest::Contains("batch_norm: input must be [N, C] or [N, C, *], got shape [3]"), Error);
  CHECK_THROWS_WITH_AS(F::layer_norm(x, {3}), doctest::Contains("layer_norm: input of shape [2, 3, 4] does not end with "
                                                                "normalized_shape [3]"),
                       Error);
  CHECK_THROWS_WITH_AS(F::layer_norm(x, {4}, TD::ones({3})),
                       doctest::Contains("layer_norm: weight of shape [3] does not match normalized_shape [4]"), Error);
  CHECK_THROWS_WITH_AS(F::group_norm(x, 2),
                       doctest::Contains("group_norm: num_groups 2 must be positive and divide the 3 channels of input "
                                         "of shape [2, 3, 4]"),
                       Error);
  CHECK_THROWS_WITH_AS(F::group_norm(x, 3, TD(), TD::ones({2})),
                       doctest::Contains("group_norm: bias of shape [2] does not match"), Error);
  CHECK_THROWS_WITH_AS(F::dropout(x, 1.5), doctest::Contains("dropout: dropout probability p must be in [0, 1], got 1.5"),
                       Error);
  CHECK_THROWS_WITH_AS(F::dropout2d(x, -0.1), doctest::Contains("dropout2d: dropout probability p must be in [0, 1]"),
                       Error);
  CHECK_THROWS_WITH_AS(F::dropout2d(TD::randn({4, 5})),
                       doctest::Contains("dropout2d: expects a [N, C, H, W] or [C, H, W] input, got shape [4, 5]"), Error);
  const auto w = TD::randn({5, 3});
  CHECK_THROWS_WITH_AS(F::embedding(IndexTensor::from({1, 5}, {2}), w),
                       doctest::Contains("embedding: index 5 is out of range for an embedding table of 5 rows (weight "
                                         "shape [5, 3])"),
                       Error);
  CHECK_THROWS_WITH_AS(F::embedding(IndexTensor::from({-1}, {1}), w), doctest::Contains("embedding: index -1 is out of range"),
                       IndexError);
  CHECK_THROWS_WITH_AS(F::embedding(IndexTensor::from({0}, {1}), TD::randn({5})),
                       doctest::Contains("embedding: weight must be 2-D [num_embeddings, embedding_dim], got shape [5]"),
                       Error);
  CHECK_THROWS_WITH_AS(F::embedding(IndexTensor::from({0}, {1}), w, 5),
                       doctest::Contains("embedding: padding_idx 5 is out of range for 5 embeddings"), Error);
  // An in-place edit of the weight between forward and backward is caught.
  auto wb = TD::ones({3}).requires_grad_();
  auto y = F::batch_norm(x.clone().requires_grad_(), TD(), TD(), wb, TD(), true);
  {
    NoGradGuard ng;
    wb.mul_(2.0);
  }
  CHECK_THROWS_WITH_AS(y.sum().backward(), doctest::Contains("saved by batch_norm was modified by an in-place operation"),
                       Error);
}
