// The guide's models, shared by the examples and the benchmarks:
// ResearchModel and ProductionModel (research_to_production, bench_layers),
// ResearchModelBN, the MLP and AdaptiveResNet (adaptive_resnet,
// bench_eager_vs_frozen).
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

/// ResearchModel with batch norm after each convolution (what freeze folds).
struct ResearchModelBN : nn::Module {
  nn::Sequential features = register_module(
      "features", nn::Sequential(nn::Conv2d(3, 64, 3, {.padding = 1}), nn::BatchNorm2d(64), nn::ReLU(), nn::MaxPool2d(2),
                                 nn::Conv2d(64, 128, 3, {.padding = 1}), nn::BatchNorm2d(128), nn::ReLU(),
                                 nn::MaxPool2d(2)));
  nn::Sequential classifier = register_module(
      "classifier", nn::Sequential(nn::Dropout(0.5), nn::Linear(128 * 8 * 8, 512), nn::ReLU(), nn::Linear(512, 10)));

  T forward(const T& x) { return classifier(features(x).flatten(1)); }
};

/// The 784-256-256-10 MLP.
inline nn::Sequential make_mlp() {
  return nn::Sequential(nn::Linear(784, 256), nn::ReLU(), nn::Linear(256, 256), nn::ReLU(), nn::Linear(256, 10));
}

/// conv-bn-relu-conv-bn plus the identity.
struct ResidualBlock : nn::Module {
  nn::Conv2d conv1, conv2;
  nn::BatchNorm2d bn1, bn2;
  explicit ResidualBlock(std::int64_t c)
      : conv1(register_module("conv1", nn::Conv2d(c, c, 3, {.padding = 1, .bias = false}))),
        conv2(register_module("conv2", nn::Conv2d(c, c, 3, {.padding = 1, .bias = false}))),
        bn1(register_module("bn1", nn::BatchNorm2d(c))),
        bn2(register_module("bn2", nn::BatchNorm2d(c))) {}
  T forward(const T& x) { return (bn2(conv2(bn1(conv1(x)).relu())) + x).relu(); }
};

/// The guide's adaptive model: its depth depends on the data, call by call.
struct AdaptiveResNet : nn::Module {
  nn::Conv2d conv1 = register_module("conv1", nn::Conv2d(3, 16, 3, {.padding = 1}));
  nn::Sequential block1 = register_module("block1", nn::Sequential(nn::make<ResidualBlock>(16)));
  nn::Sequential block2 =
      register_module("block2", nn::Sequential(nn::make<ResidualBlock>(16), nn::make<ResidualBlock>(16)));
  nn::Linear fc = register_module("fc", nn::Linear(16, 10));
  float threshold = 0.1f;
  int deep_calls = 0;

  T forward(T x) {
    x = conv1(x).relu();
    if (x.mean() > threshold) {  // easy input: one block (a guard when traced)
      x = block1(x);
    } else {  // hard input: two blocks
      x = block2(x);
      ++deep_calls;
    }
    return fc(frost::adaptive_avg_pool2d(x, 1).flatten(1));
  }
};

}  // namespace guide
