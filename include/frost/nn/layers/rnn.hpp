// Recurrent layers: LSTM and GRU (multi-layer, optionally bidirectional), and
// their single-step cells LSTMCell and GRUCell. Parameter names, shapes, gate
// order and initialisation are PyTorch's, so a PyTorch state dict loads as is.
//
// Each layer projects the whole input sequence with one GEMM ([L*N, in] x
// W_ih^T, biases folded in), then runs one [N, H] x [H, G*H] GEMM per step;
// everything is written with ops, so gradients (and gradients of gradients)
// come from their rules.
#pragma once
#include <array>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "../functional/dropout.hpp"
#include "../module.hpp"
#include "init_detail.hpp"

namespace frost::nn {

/// Options of LSTM and GRU (PyTorch's keyword arguments and defaults):
/// `nn::LSTM(10, 20, {.num_layers = 2, .batch_first = true})`.
struct RNNOptions {
  std::int64_t num_layers = 1;
  bool bias = true;           ///< bias_ih_l{k} and bias_hh_l{k}
  bool batch_first = false;   ///< input and output are [N, L, *] instead of [L, N, *] (h_n is not affected)
  double dropout = 0.0;       ///< dropout on the outputs of every layer but the last, in training mode
  bool bidirectional = false; ///< a second, reversed pass per layer; outputs concatenated on the feature dim
};
using LSTMOptions = RNNOptions;
using GRUOptions = RNNOptions;

/// The four parameters of one layer and direction.
template <class T>
struct RNNWeights {
  Tensor<T> weight_ih, weight_hh, bias_ih, bias_hh;  // biases undefined when bias = false
};

/// LSTM's result: `auto [output, h_n, c_n] = lstm(x);`
template <class T>
struct LSTMOutput {
  Tensor<T> output;  ///< [L, N, D*H] (batch_first: [N, L, D*H]; unbatched: [L, D*H])
  Tensor<T> h_n;     ///< [num_layers*D, N, H] (unbatched: [num_layers*D, H])
  Tensor<T> c_n;     ///< same shape as h_n
};

/// GRU's result: `auto [output, h_n] = gru(x);`
template <class T>
struct GRUOutput {
  Tensor<T> output;
  Tensor<T> h_n;
};

namespace detail {

/// Input projection of a whole sequence: x2d [L*N, in] -> [L*N, G*H], with
/// `bias` (already the sum the cell wants) added in the same GEMM.
template <class T>
Tensor<T> rnn_project(const Tensor<T>& x2d, const Tensor<T>& weight_ih, const Tensor<T>& bias) {
  return bias.defined() ? addmm(bias, x2d, weight_ih.t()) : mm(x2d, weight_ih.t());
}

/// One LSTM step given xp = x W_ih^T + b_ih + b_hh [N, 4H]; updates h and c.
template <class T>
void lstm_step(const Tensor<T>& xp, const Tensor<T>& weight_hh, Tensor<T>& h, Tensor<T>& c) {
  const std::int64_t H = h.size(1);
  auto gates = addmm(xp, h, weight_hh.t());
  auto i_f = gates.narrow(1, 0, 2 * H).sigmoid();  // i and f are adjacent: one kernel
  auto g = gates.narrow(1, 2 * H, H).tanh();
  auto o = gates.narrow(1, 3 * H, H).sigmoid();
  c = i_f.narrow(1, H, H) * c + i_f.narrow(1, 0, H) * g;
  h = o * c.tanh();
}

/// One GRU step given xp = x W_ih^T + b_ih [N, 3H]; updates h. b_hn stays
/// inside r * (W_hn h + b_hn), as in PyTorch (and cuDNN).
template <class T>
void gru_step(const Tensor<T>& xp, const Tensor<T>& weight_hh, const Tensor<T>& bias_hh, Tensor<T>& h) {
  const std::int64_t H = h.size(1);
  auto hp = bias_hh.defined() ? addmm(bias_hh, h, weight_hh.t()) : mm(h, weight_hh.t());
  auto rz = (xp.narrow(1, 0, 2 * H) + hp.narrow(1, 0, 2 * H)).sigmoid();
  auto n = (xp.narrow(1, 2 * H, H) + rz.narrow(1, 0, H) * hp.narrow(1, 2 * H, H)).tanh();
  h = n + rz.narrow(1, H, H) * (h - n);  // (1 - z) n + z h
}

}  // namespace detail

/// What LSTM and GRU share: options, parameters, shape checks and the loop
/// over layers, directions and time steps.
template <class T>
class RNNImplBase : public ModuleT<T> {
 public:
  std::int64_t input_size, hidden_size;
  RNNOptions options;
  /// Parameters by layer and direction: index layer * num_directions + direction.
  std::vector<RNNWeights<T>> all_weights;

