//===- KeyValuePipeline.cpp - Tensor cores: K and V through stages --------===//

#include "KeyValuePipeline.h"
#include "TensorCoreTileBuilder.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

/// A block-table entry per lane token (K's key, V's two keys).
constexpr int64_t kEntriesPerStep = 3;
/// The steps whose entries the loop carries: those of steps i + S - 1 (V)
/// and i + S (K).
constexpr int64_t kCarriedSteps = 2;

KeyValuePipeline::KeyValuePipeline(TensorCoreTileBuilder &builder)
    : b(builder), stages(b.schedule.keyValueStages),
      tokensPerStep(b.layout.tokensPerStep()),
      keySlots(b.geometry.headDim / 32), valueSlots(b.geometry.headDim / 64),
      scaleSlot(keySlots + 2 * valueSlots) {
  KernelEmitter &e = b.e;
  lastToken = e.sub(b.chunk.end, e.index(1));
  warpBase = e.mul(b.warp, e.index(b.layout.tokensPerWarp));
  pairKey = e.mul(b.fragmentPair, e.index(2));
  laneStages = e.address(sharedPointer(b.rewriter, e.loc, b.warpAccumulators),
                         b.rewriter.getI8Type(),
                         e.mul(b.thread, e.index(b.layout.slotBytes)));
  keyLane = e.mul(b.fragmentPair, e.index(kFragmentElementsPerVector));
  valueLane = e.mul(b.fragmentRow, e.index(kFragmentElementsPerVector));
}

SmallVector<Value> KeyValuePipeline::laneTokens(Value first) {
  KernelEmitter &e = b.e;
  SmallVector<Value> tokens;
  for (auto [offset, laneToken] : {std::pair<int64_t, Value>{0, b.fragmentRow},
                                   {0, pairKey},
                                   {1, pairKey}})
    tokens.push_back(
        e.min(e.add(e.add(first, e.index(offset)), laneToken), lastToken));
  return tokens;
}

SmallVector<Value> KeyValuePipeline::lookUpPages(ArrayRef<Value> tokens) {
  SmallVector<Value> entries;
  for (Value token : tokens)
    entries.push_back(b.loadPageEntry(token));
  return entries;
}

SmallVector<Value> KeyValuePipeline::toPages(ValueRange entries) {
  SmallVector<Value> pages;
  for (Value entry : entries)
    pages.push_back(b.clampPage(entry));
  return pages;
}

SmallVector<Value> KeyValuePipeline::toIsKey(ValueRange entries) {
  SmallVector<Value> isKey;
  if (b.rules.blockTableHoles)
    for (Value entry : entries)
      isKey.push_back(b.isKeyEntry(entry));
  return isKey;
}

Value KeyValuePipeline::slotAddress(Value stage, int64_t slot) {
  KernelEmitter &e = b.e;
  const int64_t threads = PartialKernelLayout::kThreads;
  const int64_t slotBytes = b.layout.slotBytes;
  return e.address(
      laneStages, b.rewriter.getI8Type(),
      e.add(e.mul(stage, e.index(b.layout.stageSlots * threads * slotBytes)),
            e.index(slot * threads * slotBytes)));
}

Value KeyValuePipeline::stageOf(Value index) {
  return arith::RemUIOp::create(b.rewriter, b.e.loc, index, b.e.index(stages));
}

Value KeyValuePipeline::keyVector(Value stage, int64_t vector) {
  return slotAddress(stage, vector);
}

Value KeyValuePipeline::valueVector(Value stage, int64_t key, int64_t vector) {
  return slotAddress(stage, keySlots + key * valueSlots + vector);
}

Value KeyValuePipeline::tokenScales(Value stage, bool ofValues) {
  return slotAddress(stage, scaleSlot + (ofValues ? 1 : 0));
}

