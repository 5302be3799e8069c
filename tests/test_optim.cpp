// optim: SGD, Adam, AdamW and RMSprop trajectories, learning-rate schedules and
// clip_grad_norm_ against PyTorch (tests/reference/optim_reference.py), state
// dict round trips, parameter groups, in-place semantics and bad input.
#include "support.hpp"

#include <cmath>
#include <functional>
#include <memory>
#include <string_view>
#include <tuple>

#include <frost/optim.hpp>

using namespace frost;
using namespace frost::test;

namespace {

// The reference problem: loss = mean((x W + b - y)^2) + 0.1 sum(W^4).
template <class T>
Tensor<T> X() {
  return Tensor<T>::from({0.5, -1.0, 1.5, 0.25, -0.75, 2.0, 1.0, 1.0}, {4, 2});
}
template <class T>
Tensor<T> Y() {
  return Tensor<T>::from({1.0, 0.0, -1.0, 0.5, 2.0, 0.0, -1.0, 1.0, 1.5, 0.0, -0.5, 2.0}, {4, 3});
}

template <class T>
struct Problem {
  Tensor<T> W = Tensor<T>::from({0.3, -0.2, 0.1, 0.4, 0.6, -0.5}, {2, 3}).requires_grad_();
  Tensor<T> b = Tensor<T>::from({0.05, -0.1, 0.2}).requires_grad_();
  std::vector<Tensor<T>> params() const { return {W, b}; }
  Tensor<T> loss() const {
    auto r = X<T>().matmul(W) + b - Y<T>();
    return (r * r).mean() + T(0.1) * W.pow(T(4)).sum();
  }
};

template <class T>
void train(optim::Optimizer& opt, const Problem<T>& pr, int steps) {
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    pr.loss().backward();
    opt.step();
  }
}

struct Trajectory {
  const char* name;
  std::vector<double> W, b;
};

// PyTorch 1.13, float64, 5 steps from the same start.
const std::vector<Trajectory> kTorch = {
    {"sgd_plain", {0.35902086889816, 0.016960162620067297, 0.042321824284381665, 0.0480049576008781, 0.4642819286809952, 0.08041980526345005}, {-0.01986605932254757, 0.03974722373712678, 0.348238773229554}},
    {"sgd_momentum", {0.448549386246639, 0.345743702158516, -0.04759625249994013, -0.48011780823675765, 0.25848824871461523, 0.9429430132615583}, {-0.11350325982945761, 0.25352105094619737, 0.5517437433100055}},
    {"sgd_dampening_wd", {0.4050878806963482, 0.19693386534863033, -0.004581751527687578, -0.25208868465813045, 0.34587593353067625, 0.576451812032878}, {-0.08546064335548229, 0.15399010049947112, 0.4818449484923894}},
    {"sgd_nesterov_wd", {0.36454585889155466, 0.11509126188127489, 0.014487807827546563, -0.11684317358275452, 0.3768313855151822, 0.34389886866845376}, {-0.047735480349512985, 0.10365116386126959, 0.3933701248346661}},
    {"sgd_maximize", {0.2882893537392944, -0.2437915885336641, 0.1108560374120945, 0.4745331515907335, 0.628438758432007, -0.6243420773393741}, {0.06794062966166184, -0.1274278103519302, 0.16354293538395015}},
    {"sgd_groups", {0.43028572003224275, 0.3777963778825455, -0.009180338743882039, -0.49804309425437415, 0.289229345370762, 0.9793051063451348}, {0.04416330881865294, -0.08491617709964094, 0.21302974369823463}},
    {"adam_default", {0.30499839407210694, -0.19500099767640752, 0.09500139232088399, 0.39500082176905066, 0.595001511000359, -0.49500052360082236}, {0.04500138692993574, -0.09500087779188285, 0.2049993267416934}},
    {"adam_betas_wd", {0.5127360938363512, 0.04449221108732705, -0.1379623167215222, 0.15373619285993279, 0.3581282350136541, -0.25197596220995006}, {-0.18761496993822185, 0.1448087901206447, 0.4461103205492304}},
    {"adam_amsgrad", {0.5356044255438359, 0.04529171614562037, -0.14169019101634384, 0.1533733704333807, 0.35853439759282246, -0.25176275073293675}, {-0.19123056015523154, 0.1459961443052254, 0.447304974182518}},
    {"adam_maximize", {0.25021692424544895, -0.24999312639121524, 0.14974782950167362, 0.4500177304696879, 0.6499792413093364, -0.5500154441738943}, {0.09988311289004573, -0.14992914321118306, 0.1500530706013748}},
    {"adamw_default", {0.5347557335307571, 0.04553163807761491, -0.1416276576245303, 0.15263373582078138, 0.35738565781539383, -0.25076906579201724}, {-0.19104583970605837, 0.14600844036315372, 0.44655760812383727}},
    {"adamw_wd_amsgrad", {0.4780160115185733, 0.04726250798832927, -0.11841962713433199, 0.12411697821600942, 0.3292517268401956, -0.20725436878104458}, {-0.160548797808755, 0.1408497128532032, 0.4074798325062981}},
    {"rmsprop_default", {0.5149306855655951, 0.07279157644388058, -0.15202648389507725, 0.11412738543298917, 0.349582383392091, -0.19896553032482167}, {-0.18653371236329264, 0.17667551300833542, 0.4880529839703788}},
    {"rmsprop_centered_momentum_wd", {0.5680383241746118, 0.48768591040651293, -0.4233006274772842, -0.3780217075182133, -0.04633282733940904, 0.3548088259585567}, {-0.42168476290643375, 0.595946808416627, 0.9352531152224728}},
    {"rmsprop_alpha_momentum_maximize", {0.20732309988602737, -0.29175033005400597, 0.19245787657651667, 0.49140850943205877, 0.6928382743704973, -0.5907657730811672}, {0.14242638169650887, -0.19144291151212958, 0.10897710694134134}},
};

const Trajectory& torch_ref(std::string_view name) {
  for (const auto& t : kTorch)
    if (t.name == name) return t;
  FAIL("no reference for ", name);
  return kTorch[0];
}

template <class T>
using Factory = std::function<std::unique_ptr<optim::Optimizer>(const Problem<T>&)>;