  /// 2 when bidirectional, else 1.
  std::int64_t num_directions() const { return options.bidirectional ? 2 : 1; }

  std::string extra_repr() const override {
    std::string s = std::to_string(input_size) + ", " + std::to_string(hidden_size);
    if (options.num_layers != 1) s += ", num_layers=" + std::to_string(options.num_layers);
    if (!options.bias) s += ", bias=False";
    if (options.batch_first) s += ", batch_first=True";
    if (options.dropout != 0) {
      std::ostringstream p;  // 0.5, not std::to_string's 0.500000
      p << options.dropout;
      s += ", dropout=" + p.str();
    }
    if (options.bidirectional) s += ", bidirectional=True";
    return s;
  }

 protected:
  RNNImplBase(const char* kind, std::int64_t gates, std::int64_t in, std::int64_t hidden, const RNNOptions& o)
      : input_size(in), hidden_size(hidden), options(o), kind_(kind) {
    FROST_CHECK(in > 0 && hidden > 0, "frost::nn::", kind, ": input_size (", in, ") and hidden_size (", hidden,
                ") must be positive");
    FROST_CHECK(o.num_layers >= 1, "frost::nn::", kind, ": num_layers must be at least 1, got ", o.num_layers);
    FROST_CHECK(o.dropout >= 0 && o.dropout <= 1, "frost::nn::", kind, ": dropout must be in [0, 1], got ", o.dropout);
    const double bound = detail::fan_in_bound(hidden);
    for (std::int64_t layer = 0; layer < o.num_layers; ++layer) {
      const std::int64_t layer_in = layer == 0 ? in : hidden * num_directions();
      for (std::int64_t dir = 0; dir < num_directions(); ++dir) {
        const std::string sfx = "_l" + std::to_string(layer) + (dir == 1 ? "_reverse" : "");
        RNNWeights<T> w;
        w.weight_ih = this->register_parameter("weight_ih" + sfx, detail::uniform_param<T>({gates * hidden, layer_in}, bound));
        w.weight_hh = this->register_parameter("weight_hh" + sfx, detail::uniform_param<T>({gates * hidden, hidden}, bound));
        if (o.bias) {
          w.bias_ih = this->register_parameter("bias_ih" + sfx, detail::uniform_param<T>({gates * hidden}, bound));
          w.bias_hh = this->register_parameter("bias_hh" + sfx, detail::uniform_param<T>({gates * hidden}, bound));
        }
        all_weights.push_back(w);
      }
    }
  }

  /// The input as time-major [L, N, in]; `unbatched` for a 2-D [L, in].
  Tensor<T> time_major(const Tensor<T>& input, bool& unbatched) const {
    frost::detail::check_defined(input, kind_);
    FROST_CHECK(input.dim() == 2 || input.dim() == 3, "frost::nn::", kind_, ": expects a 3-D input ",
                options.batch_first ? "[N, L, input_size]" : "[L, N, input_size]",
                " or a 2-D unbatched [L, input_size], got shape ", input.shape().str());
    FROST_CHECK(input.size(-1) == input_size, "frost::nn::", kind_, ": input of shape ", input.shape().str(),
                " must have input_size = ", input_size, " features in its last dim");
    unbatched = input.dim() == 2;
    auto x = unbatched ? input.unsqueeze(1) : options.batch_first ? input.transpose(0, 1) : input;
    FROST_CHECK(x.size(0) > 0, "frost::nn::", kind_, ": the sequence length of input ", input.shape().str(),
                " must be positive");
    return x;
  }

