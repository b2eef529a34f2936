//===- KeyValuePipeline.h - Tensor cores: K and V in stages -----*- C++ -*-===//
//
// The tensor-core tile's K and V reach registers through workgroup memory:
// each lane copies its own vectors (cp.async) into one of the schedule's
// S = keyValueStages stages and reads them back when their step comes.
// Step i's stage is i mod S. K of step i + S is copied as soon as step i's
// S is computed (its K slots are free then), V of step i + S - 1 at the
// top of step i (step i - 1's P V freed its V slots), and each is waited
// for just before its first read: S - 1 steps and a half of lead each,
// where a step is shorter than a load's latency. Two commit groups a step,
// K(j) then V(j), so the waits leave the 2S - 1 newest groups in flight.
// The loads hold no registers; a lane reads only what it copied, so the
// copies need no barrier. Stage s, slot i of thread t is at byte
// ((s * slots + i) * threads + t) * slotBytes: a warp's read of a slot is
// 32 consecutive slots. The stages take the accumulators' buffer, free
// until the loop ends.
//
// A paged cache's block-table entries are loaded a step or two before the
// copies that use them and carried through the loop (one register each),
// clamped into pages only where a copy uses them, so that nothing waits on
// a load in the step that issues it. With holes, a copy of a hole reads
// nothing (its slots are zeros) and the scores' mask loads the pair's
// entries again.
//
//===----------------------------------------------------------------------===//

#ifndef FD_LIB_CONVERSION_FDTOGPU_KEYVALUEPIPELINE_H
#define FD_LIB_CONVERSION_FDTOGPU_KEYVALUEPIPELINE_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::fd::detail {

class TensorCoreTileBuilder;

class KeyValuePipeline {
public:
  /// The lane's positions in a step and its stage addresses, emitted at
  /// `builder`'s insertion point (the tile stream's start,
  /// TensorCoreTileBuilder::streamRowTile).
  explicit KeyValuePipeline(TensorCoreTileBuilder &builder);

  /// Before the token loop (before q is staged, under its latency): the
  /// copies of the first S - 1 steps and K of step S - 1. Returns the page
  /// entries the loop carries (none for a dense cache).
  SmallVector<Value> start();

  /// What the top of a step leaves: its stage and the page entries the
  /// next step carries.
  struct Step {
    Value stage;
    SmallVector<Value> nextEntries;
  };
  /// The top of the step starting at `stepStart`, whose warp's first key
  /// is `first`: copies V of step i + S - 1 and waits for this step's K.
  /// `entries` are those the loop carries.
  Step beginStep(Value stepStart, Value first, ValueRange entries);
  /// Once this step's K is read: copies K of step i + S into its slots.
  void copyKeysAhead(Value stepStart, Value first, Value stage,
                     ValueRange entries);
  /// With block-table holes, whether the lane's keys 2p and 2p + 1 of the
  /// step whose warp starts at `first` are keys (their entries loaded
  /// again: those the copies took were loaded steps ago); else none.
  SmallVector<Value> pairIsKey(Value first);
  /// Waits for the half step read next (this step's K at its top, its V
  /// before P V): the 2S - 1 newest groups stay in flight.
  void waitForHalfStep();
  /// After the loop: the last (empty) copies drain and every warp is past
  /// its last read of the stages, before the accumulators take their place.
  void drain();

  /// Where the lane's vector `vector` (of D / 32) of its key lies in
  /// `stage`.
  Value keyVector(Value stage, int64_t vector);
  /// Where the lane's vector `vector` (of D / 64) of key `key` (2p, 2p+1)
  /// of the values lies in `stage`.
  Value valueVector(Value stage, int64_t key, int64_t vector);
  /// Where the f32 pair of its keys' per-token scales lies in `stage`: of
  /// K, or `ofValues`, of V.
  Value tokenScales(Value stage, bool ofValues);

  /// The first key of the lane's warp in a step: the step's first plus
  /// warp * 8.
  Value getWarpBase() const { return warpBase; }
  /// The lane's first key of the pair it reads V of (and whose scores it
  /// holds): 2p.
  Value getPairKey() const { return pairKey; }

private:
  /// The cache positions a lane reads in the step whose warp starts at
  /// `first`: K of key g, then V of keys 2p and 2p + 1.
  SmallVector<Value> laneTokens(Value first);
  SmallVector<Value> lookUpPages(ArrayRef<Value> tokens);
  SmallVector<Value> toPages(ValueRange entries);
  /// With block-table holes, whether each entry is a key; else none.
  SmallVector<Value> toIsKey(ValueRange entries);
  Value slotAddress(Value stage, int64_t slot);
  Value stageOf(Value index);
  /// Copies the K (with the pair's key scales) or, `ofValues`, the V (with
  /// their value scales) of the step whose warp starts at `first` into
  /// `stage`, reading nothing unless `live` (the step is in the chunk) and,
  /// with holes, the token `isKey` says is a key (a hole's slots are
  /// zeros), and commits them as one group. `pages` (and `isKey`) are those
  /// of laneTokens(first).
  void copyHalfStep(bool ofValues, Value first, ArrayRef<Value> pages,
                    ArrayRef<Value> isKey, Value stage, Value live);

  TensorCoreTileBuilder &b;
  const int64_t stages, tokensPerStep, keySlots, valueSlots, scaleSlot;
  Value lastToken, warpBase, pairKey, laneStages, keyLane, valueLane;
};

} // namespace mlir::fd::detail

#endif // FD_LIB_CONVERSION_FDTOGPU_KEYVALUEPIPELINE_H
