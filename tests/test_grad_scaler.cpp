// amp::GradScaler against torch.amp.GradScaler step by step
// (tests/reference/grad_scaler_reference.py: SGD with momentum, an inf at
// step 3, a NaN at step 6, unscale_ and clipping at step 7), and its errors.
#include "support.hpp"

using namespace frost;
using namespace frost::test;

namespace {

const SafetensorsFile& reference() {
  static const SafetensorsFile f = SafetensorsFile::open(test_data_path("grad_scaler_reference.safetensors"));
  return f;
}

#define CHECK_FROST_ERROR(expr, part) CHECK_THROWS_WITH_AS(expr, doctest::Contains(part), frost::Error)

}  // namespace

TEST_CASE("GradScaler: ten SGD steps with an inf and a NaN match torch.amp.GradScaler's") {
  const auto& ref = reference();
  const TF x = ref.get<float>("x"), t = ref.get<float>("t");
  TF w = ref.get<float>("w0").clone().requires_grad_();
  optim::SGD opt({w}, {.lr = 0.1, .momentum = 0.9});
  amp::GradScaler scaler({.init_scale = 1024.0, .growth_factor = 2.0, .backoff_factor = 0.5, .growth_interval = 2});
  const auto ws = ref.get<float>("w");
  const auto scales = ref.get<double>("scale").to_vector(), trackers = ref.get<double>("tracker").to_vector();
  const auto stepped = ref.get<double>("stepped").to_vector();
  for (int step = 0; step < 10; ++step) {
    INFO("step ", step);
    opt.zero_grad();
    const auto loss = (x.mm(w) - t).pow(2.0f).mean();
    scaler.scale(loss).backward();
    {
      NoGradGuard ng;
      if (step == 3) w.grad().select(0, 0).select(0, 0).fill_(std::numeric_limits<float>::infinity());
      if (step == 6) w.grad().select(0, 1).select(0, 1).fill_(std::numeric_limits<float>::quiet_NaN());
    }
    if (step == 7) {
      scaler.unscale_(opt);
      nn::utils::clip_grad_norm_(std::vector<TF>{w}, 0.05);
    }
    const bool did = scaler.step(opt);
    scaler.update();
    CHECK(did == (stepped[static_cast<std::size_t>(step)] == 1.0));
    CHECK(scaler.get_scale() == scales[static_cast<std::size_t>(step)]);
    CHECK(double(scaler.get_growth_tracker()) == trackers[static_cast<std::size_t>(step)]);
    CHECK(closeness(w.detach().to_vector(), ws.select(0, step).to_vector(), 1e-6, 1e-5) <= 1);
  }
  // the state dict carries the scale and tracker on
  const auto sd = scaler.state_dict();
  REQUIRE(sd.has_value());
  amp::GradScaler other;
  other.load_state_dict(sd);
  CHECK(other.get_scale() == scaler.get_scale());
  CHECK(other.get_growth_tracker() == scaler.get_growth_tracker());
  CHECK(other.get_growth_interval() == 2);
}

TEST_CASE("GradScaler: scale, growth to float32's limit, new_scale, and a disabled scaler") {
  amp::GradScaler s({.init_scale = 3.0e38, .growth_interval = 1});
  auto w = TD::from({1.0, 2.0}).requires_grad_();
  optim::SGDT<double> opt({w}, {.lr = 0.5});
  CHECK(s.scale(w.sum()).item() == 3.0 * double(3.0e38f));  // the scale is a float32 value
  s.scale(w.sum()).backward();  // gradients of 3e38, back to 1 (within float32's subnormal 1/scale)
  CHECK(s.step(opt));
  s.update();  // growth_interval 1, but 6e38 would overflow float32: the scale stays
  CHECK(s.get_scale() == double(3.0e38f));
  s.update(8.0);
  CHECK(s.get_scale() == 8.0);
  // the scaled gradient comes back divided by the scale before the step
  opt.zero_grad();
  s.scale((w * w).sum()).backward();
  s.step(opt);
  s.update();
  CHECK(w.detach().to_vector() == std::vector<double>{0.0, 0.0});  // w - 0.5 (2 w)

  amp::GradScaler off({.enabled = false});
  CHECK(off.get_scale() == 1.0);
  CHECK(off.scale(w.sum()).item() == w.sum().item());
  CHECK_FALSE(off.state_dict().has_value());
  CHECK_FROST_ERROR(s.load_state_dict(off.state_dict()), "disabled");
}

TEST_CASE("GradScaler: misuse is an Error naming the call") {
  auto w = TF::from({1.0f}).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.1});
  amp::GradScaler s;
  CHECK_FROST_ERROR(s.update(), "no inf checks");
  CHECK_FROST_ERROR(s.unscale_(opt), "no parameter of the optimizer (SGD) has a gradient");
  s.scale(w.sum()).backward();
  s.unscale_(opt);
  CHECK_FROST_ERROR(s.unscale_(opt), "unscale_: already called");
  s.step(opt);
  CHECK_FROST_ERROR(s.step(opt), "step: already called");
  CHECK_FROST_ERROR(s.unscale_(opt), "after step()");
  s.update();
  CHECK_FROST_ERROR(amp::GradScaler({.growth_factor = 1.0}), "growth_factor must be > 1");
  CHECK_FROST_ERROR(amp::GradScaler({.backoff_factor = 1.5}), "backoff_factor");
  CHECK_FROST_ERROR(amp::GradScaler({.growth_interval = 0}), "growth_interval");
  CHECK_FROST_ERROR(amp::GradScaler({.init_scale = -1.0}), "scale must be positive");
  CHECK_FROST_ERROR(s.update(-2.0), "new_scale");
  CHECK_FROST_ERROR(s.load_state_dict(amp::GradScalerStateDict{.growth_interval = 4, .growth_tracker = 4}),
                    "_growth_tracker");
}
