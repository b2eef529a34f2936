//===- TensorCoreTile.cpp - The partial kernel on tensor cores ------------===//
//
// A row tile of up to 16 query rows (the group's heads x Lq) against the
// chunk with mma.sync (f16/bf16 in, f32 accumulate). Each warp takes 8 keys
// per step: S = q K^T as one 16x8 tile over D/16 m16n8k16 k-steps, the
// online softmax on S in registers, then O += P V as D/8 m16n8k8 tiles, P
// taken straight from S's accumulator layout. q's fragments are staged in
// workgroup memory once per row tile (TensorCoreFragments.cpp). K and V are
// read in an element order chosen so that each lane's reads are whole
// 16-byte vectors, coalesced across the warp; each lane copies its vectors
// into workgroup memory with cp.async a step and a half before their use
// (two stages, K and V in commit groups of their own), and reads them back
// as the k-steps and output tiles take them.
// Eight keys per step (not 16) keep the fragments and the accumulator
// within 128 registers, so four blocks fit on an SM.
//
// Fragment layouts (PTX ISA): lane l holds, with g = l / 4 and p = l % 4,
// for m16n8k16 A (16x16) rows g and g + 8 at columns 2p, 2p+1 and 2p+8,
// 2p+9, B (16x8, "col") column g at rows 2p, 2p+1 and 2p+8, 2p+9; for
// m16n8k8 A (16x8) rows g and g + 8 at columns 2p, 2p+1, B (8x8) column g
// at rows 2p, 2p+1; C (16x8) rows g and g + 8 at columns 2p, 2p+1.
//
// S = q K^T sums over the head dim, so the head dim may be permuted as long
// as q and K use the same permutation: lane l loads the 16-byte vectors of
// key g at dims 32c + 8p (c < D/32); k-step 2c + h takes elements 4h, 4h+1
// as its rows 2p, 2p+1 and 4h+2, 4h+3 as rows 2p+8, 2p+9, and q's
// fragments follow. O = P V's columns (head dims) may be permuted too:
// column n of output tile j is dim 64(j / 8) + 8n + j % 8, so lane l needs
// dims [8g + 64h, 8g + 64h + 8) of keys 2p and 2p+1: again whole vectors,
// and a warp's load of one key's vectors is 128 contiguous bytes. The
// pairs of keys B wants in one word are formed by byte permutes.
//
// An fp8 cache is read in the same element order, 8 bytes per load (64
// contiguous bytes per key and warp), and decoded to the query's type on
// the way (loadFragmentWords); its per-token scales multiply the scores
// (K) and P (V), each lane loading those of its two keys.
//
//===----------------------------------------------------------------------===//

#include "PartialKernelBuilder.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

KeyRange PartialKernelBuilder::visibleKeys(Value firstRow, Value tileRow) {
  if (!rules.rowsDiffer())
    return {Value(), chunk.end};
  Value blockRow = e.min(e.add(firstRow, tileRow), lastRow);
  Value token = arith::DivUIOp::create(rewriter, e.loc, blockRow,
                                       e.index(geometry.groupSize()));
  return buildVisibleKeys(rewriter, e.loc, chunk.sequence, token, rules);
}