template <class T>
std::vector<std::pair<const char*, Factory<T>>> factories() {
  using namespace optim;
  return {
      {"sgd_plain", [](const Problem<T>& p) { return std::make_unique<SGDT<T>>(p.params(), SGDOptions{.lr = 0.1}); }},
      {"sgd_momentum",
       [](const Problem<T>& p) { return std::make_unique<SGDT<T>>(p.params(), SGDOptions{.lr = 0.1, .momentum = 0.9}); }},
      {"sgd_dampening_wd",
       [](const Problem<T>& p) {
         return std::make_unique<SGDT<T>>(p.params(),
                                          SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.5, .weight_decay = 0.01});
       }},
      {"sgd_nesterov_wd",
       [](const Problem<T>& p) {
         return std::make_unique<SGDT<T>>(p.params(),
                                          SGDOptions{.lr = 0.05, .momentum = 0.8, .weight_decay = 0.1, .nesterov = true});
       }},
      {"sgd_maximize",
       [](const Problem<T>& p) {
         return std::make_unique<SGDT<T>>(p.params(), SGDOptions{.lr = 0.01, .momentum = 0.5, .maximize = true});
       }},
      {"sgd_groups",
       [](const Problem<T>& p) {
         return std::make_unique<SGDT<T>>(
             std::vector<ParamGroupInit<T, SGDOptions>>{{{p.W}, SGDOptions{.lr = 0.1, .momentum = 0.9}},
                                                        {{p.b}, SGDOptions{.lr = 0.01, .weight_decay = 1e-4}}},
             SGDOptions{.lr = 0.5});
       }},
      {"adam_default", [](const Problem<T>& p) { return std::make_unique<AdamT<T>>(p.params()); }},
      {"adam_betas_wd",
       [](const Problem<T>& p) {
         return std::make_unique<AdamT<T>>(p.params(), AdamOptions{.lr = 0.05, .betas = {0.8, 0.9}, .weight_decay = 0.1});
       }},
      {"adam_amsgrad",
       [](const Problem<T>& p) { return std::make_unique<AdamT<T>>(p.params(), AdamOptions{.lr = 0.05, .amsgrad = true}); }},
      {"adam_maximize",
       [](const Problem<T>& p) {
         return std::make_unique<AdamT<T>>(p.params(), AdamOptions{.lr = 0.01, .eps = 1e-3, .maximize = true});
       }},
      {"adamw_default", [](const Problem<T>& p) { return std::make_unique<AdamWT<T>>(p.params(), AdamWOptions{.lr = 0.05}); }},
      {"adamw_wd_amsgrad",
       [](const Problem<T>& p) {
         return std::make_unique<AdamWT<T>>(
             p.params(), AdamWOptions{.lr = 0.05, .betas = {0.5, 0.7}, .weight_decay = 0.5, .amsgrad = true});
       }},
      {"rmsprop_default", [](const Problem<T>& p) { return std::make_unique<RMSpropT<T>>(p.params()); }},
      {"rmsprop_centered_momentum_wd",
       [](const Problem<T>& p) {
         return std::make_unique<RMSpropT<T>>(
             p.params(), RMSpropOptions{.lr = 0.01, .weight_decay = 0.1, .momentum = 0.9, .centered = true});
       }},
      {"rmsprop_alpha_momentum_maximize",
       [](const Problem<T>& p) {
         return std::make_unique<RMSpropT<T>>(
             p.params(), RMSpropOptions{.lr = 0.005, .alpha = 0.9, .eps = 1e-4, .momentum = 0.5, .maximize = true});
       }},
  };
}

}  // namespace

TEST_CASE("optim: every optimizer and option combination follows PyTorch's trajectory (double)") {
  for (auto& [name, make] : factories<double>()) {
    CAPTURE(name);
    Problem<double> pr;
    auto opt = make(pr);
    train(*opt, pr, 5);
    const auto& ref = torch_ref(name);
    check_close(pr.W, ref.W, 1e-12, 1e-10);
    check_close(pr.b, ref.b, 1e-12, 1e-10);
  }
}

TEST_CASE("optim: float optimizers (the short spellings) track the double reference") {
  for (auto& [name, make] : factories<float>()) {
    CAPTURE(name);
    Problem<float> pr;
    auto opt = make(pr);
    train(*opt, pr, 5);
    const auto& ref = torch_ref(name);
    check_close(pr.W, std::vector<float>(ref.W.begin(), ref.W.end()), 1e-5, 1e-4);
    check_close(pr.b, std::vector<float>(ref.b.begin(), ref.b.end()), 1e-5, 1e-4);
  }
  // The spelling users write with model->parameters().
  Problem<float> pr;
  optim::SGD opt(pr.params(), {.lr = 0.1, .momentum = 0.9});
  train(opt, pr, 5);
  check_close(pr.W, std::vector<float>(torch_ref("sgd_momentum").W.begin(), torch_ref("sgd_momentum").W.end()), 1e-5,
              1e-4);
}

TEST_CASE("optim: param groups take their own options or the defaults; options are writable") {
  TF a = TF::from({1.0f, 2.0f}).requires_grad_(), b = TF::from({3.0f}).requires_grad_();
  optim::SGD opt({{{a}, optim::SGDOptions{.lr = 0.1}}, {{b}}}, {.lr = 0.01, .momentum = 0.9});
  REQUIRE(opt.param_groups().size() == 2);
  CHECK(opt.param_groups()[0].options.lr == 0.1);
  CHECK(opt.param_groups()[0].options.momentum == 0.0);
  CHECK(opt.param_groups()[1].options.lr == 0.01);
  CHECK(opt.param_groups()[1].options.momentum == 0.9);
  CHECK(opt.defaults().momentum == 0.9);

  opt.param_groups()[0].options.lr = 0.5;
  a.set_grad(TF::from({1.0f, -2.0f}));
  opt.step();
  check_close(a, std::vector<float>{0.5f, 3.0f});
  CHECK(b.to_vector() == std::vector<float>{3.0f});  // no gradient: skipped, no state created
  CHECK(!opt.state(b).momentum_buffer.defined());

  TF c = TF::from({0.0f}).requires_grad_();
  opt.add_param_group({{c}, optim::SGDOptions{.lr = 1.0}});
  CHECK(opt.num_param_groups() == 3);
  c.set_grad(TF::from({2.0f}));
  opt.step();
  check_close(c, std::vector<float>{-2.0f});
}

