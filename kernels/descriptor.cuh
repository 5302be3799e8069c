// One owning handle for every kind of cuDNN descriptor frost uses. Each
// descriptor is its own member, created in its own constructor, so a set-up
// that throws halfway (a failed create or set call) destroys the ones made
// before it: a struct holding raw handles and destroying them in its own
// destructor leaks them then, since that destructor never runs.
#pragma once
#include <cudnn.h>

#include "check.cuh"

namespace frost::cuda_detail {

// The create/destroy pair of each descriptor type, picked by overload; a
// failed create names its call.
inline void create_descriptor(cudnnTensorDescriptor_t* d, const char* op) {
  FROST_CUDA(cudnnCreateTensorDescriptor(d), op);
}
inline void create_descriptor(cudnnFilterDescriptor_t* d, const char* op) {
  FROST_CUDA(cudnnCreateFilterDescriptor(d), op);
}
inline void create_descriptor(cudnnConvolutionDescriptor_t* d, const char* op) {
  FROST_CUDA(cudnnCreateConvolutionDescriptor(d), op);
}
inline void create_descriptor(cudnnActivationDescriptor_t* d, const char* op) {
  FROST_CUDA(cudnnCreateActivationDescriptor(d), op);
}
inline void destroy_descriptor(cudnnTensorDescriptor_t d) { cudnnDestroyTensorDescriptor(d); }
inline void destroy_descriptor(cudnnFilterDescriptor_t d) { cudnnDestroyFilterDescriptor(d); }
inline void destroy_descriptor(cudnnConvolutionDescriptor_t d) { cudnnDestroyConvolutionDescriptor(d); }
inline void destroy_descriptor(cudnnActivationDescriptor_t d) { cudnnDestroyActivationDescriptor(d); }

/// A cuDNN descriptor, created with the op's name for the error, destroyed with it.
template <class Handle>
class Descriptor {
 public:
  explicit Descriptor(const char* op) { create_descriptor(&d_, op); }
  ~Descriptor() {
    if (d_) destroy_descriptor(d_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  /// The raw handle, for cuDNN's calls.
  operator Handle() const { return d_; }

 private:
  Handle d_ = nullptr;
};

using TensorDescriptor = Descriptor<cudnnTensorDescriptor_t>;
using FilterDescriptor = Descriptor<cudnnFilterDescriptor_t>;
using ConvolutionDescriptor = Descriptor<cudnnConvolutionDescriptor_t>;
using ActivationDescriptor = Descriptor<cudnnActivationDescriptor_t>;

}  // namespace frost::cuda_detail
