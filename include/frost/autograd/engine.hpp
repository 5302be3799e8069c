// The backward engine: visits the nodes reachable from the roots in
// decreasing sequence number (reverse tape order), so a node runs only after
// every gradient for its output has arrived, and frees each node's saved
// tensors after use unless the graph is retained.
#pragma once
#include <initializer_list>
#include <queue>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "node.hpp"

namespace frost::autograd {

namespace detail {

struct BySeq {
  bool operator()(const NodeBase* a, const NodeBase* b) const { return a->seq < b->seq; }
};

template <class T>
void accumulate(Tensor<T>& slot, Tensor<T> g) {
  if (!slot.defined()) slot = std::move(g);
  else slot = slot + g;
}

/// Adds `g` into a leaf's .grad: in place when nobody else holds the buffer,
/// out of place otherwise (and under create_graph, so .grad keeps history).
template <class T>
void accumulate_leaf(TensorImpl<T>& leaf, Tensor<T> g, bool create_graph) {
  FROST_CHECK(g.shape() == leaf.shape, "frost::backward: a gradient of shape ", g.shape().str(),
              " reached a leaf of shape ", leaf.shape.str(), " (an op's backward rule returned the wrong shape)");
  FROST_CHECK(g.device() == leaf.storage->device, "frost::backward: a gradient on ", g.device().str(),
              " reached a leaf on ", leaf.storage->device.str(), " (a leaf's .grad lives on its own device)");
  if (!create_graph) g = g.detach();
  if (!leaf.grad) {
    // After detach() g's impl is ours; its memory is ours if nobody else
    // holds the storage, and it is kept as it is if it is also dense (not a
    // broadcast view of a smaller gradient, which later sums would corrupt).
    const bool exclusive =
        g.impl()->use_count() == 1 && g.impl()->storage->use_count() == 1 && g.is_contiguous();
    leaf.grad = (exclusive || create_graph) ? g.impl_ref() : g.clone().impl_ref();
    return;
  }
  Tensor<T> cur(leaf.grad);
  // Accumulate in place, as PyTorch does: a handle the user took with grad()
  // sees the sum. The buffer is private to .grad (stored exclusive or cloned).
  if (!create_graph && !cur.requires_grad() && !cur.impl()->is_view && cur.shape() == g.shape()) {
    NoGradGuard ng;
    cur.add_(g);
    return;
  }
  leaf.grad = (cur + g).impl_ref();
}

/// Gradients autograd::grad returns: where each input's gradient is taken
/// (its node, or the leaf itself) and the sums so far.
template <class T>
struct Capture {
  std::unordered_map<const void*, std::size_t> at;
  std::vector<Tensor<T>> got;
};

/// One backward pass. The nodes of every floating dtype share one queue in decreasing
/// sequence number, so a node that gets gradients through a cast between
/// dtypes (x.to<float>() in a double graph) runs once, after all of them.
class Engine {
 public:
  Engine(bool retain_graph, bool create_graph) : retain_(retain_graph), create_(create_graph) {}

  template <class T>
  Capture<T>& capture() {
    if constexpr (std::is_same_v<T, float>) return cap_f_;
    else if constexpr (std::is_same_v<T, double>) return cap_d_;
    else if constexpr (std::is_same_v<T, half>) return cap_h_;
    else return cap_b_;
  }
  void set_capturing() { capturing_ = true; }

  /// Adds `g` to the gradient of the edge's node (queueing it) or leaf.
  template <class T>
  void send(const Edge<T>& e, Tensor<T> g) {
    if (e.fn) {
      detail::accumulate(e.fn->grad_buf, std::move(g));
      if (!e.fn->queued) {
        e.fn->queued = true;
        ready_.push(e.fn.get());
      }
    } else if (e.leaf) {
      if (capturing_) {  // autograd::grad leaves every .grad alone
        auto& c = capture<T>();
        auto it = c.at.find(e.leaf.get());
        if (it != c.at.end()) detail::accumulate(c.got[it->second], std::move(g));
      } else {
        detail::accumulate_leaf(*e.leaf, std::move(g), create_);
      }
    }
  }