TEST_CASE("optim: zero_grad sets to none by default, or zeroes in place") {
  Problem<double> pr;
  optim::AdamT<double> opt(pr.params());
  pr.loss().backward();
  CHECK(pr.W.grad().defined());
  opt.zero_grad();
  CHECK(!pr.W.grad().defined());
  CHECK(!pr.b.grad().defined());

  pr.loss().backward();
  TD g = pr.W.grad();
  opt.zero_grad(false);
  CHECK(pr.W.grad().is_same(g));  // the same buffer, now zero
  CHECK(g.to_vector() == std::vector<double>(6, 0.0));
  opt.zero_grad(false);  // nothing to clear twice: still zero, still defined
  CHECK(pr.b.grad().to_vector() == std::vector<double>(3, 0.0));
}

TEST_CASE("optim: step updates in place, bumps the version and records nothing") {
  Problem<double> pr;
  optim::SGDT<double> opt(pr.params(), {.lr = 0.1});
  const double* before = pr.W.data();
  auto saved = pr.W * pr.W;  // saves W for backward
  pr.loss().backward();
  const auto v0 = pr.W.version();
  opt.step();
  CHECK(pr.W.data() == before);
  CHECK(pr.W.version() > v0);
  CHECK(pr.W.is_leaf());
  CHECK(pr.W.requires_grad());
  // The saved W changed under the recorded product: autograd must notice.
  CHECK_THROWS_WITH_AS(saved.sum().backward(), doctest::Contains("modified by an in-place operation"), frost::Error);
}

TEST_CASE("optim: non-contiguous parameters and expanded gradients") {
  // A transposed leaf: the update goes through a contiguous copy and back.
  TD base = TD::from({1, 2, 3, 4, 5, 6}, {2, 3});
  TD p = base.t();
  p.requires_grad_();
  REQUIRE(!p.is_contiguous());
  optim::SGDT<double> opt({p}, {.lr = 0.5});
  (p * TD::from({1, 2, 3, 4, 5, 6}, {3, 2})).sum().backward();
  opt.step();
  check_close(p, std::vector<double>{0.5, 3.0, 0.5, 3.0, 0.5, 3.0}, 0, 0);
  check_close(base, std::vector<double>{0.5, 0.5, 0.5, 3.0, 3.0, 3.0}, 0, 0);  // same memory

  // sum's gradient may be a broadcast of one element: read, never written.
  TD w = TD::from({1, 2, 3}).requires_grad_();
  optim::SGDT<double> opt2({w}, {.lr = 0.25, .momentum = 0.5});
  for (int i = 0; i < 2; ++i) {
    opt2.zero_grad(false);
    w.sum().backward();
    opt2.step();
  }
  // buf: 1 then 1.5; w -= 0.25 * (1 + 1.5)
  check_close(w, std::vector<double>{0.375, 1.375, 2.375}, 1e-15, 0);
  CHECK(w.grad().to_vector() == std::vector<double>{1, 1, 1});
}

TEST_CASE("optim: state_dict round trip continues exactly like the uninterrupted run") {
  auto check_round_trip = [](auto make, const char* what) {
    CAPTURE(what);
    Problem<double> full;
    auto o_full = make(full.params());
    train(o_full, full, 6);

    Problem<double> part;
    auto o_part = make(part.params());
    train(o_part, part, 3);
    auto sd = o_part.state_dict();
    const TD W3 = part.W.detach().clone(), b3 = part.b.detach().clone();
    train(o_part, part, 2);  // the dict is a snapshot: later steps do not change it

    Problem<double> resumed;
    {
      NoGradGuard ng;
      resumed.W.copy_(W3);
      resumed.b.copy_(b3);
    }
    auto o_res = make(resumed.params());
    o_res.param_groups()[0].options.lr = 123;  // overwritten by the loaded options
    o_res.load_state_dict(sd);
    CHECK(o_res.param_groups()[0].options.lr == sd.param_groups[0].options.lr);
    train(o_res, resumed, 3);
    CHECK(resumed.W.to_vector() == full.W.to_vector());
    CHECK(resumed.b.to_vector() == full.b.to_vector());
  };
  check_round_trip([](std::vector<TD> p) { return optim::SGDT<double>(p, {.lr = 0.1, .momentum = 0.9, .nesterov = true}); },
                   "SGD");
  check_round_trip([](std::vector<TD> p) { return optim::AdamT<double>(p, {.lr = 0.05, .amsgrad = true}); }, "Adam");
  check_round_trip([](std::vector<TD> p) { return optim::AdamWT<double>(p, {.lr = 0.05}); }, "AdamW");
  check_round_trip(
      [](std::vector<TD> p) { return optim::RMSpropT<double>(p, {.lr = 0.01, .momentum = 0.9, .centered = true}); },
      "RMSprop");

  Problem<double> pr;
  optim::AdamT<double> opt(pr.params());
  train(opt, pr, 2);
  auto sd = opt.state_dict();
  REQUIRE(sd.state.size() == 2);
  CHECK(sd.state[0].step == 2);
  CHECK(sd.state[0].exp_avg.shape() == Shape{2, 3});
  CHECK(!sd.state[0].max_exp_avg_sq.defined());
  CHECK(sd.param_groups[0].params == std::vector<std::int64_t>{0, 1});
}

TEST_CASE("optim: load_state_dict rejects a dict for other parameters") {
  Problem<double> pr;
  optim::AdamT<double> opt(pr.params());
  train(opt, pr, 1);
  auto sd = opt.state_dict();

  optim::AdamT<double> two_groups({{{pr.W}, std::nullopt}, {{pr.b}, std::nullopt}});
  CHECK_THROWS_WITH_AS(two_groups.load_state_dict(sd), doctest::Contains("different number of parameter groups"),
                       frost::Error);
  TD other = TD::zeros({5}).requires_grad_();
  optim::AdamT<double> three({pr.W, pr.b, other});
  CHECK_THROWS_WITH_AS(three.load_state_dict(sd),
                       doctest::Contains("doesn't match the size of optimizer's group (group 0: 2 parameters, expected 3)"),
                       frost::Error);
  optim::AdamT<double> swapped({pr.b, pr.W});
  CHECK_THROWS_WITH_AS(swapped.load_state_dict(sd), doctest::Contains("exp_avg of parameter 0 has shape [2, 3]"),
                       frost::Error);
  auto bad = sd;
  bad.param_groups[0].options.betas[0] = 1.5;
  CHECK_THROWS_WITH_AS(opt.load_state_dict(bad), doctest::Contains("Invalid beta parameter at index 0: 1.5"),
                       frost::Error);
  CHECK(opt.param_groups()[0].options.betas[0] == 0.9);  // a rejected dict changes nothing
}