  /// A given initial state ("h0", "c0") as [num_layers*D, N, H], checked; an
  /// undefined one stays undefined (zeros).
  Tensor<T> initial_state(const Tensor<T>& s, const char* what, std::int64_t batch, bool unbatched) const {
    if (!s.defined()) return s;
    const std::int64_t layers = options.num_layers * num_directions();
    const Shape expect = unbatched ? Shape{layers, hidden_size} : Shape{layers, batch, hidden_size};
    FROST_CHECK(s.shape() == expect, "frost::nn::", kind_, ": expected ", what, " of shape ", expect.str(),
                " (num_layers*num_directions, ", unbatched ? "" : "batch, ", "hidden_size), got ", s.shape().str());
    return unbatched ? s.unsqueeze(1) : s;
  }

  /// Runs every layer and direction over x [L, N, in]. `states` are the
  /// initial states ([num_layers*D, N, H] or undefined for zeros); on return
  /// they hold the final ones, and the result is the last layer's output.
  /// `Cell` gives `bias(w)` (folded into the input projection) and
  /// `step(xp_t, w, state)`.
  template <std::size_t S, class Cell>
  Tensor<T> run(const Tensor<T>& x, std::array<Tensor<T>, S>& states, const Cell& cell) const {
    const std::int64_t L = x.size(0), N = x.size(1), H = hidden_size, D = num_directions();
    std::array<std::vector<Tensor<T>>, S> finals;
    Tensor<T> layer_in = x;
    for (std::int64_t layer = 0; layer < options.num_layers; ++layer) {
      std::vector<Tensor<T>> dir_out;
      for (std::int64_t dir = 0; dir < D; ++dir) {
        const std::int64_t idx = layer * D + dir;
        const RNNWeights<T>& w = all_weights[static_cast<std::size_t>(idx)];
        const auto xp = detail::rnn_project(layer_in.reshape({L * N, layer_in.size(2)}), w.weight_ih, cell.bias(w))
                            .view({L, N, -1});
        std::array<Tensor<T>, S> st;
        for (std::size_t s = 0; s < S; ++s)
          st[s] = states[s].defined() ? states[s].select(0, idx) : Tensor<T>::zeros({N, H}, x.device());
        std::vector<Tensor<T>> hs(static_cast<std::size_t>(L));
        for (std::int64_t k = 0; k < L; ++k) {
          const std::int64_t t = dir == 0 ? k : L - 1 - k;
          cell.step(xp.select(0, t), w, st);
          hs[static_cast<std::size_t>(t)] = st[0];
        }
        dir_out.push_back(stack(hs, 0));
        for (std::size_t s = 0; s < S; ++s) finals[s].push_back(st[s]);
      }
      layer_in = D == 1 ? dir_out[0] : cat(dir_out, 2);
      if (layer + 1 < options.num_layers)
        layer_in = functional::dropout(layer_in, options.dropout, this->is_training());
    }
    for (std::size_t s = 0; s < S; ++s) states[s] = stack(finals[s], 0);
    return layer_in;
  }

  /// The last layer's time-major output in the caller's layout.
  Tensor<T> output_layout(const Tensor<T>& y, bool unbatched) const {
    return unbatched ? y.squeeze(1) : options.batch_first ? y.transpose(0, 1) : y;
  }