  void run() {
    try {
      while (!ready_.empty()) {
        NodeBase* n = ready_.top();
        ready_.pop();
        n->queued = false;
        visit_node(n, [&](auto* node) { step(node); });
      }
    } catch (...) {
      clear();
      throw;
    }
  }

  /// After a failure: a failing rule must not leave nodes queued with
  /// half-summed gradients.
  void clear() {
    while (!ready_.empty()) {
      NodeBase* n = ready_.top();
      ready_.pop();
      n->queued = false;
      visit_node(n, [](auto* node) { node->grad_buf = {}; });
    }
  }

 private:
  /// f(node as the Node<T> of its dtype): the floating dtypes autograd runs in.
  template <class F>
  static void visit_node(NodeBase* n, F f) {
    switch (n->dtype) {
      case DType::float32: return f(static_cast<Node<float>*>(n));
      case DType::float64: return f(static_cast<Node<double>*>(n));
      case DType::float16: return f(static_cast<Node<half>*>(n));
      default: return f(static_cast<Node<bfloat16>*>(n));
    }
  }

  template <class T>
  std::vector<Tensor<T>>& dx_buffer() {
    if constexpr (std::is_same_v<T, float>) return dx_f_;
    else if constexpr (std::is_same_v<T, double>) return dx_d_;
    else if constexpr (std::is_same_v<T, half>) return dx_h_;
    else return dx_b_;
  }

  template <class T>
  void step(Node<T>* n) {
    Tensor<T> dy = std::move(n->grad_buf);
    n->grad_buf = Tensor<T>();
    if (capturing_) {
      auto& c = capture<T>();
      auto it = c.at.find(n);
      if (it != c.at.end()) detail::accumulate(c.got[it->second], dy);
    }
    FROST_CHECK(!n->released, "frost::backward: trying to backward through the graph a second time (", n->name(),
                " already freed its saved tensors); pass retain_graph=true to the first backward");
    auto& dx = dx_buffer<T>();
    dx.assign(n->next.size(), Tensor<T>());
    n->apply(dy, Grads<T>{dx.data(), &n->next});
    // Dropped before the sends: a rule that returns a view of dy (transpose,
    // reshape) then hands a leaf storage nobody else holds, which it keeps
    // as .grad instead of copying.
    dy = Tensor<T>();
    if (!retain_) n->release_saved();
    for (std::size_t i = 0; i < n->next.size(); ++i)
      if (dx[i].defined() && n->next[i].needed()) send(n->next[i], std::move(dx[i]));
  }