void KeyValuePipeline::copyHalfStep(bool ofValues, Value first,
                                    ArrayRef<Value> pages,
                                    ArrayRef<Value> isKey, Value stage,
                                    Value live) {
  KernelEmitter &e = b.e;
  Type i8 = b.rewriter.getI8Type();
  const int64_t headDim = b.geometry.headDim;
  const int64_t slotBytes = b.layout.slotBytes;
  SmallVector<Value> tokens = laneTokens(first);
  // A copy of lane token `token` (0: K's key, 1 and 2: V's pair) reads
  // nothing when the step is past the chunk or the token is a hole: its
  // slot is zeros.
  auto isLive = [&](int64_t token) -> Value {
    if (isKey.empty())
      return live;
    return arith::AndIOp::create(b.rewriter, e.loc, live, isKey[token]);
  };
  auto copy = [&](Value base, Type type, Value offset, int64_t slot,
                  int64_t byteOffset, int64_t bytes, int64_t token) {
    Value source = e.address(base, type, offset);
    Value target = e.address(slotAddress(stage, slot), i8, e.index(byteOffset));
    NVVM::CpAsyncOp::create(b.rewriter, e.loc, target, source,
                            static_cast<uint32_t>(bytes),
                            bytes == 16 ? NVVM::LoadCacheModifierKind::CG
                                        : NVVM::LoadCacheModifierKind::CA,
                            e.select(isLive(token), e.i32(bytes), e.i32(0)));
  };
  Type element = b.cache.addressType(), f32 = b.rewriter.getF32Type();
  // The rows of the lane's key pair 2p, 2p+1.
  auto pairRow = [&](int64_t key) {
    return b.cacheRow(tokens[1 + key], pages[1 + key]);
  };
  if (!ofValues) {
    Value keyRow = b.cacheRow(tokens[0], pages[0]);
    Value keyOffset = e.add(e.mul(keyRow, e.index(headDim)), keyLane);
    for (int64_t v = 0; v < keySlots; ++v)
      copy(b.keys, element, e.add(keyOffset, e.index(32 * v)), v, 0, slotBytes,
           0);
    if (b.keyScales)
      for (int64_t key = 0; key < 2; ++key)
        copy(b.keyScales, f32, pairRow(key), scaleSlot, 4 * key, 4, 1 + key);
  } else {
    for (int64_t key = 0; key < 2; ++key) {
      Value row = pairRow(key);
      Value valueOffset = e.add(e.mul(row, e.index(headDim)), valueLane);
      for (int64_t v = 0; v < valueSlots; ++v)
        copy(b.values, element, e.add(valueOffset, e.index(64 * v)),
             keySlots + key * valueSlots + v, 0, slotBytes, 1 + key);
      if (b.valueScales)
        copy(b.valueScales, f32, row, scaleSlot + 1, 4 * key, 4, 1 + key);
    }
  }
  NVVM::CpAsyncCommitGroupOp::create(b.rewriter, e.loc);
}

SmallVector<Value> KeyValuePipeline::start() {
  KernelEmitter &e = b.e;
  const ChunkBounds &chunk = b.chunk;
  const bool paged = b.geometry.isPaged();
  // The pages of steps 0 .. S: those of the first steps' copies, and the
  // entries of steps S - 1 and S, which the first step's copies take. None
  // read for an empty chunk, whose positions may lie past the sequence's
  // pages.
  Value chunkLive = e.lessThan(chunk.begin, chunk.end);
  Value firstOfChunk = e.add(chunk.begin, warpBase);
  auto stepLive = [&](int64_t step) {
    return step == 0
               ? chunkLive
               : e.lessThan(e.add(chunk.begin, e.index(step * tokensPerStep)),
                            chunk.end);
  };
  SmallVector<Value> prologueEntries, carriedEntries;
  if (paged) {
    auto lookUp = scf::IfOp::create(
        b.rewriter, e.loc, chunkLive,
        [&](OpBuilder &, Location) {
          SmallVector<Value> entries;
          for (int64_t step = 0; step <= stages; ++step)
            llvm::append_range(
                entries, lookUpPages(laneTokens(e.add(
                             firstOfChunk, e.index(step * tokensPerStep)))));
          scf::YieldOp::create(b.rewriter, e.loc, entries);
        },
        [&](OpBuilder &, Location) {
          scf::YieldOp::create(
              b.rewriter, e.loc,
              SmallVector<Value>((stages + 1) * kEntriesPerStep, e.i32(0)));
        });
    llvm::append_range(prologueEntries, lookUp.getResults());
    llvm::append_range(carriedEntries, lookUp.getResults().drop_front(
                                           (stages - 1) * kEntriesPerStep));
  }
  auto stepEntries = [&](int64_t step) {
    return ArrayRef<Value>(prologueEntries)
        .slice(step * kEntriesPerStep, kEntriesPerStep);
  };
  auto stepPages = [&](int64_t step) {
    if (!paged)
      return SmallVector<Value>(kEntriesPerStep);
    return toPages(stepEntries(step));
  };
  auto stepIsKey = [&](int64_t step) {
    return paged ? toIsKey(stepEntries(step)) : SmallVector<Value>();
  };
  // K(0), V(0), .., V(S - 2), then K(S - 1): the order the loop's waits
  // count on. The steps' first keys and step 0's pages are built before
  // any copy, as the two-stage pipeline built them: two stages keep their
  // instruction order (and PTX) byte for byte.
  SmallVector<Value> pages = stepPages(0);
  SmallVector<Value> stepFirsts = {firstOfChunk};
  for (int64_t step = 1; step < stages; ++step)
    stepFirsts.push_back(e.add(firstOfChunk, e.index(step * tokensPerStep)));
  for (int64_t step = 0; step < stages; ++step) {
    if (step > 0)
      pages = stepPages(step);
    SmallVector<Value> isKey = stepIsKey(step);
    copyHalfStep(/*ofValues=*/false, stepFirsts[step], pages, isKey,
                 e.index(step), stepLive(step));
    if (step + 1 < stages)
      copyHalfStep(/*ofValues=*/true, stepFirsts[step], pages, isKey,
                   e.index(step), stepLive(step));
  }
  return carriedEntries;
}

