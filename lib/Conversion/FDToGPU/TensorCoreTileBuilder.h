//===- TensorCoreTileBuilder.h - The partial kernel on tensor cores -*- C++
//-*-===//
//
// Private to the FDToGPU lowering. A row tile of up to 16 rows on tensor
// cores (TensorCoreTile.cpp says how it maps onto mma.sync; its operands:
// TensorCoreFragments.cpp; K and V through workgroup memory:
// KeyValuePipeline.h).
//
//===----------------------------------------------------------------------===//

#ifndef FD_LIB_CONVERSION_FDTOGPU_TENSORCORETILEBUILDER_H
#define FD_LIB_CONVERSION_FDTOGPU_TENSORCORETILEBUILDER_H

#include "PartialKernelBuilder.h"

namespace mlir::fd::detail {

class KeyValuePipeline;

class TensorCoreTileBuilder : public PartialKernelBuilder {
public:
  using PartialKernelBuilder::PartialKernelBuilder;

protected:
  /// The tile's K/V stages read the builder's state.
  friend class KeyValuePipeline;

  /// Where the lane's values sit in an mma fragment.
  void setUpLanes() override;
  /// Streams the chunk through the tile's rows with mma.sync.
  void streamRowTile(Value firstRow) override;
  /// A swizzle that keeps the publishing 16-byte stores free of bank
  /// conflicts.
  Value accumulatorColumn(Value row, Value dim) override;
  /// P carries an fp8 cache's per-token value scales times
  /// cache.probabilityFactor().
  double getProbabilityFactor() const override {
    return cache.probabilityFactor();
  }

