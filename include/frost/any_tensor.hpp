// AnyTensor: a tensor whose dtype is known at run time only (a safetensors
// file's entries, Tensor::to(DType)). It holds one Tensor<T> (sharing it, no
// copy) and its DType, and hands it back with a checked as<T>() or a
// converting to<T>(); visit() calls a generic lambda with the Tensor<T>.
#pragma once
#include <ostream>
#include <variant>

#include "tensor.hpp"

namespace frost {

/// A Tensor<T> of any element type, with its DType.
/// \code
/// frost::AnyTensor a = Tensor<float>::ones({2}).to(frost::DType::bfloat16);
/// a.dtype();                    // DType::bfloat16
/// auto b = a.as<frost::bfloat16>();   // the tensor itself; as<float>() is an Error
/// auto f = a.to<float>();       // converted
/// \endcode
class AnyTensor {
 public:
  /// Alternatives in DType order: index() is the DType's number.
  using Variant = std::variant<Tensor<float>, Tensor<double>, Tensor<std::int64_t>, Tensor<bool>, Tensor<std::uint8_t>,
                               Tensor<std::int8_t>, Tensor<std::int16_t>, Tensor<std::int32_t>, Tensor<half>,
                               Tensor<bfloat16>>;

  AnyTensor() = default;
  template <Scalar T>
  AnyTensor(Tensor<T> t) : v_(std::move(t)) {}  // NOLINT: implicit, a Tensor<T> is one

  bool defined() const {
    return std::visit([](const auto& t) { return t.defined(); }, v_);
  }
  DType dtype() const { return static_cast<DType>(v_.index()); }
  const Shape& shape() const {
    check("shape");
    return std::visit([](const auto& t) -> const Shape& { return t.shape(); }, v_);
  }
  std::int64_t numel() const { return shape().numel(); }
  int dim() const { return shape().ndim(); }
  Device device() const {
    check("device");
    return std::visit([](const auto& t) { return t.device(); }, v_);
  }

  template <Scalar T>
  bool is() const {
    return std::holds_alternative<Tensor<T>>(v_);
  }
  /// The held tensor; a frost::Error when it is not a Tensor<T>.
  template <Scalar T>
  const Tensor<T>& as() const {
    FROST_CHECK(is<T>(), "frost::AnyTensor::as: the tensor is ", dtype_name(dtype()), ", not ", dtype_name<T>(),
                " (convert with to<T>() or to(DType))");
    return std::get<Tensor<T>>(v_);
  }
  /// The tensor converted to T (itself when it already is one).
  template <Scalar T>
  Tensor<T> to() const {
    check("to");
    return std::visit([](const auto& t) { return t.template to<T>(); }, v_);
  }
  /// The tensor converted to dtype d.
  AnyTensor to(DType d) const;
  /// f(const Tensor<T>&) for the held T.
  template <class F>
  decltype(auto) visit(F&& f) const {
    return std::visit(std::forward<F>(f), v_);
  }

 private:
  void check(const char* what) const {
    FROST_CHECK(defined(), "frost::AnyTensor::", what, ": the tensor is undefined");
  }
  Variant v_;
};

template <class T>
AnyTensor Tensor<T>::to(DType d) const {
  detail::check_defined(*this, "to");
  return AnyTensor(*this).to(d);
}

/// Prints the held tensor.
std::ostream& operator<<(std::ostream& os, const AnyTensor& a);

}  // namespace frost

// The dispatch over every dtype pair (to(DType)) and printing: inline here in
// header-only mode; in frost::compiled compiled once, in src/,
// so a file using AnyTensor does not instantiate 100 casts.
#if !defined(FROST_CPU_BACKEND_EXTERN) || defined(FROST_CPU_BACKEND_IMPLEMENTATION)
#include "any_tensor_impl.hpp"
#endif