  const char* kind_;
};

/// Long short-term memory over a sequence (torch.nn.LSTM): gates i, f, g, o;
/// c' = f c + i g, h' = o tanh(c'). Parameters weight_ih_l{k} [4H, in],
/// weight_hh_l{k} [4H, H], bias_ih_l{k}, bias_hh_l{k} [4H] (plus `_reverse`
/// ones when bidirectional), all uniform in +-1/sqrt(H).
/// \code
/// nn::LSTM lstm(10, 20, {.num_layers = 2});
/// auto [out, h, c] = lstm(x);          // x [L, N, 10]
/// auto next = lstm(x2, h, c);          // continue from the final state
/// \endcode
template <class T>
struct LSTMImpl : RNNImplBase<T> {
  LSTMImpl(std::int64_t input_size, std::int64_t hidden_size, const RNNOptions& o = {})
      : RNNImplBase<T>("LSTM", 4, input_size, hidden_size, o) {}

  /// `input` [L, N, in] ([N, L, in] if batch_first, [L, in] unbatched); h0
  /// and c0 [num_layers*D, N, H] ([num_layers*D, H] unbatched), both or
  /// neither (zeros).
  LSTMOutput<T> forward(const Tensor<T>& input, const Tensor<T>& h0 = {}, const Tensor<T>& c0 = {}) const {
    bool unbatched = false;
    const auto x = this->time_major(input, unbatched);
    FROST_CHECK(h0.defined() == c0.defined(), "frost::nn::LSTM: give both h0 and c0 or neither (got only ",
                h0.defined() ? "h0" : "c0", ")");
    std::array<Tensor<T>, 2> st{this->initial_state(h0, "h0", x.size(1), unbatched),
                                this->initial_state(c0, "c0", x.size(1), unbatched)};
    const auto y = this->run(x, st, Cell{});
    if (unbatched) st = {st[0].squeeze(1), st[1].squeeze(1)};
    return {this->output_layout(y, unbatched), st[0], st[1]};
  }
  std::string type_name() const override { return "LSTM"; }

 private:
  struct Cell {
    Tensor<T> bias(const RNNWeights<T>& w) const { return w.bias_ih.defined() ? w.bias_ih + w.bias_hh : Tensor<T>(); }
    void step(const Tensor<T>& xp, const RNNWeights<T>& w, std::array<Tensor<T>, 2>& st) const {
      detail::lstm_step(xp, w.weight_hh, st[0], st[1]);
    }
  };
};

/// Gated recurrent unit over a sequence (torch.nn.GRU): gates r, z, n with
/// n = tanh(W_in x + b_in + r (W_hn h + b_hn)), h' = (1 - z) n + z h.
/// Parameters as LSTM's with 3H rows.
/// \code
/// nn::GRU gru(10, 20, {.batch_first = true, .bidirectional = true});
/// auto [out, h] = gru(x);              // x [N, L, 10] -> out [N, L, 40]
/// \endcode
template <class T>
struct GRUImpl : RNNImplBase<T> {
  GRUImpl(std::int64_t input_size, std::int64_t hidden_size, const RNNOptions& o = {})
      : RNNImplBase<T>("GRU", 3, input_size, hidden_size, o) {}

  /// `input` as LSTM's; h0 [num_layers*D, N, H] or undefined (zeros).
  GRUOutput<T> forward(const Tensor<T>& input, const Tensor<T>& h0 = {}) const {
    bool unbatched = false;
    const auto x = this->time_major(input, unbatched);
    std::array<Tensor<T>, 1> st{this->initial_state(h0, "h0", x.size(1), unbatched)};
    const auto y = this->run(x, st, Cell{});
    return {this->output_layout(y, unbatched), unbatched ? st[0].squeeze(1) : st[0]};
  }
  std::string type_name() const override { return "GRU"; }

