// The guide's ResearchModel and ProductionModel, shared by the
// research_to_production example and bench_layers.
#pragma once
#include <frost/frost.hpp>

namespace guide {

using T = frost::Tensor<float>;
namespace nn = frost::nn;

inline nn::Sequential make_features() {
  return nn::Sequential(nn::Conv2d(3, 64, 3, {.padding = 1}), nn::ReLU(), nn::MaxPool2d(2),
                        nn::Conv2d(64, 128, 3, {.padding = 1}), nn::ReLU(), nn::MaxPool2d(2));
}

struct ResearchModel : nn::Module {
  nn::Sequential features = register_module("features", make_features());
  nn::Sequential classifier = register_module(
      "classifier", nn::Sequential(nn::Dropout(0.5), nn::Linear(128 * 8 * 8, 512), nn::ReLU(), nn::Linear(512, 10)));
  nn::Linear aux_classifier = register_module("aux_classifier", nn::Linear(128 * 8 * 8, 10));

  T forward(T x) {
    x = features(x).flatten(1);
    if (is_training() && frost::bernoulli(0.3)) return aux_classifier(x);  // frost's generator, not rand()
    return classifier(x);
  }
};

struct ProductionModel : nn::Module {
  nn::Sequential features = register_module("features", make_features());
  nn::Sequential classifier =
      register_module("classifier", nn::Sequential(nn::Linear(128 * 8 * 8, 512), nn::ReLU(), nn::Linear(512, 10)));

  T forward(const T& x) { return classifier(features(x).flatten(1)); }
};

}  // namespace guide
