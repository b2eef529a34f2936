//===- MergeRows.cpp - The log-sum-exp merge of split partials ------------===//
//
// emitMergeWeights and WeightedSum: fd.merge in two steps, shared by the
// merge kernel and the fused merge.
//
//===----------------------------------------------------------------------===//

#include "MergeRows.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

namespace {

/// Independent multiply-add chains per output element (split i joins chain
/// i mod kChains): 64 splits cost 16 dependent FMAs, not 64 (or 32 with the
/// two chains before: fdemu, gpt-oss B=1 L=32k's merge 1249 -> about 1190
/// cycles).
constexpr int64_t kChains = 4;

/// Combines `values` pairwise: a tree of depth log2(n) rather than a chain
/// of n dependent operations.
Value reduceTree(SmallVector<Value> values,
                 function_ref<Value(Value, Value)> combine) {
  while (values.size() > 1) {
    SmallVector<Value> next;
    for (size_t i = 0; i + 1 < values.size(); i += 2)
      next.push_back(combine(values[i], values[i + 1]));
    if (values.size() % 2)
      next.push_back(values.back());
    values = std::move(next);
  }
  return values.front();
}

/// `then()`'s values where `condition` holds (null: always), `otherwise`
/// elsewhere: an scf.if, so that `then` runs only where it holds.
SmallVector<Value> emitWhere(KernelEmitter &e, Value condition,
                             function_ref<SmallVector<Value>()> then,
                             ArrayRef<Value> otherwise) {
  if (!condition)
    return then();
  auto where = scf::IfOp::create(e.b, e.loc, ValueRange(otherwise).getTypes(),
                                 condition, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(e.b);
  e.b.setInsertionPointToStart(where.thenBlock());
  scf::YieldOp::create(e.b, e.loc, then());
  e.b.setInsertionPointToStart(where.elseBlock());
  scf::YieldOp::create(e.b, e.loc, otherwise);
  return SmallVector<Value>(where.getResults());
}

} // namespace

SmallVector<Value> mlir::fd::detail::loadMergeLses(KernelEmitter &e,
                                                   const MergeBuffers &buffers,
                                                   Value row, Value isQuery,
                                                   Value lane) {
  Type f32 = e.b.getF32Type();
  const int64_t numSplits = buffers.numSplits;
  const int64_t perLane = llvm::divideCeil(numSplits, 32);
  Value log2e = e.f32(llvm::numbers::log2e);
  Value firstSplit = e.mul(row, e.index(numSplits));
  // Split lane + 32 j of the row, if there is one.
  auto splitOf = [&](int64_t j) { return e.add(lane, e.index(32 * j)); };
  auto isSplit = [&](int64_t j) -> Value {
    return 32 * (j + 1) <= numSplits
               ? Value()
               : e.lessThan(splitOf(j), e.index(numSplits));
  };
  // The lane's lses in base 2 (-inf past the splits), all loads first.
  return emitWhere(
      e, isQuery,
      [&] {
        SmallVector<Value> loaded;
        for (int64_t j = 0; j < perLane; ++j) {
          Value split = e.min(splitOf(j), e.index(numSplits - 1));
          loaded.push_back(e.load(f32, buffers.partialLse, f32,
                                  e.add(firstSplit, split), 4));
        }
        for (int64_t j = 0; j < perLane; ++j) {
          loaded[j] = e.mul(loaded[j], log2e);
          if (Value real = isSplit(j))
            loaded[j] = e.select(real, loaded[j], e.negInf());
        }
        return loaded;
      },
      SmallVector<Value>(perLane, e.negInf()));
}

void mlir::fd::detail::emitMergeWeights(KernelEmitter &e,
                                        const MergeBuffers &buffers, Value row,
                                        Value head, Value isQuery, Value lane,
                                        Value weightRow, Value writes,
                                        ArrayRef<Value> loadedLses) {
  OpBuilder &b = e.b;
  Type f32 = b.getF32Type();
  const int64_t numSplits = buffers.numSplits;
  const int64_t perLane = llvm::divideCeil(numSplits, 32);
  Value log2e = e.f32(llvm::numbers::log2e);
  // Split lane + 32 j of the row.
  auto splitOf = [&](int64_t j) { return e.add(lane, e.index(32 * j)); };

  // A sink is one more partial (AttentionUtils.h): its lse the sink, its
  // output zero. Loaded first, beside the lses.
  Value sink;
  if (buffers.sinks) {
    sink = e.mul(e.load(f32, buffers.sinks, f32, head, 4), log2e);
    if (isQuery)
      sink = e.select(isQuery, sink, e.negInf());
  }
  SmallVector<Value> lses(loadedLses);
  if (lses.empty())
    lses = loadMergeLses(e, buffers, row, isQuery, lane);
  auto maximum = [&](Value lhs, Value rhs) { return e.max(lhs, rhs); };
  auto add = [&](Value lhs, Value rhs) { return e.add(lhs, rhs); };
  Value max = e.reduceWarp(reduceTree(lses, maximum), maximum);
  if (sink)
    max = maximum(max, sink);
  Value shift = buildMergeShift(b, e.loc, max);
  SmallVector<Value> weights;
  for (Value lse : lses)
    weights.push_back(e.exp2(e.sub(lse, shift)));
  Value sum = e.reduceWarp(reduceTree(weights, add), add);
  if (sink)
    sum = e.add(sum, e.exp2(e.sub(sink, shift)));
  Value hasKeys = buildSawKeys(b, e.loc, max);

  // Stores where `condition` (null: always) and `writes` hold.
  auto storeWhere = [&](Value condition, function_ref<void()> store) {
    if (writes)
      condition = condition ? arith::AndIOp::create(b, e.loc, condition, writes)
                            : writes;
    if (!condition) {
      store();
      return;
    }
    auto ifStores = scf::IfOp::create(b, e.loc, condition, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifStores.thenBlock());
    store();
  };
  // Past the splits, zeros up to the row's end in `weights`.
  const int64_t perRow = MergeBuffers::getWeightsPerRow(numSplits);
  Value weightBase = e.mul(weightRow, e.index(perRow));
  for (int64_t j = 0; j < perLane; ++j) {
    Value weight = e.select(
        hasKeys, arith::DivFOp::create(b, e.loc, weights[j], sum), e.f32(0.0));
    storeWhere(32 * (j + 1) <= perRow ? Value()
                                      : e.lessThan(splitOf(j), e.index(perRow)),
               [&] {
                 memref::StoreOp::create(
                     b, e.loc, weight, buffers.weights,
                     ValueRange{e.add(weightBase, splitOf(j))});
               });
  }
  if (buffers.lse) {
    Value firstLane = e.equal(lane, e.index(0));
    if (buffers.writesLse)
      firstLane = arith::AndIOp::create(b, e.loc, firstLane, buffers.writesLse);
    storeWhere(firstLane, [&] {
      Value lse = e.mul(e.add(max, e.log2(sum)), e.f32(llvm::numbers::ln2));
      e.store(e.select(hasKeys, lse, e.negInf()), buffers.lse, row);
    });
  }
}

WeightedSum::WeightedSum(KernelEmitter &e, const MergeBuffers &buffers,
                         Value row, Value firstDim, int64_t width,
                         Value isQuery, int64_t splitsPerIteration,
                         Value shareFirst, int64_t shareSplits)
    : e(e), buffers(buffers), row(row), firstDim(firstDim), width(width),
      isQuery(isQuery), splitsPerIteration(splitsPerIteration),
      shareFirst(shareFirst ? shareFirst : e.index(0)),
      shareSplits(shareFirst ? shareSplits : buffers.numSplits),
      mayOverrun(shareFirst != nullptr) {}

Type WeightedSum::getSliceType() const {
  Type f32 = e.b.getF32Type();
  return width == 1 ? f32 : VectorType::get({width}, f32);
}

Value WeightedSum::getShareSplit(Value first, int64_t i) {
  return e.add(e.add(shareFirst, first), e.index(i));
}

Value WeightedSum::getSplit(Value first, int64_t i) {
  Value split = getShareSplit(first, i);
  return mayOverrun ? e.min(split, e.index(buffers.numSplits - 1)) : split;
}

Value WeightedSum::isSplit(Value first, int64_t i) {
  return e.lessThan(getShareSplit(first, i), e.index(buffers.numSplits));
}

SmallVector<Value> WeightedSum::loadPartials(Value first, int64_t count) {
  Type f32 = e.b.getF32Type();
  const int64_t headDim = buffers.headDim;
  Value rowFirst = e.mul(row, e.index(buffers.numSplits));
  SmallVector<Value> partials;
  for (int64_t i = 0; i < count; ++i)
    partials.push_back(e.load(
        getSliceType(), buffers.partialOutput, f32,
        e.add(e.mul(e.add(rowFirst, getSplit(first, i)), e.index(headDim)),
              firstDim),
        4 * width));
  return partials;
}

SmallVector<Value> WeightedSum::accumulate(Value weightBase, Value first,
                                           ArrayRef<Value> partials,
                                           ValueRange chains) {
  SmallVector<Value> weights;
  for (int64_t i = 0; i < static_cast<int64_t>(partials.size()); ++i) {
    Value weight = memref::LoadOp::create(
        e.b, e.loc, buffers.weights,
        ValueRange{e.add(weightBase, getSplit(first, i))});
    if (mayOverrun)
      weight = e.select(isSplit(first, i), weight, e.f32(0.0));
    weights.push_back(weight);
  }
  SmallVector<Value> next(chains);
  for (auto [i, partial] : llvm::enumerate(partials))
    for (int64_t d = 0; d < width; ++d) {
      Value &chain = next[kChains * d + i % kChains];
      chain = e.fma(weights[i], width == 1 ? partial : e.extract(partial, d),
                    chain);
    }
  return next;
}

void WeightedSum::preloadFirstIteration() {
  const int64_t count = std::min<int64_t>(splitsPerIteration, shareSplits);
  Value zero =
      arith::ConstantOp::create(e.b, e.loc, e.b.getZeroAttr(getSliceType()));
  preloaded = emitWhere(
      e, isQuery, [&] { return loadPartials(e.index(0), count); },
      SmallVector<Value>(count, zero));
}

SmallVector<Value> WeightedSum::sum(Value weightRow) {
  OpBuilder &b = e.b;
  const int64_t numSplits = shareSplits;
  Value weightBase = e.mul(
      weightRow, e.index(MergeBuffers::getWeightsPerRow(buffers.numSplits)));
  // kChains chains per element. The preloaded splits
  // first, then whole iterations, then the splits left (a static count): no
  // bounds checks. A padding token's row reads nothing.
  SmallVector<Value> chains(kChains * width, e.f32(0.0));
  const int64_t preloadedCount = preloaded.size();
  if (preloadedCount) {
    SmallVector<Value> before = chains;
    chains = emitWhere(
        e, isQuery,
        [&] { return accumulate(weightBase, e.index(0), preloaded, before); },
        before);
  }
  const int64_t rest = numSplits - preloadedCount;
  const int64_t remainder = rest % splitsPerIteration;
  const int64_t wholeEnd = numSplits - remainder;
  auto sumSplits = [&](Value first, int64_t count, ValueRange current) {
    return accumulate(weightBase, first, loadPartials(first, count), current);
  };
  if (rest >= splitsPerIteration) {
    Value end = e.index(wholeEnd);
    if (isQuery)
      end = e.select(isQuery, end, e.index(preloadedCount));
    auto loop = scf::ForOp::create(
        b, e.loc, e.index(preloadedCount), end, e.index(splitsPerIteration),
        chains, [&](OpBuilder &, Location, Value first, ValueRange current) {
          scf::YieldOp::create(b, e.loc,
                               sumSplits(first, splitsPerIteration, current));
        });
    chains = SmallVector<Value>(loop.getResults());
  }
  if (remainder) {
    SmallVector<Value> before = chains;
    chains = emitWhere(
        e, isQuery,
        [&] { return sumSplits(e.index(wholeEnd), remainder, before); },
        before);
  }

  SmallVector<Value> sums;
  for (int64_t d = 0; d < width; ++d)
    sums.push_back(reduceTree(
        SmallVector<Value>(ArrayRef<Value>(chains).slice(kChains * d, kChains)),
        [&](Value a, Value b) { return e.add(a, b); }));
  return sums;
}

void WeightedSum::store(ArrayRef<Value> elements) {
  OpBuilder &b = e.b;
  Type outputElement = buffers.outputElement;
  SmallVector<Value> outputs;
  for (Value element : elements)
    outputs.push_back(
        outputElement.isF32()
            ? element
            : arith::TruncFOp::create(b, e.loc, outputElement, element));
  Value outputOffset = e.add(e.mul(row, e.index(buffers.headDim)), firstDim);
  if (width == 1) {
    e.store(outputs.front(), buffers.output, outputOffset);
    return;
  }
  Value vector = e.vector(outputs);
  LLVM::StoreOp::create(b, e.loc, vector,
                        e.address(buffers.output, outputElement, outputOffset),
                        width * outputElement.getIntOrFloatBitWidth() / 8);
}
