// The tape: a Node per recorded op, holding what its backward needs, edges to
// the nodes (or leaves) that produced its inputs, and a sequence number that
// orders backward. An op's node is OpNode<T, Op, Saved...>: the op struct
// (kind, attributes, backward rule) plus the tensors it saved.
#pragma once
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "../core/allocator.hpp"
#include "../core/dtype.hpp"
#include "../core/error.hpp"
#include "../core/ref.hpp"
#include "grad_mode.hpp"

namespace frost {

template <class T>
class Tensor;
template <class T>
struct TensorImpl;
template <class T>
struct Node;

/// Where a node sends the gradient of one of its inputs: the producing node,
/// or the leaf whose .grad accumulates it. Both empty: no gradient needed.
template <class T>
struct Edge {
  Ref<Node<T>> fn;
  Ref<TensorImpl<T>> leaf;
  bool needed() const { return fn || leaf; }
};

/// Two edges inline (every unary and binary op), more on the heap (cat, stack).
template <class T>
class EdgeList {
 public:
  void resize(std::size_t n) {
    n_ = n;
    if (n > 2) heap_.resize(n);
  }
  std::size_t size() const { return n_; }
  Edge<T>& operator[](std::size_t i) { return n_ > 2 ? heap_[i] : inline_[i]; }
  const Edge<T>& operator[](std::size_t i) const { return n_ > 2 ? heap_[i] : inline_[i]; }
  void clear() {
    inline_[0] = {};
    inline_[1] = {};
    heap_.clear();
  }

 private:
  Edge<T> inline_[2];
  std::vector<Edge<T>> heap_;
  std::size_t n_ = 0;
};

/// Gradients an op's backward writes, one slot per input; `needs(i)` says
/// whether input i wants one, so rules skip work nobody uses.
template <class T>
struct Grads {
  Tensor<T>* slot;
  const EdgeList<T>* edges;
  bool needs(std::size_t i) const { return (*edges)[i].needed(); }
  Tensor<T>& operator[](std::size_t i) { return slot[i]; }
};

/// What the backward engine needs of a node whatever its dtype: one queue
/// orders the float and double nodes of a graph that casts between them.
/// Sequence numbers are shared by both dtypes, so they order the whole tape.
struct NodeBase {
  std::uint64_t seq = 0;
  DType dtype = DType::float32;
  bool queued = false;

  virtual ~NodeBase() = default;
};

namespace detail {
inline thread_local std::uint64_t next_sequence_nr = 0;
inline thread_local std::vector<NodeBase*>* pending_node_deletes = nullptr;
}  // namespace detail

template <class T>
struct Node : RefCounted, detail::Pooled, NodeBase {
  EdgeList<T> next;
  Tensor<T> grad_buf;  // gradient of this node's output, summed during backward
  bool released = false;  // saved tensors freed: a second backward through this node is an error

  Node() { dtype = dtype_of<T>(); }
  ~Node() override = default;
  virtual const char* name() const = 0;
  /// Gradients of the inputs given the gradient of the output.
  virtual void apply(const Tensor<T>& dy, Grads<T> dx) = 0;
  /// Frees saved tensors once backward has used them (unless retain_graph);
  /// nodes that saved no tensor stay usable, as in PyTorch.
  virtual void release_saved() = 0;

  // Unlinking a long chain recursively would overflow the stack: nodes whose
  // count drops to zero while another is being deleted wait in a list. The
  // list is shared by both dtypes (a cast's node holds the other dtype's
  // graph), and each entry is deleted through its virtual destructor.
  static void destroy(Node* n) {
    if (detail::pending_node_deletes) {
      detail::pending_node_deletes->push_back(n);
      return;
    }
    thread_local std::vector<NodeBase*> pending;  // keeps its capacity between graphs
    detail::pending_node_deletes = &pending;
    delete n;
    while (!pending.empty()) {
      NodeBase* p = pending.back();
      pending.pop_back();
      delete p;
    }
    detail::pending_node_deletes = nullptr;
  }
};

/// A tensor an op keeps for backward, with the version it had then. An op's
/// own output is kept without its history (no cycle node -> output -> node)
/// and re-attached to the node when a second derivative needs it.
template <class T>
struct SavedTensor {
  Tensor<T> t;
  std::uint32_t version = 0;
  bool is_output = false;