TEST_CASE("optim: bad options and parameters are errors with PyTorch's wording") {
  Problem<double> pr;
  using optim::SGDT, optim::AdamT, optim::AdamWT, optim::RMSpropT;
  auto ps = pr.params();
  CHECK_THROWS_WITH_AS(SGDT<double>(ps, {.lr = -0.1}), doctest::Contains("SGD: Invalid learning rate: -0.1"),
                       frost::Error);
  CHECK_THROWS_WITH_AS(SGDT<double>(ps, {.momentum = -1}), doctest::Contains("Invalid momentum value: -1"), frost::Error);
  CHECK_THROWS_WITH_AS(SGDT<double>(ps, {.weight_decay = -1}), doctest::Contains("Invalid weight_decay value: -1"),
                       frost::Error);
  CHECK_THROWS_WITH_AS(SGDT<double>(ps, {.nesterov = true}),
                       doctest::Contains("Nesterov momentum requires a momentum and zero dampening"), frost::Error);
  CHECK_THROWS_WITH_AS(SGDT<double>(ps, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                       doctest::Contains("Nesterov momentum requires a momentum and zero dampening"), frost::Error);
  CHECK_THROWS_WITH_AS(AdamT<double>(ps, {.betas = {1.0, 0.999}}),
                       doctest::Contains("Adam: Invalid beta parameter at index 0: 1"), frost::Error);
  CHECK_THROWS_WITH_AS(AdamWT<double>(ps, {.betas = {0.9, -0.1}}),
                       doctest::Contains("AdamW: Invalid beta parameter at index 1: -0.1"), frost::Error);
  CHECK_THROWS_WITH_AS(AdamT<double>(ps, {.eps = -1}), doctest::Contains("Invalid epsilon value: -1"), frost::Error);
  CHECK_THROWS_WITH_AS(AdamT<double>(ps, {.lr = -1}), doctest::Contains("Adam: Invalid learning rate: -1 (defaults)"),
                       frost::Error);
  CHECK_THROWS_WITH_AS(RMSpropT<double>(ps, {.alpha = -0.5}), doctest::Contains("RMSprop: Invalid alpha value: -0.5"),
                       frost::Error);
  CHECK_THROWS_WITH_AS(RMSpropT<double>(ps, {.momentum = -0.5}), doctest::Contains("Invalid momentum value: -0.5"),
                       frost::Error);
  // A group's own options are checked too, and the message says which group.
  CHECK_THROWS_WITH_AS(SGDT<double>({{{pr.W}}, {{pr.b}, optim::SGDOptions{.lr = -2}}}),
                       doctest::Contains("Invalid learning rate: -2 (param group 1)"), frost::Error);

  {
    // A frozen parameter is taken (PyTorch's way to freeze a backbone) and
    // left alone; unfrozen later, it trains.
    TD frozen = TD::ones({2});
    SGDT<double> opt({pr.W, frozen}, {.lr = 0.5, .weight_decay = 0.1});
    opt.step();
    CHECK(frozen.to_vector() == std::vector<double>{1, 1});
    frozen.requires_grad_();
    (frozen * 2.0).sum().backward();
    opt.step();
    check_close(frozen, {1 - 0.5 * 2.1, 1 - 0.5 * 2.1}, 1e-15, 1e-15);
  }
  CHECK_THROWS_WITH_AS(SGDT<double>({{{pr.W, pr.b}}, {{pr.b}}}),
                       doctest::Contains("some parameters appear in more than one parameter group"), frost::Error);
  CHECK_THROWS_WITH_AS(SGDT<double>({pr.W, pr.W}), doctest::Contains("some parameters appear in more than one"),
                       frost::Error);
  CHECK_THROWS_WITH_AS(SGDT<double>(std::vector<TD>{}), doctest::Contains("SGD: optimizer got an empty parameter list"),
                       frost::Error);
  CHECK_THROWS_WITH_AS(SGDT<double>({pr.W * 2.0}), doctest::Contains("can't optimize a non-leaf Tensor"), frost::Error);
  CHECK_THROWS_WITH_AS(SGDT<double>({TD()}), doctest::Contains("is an undefined tensor"), frost::Error);
  optim::SGDT<double> ok(ps);
  CHECK_THROWS_WITH_AS(ok.add_param_group({{pr.b}}), doctest::Contains("more than one parameter group"), frost::Error);
  CHECK_THROWS_WITH_AS(ok.lr(3), doctest::Contains("param group 3 is out of range (1 groups)"), frost::Error);
}

// ---- schedulers -------------------------------------------------------------

namespace {
struct Schedule {
  const char* name;
  std::vector<double> lrs, momenta;  // after construction, then after each step; groups flattened
};
// PyTorch 1.13 lr_scheduler with the optimizers of optim_reference.py.
const std::vector<Schedule> kSchedules = {
    {"step_lr", {0.1, 0.05, 0.1, 0.05, 0.1, 0.05, 0.05, 0.025, 0.05, 0.025, 0.05, 0.025, 0.025, 0.0125, 0.025, 0.0125, 0.025, 0.0125, 0.0125, 0.00625, 0.0125, 0.00625}, {}},
    {"cosine", {0.1, 0.05, 0.0855017856687341, 0.04282411613907042, 0.0505, 0.025500000000000002, 0.0154982143312659, 0.008175883860929586, 0.001, 0.001, 0.015498214331265896, 0.008175883860929585, 0.05050000000000001, 0.025500000000000005, 0.08550178566873413, 0.04282411613907043, 0.10000000000000003, 0.050000000000000024, 0.08550178566873413, 0.04282411613907044, 0.05050000000000003, 0.02550000000000002, 0.015498214331265945, 0.00817588386092961, 0.001, 0.001, 0.015498214331265896, 0.008175883860929585}, {}},
    {"onecycle_cos_sgd", {0.0040000000000000036, 0.0040000000000000036, 0.052000000000000005, 0.052000000000000005, 0.1, 0.1, 0.09504846320134738, 0.09504846320134738, 0.0811745653949763, 0.0811745653949763, 0.06112620219362893, 0.06112620219362893, 0.03887419780637107, 0.03887419780637107, 0.0188258346050237, 0.0188258346050237, 0.004951936798652629, 0.004951936798652629, 4e-07, 4e-07, 0.004951936798652624, 0.004951936798652624}, {0.95, 0.95, 0.8999999999999999, 0.8999999999999999, 0.85, 0.85, 0.854951556604879, 0.854951556604879, 0.8688255099070633, 0.8688255099070633, 0.8888739533021842, 0.8888739533021842, 0.9111260466978157, 0.9111260466978157, 0.9311744900929366, 0.9311744900929366, 0.945048443395121, 0.945048443395121, 0.95, 0.95, 0.945048443395121, 0.945048443395121}},
    {"onecycle_linear_3phase_sgd", {0.02, 0.01, 0.11000000000000001, 0.05500000000000001, 0.2, 0.1, 0.11, 0.055, 0.01999999999999999, 0.009999999999999995, 0.017171428571428574, 0.008585714285714287, 0.014342857142857143, 0.007171428571428572, 0.011514285714285715, 0.005757142857142857, 0.008685714285714286, 0.004342857142857143, 0.005857142857142856, 0.002928571428571428, 0.003028571428571429, 0.0015142857142857145, 0.0001999999999999988, 9.99999999999994e-05, -0.002628571428571428, -0.001314285714285714}, {0.95, 0.95, 0.8999999999999999, 0.8999999999999999, 0.85, 0.85, 0.8999999999999999, 0.8999999999999999, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95}},
    {"onecycle_adam", {0.0020000000000000018, 0.04096375524460961, 0.04859708886937616, 0.04058728269748815, 0.02779920070613508, 0.014153049910434961, 0.0038320796917128202, 2e-07, 0.003832079691712817}, {0.9, 0.8188255099070634, 0.8028058334845817, 0.8188255099070634, 0.8444017761948347, 0.871694186955878, 0.8923362099614143, 0.9, 0.8923362099614143}},
    {"onecycle_no_momentum", {0.0020000000000000018, 0.049720771772545594, 0.04058728269748815, 0.023131855133348752, 0.00667387650944153, 2e-07, 0.006673876509441528}, {0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9}},
    {"multistep", {0.1, 0.05, 0.1, 0.05, 0.05, 0.025, 0.05, 0.025, 0.05, 0.025, 0.0125, 0.00625, 0.0125, 0.00625, 0.0125, 0.00625, 0.0125, 0.00625}, {}},
    {"exponential", {0.1, 0.05, 0.09000000000000001, 0.045000000000000005, 0.08100000000000002, 0.04050000000000001, 0.07290000000000002, 0.03645000000000001, 0.06561000000000002, 0.03280500000000001, 0.05904900000000002, 0.02952450000000001}, {}},
    {"linear", {0.025, 0.0125, 0.037500000000000006, 0.018750000000000003, 0.05, 0.025, 0.0625, 0.03125, 0.075, 0.0375, 0.075, 0.0375, 0.075, 0.0375, 0.075, 0.0375}, {}},
    {"constant", {0.05, 0.025, 0.05, 0.025, 0.05, 0.025, 0.1, 0.05, 0.1, 0.05, 0.1, 0.05}, {}},
};

const Schedule& schedule_ref(std::string_view name) {
  for (const auto& s : kSchedules)
    if (s.name == name) return s;
  FAIL("no reference for ", name);
  return kSchedules[0];
}

// Steps `sched` n times (after optimizer steps, as in a training loop) and
// compares every rate and momentum it produced with PyTorch's.
void check_schedule(optim::Optimizer& opt, optim::LRScheduler& sched, int n, const char* name) {
  CAPTURE(name);
  std::vector<double> lrs, momenta;
  auto record = [&] {
    for (double lr : sched.get_last_lr()) lrs.push_back(lr);
    for (std::size_t g = 0; g < opt.num_param_groups(); ++g) {
      CHECK(opt.lr(g) == sched.get_last_lr()[g]);
      momenta.push_back(opt.momentum(g));
    }
  };
  record();
  for (int i = 0; i < n; ++i) {
    opt.step();
    sched.step();
    record();
  }
  const auto& ref = schedule_ref(name);
  CHECK(closeness(lrs, ref.lrs, 1e-15, 1e-13) <= 1.0);
  if (!ref.momenta.empty()) CHECK(closeness(momenta, ref.momenta, 1e-15, 1e-13) <= 1.0);
}

optim::SGDT<double> two_groups_sgd(const Problem<double>& p) {
  return optim::SGDT<double>({{{p.W}, optim::SGDOptions{.lr = 0.1, .momentum = 0.9}}, {{p.b}, optim::SGDOptions{.lr = 0.05, .momentum = 0.9}}});
}
}  // namespace

TEST_CASE("lr_scheduler: StepLR and CosineAnnealingLR match PyTorch's rates") {
  Problem<double> pr;
  {
    auto opt = two_groups_sgd(pr);
    optim::StepLR sched(opt, 3, 0.5);
    check_schedule(opt, sched, 10, "step_lr");
    CHECK(sched.last_epoch() == 10);
    CHECK(sched.base_lrs() == std::vector<double>{0.1, 0.05});
  }
  {
    auto opt = two_groups_sgd(pr);
    optim::CosineAnnealingLR sched(opt, 4, 0.001);  // 13 steps: down, back up, and down again
    check_schedule(opt, sched, 13, "cosine");
  }
}

TEST_CASE("lr_scheduler: MultiStepLR, ExponentialLR, LinearLR and ConstantLR match PyTorch's rates") {
  Problem<double> pr;
  {
    auto opt = two_groups_sgd(pr);
    optim::MultiStepLR sched(opt, {2, 5, 5}, 0.5);  // 5 twice: halved twice there
    check_schedule(opt, sched, 8, "multistep");
  }
  {
    auto opt = two_groups_sgd(pr);
    optim::ExponentialLR sched(opt, 0.9);
    check_schedule(opt, sched, 5, "exponential");
  }
  {
    auto opt = two_groups_sgd(pr);
    optim::LinearLR sched(opt, 0.25, 0.75, 4);  // past total_iters the rate stays
    check_schedule(opt, sched, 7, "linear");
  }
  {
    auto opt = two_groups_sgd(pr);
    optim::ConstantLR sched(opt, 0.5, 3);
    check_schedule(opt, sched, 5, "constant");
  }
  auto opt = two_groups_sgd(pr);
  CHECK_THROWS_WITH_AS(optim::LinearLR(opt, 0.0), doctest::Contains("LinearLR: start_factor must be in (0, 1], got 0"),
                       frost::Error);
  CHECK_THROWS_WITH_AS(optim::LinearLR(opt, 0.5, 1.5), doctest::Contains("end_factor must be in [0, 1], got 1.5"),
                       frost::Error);
  CHECK_THROWS_WITH_AS(optim::ConstantLR(opt, 2.0), doctest::Contains("ConstantLR: factor must be in (0, 1], got 2"),
                       frost::Error);
}

TEST_CASE("lr_scheduler: ReduceLROnPlateau cuts the rates as PyTorch's does") {
  // PyTorch 1.13, the same metrics, both groups' rates after each step.
  const std::vector<double> metrics = {1.0, 0.9, 0.95, 0.95, 0.95, 0.8, 0.85, 0.85, 0.85, 0.85, 0.85, 0.85, 0.85};
  const std::vector<double> min_ref = {0.1, 0.05, 0.1, 0.05, 0.1, 0.05, 0.1, 0.05, 0.05, 0.025, 0.05, 0.025, 0.05, 0.025, 0.05, 0.025, 0.025, 0.02, 0.025, 0.02, 0.025, 0.02, 0.025, 0.02, 0.02, 0.02};
  const std::vector<double> max_ref = {0.1, 0.05, 0.1, 0.05, 0.03, 0.015, 0.03, 0.015, 0.009, 0.0045, 0.009, 0.0045, 0.0026999999999999997, 0.0013499999999999999, 0.0026999999999999997, 0.0013499999999999999, 0.0008099999999999998, 0.0004049999999999999, 0.0008099999999999998, 0.0004049999999999999, 0.00024299999999999994, 0.00012149999999999997, 0.00024299999999999994, 0.00012149999999999997, 7.289999999999998e-05, 3.644999999999999e-05};
  auto run = [&](const optim::ReduceLROnPlateauOptions& o) {
    Problem<double> pr;
    auto opt = two_groups_sgd(pr);
    optim::ReduceLROnPlateau sched(opt, o);
    std::vector<double> lrs;
    for (double m : metrics) {
      train(opt, pr, 1);
      sched.step(m);
      CHECK(sched.get_last_lr() == std::vector<double>{opt.lr(0), opt.lr(1)});
      lrs.push_back(opt.lr(0));
      lrs.push_back(opt.lr(1));
    }
    return lrs;
  };
  CHECK(closeness(run({.factor = 0.5, .patience = 2, .cooldown = 1, .min_lr = 0.02}), min_ref, 1e-15, 1e-13) <= 1.0);
  CHECK(closeness(run({.maximize = true, .factor = 0.3, .patience = 1, .threshold = 0.06, .threshold_abs = true}), max_ref,
                  1e-15, 1e-13) <= 1.0);
  // A metric in a one-element tensor.
  Problem<double> pr;
  auto opt = two_groups_sgd(pr);
  optim::ReduceLROnPlateau sched(opt, {.patience = 0});
  sched.step(TD::scalar(1.0));
  sched.step(TD::scalar(2.0));
  CHECK(opt.lr(0) == doctest::Approx(0.01));
  CHECK(sched.best() == 1.0);
  CHECK_THROWS_WITH_AS(optim::ReduceLROnPlateau(opt, {.factor = 1.0}), doctest::Contains("Factor should be < 1.0"),
                       frost::Error);
}

TEST_CASE("lr_scheduler: OneCycleLR matches PyTorch's rates and momenta") {
  Problem<double> pr;
  {
    auto opt = two_groups_sgd(pr);
    optim::OneCycleLR sched(opt, 0.1, 10);
    check_schedule(opt, sched, 10, "onecycle_cos_sgd");
    CHECK_THROWS_WITH_AS(sched.step(), doctest::Contains("Tried to step 12 times. The specified number of total steps is 10"),
                         frost::Error);
  }
  {  // total_steps=None: epochs * steps_per_epoch, the same schedule
    auto opt = two_groups_sgd(pr);
    optim::OneCycleLR sched(opt, 0.1, {.epochs = 2, .steps_per_epoch = 5});
    check_schedule(opt, sched, 10, "onecycle_cos_sgd");
    auto opt2 = two_groups_sgd(pr);
    CHECK_THROWS_WITH_AS(optim::OneCycleLR(opt2, 0.1, optim::OneCycleLROptions{.epochs = 3}),
                         doctest::Contains("You must define either total_steps OR (epochs AND steps_per_epoch)"),
                         frost::Error);
  }
  {
    auto opt = two_groups_sgd(pr);
    optim::OneCycleLR sched(opt, std::vector<double>{0.2, 0.1}, 12,
                            {.pct_start = 0.25, .anneal_strategy = optim::AnnealStrategy::linear, .div_factor = 10,
                             .final_div_factor = 100, .three_phase = true});
    check_schedule(opt, sched, 12, "onecycle_linear_3phase_sgd");
  }
  {
    optim::AdamT<double> opt(pr.params(), {.lr = 0.01});
    optim::OneCycleLR sched(opt, 0.05, 8, {.base_momentum = 0.8, .max_momentum = 0.9});
    check_schedule(opt, sched, 8, "onecycle_adam");
    CHECK(opt.param_groups()[0].options.betas[1] == 0.999);  // only beta1 cycles
  }
  {
    optim::AdamT<double> opt(pr.params(), {.lr = 0.01});
    optim::OneCycleLR sched(opt, 0.05, 6, {.cycle_momentum = false});
    check_schedule(opt, sched, 6, "onecycle_no_momentum");
  }
  // The rates reach the update: one SGD step at the scheduled rate.
  {
    TD w = TD::from({1.0}).requires_grad_();
    optim::SGDT<double> opt({w}, {.lr = 1.0});
    optim::StepLR sched(opt, 1, 0.5);
    sched.step();
    w.set_grad(TD::from({1.0}));
    opt.step();
    check_close(w, std::vector<double>{0.5}, 0, 0);
  }
}

namespace {
// A user-defined optimizer without momentum: the base class does groups and state.
struct PlainOptions {
  double lr = 0.1;
};
void check_options(const PlainOptions& o, const char* name, std::optional<std::size_t>) {
  FROST_CHECK(o.lr >= 0, "frost::optim::", name, ": Invalid learning rate: ", o.lr);
}
class Plain : public optim::OptimizerBase<double, PlainOptions> {
 public:
  explicit Plain(std::vector<TD> p) : OptimizerBase("Plain", one_group(std::move(p)), {}) {}
  void step() override {
    for_each_param_with_grad([](const PlainOptions& o, TD& p, const double* g, optim::ParamState<double>& st) {
      ++st.step;
      for (std::int64_t i = 0; i < p.numel(); ++i) p.data()[i] -= o.lr * g[i];
    });
  }
};
}  // namespace

TEST_CASE("lr_scheduler: bad arguments") {
  Problem<double> pr;
  auto opt = two_groups_sgd(pr);
  CHECK_THROWS_WITH_AS(optim::StepLR(opt, 0), doctest::Contains("StepLR: step_size must be positive, got 0"), frost::Error);
  CHECK_THROWS_WITH_AS(optim::CosineAnnealingLR(opt, -1), doctest::Contains("T_max must be positive"), frost::Error);
  CHECK_THROWS_WITH_AS(optim::OneCycleLR(opt, 0.1, 0), doctest::Contains("Expected positive integer total_steps, but got 0"),
                       frost::Error);
  CHECK_THROWS_WITH_AS(optim::OneCycleLR(opt, 0.1, 10, {.pct_start = 1.5}),
                       doctest::Contains("Expected float between 0 and 1 pct_start, but got 1.5"), frost::Error);
  CHECK_THROWS_WITH_AS(optim::OneCycleLR(opt, std::vector<double>{0.1}, 10),
                       doctest::Contains("expected 2 values for max_lr, got 1"), frost::Error);
  CHECK_THROWS_WITH_AS(optim::OneCycleLR(opt, 0.1, 10, {.pct_start = 0.1}),
                       doctest::Contains("phase 0 of the schedule has zero length"), frost::Error);

  Plain plain(pr.params());
  CHECK(!plain.has_momentum());
  CHECK_THROWS_WITH_AS(optim::OneCycleLR(plain, 0.1, 10),
                       doctest::Contains("optimizer (Plain) must support momentum with `cycle_momentum` option enabled"),
                       frost::Error);
  optim::OneCycleLR sched(plain, 0.1, 10, {.cycle_momentum = false});
  CHECK(plain.lr(0) == doctest::Approx(0.004));
  train(plain, pr, 1);
  CHECK(plain.state(pr.W).step == 1);
}

// ---- clip_grad_norm_ ----------------------------------------------------------

TEST_CASE("clip_grad_norm_: total norm and clipped gradients match PyTorch") {
  struct Case {
    double norm_type, max_norm, total;
    std::vector<double> g1, g2;
  };
  const double inf = INFINITY;
  const Case cases[] = {
      {2.0, 1.0, 5.706356105256664, {0.17524315102516203, -0.35048630205032405, 0.08762157551258101, 0.5257294530754861, 0.0, -0.26286472653774307}, {0.043810787756290506, -0.7009726041006481}},
      {1.0, 2.5, 12.25, {0.20408161599333746, -0.4081632319866749, 0.10204080799666873, 0.6122448479800124, 0.0, -0.3061224239900062}, {0.051020403998334365, -0.8163264639733498}},
      {3.0, 100.0, 4.695357192776339, {1.0, -2.0, 0.5, 3.0, 0.0, -1.5}, {0.25, -4.0}},
      {inf, 2.0, 4.0, {0.49999987500003124, -0.9999997500000625, 0.24999993750001562, 1.4999996250000938, 0.0, -0.7499998125000469}, {0.12499996875000781, -1.999999500000125}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.norm_type);
    TD p1 = TD::zeros({2, 3}).requires_grad_(), p2 = TD::zeros({2}).requires_grad_(), p3 = TD::zeros({1}).requires_grad_();
    p1.set_grad(TD::from({1.0, -2.0, 0.5, 3.0, 0.0, -1.5}, {2, 3}));
    p2.set_grad(TD::from({0.25, -4.0}));
    TD g1 = p1.grad();
    TD total = nn::utils::clip_grad_norm_(std::vector<TD>{p1, p2, p3}, c.max_norm, c.norm_type);  // p3: no grad
    CHECK(total.dim() == 0);
    CHECK(total.item() == doctest::Approx(c.total).epsilon(1e-13));
    check_close(p1.grad(), c.g1, 1e-15, 1e-13);
    check_close(p2.grad(), c.g2, 1e-15, 1e-13);
    CHECK(p1.grad().is_same(g1));  // scaled in place
    CHECK(!p3.grad().defined());
  }
  // float, and a single tensor
  TF pf = TF::zeros({2}).requires_grad_();
  pf.set_grad(TF::from({3.0f, 4.0f}));
  CHECK(nn::utils::clip_grad_norm_(pf, 1.0).item() == doctest::Approx(5.0));
  check_close(pf.grad(), std::vector<float>{0.6f, 0.8f}, 1e-6, 1e-5);
}

TEST_CASE("clip_grad_value_: clamps every gradient in place, as PyTorch") {
  for (const auto& [clip, g1, g2] : std::vector<std::tuple<double, std::vector<double>, std::vector<double>>>{
           {0.5, {0.5, -0.5, 0.5, 0.5, 0.0, -0.5}, {0.25, -0.5}}, {2.0, {1.0, -2.0, 0.5, 2.0, 0.0, -1.5}, {0.25, -2.0}}}) {
    CAPTURE(clip);
    TD p1 = TD::zeros({2, 3}).requires_grad_(), p2 = TD::zeros({2}).requires_grad_(), p3 = TD::zeros({1}).requires_grad_();
    p1.set_grad(TD::from({1.0, -2.0, 0.5, 3.0, 0.0, -1.5}, {2, 3}));
    p2.set_grad(TD::from({0.25, -4.0}));
    const TD before = p1.grad();
    nn::utils::clip_grad_value_(std::vector<TD>{p1, p2, p3}, clip);  // p3: no grad
    CHECK(p1.grad().to_vector() == g1);
    CHECK(p2.grad().to_vector() == g2);
    CHECK(p1.grad().is_same(before));  // in place
    CHECK(!p3.grad().defined());
  }
  // A broadcast (expanded) gradient is replaced, not written through.
  TD w = TD::zeros({3}).requires_grad_();
  w.set_grad(TD::from({5.0}).expand({3}));
  nn::utils::clip_grad_value_(w, 1.0);
  CHECK(w.grad().to_vector() == std::vector<double>{1, 1, 1});
  CHECK_THROWS_WITH_AS(nn::utils::clip_grad_value_(w, -1.0), doctest::Contains("clip_value must be non-negative, got -1"),
                       frost::Error);
}

TEST_CASE("clip_grad_norm_: broadcast gradients, no gradients, non-finite norms, bad norm_type") {
  TD w = TD::from({1, 2, 3, 4}).requires_grad_();
  w.sum().backward();  // a gradient of ones that may alias one upstream element
  TD total = nn::utils::clip_grad_norm_(std::vector<TD>{w}, 1.0);
  CHECK(total.item() == doctest::Approx(2.0));
  check_close(w.grad(), std::vector<double>(4, 1.0 / (2.0 + 1e-6)), 1e-15, 1e-12);

  TD none = TD::zeros({3}).requires_grad_();
  CHECK(nn::utils::clip_grad_norm_(std::vector<TD>{none}, 1.0).item() == 0.0);

  TD n = TD::zeros({2}).requires_grad_();
  n.set_grad(TD::from({1.0, NAN}));
  CHECK(std::isnan(nn::utils::clip_grad_norm_(n, 1.0).item()));
  n.set_grad(TD::from({1.0, INFINITY}));
  CHECK_THROWS_WITH_AS(nn::utils::clip_grad_norm_(n, 1.0, 2.0, true),
                       doctest::Contains("The total norm of order 2 for gradients from `parameters` is non-finite"),
                       frost::Error);
  CHECK_THROWS_WITH_AS(nn::utils::clip_grad_norm_(n, 1.0, -1.0), doctest::Contains("norm_type must be positive or inf, got -1"),
                       frost::Error);
}

TEST_CASE("optim: tensors large enough to split across threads update every element") {
  const std::int64_t n = 100003;  // above the parallel grain, odd so chunks are uneven
  TD w = TD::zeros({n}).requires_grad_();
  TD v = TD::zeros({n}).requires_grad_();
  optim::SGDT<double> sgd({w}, {.lr = 0.5, .momentum = 0.9});
  optim::AdamT<double> adam({v}, {.lr = 0.01});
  const TD g = TD::arange(1, double(n) + 1);
  for (int step = 0; step < 2; ++step) {
    w.set_grad(g.clone());
    v.set_grad(g.clone());
    sgd.step();
    adam.step();
  }
  // SGD: buffers g then 1.9 g, so w = -0.5 (2.9 g). Adam with a constant
  // gradient moves each element by ~lr per step whatever its size.
  const auto wv = w.to_vector(), vv = v.to_vector(), gv = g.to_vector();
  double worst_w = 0, worst_v = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    worst_w = std::max(worst_w, std::fabs(wv[i] + 1.45 * gv[i]) / gv[i]);
    worst_v = std::max(worst_v, std::fabs(vv[i] + 0.02));
  }
  CHECK(worst_w < 1e-14);
  CHECK(worst_v < 1e-9);
}

