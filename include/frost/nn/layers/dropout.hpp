// Dropout and Dropout2d: active in training, the identity in evaluation
// (and removed from frozen plans). Masks come from frost's generator.
#pragma once
#include <string>

#include "../functional/dropout.hpp"
#include "../module.hpp"

namespace frost::nn {

/// Zeroes elements (Dropout) or whole channels (Dropout2d) with probability
/// p in training and scales the rest by 1 / (1 - p).
template <class T, bool Channels>
struct DropoutImplBase : ModuleT<T> {
  double p;
  explicit DropoutImplBase(double prob = 0.5) : p(prob) {
    FROST_CHECK(prob >= 0 && prob <= 1, "frost::nn::", type_name(), ": p must be in [0, 1], got ", prob);
  }
  Tensor<T> forward(const Tensor<T>& x) {
    return Channels ? functional::dropout2d(x, p, this->is_training()) : functional::dropout(x, p, this->is_training());
  }
  std::string type_name() const override { return Channels ? "Dropout2d" : "Dropout"; }
  std::string extra_repr() const override {
    std::ostringstream s;
    s << "p=" << p << ", inplace=False";
    return s.str();
  }
};
template <class T>
using DropoutImpl = DropoutImplBase<T, false>;
template <class T>
using Dropout2dImpl = DropoutImplBase<T, true>;

template <class T>
class DropoutT : public ModuleHolder<DropoutImpl<T>> {
 public:
  explicit DropoutT(double p = 0.5) : ModuleHolder<DropoutImpl<T>>(std::make_shared<DropoutImpl<T>>(p)) {}
};
template <class T>
class Dropout2dT : public ModuleHolder<Dropout2dImpl<T>> {
 public:
  explicit Dropout2dT(double p = 0.5) : ModuleHolder<Dropout2dImpl<T>>(std::make_shared<Dropout2dImpl<T>>(p)) {}
};
using Dropout = DropoutT<float>;
using Dropout2d = Dropout2dT<float>;

}  // namespace frost::nn