  static SavedTensor input(const Tensor<T>& x) { return {x, x.version(), false}; }
  static SavedTensor output(const Tensor<T>& y) { return {y.detach(), y.version(), true}; }

  Tensor<T> unpack(Node<T>* self) const {
    FROST_CHECK(t.defined(), "frost::backward: ", self->name(),
                " lost its saved tensors: the graph was already freed by an earlier backward; "
                "pass retain_graph=true to the first backward to call backward twice");
    FROST_CHECK(t.version() == version, "frost::backward: a tensor of shape ", t.shape().str(), " saved by ",
                self->name(), " was modified by an in-place operation (version ", version, " when saved, ",
                t.version(), " now); use an out-of-place op or clone() it first");
    if (is_output && is_grad_enabled()) {
      Tensor<T> y = t.detach();
      y.impl()->grad_fn = Ref<Node<T>>(self);
      y.impl()->requires_grad = true;
      return y;
    }
    return t;
  }
};

namespace detail {
template <class X>
struct is_saved : std::false_type {};
template <class T>
struct is_saved<SavedTensor<T>> : std::true_type {};
template <class X>
struct holds_tensor : is_saved<X> {};
template <class T>
struct holds_tensor<Tensor<T>> : std::true_type {};
}  // namespace detail

/// The node of one recorded op: `Op` carries the name, attributes and the
/// backward rule `op.backward(dy, dx, saved...)`.
template <class T, class Op, class... S>
struct OpNode final : Node<T> {
  Op op;
  std::tuple<S...> saved;

  OpNode(Op o, S... s) : op(std::move(o)), saved(std::move(s)...) {}
  const char* name() const override { return Op::name; }
  void apply(const Tensor<T>& dy, Grads<T> dx) override {
    std::apply([&](const auto&... s) { op.backward(dy, dx, unpack(s)...); }, saved);
  }
  void release_saved() override {
    if constexpr ((detail::holds_tensor<S>::value || ...)) {
      saved = std::tuple<S...>();
      this->released = true;
    }
  }

 private:
  template <class X>
  decltype(auto) unpack(const X& s) {
    if constexpr (detail::is_saved<X>::value) return s.unpack(this);
    else return (s);
  }
};

namespace detail {

template <class T>
inline bool any_requires_grad(std::initializer_list<const Tensor<T>*> xs) {
  if (!is_grad_enabled()) return false;
  for (auto* x : xs)
    if (x->defined() && x->requires_grad()) return true;
  return false;
}

template <class T>
inline Edge<T> edge_of(const Tensor<T>& x) {
  if (!x.defined() || !x.requires_grad()) return {};
  if (x.impl()->grad_fn) return {x.impl()->grad_fn, {}};
  return {{}, x.impl_ref()};
}

/// Records `op` as the producer of `out`, with edges to `inputs`.
template <class T, class Op, class... S>
void record(Tensor<T>& out, Op op, std::initializer_list<const Tensor<T>*> inputs, S... saved) {
  auto* node = new OpNode<T, Op, S...>(std::move(op), std::move(saved)...);
  node->seq = next_sequence_nr++;
  node->next.resize(inputs.size());
  std::size_t i = 0;
  for (auto* x : inputs) node->next[i++] = edge_of(*x);
  out.impl()->grad_fn = Ref<Node<T>>::adopt(node);
  out.impl()->requires_grad = true;
}

/// The same for ops with a run-time number of inputs (cat, stack).
template <class T, class Op, class... S>
void record_n(Tensor<T>& out, Op op, const std::vector<Tensor<T>>& inputs, S... saved) {
  auto* node = new OpNode<T, Op, S...>(std::move(op), std::move(saved)...);
  node->seq = next_sequence_nr++;
  node->next.resize(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) node->next[i] = edge_of(inputs[i]);
  out.impl()->grad_fn = Ref<Node<T>>::adopt(node);
  out.impl()->requires_grad = true;
}

}  // namespace detail

}  // namespace frost
