//===- WarpgroupTileBuilder.h - wgmma tiles of 64 rows ----------*- C++ -*-===//
//
// Private to the FDToGPU lowering. The warpgroup tile (sm_90a): two
// warpgroups compute 64 query rows with wgmma.mma_async, its operands in
// dynamic shared memory. WarpgroupTile.cpp says how they share a step;
// WarpgroupCopies.cpp how q and K/V reach shared memory.
//
//===----------------------------------------------------------------------===//

#ifndef FD_LIB_CONVERSION_FDTOGPU_WARPGROUPTILEBUILDER_H
#define FD_LIB_CONVERSION_FDTOGPU_WARPGROUPTILEBUILDER_H

#include "TensorCoreTileBuilder.h"

namespace mlir::fd::detail {

class WarpgroupTileBuilder : public TensorCoreTileBuilder {
public:
  using TensorCoreTileBuilder::TensorCoreTileBuilder;

private:
  /// The warpgroup, the lane's rows (16 per warp of its warpgroup) and the
  /// regions of dynamic shared memory.
  void setUpLanes() override;
  /// Streams the chunk through the tile's rows, each warpgroup taking S for
  /// half a step's 32 keys and P V for half the value dims.
  void streamRowTile(Value firstRow) override;
  /// Writes each lane's rows of the normalized partial and their lse from
  /// registers; in a cluster, stageClusterRows.
  void writePartials(Value firstRow) override;
  /// A chunk's cluster: stores the lane's normalized rows and their lse in
  /// dynamic shared memory (where q and the stages were) for the cluster's
  /// merge (mergeClusterRows).
  void stageClusterRows(Value firstRow);
  /// Where writeLaneRows puts the lane's rows: the f32 rows (`rows`, D_v
  /// a row, at row `rowOf(tile row)`), only the real ones or all, and how
  /// a row's lse is stored from its max, sum and whether it saw a key.
  struct LaneRowTarget {
    Value rows;
    bool realRowsOnly;
    function_ref<Value(Value tileRow)> rowOf;
    function_ref<void(Value row, Value max, Value sum, Value hasKeys)> storeLse;
  };
  /// The lane's two rows (g, g + 8) of its warpgroup's half of the value
  /// dims, normalized (1 / sum, times the output scale; zeros without
  /// keys), and their lse, into `target`.
  void writeLaneRows(Value firstRow, const LaneRowTarget &target);

  /// The shared address (i64) of byte `offset` of the aligned dynamic
  /// shared memory, and the pointer to it.
  Value sharedAddress(Value offset);
  Value sharedBytePointer(Value offset);
  /// The offset of 16-byte piece `piece` of row `row` in a region of `rows`
  /// rows laid out for wgmma's K-major 128-byte swizzle: each 64-dim block
  /// of the rows 128 bytes a row, its pieces XORed with the row's low 3
  /// bits.
  Value swizzledPieceOffset(int64_t rows, Value row, Value piece);
  /// A wgmma matrix descriptor of the operand at shared address `address`
  /// (i64): its leading and stride byte offsets and swizzle mode (0 none,
  /// 1 128-byte).
  Value matrixDescriptor(Value address, int64_t leadingBytes,
                         int64_t strideBytes, int64_t swizzleMode);
  /// `descriptor` with its start address `bytes` further.
  Value advanceDescriptor(Value descriptor, int64_t bytes);

  /// Copies the tile's q rows (padding rows zeros) into the q region with
  /// cp.async, as one group.
  void copyQuery(Value firstRow);
  /// A thread's pieces of the copy of keys [stepStart, stepStart + 32):
  /// whether the key is in the chunk, its position clamped into the chunk,
  /// its 16-byte piece, and the key's index in the step (its stage row).
  struct Piece {
    Value live, token, piece, key;
  };
  SmallVector<Piece> getStepPieces(Value stepStart);
  /// With a paged cache, the block-table entries of the pieces' keys.
  SmallVector<Value> loadStepEntries(Value stepStart);
  /// Copies keys [stepStart, stepStart + 32) into stage `stage` and
  /// commits them as one group; keys past the chunk (or holes) are zeros.
  void copyStep(Value stepStart, Value stage, ValueRange entries);

  /// The warpgroup's S = q K^T for its 16 keys of the step in `stage`: the
  /// lane's 8 scores (rows g, g + 8 at keys 2p, 2p + 1 of each 8-key
  /// tile).
  SmallVector<Value> multiplyQueryKeys(Value stage);
  /// O += P V over the warpgroup's half of the value dims for the step in
  /// `stage`, P (both warpgroups' keys) in shared memory.
  SmallVector<Value> accumulateValues(Value stage, ArrayRef<Value> outputs);
  /// The step's P of the lane's rows and keys into the P region.
  void storeProbabilities(ArrayRef<Value> words);
  /// The lane's two rows' `values` (rows g, g + 8) combined with the other
  /// warpgroup's for the same rows, through slot `slot` of the max-sum
  /// buffer and a barrier: the same result in both where `combine`
  /// commutes (each row's max over the step's keys, its sum at the end).
  void combineRowsAcrossWarpgroups(MutableArrayRef<Value> values, int64_t slot,
                                   function_ref<Value(Value, Value)> combine);
  /// A wgmma.mma_async of `n` columns into `accumulators` (n / 2 f32);
  /// `accumulate` false ignores them.
  SmallVector<Value> warpgroupMma(Value descriptorA, Value descriptorB,
                                  int64_t n, ArrayRef<Value> accumulators,
                                  bool accumulate, bool valuesMajor);
  /// Makes the threads' shared-memory writes visible to wgmma's operand
  /// reads (the async proxy), then a block barrier.
  void fenceAndBarrier();

  /// The warpgroup (0 or 1) and the aligned start of dynamic shared memory
  /// (an index: the shared address).
  Value warpgroup, sharedBase;
  /// The chunk's last key (copies past the chunk read it, as zeros).
  Value lastKey;
  /// What the token loop leaves for writePartials: each row's max, its sum
  /// over the block's keys, the lane's output tiles.
  SmallVector<Value> results;
};

} // namespace mlir::fd::detail

#endif // FD_LIB_CONVERSION_FDTOGPU_WARPGROUPTILEBUILDER_H