  /// Whether the mma multiplies in f16 though the queries are bf16: over an
  /// fp8 cache with per-tensor scales (or none), which then decodes with
  /// one conversion a pair where bf16 took twelve instructions; q is
  /// converted once (HalfQuery.cpp), and P, at most 2^kMaxLag, has no value
  /// scale in it. Per-token value scales would go into P, which f16 could
  /// not hold for large values: those stay bf16.
  bool multipliesInHalf() const {
    return cache.isFloat8() && elementType.isBF16() &&
           ::flashdecode::multipliesFloat8InHalf(
               /*bfloat16Queries=*/true,
               /*float8TokenScales=*/bool(keyScales));
  }
  /// f16 products (HalfQuery.cpp): `largest` and the finite magnitudes of
  /// the bf16 pair `word`; the power of two 2^k that puts the largest |q|
  /// in [2^14, 2^15), and 2^-k; `word` as an f16 pair times `scale`.
  Value foldFiniteMagnitudes(Value largest, Value word);
  struct HalfQueryScale {
    Value scale, inverse;
  };
  HalfQueryScale getHalfQueryScale(Value largest);
  Value toHalfWord(Value word, Value scale);
  /// Rewrites the staged q fragments (stageQueryFragments') as f16 pairs
  /// times 2^k, the same in every warp; returns 2^-k, which the scores are
  /// multiplied by.
  Value halveQueryFragments();
  /// The mma operands' element type: the query's, or f16.
  Type getOperandType() const {
    return multipliesInHalf() ? rewriter.getF16Type() : elementType;
  }
  /// The four mma words of q's A fragment of k-step `step`, from
  /// workgroup memory.
  SmallVector<Value> loadQueryFragment(int64_t step);
  /// S = q K^T of the step in `stage`: the lane's four scores (row g + 8 (i
  /// / 2), key 2p + i % 2), q's first k-steps from `heldQueryWords`.
  SmallVector<Value>
  multiplyQueryKeys(KeyValuePipeline &pipeline, Value stage,
                    ArrayRef<SmallVector<Value>> heldQueryWords);
  /// O = O * rescale + P V for the step in `stage` once its V is in:
  /// `carried`'s output accumulator into `next`'s.
  struct TensorCoreSoftmaxStep;
  void accumulateValues(KeyValuePipeline &pipeline, Value stage,
                        const TensorCoreSoftmaxStep &softmax,
                        ValueRange carried, MutableArrayRef<Value> next);
  /// The 8 cache elements at `address` (a K/V stage in workgroup memory) as
  /// four mma operand words of element pairs in the operand type.
  SmallVector<Value> loadFragmentWords(Value address);
  /// The four fp8 elements of `word` as two mma words of element pairs in
  /// the operand type (elements 0, 1 and 2, 3).
  SmallVector<Value> decodeFloat8Words(Value word);
  /// Stages the q fragments (A operands) of the tile's rows in workgroup
  /// memory, per k-step and lane.
  void stageQueryFragments(Value firstRow);
  /// The keys row `tileRow` of the tile starting at `firstRow` sees,
  /// unclipped (buildVisibleKeys), or {null, the chunk's end} when every row
  /// sees the whole chunk (one query token).
  KeyRange visibleKeys(Value firstRow, Value tileRow);
  /// What the lane's two rows of a tensor-core tile (g and g + 8) see of
  /// the chunk: their ends as i32 (with a window also the chunk's end, each
  /// row's start recomputed per step from its end), and their ALiBi.
  struct TensorCoreRows {
    bool windowed = false;
    /// `begins` only with a window over a KV shard.
    Value ends[2], begins[2], chunkEnd;
    AlibiRow alibi[2];
  };
  TensorCoreRows getTensorCoreRows(Value firstRow);
  /// A step's scores S (row g + 8 (i % 4 / 2), key 8 (i / 4) + 2p + i % 2:
  /// 4 per 8-key tile; `first` the warp's first key, `pairKey` 2p) times
  /// the pair's `scoreScales`,
  /// shaped and with ALiBi, -inf where the row may not see the key or,
  /// with holes, where `pairIsKey` says the key is a hole.
  SmallVector<Value> maskTensorCoreScores(Value first, Value pairKey,
                                          ArrayRef<Value> s,
                                          ArrayRef<Value> scoreScales,
                                          const TensorCoreRows &rows,
                                          ArrayRef<Value> pairIsKey);
  /// One step of a tensor-core tile's online softmax for the lane's rows
  /// g and g + 8: each row's new max (over its four lanes), its sum (the
  /// lane's share), the factor its state is rescaled by, and the scores'
  /// weights (`scores` as maskTensorCoreScores orders them).
  struct TensorCoreSoftmaxStep {
    Value max[2], sum[2], rescale[2];
    /// As the scores: 4 per 8-key tile.
    SmallVector<Value, 4> weights;
    /// Whether a row of the warp took a new max (the same in every lane).
    Value raised;
  };
  /// How far (base 2) a row's scores may rise above the max its weights
  /// are taken against before the max moves: 2^8 keeps P well within f16
  /// and bf16, and a max moves in few steps (the first, mostly).
  static constexpr float kMaxLag = 8.0f;
  /// kMaxLag, or 0 where P carries per-token value scales in f16: a scale
  /// times the probability factor leaves P room for values up to ~10^5 at
  /// weights of at most 1, ~450 at 2^8.
  float getMaxLag() const {
    return (keyScales || valueScales) && getOperandType().isF16() ? 0.0f
                                                                  : kMaxLag;
  }
  /// Also writes the rows' new max and sum into `next` (the carried state's
  /// first four entries). `shareRowMaxes`, where given, turns the two rows'
  /// maxima over the warp's keys into their maxima over the block's (the
  /// warpgroup tile's warpgroups each hold half a step's keys), before the
  /// max moves.
  TensorCoreSoftmaxStep stepTensorCoreSoftmax(
      ValueRange carried, ArrayRef<Value> scores, MutableArrayRef<Value> next,
      function_ref<void(MutableArrayRef<Value>)> shareRowMaxes = nullptr);
  /// The token loop's carried state at its start: each row's max (-inf) and
  /// this lane's share of its sum, then `outputTiles` output tiles of 4.
  SmallVector<Value> getInitialTileState(int64_t outputTiles);
  /// P's A fragment for O += P V: the step's weights (rows g, g + 8 at keys
  /// 2p, 2p + 1 of each 8-key tile: S's accumulator layout), times
  /// `pairValueScales` (keys 2p, 2p + 1; none without per-token value
  /// scales), in the operand type: 2 words a tile.
  SmallVector<Value> packProbabilities(const TensorCoreSoftmaxStep &softmax,
                                       ArrayRef<Value> pairValueScales);
  /// The carried output tiles (state entries 4 ..) times their rows'
  /// rescale, multiplied only where the warp raised a max.
  SmallVector<Value> rescaleOutputs(const TensorCoreSoftmaxStep &softmax,
                                    ValueRange carried, int64_t outputTiles);
  /// O += P V for output tile `tile` of `outputs` (rescaleOutputs') with
  /// V's B word (`valueWord` builds it), into `next`.
  void accumulateOutputTile(int64_t tile, ArrayRef<Value> p,
                            function_ref<Value()> valueWord,
                            ArrayRef<Value> outputs,
                            MutableArrayRef<Value> next);
  /// Sums each row's sum in `loopResults` (entries 2, 3) over its quad.
  void sumRowsOverQuad(MutableArrayRef<Value> loopResults);
  /// The token loop's results (each row's max, the lane's share of its sum,
  /// the output accumulator): the sums over the row's four lanes, then the
  /// warp's state per row, as writePartials reads it (padding rows are not
  /// published).
  void publishTensorCoreStates(ValueRange loopResults);
  /// D += A * B for one mma tile: m16n8k16 with A four and B two packed
  /// words, m16n8k8 with two and one.
  SmallVector<Value> mma(ArrayRef<Value> a, ArrayRef<Value> b,
                         ArrayRef<Value> c);
  /// Two 16-bit elements as an mma operand word.
  Value packPair(Value low, Value high);

  /// Each lane's mma words of q per k-step, in workgroup memory.
  Value queryFragments;
  /// Where a lane's values sit in an mma fragment: row `fragmentRow` (and
  /// + 8), column pair `fragmentPair` (lane / 4 and lane % 4).
  Value fragmentRow, fragmentPair;
};

} // namespace mlir::fd::detail

#endif // FD_LIB_CONVERSION_FDTOGPU_TENSORCORETILEBUILDER_H