  bool retain_, create_, capturing_ = false;
  std::priority_queue<NodeBase*, std::vector<NodeBase*>, BySeq> ready_;
  Capture<float> cap_f_;
  Capture<double> cap_d_;
  Capture<half> cap_h_;
  Capture<bfloat16> cap_b_;
  std::vector<Tensor<float>> dx_f_;
  std::vector<Tensor<double>> dx_d_;
  std::vector<Tensor<half>> dx_h_;
  std::vector<Tensor<bfloat16>> dx_b_;
};

/// The pass now running on this thread: a cast's node sends the gradient of
/// its source (the other dtype) through it.
inline thread_local Engine* current_engine = nullptr;

}  // namespace detail

/// Runs backward from `roots` with seed gradients `grads`. When `inputs` is
/// non-empty the gradients w.r.t. those tensors are returned instead of being
/// accumulated into .grad (autograd::grad).
template <class T>
std::vector<Tensor<T>> run_backward(const std::vector<Tensor<T>>& roots, const std::vector<Tensor<T>>& grads,
                                    bool retain_graph, bool create_graph,
                                    const std::vector<Tensor<T>>& inputs = {}) {
  detail::Engine engine(retain_graph, create_graph);
  auto& cap = engine.capture<T>();
  cap.got.resize(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    FROST_CHECK(inputs[i].requires_grad(), "frost::autograd::grad: input ", i, " of shape ", inputs[i].shape().str(),
                " does not require grad");
    const void* key = inputs[i].impl()->grad_fn ? static_cast<const void*>(inputs[i].impl()->grad_fn.get())
                                                : static_cast<const void*>(inputs[i].impl());
    cap.at[key] = i;
  }
  if (!inputs.empty()) engine.set_capturing();

  // Every root is checked before any gradient moves, so a bad root changes nothing.
  std::vector<Tensor<T>> seeds(roots.size());
  for (std::size_t i = 0; i < roots.size(); ++i) {
    const Tensor<T>& r = roots[i];
    FROST_CHECK(r.requires_grad(), "frost::backward: element ", i, " of the outputs (shape ", r.shape().str(),
                ") does not require grad and has no grad_fn");
    Tensor<T> g = grads.size() > i ? grads[i] : Tensor<T>();
    if (!g.defined()) {
      FROST_CHECK(r.numel() == 1, "frost::backward: a gradient can only be implied for one-element outputs, but the "
                                  "output has shape ", r.shape().str(), "; pass backward(grad) with that shape");
      g = Tensor<T>::ones(r.shape(), r.device());
    } else {
      FROST_CHECK(g.shape() == r.shape(), "frost::backward: gradient of shape ", g.shape().str(),
                  " does not match the output's shape ", r.shape().str());
      FROST_CHECK(g.device() == r.device(), "frost::backward: the gradient is on ", g.device().str(),
                  " but the output is on ", r.device().str(), "; move it with .to(device)");
    }
    seeds[i] = std::move(g);
  }

  AutoGradMode mode(create_graph);
  struct Current {  // restored however the pass ends
    detail::Engine* saved;
    explicit Current(detail::Engine* e) : saved(detail::current_engine) { detail::current_engine = e; }
    ~Current() { detail::current_engine = saved; }
  } current(&engine);
  // Queued nodes need no extra reference: each is held by an edge of a node
  // processed earlier (or by a root), and edges live until the graph does.
  // (A leaf root that is also an input is captured by send(), like any leaf.)
  try {
    for (std::size_t i = 0; i < roots.size(); ++i) {
      const Tensor<T>& r = roots[i];
      engine.send(r.impl()->grad_fn ? Edge<T>{r.impl()->grad_fn, {}} : Edge<T>{{}, r.impl_ref()},
                  std::move(seeds[i]));
    }
  } catch (...) {
    engine.clear();
    throw;
  }
  engine.run();
  return std::move(cap.got);
}

/// Gradients of `outputs` w.r.t. `inputs` (like torch.autograd.grad); with
/// create_graph the results carry history for higher derivatives. An input
/// the outputs do not depend on is an error unless allow_unused (then its
/// gradient is an undefined tensor).
template <class T>
std::vector<Tensor<T>> grad(const std::vector<Tensor<T>>& outputs, const std::vector<Tensor<T>>& inputs,
                            const std::vector<Tensor<T>>& grad_outputs = {}, bool retain_graph = false,
                            bool create_graph = false, bool allow_unused = false) {
  FROST_CHECK(!inputs.empty(), "frost::autograd::grad: no inputs given");
  auto g = run_backward(outputs, grad_outputs, retain_graph || create_graph, create_graph, inputs);
  for (std::size_t i = 0; i < g.size(); ++i)
    FROST_CHECK(allow_unused || g[i].defined(), "frost::autograd::grad: input ", i, " (shape ",
                inputs[i].shape().str(), ") was not used to compute the outputs; pass allow_unused=true to get an "
                "undefined gradient for it");
  return g;
}

/// The same with braced lists, which cannot deduce T for the vector form:
/// `frost::autograd::grad({loss}, {x}, {}, true, true)`.
template <class T>
std::vector<Tensor<T>> grad(std::initializer_list<Tensor<T>> outputs, std::initializer_list<Tensor<T>> inputs,
                            std::initializer_list<Tensor<T>> grad_outputs = {}, bool retain_graph = false,
                            bool create_graph = false, bool allow_unused = false) {
  return grad(std::vector<Tensor<T>>(outputs), std::vector<Tensor<T>>(inputs), std::vector<Tensor<T>>(grad_outputs),
              retain_graph, create_graph, allow_unused);
}

}  // namespace frost::autograd