 private:
  struct Cell {
    Tensor<T> bias(const RNNWeights<T>& w) const { return w.bias_ih; }
    void step(const Tensor<T>& xp, const RNNWeights<T>& w, std::array<Tensor<T>, 1>& st) const {
      detail::gru_step(xp, w.weight_hh, w.bias_hh, st[0]);
    }
  };
};

namespace detail {

/// Shared checks of the cells: input [N, in] or [in], a given state [N, H] or [H].
template <class T>
void check_cell_shapes(const char* kind, const Tensor<T>& x, std::int64_t in, const Tensor<T>& s, const char* what,
                       std::int64_t hidden) {
  frost::detail::check_defined(x, kind);
  FROST_CHECK((x.dim() == 1 || x.dim() == 2) && x.size(-1) == in, "frost::nn::", kind, ": expects input [N, ", in,
              "] or [", in, "], got shape ", x.shape().str());
  if (!s.defined()) return;  // zeros
  const Shape expect = x.dim() == 2 ? Shape{x.size(0), hidden} : Shape{hidden};
  FROST_CHECK(s.shape() == expect, "frost::nn::", kind, ": expected ", what, " of shape ", expect.str(), " for input ",
              x.shape().str(), ", got ", s.shape().str());
}

}  // namespace detail

/// One LSTM step (torch.nn.LSTMCell): weight_ih [4H, in], weight_hh [4H, H],
/// bias_ih, bias_hh [4H]. forward(x, h, c) returns {h', c'}.
template <class T>
struct LSTMCellImpl : ModuleT<T> {
  std::int64_t input_size, hidden_size;
  Tensor<T> weight_ih, weight_hh, bias_ih, bias_hh;

  LSTMCellImpl(std::int64_t in, std::int64_t hidden, bool bias = true) : input_size(in), hidden_size(hidden) {
    FROST_CHECK(in > 0 && hidden > 0, "frost::nn::LSTMCell: input_size (", in, ") and hidden_size (", hidden,
                ") must be positive");
    const double b = detail::fan_in_bound(hidden);
    weight_ih = this->register_parameter("weight_ih", detail::uniform_param<T>({4 * hidden, in}, b));
    weight_hh = this->register_parameter("weight_hh", detail::uniform_param<T>({4 * hidden, hidden}, b));
    if (bias) {
      bias_ih = this->register_parameter("bias_ih", detail::uniform_param<T>({4 * hidden}, b));
      bias_hh = this->register_parameter("bias_hh", detail::uniform_param<T>({4 * hidden}, b));
    }
  }

  /// x [N, in] or [in]; h and c [N, H] or [H], both or neither (zeros).
  std::array<Tensor<T>, 2> forward(const Tensor<T>& input, const Tensor<T>& h0 = {}, const Tensor<T>& c0 = {}) const {
    FROST_CHECK(h0.defined() == c0.defined(), "frost::nn::LSTMCell: give both h and c or neither (got only ",
                h0.defined() ? "h" : "c", ")");
    detail::check_cell_shapes("LSTMCell", input, input_size, h0, "h", hidden_size);
    detail::check_cell_shapes("LSTMCell", input, input_size, c0, "c", hidden_size);
    const bool unbatched = input.dim() == 1;
    const auto x = unbatched ? input.unsqueeze(0) : input;
    auto h = h0.defined() ? (unbatched ? h0.unsqueeze(0) : h0) : Tensor<T>::zeros({x.size(0), hidden_size}, x.device());
    auto c = c0.defined() ? (unbatched ? c0.unsqueeze(0) : c0) : Tensor<T>::zeros({x.size(0), hidden_size}, x.device());
    detail::lstm_step(detail::rnn_project(x, weight_ih, bias_ih.defined() ? bias_ih + bias_hh : Tensor<T>()), weight_hh,
                      h, c);
    if (unbatched) return {h.squeeze(0), c.squeeze(0)};
    return {h, c};
  }
  std::string type_name() const override { return "LSTMCell"; }
  std::string extra_repr() const override {
    return std::to_string(input_size) + ", " + std::to_string(hidden_size) + (bias_ih.defined() ? "" : ", bias=False");
  }
};

/// One GRU step (torch.nn.GRUCell): weight_ih [3H, in], weight_hh [3H, H],
/// bias_ih, bias_hh [3H]. forward(x, h) returns h'.
template <class T>
struct GRUCellImpl : ModuleT<T> {
  std::int64_t input_size, hidden_size;
  Tensor<T> weight_ih, weight_hh, bias_ih, bias_hh;

