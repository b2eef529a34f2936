//===- SplitValueTileBuilder.h - Tensor cores for wide heads ----*- C++ -*-===//
//
// Private to the FDToGPU lowering. The tensor-core tile of heads the
// per-warp tile (TensorCoreTileBuilder.h) cannot hold: MLA's 576-wide keys
// whose values are their first 512 columns, Gemma 4's 512, value dims
// apart from key dims. SplitValueTile.cpp says how the warps share a step.
//
//===----------------------------------------------------------------------===//

#ifndef FD_LIB_CONVERSION_FDTOGPU_SPLITVALUETILEBUILDER_H
#define FD_LIB_CONVERSION_FDTOGPU_SPLITVALUETILEBUILDER_H

#include "TensorCoreTileBuilder.h"

namespace mlir::fd::detail {

class SplitValueTileBuilder : public TensorCoreTileBuilder {
public:
  using TensorCoreTileBuilder::TensorCoreTileBuilder;

private:
  void setUpLanes() override;
  /// Streams the chunk through the tile's rows, the warps sharing each
  /// step's keys, and publishes the one state they make.
  void streamRowTile(Value firstRow) override;
  /// Copies q (copyQuery) at the kernel's start where its rows are known.
  void startQueryCopy(Value firstRow) override {
    copyQuery(firstRow);
    queryCopyStarted = true;
  }
  /// Published unswizzled: each warp writes whole 16-byte pieces of its
  /// value dims.
  Value accumulatorColumn(Value, Value dim) override { return dim; }

  /// The bytes a thread copies with one cp.async (q's rows, K's and V's).
  static constexpr int64_t kPieceBytes = 16;
  /// Whether startQueryCopy copied q: its group is then the oldest.
  bool queryCopyStarted = false;
  /// Copies the q rows of the fragments' 16 rows (padding rows zeros) into
  /// the stages' buffer at KernelSchedule::getQueryStageOffset with
  /// cp.async, the block's threads taking 16-byte pieces, as one group
  /// (SplitValueQuery.cpp, as the two below).
  void copyQuery(Value firstRow);
  /// The A words of the warp's k-steps of q (its quarter of the head dim)
  /// from copyQuery's rows: a lane's 8-byte pieces of rows g and g + 8.
  SmallVector<SmallVector<Value>> readWarpQuery();
  /// `words` (readWarpQuery's bf16 pairs) as f16 pairs times 2^k, the same
  /// power of two in every warp (HalfQuery.cpp). Returns 2^-k, which the
  /// scores are multiplied by.
  Value toHalfQuery(MutableArrayRef<SmallVector<Value>> words);
  /// A thread's 16-byte pieces of the copy of keys [stepStart,
  /// stepStart + 8): their key (in the step) and piece of its row, whether
  /// the thread has the piece, whether the key is in the chunk and its
  /// position clamped into the chunk.
  /// A piece of an fp8 cache's per-token scales instead has `scale`, which
  /// of the key's scales (K's, V's) it copies (4 bytes).
  struct Piece {
    Value inRange, live, token, piece, key, scale;
  };
  SmallVector<Piece> getStepPieces(Value stepStart);
  /// With a paged cache, the block-table entries of the pieces' keys.
  SmallVector<Value> loadStepEntries(Value stepStart);
  /// Copies the keys [stepStart, stepStart + 8) (their K and V rows) into
  /// `stage`, the block's threads taking 16-byte pieces, and commits them
  /// as one group; keys past the chunk (or holes) are zeros. `entries`:
  /// loadStepEntries' (loaded a step before).
  void copyStep(Value stepStart, Value stage, ValueRange entries);
  /// The address of byte `byteOffset` of key `key`'s row in `stage`.
  Value stageAddress(Value stage, Value key, Value byteOffset);
  /// The warp's share of S = q K^T for the step in `stage`: the products
  /// of its mma chains (sumShares adds them).
  SmallVector<SmallVector<Value>>
  multiplyWarpKeys(Value stage, ArrayRef<SmallVector<Value>> queryWords);
  /// The sum of multiplyWarpKeys' products (pairwise, in place).
  SmallVector<Value> sumShares(MutableArrayRef<SmallVector<Value>> products);
  /// S summed over the warps' shares through workgroup memory: the same
  /// bits in every warp.
  SmallVector<Value> exchangeScores(ArrayRef<Value> share);
  /// O += P V over the warp's value dims for the step in `stage`, P times
  /// `pairValueScales` (keys 2p, 2p + 1) where given.
  void accumulateWarpValues(Value stage, const TensorCoreSoftmaxStep &softmax,
                            ArrayRef<Value> pairValueScales, ValueRange carried,
                            MutableArrayRef<Value> next);
  /// An fp8 cache's per-token scales a key has in a stage: K's, and V's
  /// where the values are a cache of their own; none per tensor.
  int64_t getTokenScalesPerKey() const {
    return keyScales ? (values ? 2 : 1) : 0;
  }
  /// The loop's state as the combine reads it: every warp's value dims of
  /// the one state, and its max and sum per row.
  void publishSplitState(ValueRange loopResults);

  /// The stages (the accumulators' buffer) and the exchange of S shares
  /// (the query buffer), as pointers.
  Value stages, scoreExchange;
  /// The warp's first k-step and first value dim.
  Value warpFirstStep, warpFirstValueDim;
  /// The chunk's last key (0 for an empty chunk at 0), where positions past
  /// the chunk are clamped to: set before the first copy.
  Value lastKey;
};

} // namespace mlir::fd::detail

#endif // FD_LIB_CONVERSION_FDTOGPU_SPLITVALUETILEBUILDER_H
