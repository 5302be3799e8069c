// Op table rows for views and copies (reshape family, transposes, expand,
// slicing) and for joining and indexing (cat, stack, split, chunk,
// index_select, gather, scatter_add, one_hot).
#include "op_table.hpp"

namespace frost::test::optable {

namespace {

// Index data shared by the frost lambdas and the references.
const Idx kSel{{3}, {2, 0, 2}};
const Idx kSelOne{{1}, {1}};
const Idx kSelLast{{3}, {3, 1, 0}};
const Idx kGather1{{3, 2}, {0, 3, 2, 2, 1, 0}};             // along dim 1 of [3, 4]
const Idx kGather0{{2, 4}, {2, 0, 1, 2, 0, 0, 2, 1}};       // along dim 0 of [3, 4]
const Idx kGatherSmall{{2, 2}, {3, 0, 1, 1}};               // along dim 1 of [3, 4], fewer rows
const Idx kGather3{{2, 3, 2}, {1, 0, 0, 0, 1, 1, 0, 1, 1, 0, 0, 0}};  // along dim 2 of [2, 3, 2]
const Idx kScatter0{{2, 4}, {0, 2, 2, 1, 0, 2, 1, 1}};      // into dim 0 of [3, 4], repeats
const Idx kScatter1{{2, 3}, {4, 0, 4, 1, 1, 3}};            // into dim 1 of [2, 5], src [2, 4]
const Idx kSelEveryOther{{6}, {2, 7, 0, 7, 2, 7}};         // every second entry is kSel
const Idx kGather1T{{2, 3}, {0, 2, 1, 3, 2, 0}};            // transposed, kGather1

/// `idx` with every second entry along dim 0, as a strided view.
template <class T>
IndexTensor every_other(const Idx& idx, const Tensor<T>& like) {
  return idx.t(like).slice(0, 0, idx.shape[0], 2);
}

}  // namespace

std::vector<Row> views_index_rows() {
  const Gen u = uniform(-2, 2);
  return {
      // ---- reshape family ------------------------------------------------------
      row("view", {{2, 6}}, u, FN(x[0].view({3, 4})), REF(reshaped(x[0], {3, 4}))),
      row("view", {{2, 6}}, u, FN(x[0].view({-1})), REF(reshaped(x[0], {12}))),
      row("view", {{2, 3, 2}}, u, FN(x[0].view({4, -1})), REF(reshaped(x[0], {4, 3}))),
      row("view", {{3, 2}}, u, FN(x[0].view({3, 1, 2})), REF(reshaped(x[0], {3, 1, 2}))).layout({kT}),
      row("reshape", {{2, 3, 2}}, u, FN(x[0].reshape({3, 4})), REF(reshaped(x[0], {3, 4}))),
      row("reshape", {{3, 4}}, u, FN(x[0].reshape({-1})), REF(reshaped(x[0], {12}))).layout({kT}).with_note("copies"),
      row("reshape", {{2, 3}}, u, FN(x[0].reshape({6})), REF(reshaped(x[0], {6}))).layout({kS}),
      row("reshape", {{2, 3}}, u, FN(x[0].reshape({2, 3})), REF(x[0])).with_note("same shape"),
      row("flatten", {{2, 3, 2}}, u, FN(x[0].flatten()), REF(reshaped(x[0], {12}))),
      row("flatten", {{2, 3, 2}}, u, FN(x[0].flatten(1)), REF(reshaped(x[0], {2, 6}))),
      row("flatten", {{2, 3, 2}}, u, FN(x[0].flatten(0, 1)), REF(reshaped(x[0], {6, 2}))),
      row("flatten", {{3, 4}}, u, FN(x[0].flatten()), REF(reshaped(x[0], {12}))).layout({kT}),
      row("flatten", {Shape{}}, u, FN(x[0].flatten()), REF(reshaped(x[0], {1}))),
      row("unflatten", {{2, 6}}, u, FN(x[0].unflatten(1, {2, 3})), REF(reshaped(x[0], {2, 2, 3}))),
      row("unflatten", {{2, 6}}, u, FN(x[0].unflatten(-1, {-1, 2})), REF(reshaped(x[0], {2, 3, 2}))),
      row("unflatten", {{4, 3}}, u, FN(x[0].unflatten(0, {2, 2})), REF(reshaped(x[0], {2, 2, 3}))).layout({kS}),
      row("unsqueeze", {{2, 3}}, u, FN(x[0].unsqueeze(0)), REF(reshaped(x[0], {1, 2, 3}))),
      row("unsqueeze", {{2, 3}}, u, FN(x[0].unsqueeze(-1)), REF(reshaped(x[0], {2, 3, 1}))),
      row("unsqueeze", {{3, 3}}, u, FN(x[0].unsqueeze(1)), REF(reshaped(x[0], {3, 1, 3}))).layout({kT}),
      row("unsqueeze", {Shape{}}, u, FN(x[0].unsqueeze(0)), REF(reshaped(x[0], {1}))),
      row("squeeze", {{2, 1, 3, 1}}, u, FN(x[0].squeeze()), REF(reshaped(x[0], {2, 3}))),
      row("squeeze", {{2, 1, 3, 1}}, u, FN(x[0].squeeze(1)), REF(reshaped(x[0], {2, 3, 1}))),
      row("squeeze", {{2, 1, 3, 1}}, u, FN(x[0].squeeze(-1)), REF(reshaped(x[0], {2, 1, 3}))),
      row("squeeze", {{2, 1, 3, 1}}, u, FN(x[0].squeeze(0)), REF(x[0])).with_note("size 2: unchanged"),
      row("squeeze", {{1, 3, 2}}, u, FN(x[0].squeeze()), REF(reshaped(x[0], {3, 2}))).layout({kT}),

      // ---- transposes, expand ----------------------------------------------------
      row("transpose", {{2, 3, 4}}, u, FN(x[0].transpose(0, 2)), REF(transposed(x[0], 0, 2))),
      row("transpose", {{2, 3, 4}}, u, FN(x[0].transpose(1, -1)), REF(transposed(x[0], 1, 2))),
      row("transpose", {{3, 4}}, u, FN(x[0].t()), REF(transposed(x[0], 0, 1))).layout({kT}),
      row("permute", {{2, 3, 4}}, u, FN(x[0].permute({2, 0, 1})), REF(permuted(x[0], {2, 0, 1}))),
      row("permute", {{2, 3, 4}}, u, FN(x[0].permute({-2, -1, 0})), REF(permuted(x[0], {1, 2, 0}))).layout({kS}),
      row("permute", {{2, 3, 4}}, u, FN(x[0].permute({0, 2, 1})), REF(permuted(x[0], {0, 2, 1}))).layout({kT}),
      row("expand", {{3, 1}}, u, FN(x[0].expand({2, 3, 4})), REF(broadcast_to(x[0], {2, 3, 4}))),
      row("expand", {{3, 1}}, u, FN(x[0].expand({-1, 4})), REF(broadcast_to(x[0], {3, 4}))),
      row("expand", {Shape{}}, u, FN(x[0].expand({2, 2})), REF(broadcast_to(x[0], {2, 2}))),
      row("expand", {{1, 3}}, u, FN(x[0].expand({2, 3})), REF(broadcast_to(x[0], {2, 3}))).layout({kS}),
      row("expand", {{2, 3}}, u, FN(x[0].expand_as(x[0])), REF(x[0])).with_note("same shape"),

      // ---- slicing ----------------------------------------------------------------
      row("narrow", {{4, 5}}, u, FN(x[0].narrow(1, 1, 3)), REF(sliced(x[0], 1, 1, 3))),
      row("narrow", {{4, 5}}, u, FN(x[0].narrow(0, -2, 2)), REF(sliced(x[0], 0, 2, 2))),
      row("narrow", {{3, 4}}, u, FN(x[0].narrow(-1, 2, 2)), REF(sliced(x[0], 1, 2, 2))).layout({kT}),
      row("slice", {{4, 5}}, u, FN(x[0].slice(1, 1, 5, 2)), REF(sliced(x[0], 1, 1, 2, 2))),
      row("slice", {{4, 5}}, u, FN(x[0].slice(0, -3, -1)), REF(sliced(x[0], 0, 1, 2))),
      row("slice", {{4, 5}}, u, FN(x[0].slice(1, 0, 100, 3)), REF(sliced(x[0], 1, 0, 2, 3))).with_note("end past the size"),
      row("slice", {{4, 5}}, u, FN(x[0].slice(1, 3, 3)), REF(sliced(x[0], 1, 3, 0))).with_note("empty"),
      row("slice", {{3, 4}}, u, FN(x[0].slice(0, 1, 3)), REF(sliced(x[0], 0, 1, 2))).layout({kT}),
      row("slice", {{2, 3}}, u, FN(x[0].slice(1, 0, 3, 2)), REF(sliced(x[0], 1, 0, 2, 2))).layout({kS}),
      row("select", {{3, 4}}, u, FN(x[0].select(0, 1)), REF(reshaped(sliced(x[0], 0, 1, 1), {4}))),
      row("select", {{3, 4}}, u, FN(x[0].select(1, -1)), REF(reshaped(sliced(x[0], 1, 3, 1), {3}))),
      row("select", {{2, 3, 4}}, u, FN(x[0].select(1, 2)), REF(reshaped(sliced(x[0], 1, 2, 1), {2, 4}))).layout({kT}),
      row("contiguous", {{3, 4}}, u, FN(x[0].contiguous()), REF(x[0])).layout({kT}),
      row("contiguous", {{2, 3}}, u, FN(x[0].contiguous()), REF(x[0])).layout({kS}),
      row("contiguous", {{2, 3}}, u, FN(x[0].contiguous()), REF(x[0])).with_note("already contiguous"),
      row("clone", {{2, 3}}, u, FN(x[0].clone()), REF(x[0])),
      row("clone", {{3, 3}}, u, FN(x[0].clone()), REF(x[0])).layout({kT}),
      row("clone", {{2, 3}}, u, FN(x[0].clone()), REF(x[0])).layout({kE}),

      // ---- joining -------------------------------------------------------------------
      row("cat", {{2, 3}, {1, 3}}, u, FN(frost::cat(std::vector{x[0], x[1]})), REF(concatenated(x, 0))),
      row("cat", {{2, 1}, {2, 3}, {2, 2}}, u, FN(frost::cat(x, 1)), REF(concatenated(x, 1))),
      row("cat", {{3, 2}, {3, 2}}, u, FN(frost::cat(x, -1)), REF(concatenated(x, 1))).layout({kT, kS}),
      row("cat", {{2, 3}}, u, FN(frost::cat(std::vector{x[0], x[0]}, 0)), REF(concatenated({x[0], x[0]}, 0))).with_note("same tensor twice"),
      row("cat", {{2, 3}, {0, 3}, {1, 3}}, u, FN(frost::cat(x)), REF(concatenated(x, 0))).with_note("empty piece"),
      row("stack", {{2, 3}, {2, 3}}, u, FN(frost::stack(x)), REF(stacked(x, 0))),
      row("stack", {{2, 3}, {2, 3}}, u, FN(frost::stack(x, 2)), REF(stacked(x, 2))),
      row("stack", {{3}, {3}, {3}}, u, FN(frost::stack(x, -1)), REF(stacked(x, 1))),
      row("stack", {{3, 3}, {3, 3}}, u, FN(frost::stack(x, 1)), REF(stacked(x, 1))).layout({kT, kC}),
      row("split", {{2, 5}}, u, FN(x[0].split(2, 1)[2]), REF(sliced(x[0], 1, 4, 1))).with_note("short last piece"),
      row("split", {{2, 5}}, u, [](const auto& x) { auto p = x[0].split(2, 1); return frost::cat(std::vector{p[2], p[0], p[1]}, 1); },
          REF(concatenated({sliced(x[0], 1, 4, 1), sliced(x[0], 1, 0, 2), sliced(x[0], 1, 2, 2)}, 1))).with_note("pieces reordered"),
      row("split", {{4, 3}}, u, FN(x[0].split(3)[0]), REF(sliced(x[0], 0, 0, 3))).layout({kT}),
      row("chunk", {{6, 2}}, u, FN(x[0].chunk(3)[2]), REF(sliced(x[0], 0, 4, 2))),
      row("chunk", {{3, 5}}, u, [](const auto& x) { auto p = x[0].chunk(2, 1); return frost::cat(std::vector{p[1], p[0]}, 1); },
          REF(concatenated({sliced(x[0], 1, 3, 2), sliced(x[0], 1, 0, 3)}, 1))).with_note("pieces reordered"),
      row("chunk", {{2, 3}}, u, FN(x[0].chunk(4, -1)[1]), REF(sliced(x[0], 1, 1, 1))).layout({kS}).with_note("more chunks than elements"),

      // ---- indexing ----------------------------------------------------------------------
      row("index_select", {{4, 3}}, u, FN(x[0].index_select(0, kSel.t(x[0]))), REF(index_selected(x[0], 0, kSel))),
      row("index_select", {{3, 4}}, u, FN(x[0].index_select(1, kSelOne.t(x[0]))), REF(index_selected(x[0], 1, kSelOne))),
      row("index_select", {{2, 3, 4}}, u, FN(x[0].index_select(-1, kSelLast.t(x[0]))), REF(index_selected(x[0], 2, kSelLast))),
      row("index_select", {{3, 4}}, u, FN(x[0].index_select(0, kSel.t(x[0]))), REF(index_selected(x[0], 0, kSel))).layout({kT}),
      row("index_select", {{3, 4}}, u, FN(x[0].index_select(0, every_other(kSelEveryOther, x[0]))), REF(index_selected(x[0], 0, kSel)))
          .with_note("strided index"),
      row("gather", {{3, 4}}, u, FN(x[0].gather(1, kGather1.t(x[0]))), REF(gathered(x[0], 1, kGather1))),
      row("gather", {{3, 4}}, u, FN(x[0].gather(0, kGather0.t(x[0]))), REF(gathered(x[0], 0, kGather0))),
      row("gather", {{3, 4}}, u, FN(x[0].gather(1, kGatherSmall.t(x[0]))), REF(gathered(x[0], 1, kGatherSmall))).layout({kT}),
      row("gather", {{2, 3, 2}}, u, FN(x[0].gather(-1, kGather3.t(x[0]))), REF(gathered(x[0], 2, kGather3))),
      row("gather", {{3, 4}}, u, FN(x[0].gather(1, kGather1T.t(x[0]).t())), REF(gathered(x[0], 1, kGather1))).with_note("transposed index"),
      row("scatter_add", {{3, 4}, {2, 4}}, u, FN(x[0].scatter_add(0, kScatter0.t(x[0]), x[1])), REF(scatter_added(x[0], 0, kScatter0, x[1]))),
      row("scatter_add", {{2, 5}, {2, 4}}, u, FN(x[0].scatter_add(1, kScatter1.t(x[0]), x[1])), REF(scatter_added(x[0], 1, kScatter1, x[1]))).with_note("src larger than index"),
      row("scatter_add", {{3, 4}, {2, 4}}, u, FN(x[0].scatter_add(0, kScatter0.t(x[0]), x[1])), REF(scatter_added(x[0], 0, kScatter0, x[1]))).layout({kT, kS}),
      row("one_hot", {{4}}, ints(0, 3), FN(as_values(x, frost::one_hot(as_index(x[0]), 5))), REF(one_hot_ref(x[0], 5))).no_grad(),
      row("one_hot", {{2, 3}}, ints(0, 3), FN(as_values(x, frost::one_hot(as_index(x[0])))), REF(one_hot_ref(x[0], -1))).no_grad().with_note("inferred classes"),
      row("one_hot", {{3, 2}}, ints(0, 2), FN(as_values(x, frost::one_hot(as_index(x[0]), 3))), REF(one_hot_ref(x[0], 3))).no_grad().layout({kT}),
  };
}

TEST_CASE("op table: view and indexing rows: forward in double") { check_forward_double(views_index_rows()); }
TEST_CASE("op table: view and indexing rows: forward in float") { check_forward_float(views_index_rows()); }
TEST_CASE("op table: view and indexing rows: frozen plan equals eager") { check_frozen(views_index_rows()); }
TEST_CASE("op table: view and indexing rows: gradcheck in double") { check_gradients(views_index_rows()); }
TEST_CASE("op table: view and indexing rows: second derivatives in double") { check_second_derivatives(views_index_rows()); }

}  // namespace frost::test::optable