void PartialKernelBuilder::streamTensorCoreTile(Value firstRow) {
  const int64_t headDim = geometry.headDim;
  const int64_t kSteps = headDim / 16;
  const int64_t outputTiles = headDim / 8;
  const int64_t tokensPerStep = layout.tokensPerStep();
  Value lastToken = e.sub(chunk.end, e.index(1));
  Value warpBase = e.mul(warp, e.index(layout.tokensPerWarp));
  // The cache positions a lane reads in the step whose warp starts at
  // `first`: K of key g, then V of keys 2p and 2p + 1.
  Value pairKey = e.mul(fragmentPair, e.index(2));
  auto laneTokens = [&](Value first) {
    SmallVector<Value> tokens;
    for (auto [offset, laneToken] : {std::pair<int64_t, Value>{0, fragmentRow},
                                     {0, pairKey},
                                     {1, pairKey}})
      tokens.push_back(
          e.min(e.add(e.add(first, e.index(offset)), laneToken), lastToken));
    return tokens;
  };
  // A paged cache's block-table entries of those positions, as loaded
  // (carried through the loop: one register each), and clamped into pages
  // only where a copy uses them: a step after the load, so that nothing
  // waits on it in the step that issues it.
  auto lookUpPages = [&](ArrayRef<Value> tokens) {
    SmallVector<Value> entries;
    for (Value token : tokens)
      entries.push_back(loadPageEntry(token));
    return entries;
  };
  auto toPages = [&](ValueRange entries) {
    SmallVector<Value> pages;
    for (Value entry : entries)
      pages.push_back(clampPage(entry));
    return pages;
  };

  // K and V reach registers through workgroup memory: each lane copies its
  // own vectors (cp.async) into one of the schedule's keyValueStages stages and
  // reads them back when their step comes. K of step i + 2 is copied as soon as
  // step i's S is computed (its K slots are free then), V of step i + 1 at
  // the top of step i (step i - 1's P V freed its V slots), and each is
  // waited for just before its first read: a step and a half of lead each,
  // where a step is shorter than a load's latency. Two commit groups a
  // step, so the waits leave the three newest groups in flight. The loads
  // hold no registers; a lane reads only what it copied, so the copies
  // need no barrier. Stage s, slot i of thread t is at byte
  // ((s * slots + i) * threads + t) * slotBytes: a warp's read of a slot is
  // 32 consecutive slots. The stages take the accumulators' buffer, free
  // until the loop ends.
  const int64_t threads = PartialKernelLayout::kThreads;
  const int64_t slotBytes = layout.slotBytes;
  Type i8 = rewriter.getI8Type();
  Value laneStages = e.address(sharedPointer(rewriter, e.loc, warpAccumulators),
                               i8, e.mul(thread, e.index(slotBytes)));
  auto slotAddress = [&](Value stage, int64_t slot) {
    return e.address(
        laneStages, i8,
        e.add(e.mul(stage, e.index(layout.stageSlots * threads * slotBytes)),
              e.index(slot * threads * slotBytes)));
  };
  const int64_t keySlots = headDim / 32, valueSlots = headDim / 64;
  const int64_t scaleSlot = keySlots + 2 * valueSlots;
  // Copies the K (with the pair's key scales) or, `ofValues`, the V (with
  // their value scales) of the step whose warp starts at `first` into
  // `stage`, reading nothing unless `live` (the step is in the chunk), and
  // commits them as one group. `pages` are those of laneTokens(first).
  Value keyLane = e.mul(fragmentPair, e.index(kFragmentElementsPerVector));
  Value valueLane = e.mul(fragmentRow, e.index(kFragmentElementsPerVector));
  auto copyHalfStep = [&](bool ofValues, Value first, ArrayRef<Value> pages,
                          Value stage, Value live) {
    SmallVector<Value> tokens = laneTokens(first);
    auto copy = [&](Value base, Type type, Value offset, int64_t slot,
                    int64_t byteOffset, int64_t bytes) {
      Value source = e.address(base, type, offset);
      Value target =
          e.address(slotAddress(stage, slot), i8, e.index(byteOffset));
      NVVM::CpAsyncOp::create(rewriter, e.loc, target, source,
                              static_cast<uint32_t>(bytes),
                              bytes == 16 ? NVVM::LoadCacheModifierKind::CG
                                          : NVVM::LoadCacheModifierKind::CA,
                              e.select(live, e.i32(bytes), e.i32(0)));
    };
    Type element = cache.addressType(), f32 = rewriter.getF32Type();
    // The rows of the lane's key pair 2p, 2p+1.
    auto pairRow = [&](int64_t key) {
      return cacheRow(tokens[1 + key], pages[1 + key]);
    };
    if (!ofValues) {
      Value keyRow = cacheRow(tokens[0], pages[0]);
      Value keyOffset = e.add(e.mul(keyRow, e.index(headDim)), keyLane);
      for (int64_t v = 0; v < keySlots; ++v)
        copy(keys, element, e.add(keyOffset, e.index(32 * v)), v, 0, slotBytes);
      if (keyScales)
        for (int64_t key = 0; key < 2; ++key)
          copy(keyScales, f32, pairRow(key), scaleSlot, 4 * key, 4);
    } else {
      for (int64_t key = 0; key < 2; ++key) {
        Value row = pairRow(key);
        Value valueOffset = e.add(e.mul(row, e.index(headDim)), valueLane);
        for (int64_t v = 0; v < valueSlots; ++v)
          copy(values, element, e.add(valueOffset, e.index(64 * v)),
               keySlots + key * valueSlots + v, 0, slotBytes);
        if (valueScales)
          copy(valueScales, f32, row, scaleSlot + 1, 4 * key, 4);
      }
    }
    NVVM::CpAsyncCommitGroupOp::create(rewriter, e.loc);
  };
  // When step i reads its K, V(i), K(i + 1) and V(i + 1) were committed
  // after it; when it reads its V, K(i + 1), V(i + 1) and K(i + 2).
  constexpr int32_t kGroupsInFlight = 3;

  // Before q is staged, under its latency: the first step's pages and
  // copies, and the entries of the next kLookAheadSteps steps' pages (a
  // step copies the one after it, whose entries were loaded that many
  // steps before: a step is shorter than a load's latency). None read for
  // an empty chunk, whose positions may lie past the sequence's pages.
  constexpr int64_t kLookAheadSteps = 2;
  constexpr int64_t kEntriesPerStep = 3;
  Value chunkLive = e.lessThan(chunk.begin, chunk.end);
  Value firstOfChunk = e.add(chunk.begin, warpBase);
  SmallVector<Value> firstPages(kEntriesPerStep), aheadEntries;
  if (geometry.isPaged()) {
    auto lookUp = scf::IfOp::create(
        rewriter, e.loc, chunkLive,
        [&](OpBuilder &, Location) {
          SmallVector<Value> entries;
          for (int64_t step = 0; step <= kLookAheadSteps; ++step)
            llvm::append_range(
                entries, lookUpPages(laneTokens(e.add(
                             firstOfChunk, e.index(step * tokensPerStep)))));
          scf::YieldOp::create(rewriter, e.loc, entries);
        },
        [&](OpBuilder &, Location) {
          scf::YieldOp::create(
              rewriter, e.loc,
              SmallVector<Value>((kLookAheadSteps + 1) * kEntriesPerStep,
                                 e.i32(0)));
        });
    firstPages = toPages(lookUp.getResults().take_front(kEntriesPerStep));
    llvm::append_range(aheadEntries,
                       lookUp.getResults().drop_front(kEntriesPerStep));
  }
  // K(0), V(0), then K(1): the order the loop's waits count on.
  Value secondOfChunk = e.add(firstOfChunk, e.index(tokensPerStep));
  copyHalfStep(/*ofValues=*/false, firstOfChunk, firstPages, e.index(0),
               chunkLive);
  copyHalfStep(/*ofValues=*/true, firstOfChunk, firstPages, e.index(0),
               chunkLive);
  SmallVector<Value> secondPages(kEntriesPerStep);
  if (geometry.isPaged())
    secondPages =
        toPages(ArrayRef<Value>(aheadEntries).take_front(kEntriesPerStep));
  copyHalfStep(
      /*ofValues=*/false, secondOfChunk, secondPages, e.index(1),
      e.lessThan(e.add(chunk.begin, e.index(tokensPerStep)), chunk.end));
  stageQueryFragments(firstRow);
  // q's A fragments of the first heldQuerySteps k-steps stay in registers
  // through the loop; the others are read from workgroup memory as the
  // k-steps take them.
  auto queryFragment = [&](int64_t step) {
    SmallVector<Value> words;
    for (int64_t i = 0; i < 4; ++i)
      words.push_back(
          memref::LoadOp::create(rewriter, e.loc, queryFragments,
                                 ValueRange{e.index(step), lane, e.index(i)}));
    return words;
  };
  SmallVector<SmallVector<Value>> heldQueryWords;
  for (int64_t step = 0; step < std::min(kSteps, schedule.heldQuerySteps);
       ++step)
    heldQueryWords.push_back(queryFragment(step));
  // The keys the lane's two rows (g and g + 8) see, within the chunk. As
  // i32 (positions fit: max_len is an i32): one register each, not two,
  // through the token loop. A row's window [end - W, end) keeps only its
  // end: its start is recomputed per step and the chunk's end is a bound of
  // its own (the registers of two more starts made ptxas spill).
  const bool windowed = rules.windowLeft && rules.rowsDiffer();
  Value rowEnds[2], chunkEnd;
  for (int64_t r = 0; r < 2; ++r) {
    Value end = visibleKeys(firstRow, e.add(fragmentRow, e.index(8 * r))).end;
    rowEnds[r] = e.toI32(windowed ? end : e.min(chunk.end, end));
  }
  if (windowed)
    chunkEnd = e.toI32(chunk.end);
  // ALiBi: each row's slope and position (i32, as the keys are compared).
  AlibiRow alibi[2];
  if (alibiSlopes)
    for (int64_t r = 0; r < 2; ++r) {
      alibi[r] = alibiOfRow(firstRow, e.add(fragmentRow, e.index(8 * r)));
      alibi[r].position = e.toI32(alibi[r].position);
    }

  // Carried per lane: each row's max and this lane's share of its sum,
  // then the output accumulator, tile by tile (c0..c3).
  SmallVector<Value> initial = {e.negInf(), e.negInf(), e.f32(0.0), e.f32(0.0)};
  initial.append(4 * outputTiles, e.f32(0.0));

  const int64_t entriesAt = initial.size();
  initial.append(aheadEntries);

  auto stream = scf::ForOp::create(
      rewriter, e.loc, chunk.begin, chunk.end, e.index(tokensPerStep), initial,
      [&](OpBuilder &, Location, Value stepStart, ValueRange carried) {
        Value first = e.add(stepStart, warpBase);
        Value stepIndex = arith::DivUIOp::create(rewriter, e.loc,
                                                 e.sub(stepStart, chunk.begin),
                                                 e.index(tokensPerStep));
        auto stageOf = [&](Value index) {
          return arith::RemUIOp::create(rewriter, e.loc, index,
                                        e.index(schedule.keyValueStages));
        };
        // The next step's V (the entries of its pages were loaded
        // kLookAheadSteps steps ago), then this step's K, issued a step and
        // a half ago, is waited for.
        Value nextStart = e.add(stepStart, e.index(tokensPerStep));
        SmallVector<Value> nextPages(kEntriesPerStep);
        if (geometry.isPaged())
          nextPages = toPages(carried.slice(entriesAt, kEntriesPerStep));
        copyHalfStep(/*ofValues=*/true, e.add(first, e.index(tokensPerStep)),
                     nextPages, stageOf(e.add(stepIndex, e.index(1))),
                     e.lessThan(nextStart, chunk.end));
        NVVM::CpAsyncWaitGroupOp::create(rewriter, e.loc, kGroupsInFlight);
        SmallVector<Value> nextEntries;
        if (geometry.isPaged()) {
          llvm::append_range(
              nextEntries,
              carried.slice(entriesAt + kEntriesPerStep,
                            (kLookAheadSteps - 1) * kEntriesPerStep));
          llvm::append_range(
              nextEntries,
              lookUpPages(laneTokens(e.add(
                  first, e.index((kLookAheadSteps + 1) * tokensPerStep)))));
        }
        Value stage = stageOf(stepIndex);
        // Per-token scales of the lane's keys 2p, 2p+1: q's prescale times
        // the key scale (and, with V, the value scale).
        auto pairType = VectorType::get({2}, rewriter.getF32Type());
        Value pairScoreScales[2] = {queryScale, queryScale};
        Value pairValueScales[2];
        if (keyScales) {
          Value keyPair = LLVM::LoadOp::create(
              rewriter, e.loc, pairType, slotAddress(stage, scaleSlot), 8);
          for (int64_t key = 0; key < 2; ++key)
            pairScoreScales[key] = e.mul(queryScale, e.extract(keyPair, key));
        }
        // S = q K^T over D / 16 k-steps.
        // Two accumulators (even and odd k-steps), added at the end: two
        // independent mma chains of D / 32 instead of one of D / 16, each
        // link an mma's latency.
        SmallVector<SmallVector<Value>> partialS(
            2, SmallVector<Value>(4, e.f32(0.0)));
        // K's vectors are read from the stage as the k-steps take them (the
        // registers go to q's fragments, held through the loop).
        SmallVector<Value> keyWords;
        for (int64_t step = 0; step < kSteps; ++step) {
          if (step % 2 == 0)
            keyWords = loadFragmentWords(slotAddress(stage, step / 2));
          int64_t word = 2 * (step % 2);
          SmallVector<Value> &chain = partialS[step % 2];
          SmallVector<Value> queryWords = step < schedule.heldQuerySteps
                                              ? heldQueryWords[step]
                                              : queryFragment(step);
          chain = mma(queryWords, {keyWords[word], keyWords[word + 1]}, chain);
        }
        SmallVector<Value> s;
        for (int64_t i = 0; i < 4; ++i)
          s.push_back(e.add(partialS[0][i], partialS[1][i]));
        // This step's K is read: its slots take K of the step after next
        // (its entries loaded a step ago).
        SmallVector<Value> afterNextPages(kEntriesPerStep);
        if (geometry.isPaged())
          afterNextPages = toPages(
              carried.slice(entriesAt + kEntriesPerStep, kEntriesPerStep));
        copyHalfStep(/*ofValues=*/false,
                     e.add(first, e.index(2 * tokensPerStep)), afterNextPages,
                     stage,
                     e.lessThan(e.add(stepStart, e.index(2 * tokensPerStep)),
                                chunk.end));

        // Scaled to base 2; keys a row may not see are -inf. s[i] is row
        // g + 8 (i / 2), key 2p + i % 2.
        SmallVector<Value> scores;
        for (int64_t i = 0; i < 4; ++i) {
          Value key = e.toI32(e.add(e.add(first, e.index(i % 2)), pairKey));
          Value visible = e.lessThan(key, rowEnds[i / 2]);
          if (windowed) {
            Value begin = e.sub(rowEnds[i / 2], e.i32(*rules.windowLeft));
            Value inWindow = arith::CmpIOp::create(
                rewriter, e.loc, arith::CmpIPredicate::sge, key, begin);
            Value inChunk = e.lessThan(key, chunkEnd);
            visible = arith::AndIOp::create(
                rewriter, e.loc, visible,
                arith::AndIOp::create(rewriter, e.loc, inWindow, inChunk));
          }
          Value score = shapeScore(e.mul(s[i], pairScoreScales[i % 2]));
          if (alibiSlopes)
            score = buildAlibiBias(rewriter, e.loc, score, alibi[i / 2].slope,
                                   key, alibi[i / 2].position);
          scores.push_back(e.select(visible, score, e.negInf()));
        }

        // The online softmax per row: the step's max over the 4 lanes of
        // the row, one rescale, each score's exp once.
        SmallVector<Value> next(carried.begin(), carried.end());
        Value rescale[2], weights[4];
        for (int64_t r = 0; r < 2; ++r) {
          Value tileMax = carried[r];
          for (int64_t i = 0; i < 2; ++i)
            tileMax = arith::MaximumFOp::create(rewriter, e.loc, tileMax,
                                                scores[2 * r + i]);
          for (int64_t offset : {1, 2})
            tileMax = arith::MaximumFOp::create(rewriter, e.loc, tileMax,
                                                e.shuffleXor(tileMax, offset));
          // A NaN score propagates through the max. Nothing visible yet:
          // weights 0 (2^(-inf - -inf) would be NaN).
          Value empty = e.isNegInf(tileMax);
          rescale[r] = buildRescale(e, carried[r], tileMax);
          Value sum = e.mul(carried[2 + r], rescale[r]);
          for (int64_t i = 0; i < 2; ++i) {
            weights[2 * r + i] = e.select(
                empty, e.f32(0.0), e.exp2(e.sub(scores[2 * r + i], tileMax)));
            sum = e.add(sum, weights[2 * r + i]);
          }
          next[r] = tileMax;
          next[2 + r] = sum;
        }

        // O = O * rescale + P V with m16n8k8: P's A fragment (rows g, g + 8
        // at keys 2p, 2p+1) is S's accumulator layout, rounded to the
        // element type (after a per-token value scale, times
        // cache.probabilityFactor(): it weighs the key's value, not the
        // sum); B is V at keys 2p, 2p+1 of column g, copied a step and a
        // half ago.
        NVVM::CpAsyncWaitGroupOp::create(rewriter, e.loc, kGroupsInFlight);
        if (valueScales) {
          Value valuePair = LLVM::LoadOp::create(
              rewriter, e.loc, pairType, slotAddress(stage, scaleSlot + 1), 8);
          for (int64_t key = 0; key < 2; ++key)
            pairValueScales[key] = e.mul(e.extract(valuePair, key),
                                         e.f32(cache.probabilityFactor()));
        }
        auto probability = [&](int64_t i) -> Value {
          Value weight = weights[i];
          if (valueScales)
            weight = e.mul(weight, pairValueScales[i % 2]);
          return arith::TruncFOp::create(rewriter, e.loc, elementType, weight);
        };
        SmallVector<Value> p;
        for (int64_t r = 0; r < 2; ++r)
          p.push_back(packPair(probability(2 * r), probability(2 * r + 1)));
        // V's vectors are read as the output tiles take them: the vector of
        // each key that output tiles [8v, 8v + 8) need.
        SmallVector<Value> valueWords[2];
        for (int64_t tile = 0; tile < outputTiles; ++tile) {
          if (tile % 8 == 0)
            for (int64_t key = 0; key < 2; ++key)
              valueWords[key] = loadFragmentWords(
                  slotAddress(stage, keySlots + key * valueSlots + tile / 8));
          auto element = [&](int64_t key) {
            auto pair = LLVM::BitcastOp::create(
                rewriter, e.loc, VectorType::get({2}, elementType),
                valueWords[key][(tile % 8) / 2]);
            return e.extract(pair, tile % 2);
          };
          SmallVector<Value> c;
          for (int64_t i = 0; i < 4; ++i)
            c.push_back(e.mul(carried[4 + 4 * tile + i], rescale[i / 2]));
          SmallVector<Value> d = mma(p, {packPair(element(0), element(1))}, c);
          for (int64_t i = 0; i < 4; ++i)
            next[4 + 4 * tile + i] = d[i];
        }
        llvm::copy(nextEntries, next.begin() + entriesAt);
        scf::YieldOp::create(rewriter, e.loc, next);
      });

  // The last step's (empty) copies drain, and every warp is past its last
  // read of the stages, before the accumulators take their place.
  NVVM::CpAsyncWaitGroupOp::create(rewriter, e.loc, 0);
  gpu::BarrierOp::create(rewriter, e.loc);
  // Each row's sum over its four lanes, then the warp's state per row, as
  // publishWarpStates leaves it: padding rows are not published.
  SmallVector<Value> result(stream.getResults());
  auto accumulators = cast<MemRefType>(warpAccumulators.getType());
  Value accumulatorsPointer = sharedPointer(rewriter, e.loc, warpAccumulators);
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t offset : {1, 2})
      result[2 + r] = e.add(result[2 + r], e.shuffleXor(result[2 + r], offset));
  for (int64_t r = 0; r < 2; ++r) {
    Value tileRow = e.add(fragmentRow, e.index(8 * r));
    OpBuilder::InsertionGuard guard(rewriter);
    if (8 * r + 8 > layout.rowTile) {
      auto inTile = scf::IfOp::create(
          rewriter, e.loc, e.lessThan(tileRow, e.index(layout.rowTile)),
          /*withElseRegion=*/false);
      rewriter.setInsertionPointToStart(inTile.thenBlock());
    }
    // Output tiles 4k .. 4k + 3 hold 4 consecutive dims of each of the
    // lane's columns: one 16-byte store each.
    auto f32x4 = VectorType::get({4}, rewriter.getF32Type());
    Value rowStart =
        e.mul(e.add(e.mul(warp, e.index(accumulators.getDimSize(1))), tileRow),
              e.index(headDim));
    for (int64_t first = 0; first < outputTiles; first += 4)
      for (int64_t i = 0; i < 2; ++i) {
        Value column = e.add(e.mul(fragmentPair, e.index(2)), e.index(i));
        Value dim = e.add(e.mul(column, e.index(8)),
                          e.index(64 * (first / 8) + first % 8));
        Value vector = LLVM::UndefOp::create(rewriter, e.loc, f32x4);
        for (int64_t k = 0; k < 4; ++k)
          vector = LLVM::InsertElementOp::create(
              rewriter, e.loc, vector, result[4 + 4 * (first + k) + 2 * r + i],
              e.i32(k));
        LLVM::StoreOp::create(
            rewriter, e.loc, vector,
            e.address(accumulatorsPointer, rewriter.getF32Type(),
                      e.add(rowStart, accumulatorColumn(tileRow, dim))),
            16);
      }
    auto firstLane =
        scf::IfOp::create(rewriter, e.loc, e.equal(fragmentPair, e.index(0)),
                          /*withElseRegion=*/false);
    rewriter.setInsertionPointToStart(firstLane.thenBlock());
    memref::StoreOp::create(rewriter, e.loc, result[r], warpMaxSum,
                            ValueRange{warp, tileRow, e.index(0)});
    memref::StoreOp::create(rewriter, e.loc, result[2 + r], warpMaxSum,
                            ValueRange{warp, tileRow, e.index(1)});
  }
}