KeyValuePipeline::Step KeyValuePipeline::beginStep(Value stepStart, Value first,
                                                   ValueRange entries) {
  KernelEmitter &e = b.e;
  const ChunkBounds &chunk = b.chunk;
  const bool paged = b.geometry.isPaged();
  Value stepIndex = arith::DivUIOp::create(
      b.rewriter, e.loc, e.sub(stepStart, chunk.begin), e.index(tokensPerStep));
  // V of step i + S - 1 (the entries of its pages were loaded a step or two
  // ago), then this step's K, issued S - 1 steps and a half ago, is waited
  // for.
  const int64_t ahead = (stages - 1) * tokensPerStep;
  Value aheadStart = e.add(stepStart, e.index(ahead));
  SmallVector<Value> nextPages(kEntriesPerStep), nextIsKey;
  if (paged) {
    nextPages = toPages(entries.slice(0, kEntriesPerStep));
    nextIsKey = toIsKey(entries.slice(0, kEntriesPerStep));
  }
  copyHalfStep(/*ofValues=*/true, e.add(first, e.index(ahead)), nextPages,
               nextIsKey, stageOf(e.add(stepIndex, e.index(stages - 1))),
               e.lessThan(aheadStart, chunk.end));
  waitForHalfStep();
  Step step;
  if (paged) {
    llvm::append_range(
        step.nextEntries,
        entries.slice(kEntriesPerStep, (kCarriedSteps - 1) * kEntriesPerStep));
    llvm::append_range(step.nextEntries,
                       lookUpPages(laneTokens(e.add(
                           first, e.index((stages + 1) * tokensPerStep)))));
  }
  step.stage = stageOf(stepIndex);
  return step;
}

void KeyValuePipeline::copyKeysAhead(Value stepStart, Value first, Value stage,
                                     ValueRange entries) {
  KernelEmitter &e = b.e;
  // Its entries were loaded a step ago.
  SmallVector<Value> pages(kEntriesPerStep), isKey;
  if (b.geometry.isPaged()) {
    pages = toPages(entries.slice(kEntriesPerStep, kEntriesPerStep));
    isKey = toIsKey(entries.slice(kEntriesPerStep, kEntriesPerStep));
  }
  copyHalfStep(
      /*ofValues=*/false, e.add(first, e.index(stages * tokensPerStep)), pages,
      isKey, stage,
      e.lessThan(e.add(stepStart, e.index(stages * tokensPerStep)),
                 b.chunk.end));
}

SmallVector<Value> KeyValuePipeline::pairIsKey(Value first) {
  SmallVector<Value> isKey;
  if (!b.rules.blockTableHoles)
    return isKey;
  SmallVector<Value> tokens = laneTokens(first);
  for (int64_t key = 0; key < 2; ++key)
    isKey.push_back(b.isKeyEntry(b.loadPageEntry(tokens[1 + key])));
  return isKey;
}

void KeyValuePipeline::waitForHalfStep() {
  // When step i reads its K, V(i) .. V(i + S - 1) were committed after it;
  // when it reads its V, K(i + 1) .. K(i + S).
  NVVM::CpAsyncWaitGroupOp::create(b.rewriter, b.e.loc,
                                   static_cast<int32_t>(2 * stages - 1));
}

void KeyValuePipeline::drain() {
  NVVM::CpAsyncWaitGroupOp::create(b.rewriter, b.e.loc, 0);
  gpu::BarrierOp::create(b.rewriter, b.e.loc);
}
