// The gradient of a cast between two floating dtypes: the node lives in the
// result's graph (dtype U) and hands the gradient, cast back to the source's
// dtype S, to the source's node or leaf through the running engine, which
// orders the nodes of both dtypes in one queue.
#pragma once
#include "engine.hpp"

namespace frost::autograd::detail {

template <class U, class S>
struct CastNode final : Node<U> {
  Edge<S> source;

  explicit CastNode(Edge<S> src) : source(std::move(src)) {}
  const char* name() const override { return "to"; }
  void apply(const Tensor<U>& dy, Grads<U>) override {
    // Under create_graph this cast records its own node: second derivatives
    // flow back across the dtype too.
    current_engine->send(source, dy.template to<S>());
  }
  void release_saved() override {}  // an edge, no saved tensor: a later backward may pass again
};

/// Records `y = x.to<U>()` on the tape when x needs a gradient.
template <class U, class S>
void record_cast(Tensor<U>& y, const Tensor<S>& x) {
  if (!frost::detail::any_requires_grad({&x})) return;
  auto* node = new CastNode<U, S>(frost::detail::edge_of(x));
  node->seq = frost::detail::next_sequence_nr++;
  y.impl()->grad_fn = Ref<Node<U>>::adopt(node);
  y.impl()->requires_grad = true;
}

}  // namespace frost::autograd::detail
