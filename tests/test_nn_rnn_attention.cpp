// nn::LSTM, nn::GRU, their cells, nn::MultiheadAttention and
// functional::scaled_dot_product_attention: values against PyTorch
// (tests/reference/rnn_attention_reference.py, which also gives the state-dict
// keys and shapes), gradchecks in double through inputs, states and
// parameters, layouts, initialisation, and bad input.
#include "support.hpp"

#include <frost/nn/nn.hpp>
#include <frost/nn/functional/attention.hpp>
#include <frost/nn/layers/attention.hpp>
#include <frost/nn/layers/rnn.hpp>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

using namespace frost;
using namespace frost::test;
namespace F = frost::nn::functional;

namespace {

/// The reference script's closed form: 0.5 sin(0.37 i + 1.3 k + 0.1) over the flat index i.
TD wave(const Shape& shape, int k) {
  std::vector<double> v(static_cast<std::size_t>(shape.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.5 * std::sin(0.37 * double(i) + 1.3 * k + 0.1);
  return TD::from(v, shape);
}

/// Loads wave(shape, k) into the k-th of PyTorch's state-dict entries: the
/// load fails unless frost's names and shapes are PyTorch's.
void load_waves(nn::ModuleT<double>& m, const std::vector<std::string>& keys, const std::vector<Shape>& shapes) {
  REQUIRE(keys.size() == shapes.size());
  CHECK(m.state_dict().keys() == keys);
  nn::StateDict<double> sd;
  for (std::size_t k = 0; k < keys.size(); ++k) sd.insert(keys[k], wave(shapes[k], int(k)));
  m.load_state_dict(sd);
}

constexpr double tight = 1e-9;  // double against double: only rounding differs

TD flat(const std::vector<TD>& xs) {
  std::vector<TD> f;
  for (const auto& x : xs) f.push_back(x.reshape({-1}));
  return cat(f, 0);
}

/// The parameters of an LSTM / GRU in all_weights order (w_ih, w_hh, b_ih, b_hh per layer and direction).
std::vector<TD> rnn_params(const nn::RNNImplBase<double>& m) {
  std::vector<TD> out;
  for (const auto& w : m.all_weights)
    for (const auto& t : {w.weight_ih, w.weight_hh, w.bias_ih, w.bias_hh})
      if (t.defined()) out.push_back(t);
  return out;
}

/// Points the module's forward at xs[first...] instead of its own parameters,
/// so gradcheck differentiates through them.
void use_params(nn::RNNImplBase<double>& m, const std::vector<TD>& xs, std::size_t first) {
  for (auto& w : m.all_weights)
    for (auto* t : {&w.weight_ih, &w.weight_hh, &w.bias_ih, &w.bias_hh})
      if (t->defined()) *t = xs[first++];
}

double max_abs(const TD& t) { return t.abs().max().item(); }

}  // namespace

// ---- PyTorch reference values -----------------------------------------------

TEST_CASE("LSTM: two layers with h0, c0 match PyTorch") {
  nn::LSTMT<double> lstm(4, 5, {.num_layers = 2});
  load_waves(*lstm,
             {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l1", "weight_hh_l1", "bias_ih_l1",
              "bias_hh_l1"},
             {{20, 4}, {20, 5}, {20}, {20}, {20, 5}, {20, 5}, {20}, {20}});
  auto [out, h, c] = lstm(wave({3, 2, 4}, 100), wave({2, 2, 5}, 101), wave({2, 2, 5}, 102));
  CHECK(out.shape() == Shape{3, 2, 5});
  CHECK(h.shape() == Shape{2, 2, 5});
  check_close(out, {-0.4556697020210853, -0.014157102784647985, 0.18955911476071124, -0.10301686168771522,
              0.008285006304888994, -0.1786497158675411, -0.07415587732391028, 0.254580464785017, 0.21064590284941495,
              0.1943553173793045, -0.30710993739597825, 0.04661205849773557, 0.20751017278947473, 0.07234950464793882,
              0.12962853744126482, -0.150929471845979, 0.08676124595718636, 0.16920492600936216, 0.19846169920914447,
              0.1924391537783686, -0.2238074864337826, 0.0998398227837582, 0.15464988508426003, 0.13439736927352788,
              0.18223168387231348, -0.148302120754532, 0.15125637493289434, 0.10280629000543422, 0.1723563187664357,
              0.20897251328911542}, tight, 0);
  check_close(h, {0.2028929312471823, 0.13975277866545488, 0.16481571079908836, 0.06461446816071989, 0.085219096108751,
              0.21765993701105676, 0.1720629671249978, 0.1375807364164593, 0.13811499382127507, 0.07986618911748605,
              -0.2238074864337826, 0.0998398227837582, 0.15464988508426003, 0.13439736927352788, 0.18223168387231348,
              -0.148302120754532, 0.15125637493289434, 0.10280629000543422, 0.1723563187664357, 0.20897251328911542}, tight, 0);
  check_close(c, {0.3065382426350015, 0.2054147298074918, 0.45972813992396455, 0.32330157151995337, 0.2094533622459538,
              0.4392856717708266, 0.300404495185559, 0.2626163963257053, 0.49249784128092516, 0.2833266206313474,
              -0.3307682755348137, 0.1574641265936788, 0.2399174900653812, 0.2162492110544269, 0.38779950165234084,
              -0.21679247303139987, 0.25504509697721756, 0.1521335707874333, 0.27160171251183396, 0.4966008816514055}, tight, 0);
}

TEST_CASE("GRU: two bidirectional batch_first layers match PyTorch") {
  nn::GRUT<double> gru(4, 5, {.num_layers = 2, .batch_first = true, .bidirectional = true});
  load_waves(*gru,
             {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l0_reverse", "weight_hh_l0_reverse",
              "bias_ih_l0_reverse", "bias_hh_l0_reverse", "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1",
              "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"},
             {{15, 4}, {15, 5}, {15}, {15}, {15, 4}, {15, 5}, {15}, {15}, {15, 10}, {15, 5}, {15}, {15}, {15, 10},
              {15, 5}, {15}, {15}});
  auto [out, h] = gru(wave({2, 3, 4}, 100));
  CHECK(out.shape() == Shape{2, 3, 10});
  CHECK(h.shape() == Shape{4, 2, 5});
  check_close(out, {-0.2846164415872132, -0.27883652653600516, -0.32689184496822876, -0.12550108944268507,
              -0.1002228886513767, 0.00072538141067921, -0.2230258124089805, -0.636727365706698, -0.12296061333387474,
              -0.5742124388138532, -0.5410591493878854, -0.3563881299221956, -0.5257716385502945,
              0.051053790276632316, -0.08613724431599125, -0.11501443700406966, -0.10192816367573493,
              -0.612353219398898, -0.01479539864099896, -0.5829079699194428, -0.6782751689039161, -0.3680760422046625,
              -0.6696969001557491, 0.24506068020440908, -0.04565558421096615, -0.12309518344304402,
              -0.03331906907690858, -0.4547104028985987, -0.05087287421979074, -0.4592314833749676,
              -0.4034182435276672, -0.18387832002586263, -0.34263741820588534, -0.21537536769836868,
              0.07749733718065527, -0.04416175614480038, -0.194794547085994, -0.6882589418896262,
              0.023537153958015408, -0.6375077065724822, -0.5632549492448532, -0.2762749241577538, -0.606720100615056,
              0.17708532697552848, -0.0916330680732134, -0.0067086527764110004, -0.144446778016107,
              -0.6152481424854693, 0.043292880945071346, -0.6630907773352338, -0.6953977480863841, -0.286054563843095,
              -0.7468242574220112, 0.3685450133560817, -0.09545743669397554, -0.07005121380867739,
              -0.05084108206243276, -0.4725913340056851, -0.013491650523863592, -0.5259080329764783}, tight, 0);
  check_close(h, {0.6188353989259779, -0.10888338637919576, 0.11605097654220492, 0.7185365692865038, 0.36719498286927277,
              0.5006058921156662, 0.44132473484025764, 0.3991366537398787, 0.5032478361577518, 0.2698027563448008,
              -0.5467750238449083, -0.14853993461023754, 0.27261993380703414, 0.4785725877280041,
              0.0045698470962663995, -0.2503904394424302, -0.06617575452597133, 0.19362420372105266,
              0.3398009699479777, 0.1905530078324095, -0.6782751689039161, -0.3680760422046625, -0.6696969001557491,
              0.24506068020440908, -0.04565558421096615, -0.6953977480863841, -0.286054563843095, -0.7468242574220112,
              0.3685450133560817, -0.09545743669397554, 0.00072538141067921, -0.2230258124089805, -0.636727365706698,
              -0.12296061333387474, -0.5742124388138532, -0.04416175614480038, -0.194794547085994,
              -0.6882589418896262, 0.023537153958015408, -0.6375077065724822}, tight, 0);
}

TEST_CASE("LSTM: unbatched bidirectional input without bias matches PyTorch") {
  nn::LSTMT<double> lstm(4, 3, {.bias = false, .bidirectional = true});
  load_waves(*lstm, {"weight_ih_l0", "weight_hh_l0", "weight_ih_l0_reverse", "weight_hh_l0_reverse"},
             {{12, 4}, {12, 3}, {12, 4}, {12, 3}});
  auto [out, h, c] = lstm(wave({3, 4}, 100));
  CHECK(out.shape() == Shape{3, 6});
  CHECK(h.shape() == Shape{2, 3});
  check_close(out, {0.005614836919571189, 0.09562529049256877, 0.03961577751761328, 0.08225829128794829, -0.204396292653293,
              -0.054441785781024044, -0.03037983328191173, 0.016767812532934065, 0.029955649858610375,
              -0.04232776442907787, 0.09065930942790737, 0.06191285323351968, -0.04546240656728817,
              -0.23335459582638074, 0.0031140811299528236, -0.057753927041459895, 0.06476761040009743,
              0.13645402401187162}, tight, 0);
  check_close(h, {-0.04546240656728817, -0.23335459582638074, 0.0031140811299528236, 0.08225829128794829,
              -0.204396292653293, -0.054441785781024044}, tight, 0);
  check_close(c, {-0.06541058791500715, -0.4444444863194083, 0.009881921636517597, 0.1262999960825386,
              -0.32737182952704996, -0.14842267114109725}, tight, 0);
}

TEST_CASE("MultiheadAttention: key_padding_mask and an additive attn_mask match PyTorch") {
  nn::MultiheadAttentionT<double> mha(8, 2);
  load_waves(*mha, {"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}, {{24, 8}, {24}, {8, 8}, {8}});
  const auto q = wave({3, 2, 8}, 100), k = wave({4, 2, 8}, 101), v = wave({4, 2, 8}, 102);
  const auto pad = TD::from({0, 0, 1, 0, 0, 0, 0, 1}, {2, 4});  // 1 = padding, ignored
  auto am = wave({3, 4}, 103);
  am.data()[1] = -std::numeric_limits<double>::infinity();
  auto [out, w] = mha(q, k, v, {.key_padding_mask = pad, .attn_mask = am});
  CHECK(out.shape() == Shape{3, 2, 8});
  CHECK(w.shape() == Shape{2, 3, 4});
  check_close(out, {-0.7256165787487693, -0.2546052102031366, -0.5782234621203985, -0.5231173603948766, -0.1591686898511943,
              -0.5423959105355142, 0.42190417655659085, -0.40851319256175705, -0.3329289352925236,
              -0.7446828627570341, -0.006872187328791524, -1.1569531571061522, 0.516307701593417, -1.2372996029985777,
              1.1133830022647446, -1.0738276117655303, -0.7161626742743096, -0.2690617190224764, -0.5592397566544538,
              -0.546003976254564, -0.13313179851834775, -0.5707268444340126, 0.4515974796656468, -0.43859238950535323,
              -0.33391357040760655, -0.7422599479604874, -0.010653703347712262, -1.1519373964331692,
              0.5102226414316562, -1.2303453528268575, 1.1057882552003784, -1.065842123905649, -0.7196701497141418,
              -0.26691453692773964, -0.5599560345180097, -0.5467421576875711, -0.13096343316123163,
              -0.5742540862096477, 0.45636760319506064, -0.44444852749257907, -0.3316852653130198,
              -0.7437434474607101, -0.009963794877646426, -1.1518110259750616, 0.5092841477851436, -1.228625598706438,
              1.1033437953633736, -1.0627533453278601}, tight, 0);
  check_close(w, {0.4770352067103981, 0.0, 0.0, 0.522964793289602, 0.38381033991892555, 0.3119806952226912, 0.0,
              0.30420896485838334, 0.35566406989927746, 0.3039680286351578, 0.0, 0.3403679014655647,
              0.5377885794896516, 0.0, 0.4622114205103484, 0.0, 0.4266627792400779, 0.3123194042661414,
              0.2610178164937807, 0.0, 0.4001777044885454, 0.31216207902939397, 0.28766021648206064, 0.0}, tight, 0);
  auto per_head = mha(q, k, v, {.key_padding_mask = pad, .attn_mask = am, .average_attn_weights = false}).attn_weights;
  CHECK(per_head.shape() == Shape{2, 2, 3, 4});
  check_close(per_head, {0.638598920561943, 0.0, 0.0, 0.361401079438057, 0.47235989841756054, 0.31425827521486854, 0.0,
              0.21338182636757105, 0.4178918785046992, 0.3020457513064594, 0.0, 0.28006237018884134,
              0.3154714928588532, 0.0, 0.0, 0.6845285071411469, 0.2952607814202906, 0.3097031152305138, 0.0,
              0.39503610334919564, 0.2934362612938557, 0.3058903059638563, 0.0, 0.4006734327422881, 0.608623811017227,
              0.0, 0.39137618898277304, 0.0, 0.4626214674556843, 0.30038698024166344, 0.23699155230265226, 0.0,
              0.4113885875183358, 0.3028820589086659, 0.2857293535729982, 0.0, 0.46695334796207627, 0.0,
              0.5330466520379238, 0.0, 0.3907040910244715, 0.3242518282906194, 0.2850440806849091, 0.0,
              0.388966821458755, 0.32144209915012206, 0.289591079391123, 0.0}, tight, 0);
  CHECK_FALSE(mha(q, k, v, {.need_weights = false}).attn_weights.defined());
}

TEST_CASE("MultiheadAttention: batch_first self-attention without bias matches PyTorch") {
  nn::MultiheadAttentionT<double> mha(6, 3, {.bias = false, .batch_first = true});
  load_waves(*mha, {"in_proj_weight", "out_proj.weight"}, {{18, 6}, {6, 6}});
  const auto x = wave({2, 3, 6}, 100);
  auto [out, w] = mha(x, x, x);
  CHECK(out.shape() == Shape{2, 3, 6});
  check_close(out, {-0.06357723721480853, 0.0865438489416701, -0.04106332363275353, -0.03689399782293421,
              0.08567202397727594, -0.06669243550024885, -0.030994605295190047, 0.006958593989350355,
              0.022580937695926458, -0.03426130832273022, 0.018844565815918667, 0.011476258200501651,
              0.060442918936310513, -0.02075614536906437, -0.03534656929375776, 0.06349384285035974,
              -0.04142412449300305, -0.013407745772697042, -0.0799055662808251, 0.0882982311532714,
              -0.026856226067391353, -0.05582624623109809, 0.0943559939546905, -0.05826001463537467,
              0.0388905871801693, -0.0571215255860107, 0.03017530885846348, 0.020636422585493506,
              -0.055126901139605985, 0.046017763975175915, 0.03921553326956929, 0.004225771395706042,
              -0.04432493265806077, 0.049367706010134724, -0.015365784912633785, -0.03078886567909394}, tight, 0);
  check_close(w, {0.44432399263655453, 0.2735454665193096, 0.2821305408441358, 0.18469793094152795, 0.5226148375174385,
              0.29268723154103354, 0.42581234480852626, 0.19852218231597116, 0.37566547287550245, 0.3943399855931293,
              0.3189550686738403, 0.28670494573303035, 0.21205713327086947, 0.5245425543639565, 0.26340031236517397,
              0.4079265948612884, 0.1705122066259187, 0.42156119851279295}, tight, 0);
  // Separate projections (key a distinct tensor) give the same result as the fused one.
  check_close(mha(x, x.clone(), x.clone()).attn_output, out, tight, 0);
}

// ---- gradients ------------------------------------------------------------------

TEST_CASE("LSTM and GRU: gradcheck through input, initial state and parameters, both layouts") {
  manual_seed(7);
  for (bool batch_first : {false, true}) {
    CAPTURE(batch_first);
    const Shape xs = batch_first ? Shape{2, 3, 3} : Shape{3, 2, 3};
    {
      nn::LSTMT<double> lstm(3, 2, {.num_layers = 2, .batch_first = batch_first});
      std::vector<TD> in{TD::randn(xs), TD::randn({2, 2, 2}), TD::randn({2, 2, 2})};
      for (const auto& p : rnn_params(*lstm)) in.push_back(p);
      CHECK(gradcheck(
          [&](const std::vector<TD>& x) {
            use_params(*lstm, x, 3);
            auto [out, h, c] = lstm(x[0], x[1], x[2]);
            return flat({out, h, c});
          },
          in));
    }
    {
      nn::GRUT<double> gru(3, 2, {.num_layers = 2, .batch_first = batch_first, .bidirectional = true});
      std::vector<TD> in{TD::randn(xs), TD::randn({4, 2, 2})};
      for (const auto& p : rnn_params(*gru)) in.push_back(p);
      CHECK(gradcheck(
          [&](const std::vector<TD>& x) {
            use_params(*gru, x, 2);
            auto [out, h] = gru(x[0], x[1]);
            return flat({out, h});
          },
          in));
    }
  }
}

TEST_CASE("LSTMCell and GRUCell: gradcheck, and one step equals a one-step LSTM / GRU") {
  manual_seed(8);
  nn::LSTMCellT<double> lc(3, 2);
  CHECK(lc->state_dict().keys() == std::vector<std::string>{"weight_ih", "weight_hh", "bias_ih", "bias_hh"});
  CHECK(gradcheck(
      [&](const std::vector<TD>& x) {
        lc->weight_ih = x[3], lc->weight_hh = x[4], lc->bias_ih = x[5], lc->bias_hh = x[6];
        auto [h, c] = lc(x[0], x[1], x[2]);
        return flat({h, c});
      },
      {TD::randn({2, 3}), TD::randn({2, 2}), TD::randn({2, 2}), lc->weight_ih, lc->weight_hh, lc->bias_ih,
       lc->bias_hh}));
  nn::GRUCellT<double> gc(3, 2, false);
  CHECK(gc->state_dict().keys() == std::vector<std::string>{"weight_ih", "weight_hh"});
  CHECK(gradcheck(
      [&](const std::vector<TD>& x) {
        gc->weight_ih = x[2], gc->weight_hh = x[3];
        return gc(x[0], x[1]);
      },
      {TD::randn({2, 3}), TD::randn({2, 2}), gc->weight_ih, gc->weight_hh}));

  nn::LSTMCellT<double> cell(3, 4);
  nn::LSTMT<double> lstm(3, 4);
  nn::StateDict<double> sd;
  for (const auto& [k, v] : cell->state_dict()) sd.insert(k + "_l0", v);
  lstm->load_state_dict(sd);
  const auto x = TD::randn({2, 3}), h0 = TD::randn({2, 4}), c0 = TD::randn({2, 4});
  auto [h, c] = cell(x, h0, c0);
  auto r = lstm(x.unsqueeze(0), h0.unsqueeze(0), c0.unsqueeze(0));
  check_close(h, r.h_n.squeeze(0), tight, 0);
  check_close(c, r.c_n.squeeze(0), tight, 0);
  // Unbatched cells: [in] -> [H].
  auto [h1, c1] = cell(x.select(0, 1), h0.select(0, 1), c0.select(0, 1));
  check_close(h1, h.select(0, 1), tight, 0);
  check_close(c1, c.select(0, 1), tight, 0);

  nn::GRUCellT<double> gcell(3, 4);
  nn::GRUT<double> gru(3, 4);
  nn::StateDict<double> gsd;
  for (const auto& [k, v] : gcell->state_dict()) gsd.insert(k + "_l0", v);
  gru->load_state_dict(gsd);
  check_close(gcell(x, h0), gru(x.unsqueeze(0), h0.unsqueeze(0)).h_n.squeeze(0), tight, 0);
  check_close(gcell(x), gru(x.unsqueeze(0)).h_n.squeeze(0), tight, 0);  // zero state by default
}

TEST_CASE("MultiheadAttention: gradcheck through query, key, value and parameters with both masks") {
  manual_seed(9);
  for (bool batch_first : {false, true}) {
    CAPTURE(batch_first);
    nn::MultiheadAttentionT<double> mha(4, 2, {.batch_first = batch_first});
    const auto pad = TD::from({0, 1, 0, 0, 0, 1}, {2, 3});
    auto am = TD::randn({4, 3});
    am.data()[2] = -std::numeric_limits<double>::infinity();
    const Shape qs = batch_first ? Shape{2, 4, 4} : Shape{4, 2, 4}, ks = batch_first ? Shape{2, 3, 4} : Shape{3, 2, 4};
    CHECK(gradcheck(
        [&](const std::vector<TD>& x) {
          mha->in_proj_weight = x[3], mha->in_proj_bias = x[4], mha->out_proj->weight = x[5], mha->out_proj->bias = x[6];
          auto [out, w] = mha(x[0], x[1], x[2], {.key_padding_mask = pad, .attn_mask = am, .average_attn_weights = false});
          return flat({out, w});
        },
        {TD::randn(qs), TD::randn(ks), TD::randn(ks), mha->in_proj_weight, mha->in_proj_bias, mha->out_proj->weight,
         mha->out_proj->bias}));
  }
  // Self-attention takes the fused projection: its gradient too.
  nn::MultiheadAttentionT<double> self(4, 2);
  CHECK(gradcheck(
      [&](const std::vector<TD>& x) {
        self->in_proj_weight = x[1];
        return self(x[0], x[0], x[0], {.is_causal = true}).attn_output;
      },
      {TD::randn({3, 2, 4}), self->in_proj_weight}));
  // kdim / vdim (separate projections), bias_k / bias_v and the zero slot, under a padding mask.
  nn::MultiheadAttentionT<double> kv(4, 2, {.add_bias_kv = true, .add_zero_attn = true, .kdim = 3, .vdim = 5});
  const auto pad = TD::from({0, 1, 0, 0, 0, 1}, {2, 3});
  CHECK(gradcheck(
      [&](const std::vector<TD>& x) {
        kv->q_proj_weight = x[3], kv->k_proj_weight = x[4], kv->v_proj_weight = x[5], kv->bias_k = x[6], kv->bias_v = x[7];
        auto [out, w] = kv(x[0], x[1], x[2], {.key_padding_mask = pad});
        return flat({out, w});
      },
      {TD::randn({4, 2, 4}), TD::randn({3, 2, 3}), TD::randn({3, 2, 5}), kv->q_proj_weight, kv->k_proj_weight,
       kv->v_proj_weight, kv->bias_k, kv->bias_v}));
}

TEST_CASE("scaled_dot_product_attention: plain-loop reference, causal mask, broadcast batch dims, gradcheck") {
  manual_seed(10);
  const auto q = TD::randn({2, 3, 4}), k = TD::randn({2, 5, 4}), v = TD::randn({2, 5, 2});
  auto mask = TD::randn({3, 5});
  const auto y = F::scaled_dot_product_attention(q, k, v, {.attn_mask = mask});
  CHECK(y.shape() == Shape{2, 3, 2});
  const auto qv = q.to_vector(), kv = k.to_vector(), vv = v.to_vector(), mv = mask.to_vector();
  std::vector<double> expect;
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 3; ++i) {
      std::vector<double> s(5);
      double mx = -1e300, z = 0;
      for (int j = 0; j < 5; ++j) {
        double d = 0;
        for (int e = 0; e < 4; ++e) d += qv[(b * 3 + i) * 4 + e] * kv[(b * 5 + j) * 4 + e];
        s[j] = d / 2.0 + mv[i * 5 + j];
        mx = std::max(mx, s[j]);
      }
      for (auto& x : s) z += (x = std::exp(x - mx));
      for (int c = 0; c < 2; ++c) {
        double acc = 0;
        for (int j = 0; j < 5; ++j) acc += s[j] / z * vv[(b * 5 + j) * 2 + c];
        expect.push_back(acc);
      }
    }
  check_close(y, expect, 1e-12, 1e-12);

  // is_causal is the explicit upper-triangular -inf mask; the first query sees only the first key.
  const auto ninf = -std::numeric_limits<double>::infinity();
  const auto causal = TD::from({0, ninf, ninf, ninf, ninf, 0, 0, ninf, ninf, ninf, 0, 0, 0, ninf, ninf}, {3, 5});
  const auto yc = F::scaled_dot_product_attention(q, k, v, {.is_causal = true});
  check_close(yc, F::scaled_dot_product_attention(q, k, v, {.attn_mask = causal}), tight, 0);
  check_close(yc.select(1, 0), v.select(1, 0), tight, 0);
  // A 2-D key/value broadcasts over the query's batch dim; scale overrides 1/sqrt(E).
  check_close(F::scaled_dot_product_attention(q, k.select(0, 1), v.select(0, 1), {.scale = 0.3}).select(0, 1),
              F::scaled_dot_product_attention(q.select(0, 1), k.select(0, 1), v.select(0, 1), {.scale = 0.3}), tight, 0);
  CHECK(gradcheck(
      [&](const std::vector<TD>& x) { return F::scaled_dot_product_attention(x[0], x[1], x[2], {.attn_mask = x[3]}); },
      {q, k, v, mask}));
  CHECK(gradcheck([&](const std::vector<TD>& x) { return F::scaled_dot_product_attention(x[0], x[1], x[2], {.is_causal = true}); },
                  {q, k, v}));
  // Dropout: p = 1 drops everything; a seed gives the same draw.
  CHECK(max_abs(F::scaled_dot_product_attention(q, k, v, {.dropout_p = 1.0})) == 0);
  Generator g1(3), g2(3);
  check_close(F::scaled_dot_product_attention(q, k, v, {.dropout_p = 0.5, .generator = &g1}),
              F::scaled_dot_product_attention(q, k, v, {.dropout_p = 0.5, .generator = &g2}), 0, 0);
}

// ---- layouts, states, modes -------------------------------------------------------

TEST_CASE("LSTM and GRU: batch_first, unbatched input and continuing from a state agree") {
  manual_seed(11);
  nn::LSTMT<double> tm(3, 4, {.num_layers = 2, .bidirectional = true});
  nn::LSTMT<double> bf(3, 4, {.num_layers = 2, .batch_first = true, .bidirectional = true});
  bf->load_state_dict(tm->state_dict());
  const auto x = TD::randn({5, 2, 3}), h0 = TD::randn({4, 2, 4}), c0 = TD::randn({4, 2, 4});
  auto a = tm(x, h0, c0);
  auto b = bf(x.transpose(0, 1), h0, c0);
  CHECK(a.output.shape() == Shape{5, 2, 8});
  CHECK(b.output.shape() == Shape{2, 5, 8});
  check_close(b.output, a.output.transpose(0, 1).contiguous(), tight, 0);
  check_close(b.h_n, a.h_n, tight, 0);
  check_close(b.c_n, a.c_n, tight, 0);
  // Unbatched [L, in] is batch 1 without the batch dim, whatever batch_first says.
  auto u = bf(x.select(1, 1), h0.select(1, 1), c0.select(1, 1));
  check_close(u.output, a.output.select(1, 1), tight, 0);
  check_close(u.h_n, a.h_n.select(1, 1), tight, 0);

  // Feeding the final state back continues the sequence (unidirectional).
  nn::GRUT<double> gru(3, 4, {.num_layers = 2});
  auto [full, hf] = gru(x);
  auto [first, h2] = gru(x.narrow(0, 0, 2));
  auto [rest, hr] = gru(x.narrow(0, 2, 3), h2);
  check_close(cat(std::vector<TD>{first, rest}, 0), full, tight, 0);
  check_close(hr, hf, tight, 0);
  // The last time step of a unidirectional output is h_n's last layer.
  check_close(full.select(0, 4), hf.select(0, 1), tight, 0);
}

TEST_CASE("LSTM, GRU, MultiheadAttention: dropout only in training mode") {
  manual_seed(12);
  nn::LSTMT<double> lstm(3, 4, {.num_layers = 2, .dropout = 0.5});
  nn::LSTMT<double> plain(3, 4, {.num_layers = 2});
  plain->load_state_dict(lstm->state_dict());
  const auto x = TD::randn({4, 2, 3});
  CHECK(lstm->is_training());
  CHECK(max_abs(lstm(x).output - plain(x).output) > 1e-6);  // a mask on layer 0's output
  lstm->eval();
  check_close(lstm(x).output, plain(x).output, tight, 0);
  // The last layer's output is never dropped: one layer, dropout 1, no effect.
  nn::GRUT<double> one(3, 4, {.dropout = 1.0});
  nn::GRUT<double> one_plain(3, 4);
  one_plain->load_state_dict(one->state_dict());
  check_close(one(x).output, one_plain(x).output, tight, 0);

  nn::MultiheadAttentionT<double> mha(4, 2, {.dropout = 0.5});
  const auto q = TD::randn({3, 2, 4});
  auto w_train = mha(q, q, q).attn_weights;  // dropped and rescaled: rows do not sum to 1
  CHECK(max_abs(w_train.sum({2}) - 1.0) > 1e-6);
  mha->eval();
  check_close(mha(q, q, q).attn_weights.sum({2}), TD::ones({2, 3}), 1e-12, 0);
}

TEST_CASE("MultiheadAttention: unbatched input, masks, is_causal") {
  manual_seed(13);
  nn::MultiheadAttentionT<double> mha(6, 2);
  const auto q = TD::randn({3, 2, 6}), k = TD::randn({4, 2, 6});
  const auto pad = TD::from({0, 0, 0, 1, 1, 0, 0, 0}, {2, 4});
  auto [out, w] = mha(q, k, k, {.key_padding_mask = pad});
  // Padded keys get zero weight in every head and every query.
  CHECK(w.select(0, 0).select(1, 3).abs().max().item() == 0);
  CHECK(w.select(0, 1).select(1, 0).abs().max().item() == 0);
  // Unbatched: the second sample alone, masks without the batch dim.
  auto [uo, uw] = mha(q.select(1, 1), k.select(1, 1), k.select(1, 1), {.key_padding_mask = pad.select(0, 1)});
  CHECK(uo.shape() == Shape{3, 6});
  CHECK(uw.shape() == Shape{3, 4});
  check_close(uo, out.select(1, 1), tight, 0);
  check_close(uw, w.select(0, 1), tight, 0);
  // A per-(batch, head) mask [N*h, L, S] equals the same [L, S] mask repeated.
  const auto am = TD::randn({3, 4});
  check_close(mha(q, k, k, {.attn_mask = am.unsqueeze(0).expand({4, 3, 4}).contiguous()}).attn_output,
              mha(q, k, k, {.attn_mask = am}).attn_output, tight, 0);
  // is_causal adds the causal mask (so passing both, as PyTorch's hint, changes nothing).
  const auto ninf = -std::numeric_limits<double>::infinity();
  const auto causal = TD::from({0, ninf, ninf, ninf, 0, 0, ninf, ninf, 0, 0, 0, ninf}, {3, 4});
  auto c1 = mha(q, k, k, {.is_causal = true});
  check_close(c1.attn_output, mha(q, k, k, {.attn_mask = causal}).attn_output, tight, 0);
  check_close(c1.attn_output, mha(q, k, k, {.attn_mask = causal, .is_causal = true}).attn_output, tight, 0);
  CHECK(c1.attn_weights.select(1, 0).select(1, 0).sum().item() == doctest::Approx(2.0));  // both batches, key 0 only
}

// ---- construction -------------------------------------------------------------------

TEST_CASE("LSTM, GRU, MultiheadAttention: PyTorch's default initialisation and printout") {
  manual_seed(14);
  nn::LSTMT<double> lstm(3, 16, {.num_layers = 2});
  nn::GRUT<double> gru(3, 16);
  for (const auto& p : lstm->parameters()) {
    CHECK(max_abs(p) <= 0.25);  // 1/sqrt(16)
    CHECK(max_abs(p) > 0.2);
  }
  for (const auto& p : gru->parameters()) CHECK(max_abs(p) <= 0.25);
  CHECK(lstm->parameters().size() == 8);

  nn::MultiheadAttentionT<double> mha(16, 4);
  const double xavier = std::sqrt(6.0 / (16 + 48));
  CHECK(max_abs(mha->in_proj_weight) <= xavier);
  CHECK(max_abs(mha->in_proj_weight) > 0.8 * xavier);
  CHECK(max_abs(mha->in_proj_bias) == 0);
  CHECK(max_abs(mha->out_proj->bias) == 0);
  CHECK(max_abs(mha->out_proj->weight) <= 0.25);
  CHECK(max_abs(mha->out_proj->weight) > 0.2);
  CHECK(mha->head_dim == 4);
  for (const auto& p : mha->parameters()) CHECK(p.requires_grad());

  std::ostringstream os;
  os << nn::LSTM(10, 20, {.num_layers = 2, .batch_first = true, .dropout = 0.5}) << "|" << nn::GRU(4, 5) << "|"
     << nn::MultiheadAttention(8, 2);
  CHECK(os.str() ==
        "LSTM(10, 20, num_layers=2, batch_first=True, dropout=0.5)|GRU(4, 5)|MultiheadAttention(embed_dim=8, num_heads=2\n"
        "  (out_proj): Linear(in_features=8, out_features=8, bias=True)\n)");
}

TEST_CASE("LSTM, GRU, MultiheadAttention in float through their handles") {
  nn::LSTM lstm(4, 5);
  auto [out, h, c] = lstm(TF::randn({3, 2, 4}));
  CHECK(out.shape() == Shape{3, 2, 5});
  auto next = lstm(TF::randn({1, 2, 4}), h, c);
  CHECK(next.c_n.shape() == Shape{1, 2, 5});
  nn::GRU gru(4, 5, {.bidirectional = true});
  CHECK(gru(TF::randn({3, 2, 4})).output.shape() == Shape{3, 2, 10});
  nn::MultiheadAttention mha(8, 2, {.batch_first = true});
  const auto x = TF::randn({2, 3, 8});
  auto [y, w] = mha(x, x, x, {.need_weights = true});
  CHECK(y.shape() == Shape{2, 3, 8});
  CHECK(w.shape() == Shape{2, 3, 3});
  (y.sum() + out.sum()).backward();
  CHECK(mha->in_proj_weight.grad().defined());
  CHECK(lstm->all_weights[0].weight_hh.grad().defined());
  nn::LSTMCell cell(4, 5);
  CHECK(cell(TF::randn({4}))[0].shape() == Shape{5});
}

// ---- bad input ----------------------------------------------------------------------

TEST_CASE("LSTM, GRU, cells, MultiheadAttention, sdpa: errors name the layer, the shapes and what was expected") {
  nn::LSTMT<double> lstm(4, 5, {.num_layers = 2});
  CHECK_THROWS_WITH_AS(lstm(TD::zeros({3, 2, 3})),
                       doctest::Contains("frost::nn::LSTM: input of shape [3, 2, 3] must have input_size = 4"),
                       frost::Error);
  CHECK_THROWS_WITH_AS(lstm(TD::zeros({1, 3, 2, 4})), doctest::Contains("expects a 3-D input [L, N, input_size]"),
                       frost::Error);
  CHECK_THROWS_WITH_AS(lstm(TD::zeros({3, 2, 4}), TD::zeros({1, 2, 5}), TD::zeros({2, 2, 5})),
                       doctest::Contains("frost::nn::LSTM: expected h0 of shape [2, 2, 5]"), frost::Error);
  CHECK_THROWS_WITH_AS(lstm(TD::zeros({3, 2, 4}), TD::zeros({2, 2, 5}), TD::zeros({2, 3, 5})),
                       doctest::Contains("expected c0 of shape [2, 2, 5] (num_layers*num_directions, batch, hidden_size), got [2, 3, 5]"),
                       frost::Error);
  CHECK_THROWS_WITH_AS(lstm(TD::zeros({3, 2, 4}), TD::zeros({2, 2, 5})),
                       doctest::Contains("give both h0 and c0 or neither"), frost::Error);
  CHECK_THROWS_WITH_AS(lstm(TD::zeros({0, 2, 4})), doctest::Contains("sequence length"), frost::Error);
  nn::GRUT<double> gru(4, 5, {.batch_first = true, .bidirectional = true});
  CHECK_THROWS_WITH_AS(gru(TD::zeros({2, 3, 4}), TD::zeros({1, 2, 5})),
                       doctest::Contains("frost::nn::GRU: expected h0 of shape [2, 2, 5]"), frost::Error);
  CHECK_THROWS_WITH_AS(gru(TD::zeros({5})), doctest::Contains("[N, L, input_size]"), frost::Error);
  CHECK_THROWS_WITH_AS(nn::GRU(4, 5, {.num_layers = 0}), doctest::Contains("num_layers must be at least 1"), frost::Error);
  CHECK_THROWS_WITH_AS(nn::LSTM(4, 5, {.dropout = 1.5}), doctest::Contains("dropout must be in [0, 1]"), frost::Error);
  CHECK_THROWS_WITH_AS(nn::LSTM(0, 5), doctest::Contains("input_size (0) and hidden_size (5) must be positive"),
                       frost::Error);

  nn::LSTMCellT<double> cell(4, 5);
  CHECK_THROWS_WITH_AS(cell(TD::zeros({2, 3})), doctest::Contains("frost::nn::LSTMCell: expects input [N, 4] or [4]"),
                       frost::Error);
  CHECK_THROWS_WITH_AS(cell(TD::zeros({2, 4}), TD::zeros({3, 5}), TD::zeros({2, 5})),
                       doctest::Contains("expected h of shape [2, 5] for input [2, 4], got [3, 5]"), frost::Error);
  nn::GRUCellT<double> gcell(4, 5);
  CHECK_THROWS_WITH_AS(gcell(TD::zeros({4}), TD::zeros({2, 5})), doctest::Contains("frost::nn::GRUCell: expected h of shape [5]"),
                       frost::Error);

  CHECK_THROWS_WITH_AS(nn::MultiheadAttention(10, 3),
                       doctest::Contains("frost::nn::MultiheadAttention: embed_dim (10) must be divisible by num_heads (3)"),
                       frost::Error);
  nn::MultiheadAttentionT<double> mha(8, 2);
  const auto q = TD::zeros({3, 2, 8}), k = TD::zeros({4, 2, 8});
  CHECK_THROWS_WITH_AS(mha(TD::zeros({3, 2, 6}), k, k),
                       doctest::Contains("expects query [L, N, E], key [S, N, kdim] and value [S, N, vdim] (or "
                                         "unbatched [L, E], [S, kdim], [S, vdim]) with E = embed_dim = 8, kdim = 8, "
                                         "vdim = 8, got shapes [3, 2, 6], [4, 2, 8] and [4, 2, 8]"),
                       frost::Error);
  CHECK_THROWS_WITH_AS(mha(q, TD::zeros({4, 3, 8}), TD::zeros({4, 3, 8})), doctest::Contains("got shapes [3, 2, 8], [4, 3, 8]"),
                       frost::Error);
  CHECK_THROWS_WITH_AS(mha(q, k, k, {.key_padding_mask = TD::zeros({2, 3})}),
                       doctest::Contains("key_padding_mask of shape [2, 3] must be [2, 4] ([N, S])"), frost::Error);
  CHECK_THROWS_WITH_AS(mha(q, k, k, {.attn_mask = TD::zeros({4, 3})}),
                       doctest::Contains("attn_mask of shape [4, 3] must be [3, 4] or [4, 3, 4]"), frost::Error);

  CHECK_THROWS_WITH_AS(F::scaled_dot_product_attention(TD::zeros({3, 4}), TD::zeros({5, 3}), TD::zeros({5, 2})),
                       doctest::Contains("scaled_dot_product_attention: expects query [..., L, E], key [..., S, E]"),
                       frost::Error);
  CHECK_THROWS_WITH_AS(
      F::scaled_dot_product_attention(TD::zeros({3, 4}), TD::zeros({5, 4}), TD::zeros({5, 2}), {.attn_mask = TD::zeros({2, 5})}),
      doctest::Contains("attn_mask of shape [2, 5] does not broadcast to the attention scores' shape [3, 5]"), frost::Error);
  CHECK_THROWS_WITH_AS(F::scaled_dot_product_attention(TD::zeros({3, 4}), TD::zeros({5, 4}), TD::zeros({5, 2}),
                                                       {.attn_mask = TD::zeros({3, 5}), .is_causal = true}),
                       doctest::Contains("give attn_mask or is_causal, not both"), frost::Error);
}