TEST_CASE("lr_scheduler: state_dict resumes a schedule where it stopped") {
  for (int kind = 0; kind < 3; ++kind) {
    auto make = [&](optim::Optimizer& opt) -> std::unique_ptr<optim::LRScheduler> {
      if (kind == 0) return std::make_unique<optim::StepLR>(opt, 2, 0.5);
      if (kind == 1) return std::make_unique<optim::CosineAnnealingLR>(opt, 7, 0.001);
      return std::make_unique<optim::OneCycleLR>(opt, 0.5, 12);
    };
    // Uninterrupted: 10 steps.
    Problem<double> a;
    auto opt_a = two_groups_sgd(a);
    auto sched_a = make(opt_a);
    std::vector<double> lrs_a;
    for (int i = 0; i < 10; ++i) {
      train(opt_a, a, 1);
      sched_a->step();
      lrs_a.push_back(sched_a->get_last_lr()[0]);
    }
    // Interrupted after 4: optimizer and scheduler state go into fresh ones.
    Problem<double> b;
    auto opt_b = two_groups_sgd(b);
    auto sched_b = make(opt_b);
    std::vector<double> lrs_b;
    for (int i = 0; i < 4; ++i) {
      train(opt_b, b, 1);
      sched_b->step();
      lrs_b.push_back(sched_b->get_last_lr()[0]);
    }
    const auto opt_state = opt_b.state_dict();
    const auto sched_state = sched_b->state_dict();
    CHECK(sched_state.last_epoch == 4);
    Problem<double> c;
    {
      NoGradGuard ng;
      c.W.copy_(b.W);
      c.b.copy_(b.b);
    }
    auto opt_c = two_groups_sgd(c);
    auto sched_c = make(opt_c);
    opt_c.load_state_dict(opt_state);
    sched_c->load_state_dict(sched_state);
    for (int i = 4; i < 10; ++i) {
      train(opt_c, c, 1);
      sched_c->step();
      lrs_b.push_back(sched_c->get_last_lr()[0]);
    }
    CHECK(lrs_b == lrs_a);
    CHECK(c.W.to_vector() == a.W.to_vector());
  }
  Problem<double> pr;
  auto opt = two_groups_sgd(pr);
  optim::StepLR sched(opt, 2);
  CHECK_THROWS_WITH_AS(sched.load_state_dict({3, {0.1}, {0.1}}),
                       doctest::Contains("this scheduler's optimizer has 2 param groups"), frost::Error);
}