  GRUCellImpl(std::int64_t in, std::int64_t hidden, bool bias = true) : input_size(in), hidden_size(hidden) {
    FROST_CHECK(in > 0 && hidden > 0, "frost::nn::GRUCell: input_size (", in, ") and hidden_size (", hidden,
                ") must be positive");
    const double b = detail::fan_in_bound(hidden);
    weight_ih = this->register_parameter("weight_ih", detail::uniform_param<T>({3 * hidden, in}, b));
    weight_hh = this->register_parameter("weight_hh", detail::uniform_param<T>({3 * hidden, hidden}, b));
    if (bias) {
      bias_ih = this->register_parameter("bias_ih", detail::uniform_param<T>({3 * hidden}, b));
      bias_hh = this->register_parameter("bias_hh", detail::uniform_param<T>({3 * hidden}, b));
    }
  }

  /// x [N, in] or [in]; h [N, H] or [H] (undefined: zeros).
  Tensor<T> forward(const Tensor<T>& input, const Tensor<T>& h0 = {}) const {
    detail::check_cell_shapes("GRUCell", input, input_size, h0, "h", hidden_size);
    const bool unbatched = input.dim() == 1;
    const auto x = unbatched ? input.unsqueeze(0) : input;
    auto h = h0.defined() ? (unbatched ? h0.unsqueeze(0) : h0) : Tensor<T>::zeros({x.size(0), hidden_size}, x.device());
    detail::gru_step(detail::rnn_project(x, weight_ih, bias_ih), weight_hh, bias_hh, h);
    return unbatched ? h.squeeze(0) : h;
  }
  std::string type_name() const override { return "GRUCell"; }
  std::string extra_repr() const override {
    return std::to_string(input_size) + ", " + std::to_string(hidden_size) + (bias_ih.defined() ? "" : ", bias=False");
  }
};

template <class T>
class LSTMT : public ModuleHolder<LSTMImpl<T>> {
 public:
  LSTMT(std::int64_t input_size, std::int64_t hidden_size, const RNNOptions& o = {})
      : ModuleHolder<LSTMImpl<T>>(std::make_shared<LSTMImpl<T>>(input_size, hidden_size, o)) {}
};
template <class T>
class GRUT : public ModuleHolder<GRUImpl<T>> {
 public:
  GRUT(std::int64_t input_size, std::int64_t hidden_size, const RNNOptions& o = {})
      : ModuleHolder<GRUImpl<T>>(std::make_shared<GRUImpl<T>>(input_size, hidden_size, o)) {}
};
template <class T>
class LSTMCellT : public ModuleHolder<LSTMCellImpl<T>> {
 public:
  LSTMCellT(std::int64_t input_size, std::int64_t hidden_size, bool bias = true)
      : ModuleHolder<LSTMCellImpl<T>>(std::make_shared<LSTMCellImpl<T>>(input_size, hidden_size, bias)) {}
};
template <class T>
class GRUCellT : public ModuleHolder<GRUCellImpl<T>> {
 public:
  GRUCellT(std::int64_t input_size, std::int64_t hidden_size, bool bias = true)
      : ModuleHolder<GRUCellImpl<T>>(std::make_shared<GRUCellImpl<T>>(input_size, hidden_size, bias)) {}
};

using LSTM = LSTMT<float>;
using GRU = GRUT<float>;
using LSTMCell = LSTMCellT<float>;
using GRUCell = GRUCellT<float>;

}  // namespace frost::nn
