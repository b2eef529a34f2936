//===- SplitValueTile.cpp - Tensor cores for wide heads -------------------===//
//
// A row tile of up to 16 query rows whose head is too wide for a warp to
// hold its output alone (D_v = 512: 256 accumulator registers a lane): the
// four warps take each step's 8 keys together. The block copies the keys'
// K and V rows (MLA: one latent row, the values its first D_v columns, read
// once) into a stage of workgroup memory with cp.async, the schedule's S
// stages a step each, S - 1 steps ahead. Each warp computes its share of
// S = q K^T over a quarter of the head dim (D / 64 m16n8k16 k-steps, its q
// fragments held in registers), the shares are summed through workgroup
// memory, and every warp runs the same online softmax on the sum (the same
// max and sum per row), then O += P V for a quarter of the value dims
// (D_v / 32 m16n8k8 tiles). So no mma flop is done twice and a lane holds
// D_v / 8 accumulators. An fp8 row is copied as stored, its per-token
// scales beside it, and decoded as the warps read it.
//
// Two barriers a step: at its top, once the step's copies are in (every
// warp is then past the previous step, so its stage takes the copy of step
// i + S - 1, issued before the step's P V; the last S - 1 steps, in a loop
// of their own, copy none), and between the shares' stores and their
// reads.
//
// Fragments (PTX ISA, as in TensorCoreTile.cpp, lane l: g = l / 4,
// p = l % 4): k-step t of S takes head dims 16t + 4p .. 16t + 4p + 3 of q
// and K as its rows 2p, 2p+1 and 2p+8, 2p+9 (q K^T sums over the head dim,
// so any permutation both use is exact): one 8-byte read of key g a lane.
// Column n of the warp's output tile j is value dim W + T n + j (W the
// warp's first, T = D_v / 32 its tiles): lane l reads dims
// [W + T g, W + T g + T) of keys 2p and 2p + 1, whole 8- or 16-byte pieces.
//
//===----------------------------------------------------------------------===//

#include "SplitValueTileBuilder.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

void SplitValueTileBuilder::setUpLanes() {
  TensorCoreTileBuilder::setUpLanes();
  stages = sharedPointer(rewriter, e.loc, warpAccumulators);
  scoreExchange = sharedPointer(rewriter, e.loc, queryFragments);
  warpFirstStep = e.mul(warp, e.index(layout.warpHeadDims() / 16));
  warpFirstValueDim = e.mul(warp, e.index(layout.warpValueDims()));
}

Value SplitValueTileBuilder::stageAddress(Value stage, Value key,
                                          Value byteOffset) {
  if (const int64_t swizzle = layout.stageSwizzleBytes) {
    // Key bit 2 times the swizzle: (key & 4) * (swizzle / 4).
    Value flip = e.mul(arith::AndIOp::create(rewriter, e.loc, key, e.index(4)),
                       e.index(swizzle / 4));
    byteOffset = arith::XOrIOp::create(rewriter, e.loc, byteOffset, flip);
  }
  Value offset = e.add(e.add(e.mul(stage, e.index(layout.stageBytes())),
                             e.mul(key, e.index(layout.stageRowBytes))),
                       byteOffset);
  return e.address(stages, rewriter.getI8Type(), offset);
}

SmallVector<SplitValueTileBuilder::Piece>
SplitValueTileBuilder::getStepPieces(Value stepStart) {
  const int64_t threads = PartialKernelLayout::kThreads;
  const int64_t piecesPerKey = layout.stageScaleOffset / kPieceBytes;
  const int64_t stepKeys = layout.tokensPerStep();
  const int64_t pieces = stepKeys * piecesPerKey;
  constexpr int64_t kPiecesPerPass = 128 / kPieceBytes;
  SmallVector<Piece> stepPieces;
  auto setToken = [&](Piece &p) {
    Value token = e.add(stepStart, p.key);
    p.live = e.lessThan(token, chunk.end);
    p.token = e.min(token, lastKey);
  };
  for (int64_t first = 0; first < pieces; first += threads) {
    Piece p;
    Value index = e.add(thread, e.index(first));
    // Threads past the last piece copy nothing (a copy of no bytes still
    // writes its zeros).
    if (first + threads > pieces)
      p.inRange = e.lessThan(index, e.index(pieces));
    index = e.min(index, e.index(pieces - 1));
    // A copy's pass is 8 lanes' 16 bytes (one wavefront). Where a key's
    // pieces fill whole passes, a pass takes 8 pieces of one key; else
    // (fp8 MLA's 36 a key) passes that straddled two rows met some banks
    // twice, so a pass takes one piece of each of the step's 8 keys (rows
    // an odd number of 16 bytes apart: 8 distinct banks' groups).
    bool wholePasses = piecesPerKey % kPiecesPerPass == 0;
    Value perKey = e.index(wholePasses ? piecesPerKey : stepKeys);
    Value major = arith::DivUIOp::create(rewriter, e.loc, index, perKey);
    Value minor = arith::RemUIOp::create(rewriter, e.loc, index, perKey);
    p.key = wholePasses ? major : minor;
    p.piece = wholePasses ? minor : major;
    setToken(p);
    stepPieces.push_back(p);
  }
  // An fp8 cache's per-token scales: a thread per key and scale.
  if (const int64_t scales = getTokenScalesPerKey()) {
    Piece p;
    p.inRange = e.lessThan(thread, e.index(stepKeys * scales));
    Value index = e.min(thread, e.index(stepKeys * scales - 1));
    p.key = arith::DivUIOp::create(rewriter, e.loc, index, e.index(scales));
    p.scale = arith::RemUIOp::create(rewriter, e.loc, index, e.index(scales));
    setToken(p);
    stepPieces.push_back(p);
  }
  return stepPieces;
}

SmallVector<Value> SplitValueTileBuilder::loadStepEntries(Value stepStart) {
  SmallVector<Value> entries;
  if (geometry.isPaged())
    for (const Piece &p : getStepPieces(stepStart))
      entries.push_back(loadPageEntry(p.token));
  return entries;
}

void SplitValueTileBuilder::copyStep(Value stepStart, Value stage,
                                     ValueRange entries) {
  const int64_t keyPieces = geometry.headDim * cache.bytes() / kPieceBytes;
  Type element = cache.addressType();
  Value elementsPerPiece = e.index(kPieceBytes / cache.bytes());
  for (auto [index, p] : llvm::enumerate(getStepPieces(stepStart))) {
    auto [row, live] =
        copiedRow(p.token, entries.empty() ? Value() : entries[index], p.live);
    OpBuilder::InsertionGuard guard(rewriter);
    if (p.inRange) {
      auto inRange = scf::IfOp::create(rewriter, e.loc, p.inRange,
                                       /*withElseRegion=*/false);
      rewriter.setInsertionPointToStart(inRange.thenBlock());
    }
    if (p.scale) {
      Type f32 = rewriter.getF32Type();
      Value source = e.address(keyScales, f32, row);
      if (values)
        source = e.select(e.equal(p.scale, e.index(0)), source,
                          e.address(valueScales, f32, row));
      Value target = stageAddress(
          stage, p.key,
          e.add(e.index(layout.stageScaleOffset), e.mul(p.scale, e.index(4))));
      NVVM::CpAsyncOp::create(rewriter, e.loc, target, source, 4,
                              NVVM::LoadCacheModifierKind::CA,
                              e.select(live, e.i32(4), e.i32(0)));
      continue;
    }
    Value source = e.address(keys, element,
                             e.add(e.mul(row, e.index(geometry.headDim)),
                                   e.mul(p.piece, elementsPerPiece)));
    if (values) {
      Value valuePiece = e.max(e.sub(p.piece, e.index(keyPieces)), e.index(0));
      Value valueSource =
          e.address(values, element,
                    e.add(e.mul(row, e.index(geometry.valueHeadDim)),
                          e.mul(valuePiece, elementsPerPiece)));
      source = e.select(e.lessThan(p.piece, e.index(keyPieces)), source,
                        valueSource);
    }
    Value target =
        stageAddress(stage, p.key, e.mul(p.piece, e.index(kPieceBytes)));
    NVVM::CpAsyncOp::create(rewriter, e.loc, target, source,
                            static_cast<uint32_t>(kPieceBytes),
                            NVVM::LoadCacheModifierKind::CG,
                            e.select(live, e.i32(kPieceBytes), e.i32(0)));
  }
  NVVM::CpAsyncCommitGroupOp::create(rewriter, e.loc);
}

SmallVector<SmallVector<Value>> SplitValueTileBuilder::multiplyWarpKeys(
    Value stage, ArrayRef<SmallVector<Value>> queryWords) {
  // A lane's four elements of key g: two words, or one fp8 word decoded.
  const bool float8 = cache.isFloat8();
  auto wordsType = VectorType::get({float8 ? 1 : 2}, rewriter.getI32Type());
  Value laneBytes = e.mul(
      e.add(e.mul(warpFirstStep, e.index(16)), e.mul(fragmentPair, e.index(4))),
      e.index(cache.bytes()));
  // Three accumulators (k-steps t, t + 3, t + 6, ...): three mma chains a
  // third as long, summed by sumShares. Two made the chain the step's
  // longest latency; one a k-step took as many adds as the fp8 tile's issue
  // could spare (bench/RESULTS.md, 2026-12-06 (third)).
  constexpr size_t chains = 3;
  SmallVector<SmallVector<Value>> products;
  for (auto [step, words] : llvm::enumerate(queryWords)) {
    Value address =
        stageAddress(stage, fragmentRow,
                     e.add(laneBytes, e.index(16 * step * cache.bytes())));
    Value loaded = LLVM::LoadOp::create(rewriter, e.loc, wordsType, address,
                                        float8 ? 4 : 8);
    SmallVector<Value> keyWords =
        float8 ? decodeFloat8Words(e.extract(loaded, 0))
               : SmallVector<Value>{e.extract(loaded, 0), e.extract(loaded, 1)};
    if (step < chains)
      products.push_back(
          mma(words, keyWords, SmallVector<Value>(4, e.f32(0.0))));
    else
      products[step % chains] = mma(words, keyWords, products[step % chains]);
  }
  return products;
}

SmallVector<Value>
SplitValueTileBuilder::sumShares(MutableArrayRef<SmallVector<Value>> products) {
  for (size_t width = 1; width < products.size(); width *= 2)
    for (size_t first = 0; first + width < products.size(); first += 2 * width)
      for (int64_t i = 0; i < 4; ++i)
        products[first][i] =
            e.add(products[first][i], products[first + width][i]);
  return products.front();
}

SmallVector<Value>
SplitValueTileBuilder::exchangeScores(ArrayRef<Value> share) {
  static_assert(PartialKernelLayout::kWarps == 4, "the sum pairs 4 warps");
  auto f32x4 = VectorType::get({4}, rewriter.getF32Type());
  auto laneSlot = [&](Value warpIndex) {
    return e.address(
        scoreExchange, rewriter.getF32Type(),
        e.mul(e.add(e.mul(warpIndex, e.index(32)), lane), e.index(4)));
  };
  Value vector = e.vector(share);
  LLVM::StoreOp::create(rewriter, e.loc, vector, laneSlot(warp), 16);
  gpu::BarrierOp::create(rewriter, e.loc);
  // The warp's own share stays in registers. (s0 + s1) + (s2 + s3) as
  // each warp's pair plus the other pair: float addition commutes, so
  // every warp gets the same bits with three reads, not four.
  auto readShare = [&](int64_t flip) {
    Value other = arith::XOrIOp::create(rewriter, e.loc, warp, e.index(flip));
    return LLVM::LoadOp::create(rewriter, e.loc, f32x4, laneSlot(other), 16)
        .getResult();
  };
  Value partner = readShare(1), otherFirst = readShare(2),
        otherSecond = readShare(3);
  SmallVector<Value> s;
  for (int64_t i = 0; i < 4; ++i)
    s.push_back(
        e.add(e.add(share[i], e.extract(partner, i)),
              e.add(e.extract(otherFirst, i), e.extract(otherSecond, i))));
  return s;
}

void SplitValueTileBuilder::accumulateWarpValues(
    Value stage, const TensorCoreSoftmaxStep &softmax,
    ArrayRef<Value> pairValueScales, ValueRange carried,
    MutableArrayRef<Value> next) {
  const int64_t tiles = layout.warpValueDims() / 8;
  // P's A fragment is S's accumulator layout: rows g, g + 8 at keys 2p,
  // 2p + 1.
  SmallVector<Value> p = packProbabilities(softmax, pairValueScales);
  // The lane's T value dims of keys 2p and 2p + 1 (T x the element's
  // bytes, in the widest pieces up to 16 bytes their alignment allows), as
  // words of element pairs (an fp8 word decoded into two).
  const int64_t laneBytes = tiles * cache.bytes();
  const int64_t pieceBytes = std::min<int64_t>(16, laneBytes & -laneBytes);
  auto pieceType = VectorType::get({pieceBytes / 4}, rewriter.getI32Type());
  Value valueBytes =
      e.add(e.index(layout.stageValueOffset),
            e.mul(e.add(warpFirstValueDim, e.mul(fragmentRow, e.index(tiles))),
                  e.index(cache.bytes())));
  SmallVector<Value> words[2];
  for (int64_t key = 0; key < 2; ++key) {
    Value keyIndex = e.add(e.mul(fragmentPair, e.index(2)), e.index(key));
    for (int64_t piece = 0; piece < laneBytes / pieceBytes; ++piece) {
      Value address = stageAddress(
          stage, keyIndex, e.add(valueBytes, e.index(piece * pieceBytes)));
      Value vector =
          LLVM::LoadOp::create(rewriter, e.loc, pieceType, address, pieceBytes);
      for (int64_t w = 0; w < pieceBytes / 4; ++w) {
        Value word = e.extract(vector, w);
        if (cache.isFloat8())
          llvm::append_range(words[key], decodeFloat8Words(word));
        else
          words[key].push_back(word);
      }
    }
  }
  auto element = [&](int64_t key, int64_t tile) {
    auto pair = LLVM::BitcastOp::create(rewriter, e.loc,
                                        VectorType::get({2}, getOperandType()),
                                        words[key][tile / 2]);
    return e.extract(pair, tile % 2);
  };
  SmallVector<Value> outputs = rescaleOutputs(softmax, carried, tiles);
  for (int64_t tile = 0; tile < tiles; ++tile)
    accumulateOutputTile(
        tile, p, [&] { return packPair(element(0, tile), element(1, tile)); },
        outputs, next);
}

void SplitValueTileBuilder::streamRowTile(Value firstRow) {
  const int64_t stagesCount = schedule.keyValueStages;
  const int64_t keysPerStep = layout.tokensPerStep();
  const int64_t tiles = layout.warpValueDims() / 8;
  Value pairKey = e.mul(fragmentPair, e.index(2));
  lastKey = e.max(e.sub(chunk.end, e.index(1)), e.index(0));
  // q's rows are copied first, into the buffer's end (a warp's own loads
  // of its 4.6 KB of MLA's q took a latency per 1 KB). Copied at the
  // kernel's start (startQueryCopy), q is in while the sequence's extent
  // and the first pages load, and the warps read their fragments before
  // any step is copied. Copied here, once the rows are known, the steps
  // whose stages lie before q are copied first: in flight while the warps
  // wait for q and read it; the steps of the stages q lies in once every
  // warp has read it. Steps 0 .. S - 2 are in flight before the loop; a
  // paged cache's entries of each copy are loaded a step before it
  // (carried through the loop), those of the first copies all before any
  // (their latencies overlap).
  if (!queryCopyStarted)
    copyQuery(firstRow);
  SmallVector<SmallVector<Value>> prologueEntries;
  for (int64_t step = 0; step + 1 < stagesCount; ++step)
    prologueEntries.push_back(loadStepEntries(stepAhead(chunk.begin, step)));
  auto copyFirstStep = [&](int64_t step) {
    copyStep(stepAhead(chunk.begin, step), e.index(step),
             prologueEntries[step]);
  };
  const int64_t stepsBeforeQuery =
      queryCopyStarted
          ? 0
          : std::min(schedule.getQueryStageOffset() / layout.stageBytes(),
                     stagesCount - 1);
  for (int64_t step = 0; step < stepsBeforeQuery; ++step)
    copyFirstStep(step);
  NVVM::CpAsyncWaitGroupOp::create(rewriter, e.loc,
                                   static_cast<int32_t>(stepsBeforeQuery));
  gpu::BarrierOp::create(rewriter, e.loc);
  SmallVector<SmallVector<Value>> queryWords = readWarpQuery();
  Value scoreScale = queryScale;
  if (multipliesInHalf())
    scoreScale = e.mul(scoreScale, toHalfQuery(queryWords));
  if (stepsBeforeQuery < stagesCount - 1) {
    gpu::BarrierOp::create(rewriter, e.loc);
    for (int64_t step = stepsBeforeQuery; step + 1 < stagesCount; ++step)
      copyFirstStep(step);
  }
  SmallVector<Value> firstEntries =
      loadStepEntries(stepAhead(chunk.begin, stagesCount - 1));
  TensorCoreRows rows = getTensorCoreRows(firstRow);

  // Carried per lane: each row's max and this lane's share of its sum,
  // then the warp's output tiles (c0..c3 each).
  SmallVector<Value> initial = getInitialTileState(tiles);
  const int64_t entriesAt = initial.size();
  // A step computes the stage its copies filled S - 1 steps before and, in
  // the first loop, copies the step S - 1 ahead. The last S - 1 steps have
  // none to copy (past the chunk) and run in a loop of their own that
  // commits empty groups: copies of nothing would write the stages zeros a
  // memory latency later, which the drain below would wait for (it still
  // does for the prologue's, in a chunk of fewer than S - 1 steps).
  auto computeStep = [&](Value stepStart, ValueRange carried,
                         bool copiesAhead) -> SmallVector<Value> {
    Value stage = stageOfStep(stepStart, 0);
    // This step's copies are in once the S - 2 newer groups are all that is
    // pending; past the barrier every thread's are visible and every warp
    // is done with the previous step's stage.
    NVVM::CpAsyncWaitGroupOp::create(rewriter, e.loc,
                                     static_cast<int32_t>(stagesCount - 2));
    gpu::BarrierOp::create(rewriter, e.loc);
    SmallVector<SmallVector<Value>> products =
        multiplyWarpKeys(stage, queryWords);
    SmallVector<Value> nextEntries;
    if (copiesAhead)
      nextEntries = loadStepEntries(stepAhead(stepStart, stagesCount));
    // With holes, whether the lane's keys 2p, 2p + 1 are keys.
    SmallVector<Value> pairIsKey;
    if (rules.blockTableHoles)
      for (int64_t key = 0; key < 2; ++key)
        pairIsKey.push_back(isKeyEntry(loadPageEntry(
            e.min(e.add(stepStart, e.add(pairKey, e.index(key))), lastKey))));
    SmallVector<Value> s = exchangeScores(sumShares(products));
    // Per-token scales of the lane's keys 2p, 2p + 1 (fp8): K's times q's
    // prescale for the scores, V's for P.
    SmallVector<Value> scoreScales = {scoreScale, scoreScale}, pairValueScales;
    if (keyScales)
      for (int64_t key = 0; key < 2; ++key) {
        auto scaleOf = [&](int64_t slot) -> Value {
          return LLVM::LoadOp::create(
              rewriter, e.loc, rewriter.getF32Type(),
              stageAddress(stage, e.add(pairKey, e.index(key)),
                           e.index(layout.stageScaleOffset + 4 * slot)),
              4);
        };
        scoreScales[key] = e.mul(scoreScale, scaleOf(0));
        pairValueScales.push_back(
            e.mul(scaleOf(values ? 1 : 0), e.f32(cache.probabilityFactor())));
      }
    SmallVector<Value> scores = maskTensorCoreScores(
        stepStart, pairKey, s, scoreScales, rows, pairIsKey);
    SmallVector<Value> next(carried.begin(), carried.end());
    TensorCoreSoftmaxStep softmax =
        stepTensorCoreSoftmax(carried, scores, next);
    // The copy's address arithmetic issues in the softmax's shuffle and exp
    // latencies (at the step's top it lengthened the step).
    if (copiesAhead)
      copyStep(stepAhead(stepStart, stagesCount - 1),
               stageOfStep(stepStart, stagesCount - 1),
               carried.drop_front(entriesAt));
    else
      NVVM::CpAsyncCommitGroupOp::create(rewriter, e.loc);
    accumulateWarpValues(stage, softmax, pairValueScales, carried, next);
    if (copiesAhead)
      llvm::copy(nextEntries, next.begin() + entriesAt);
    return next;
  };
  initial.append(firstEntries);
  Value copiesEnd = e.max(
      chunk.begin, e.sub(chunk.end, e.index((stagesCount - 1) * keysPerStep)));
  auto copying = scf::ForOp::create(
      rewriter, e.loc, chunk.begin, copiesEnd, e.index(keysPerStep), initial,
      [&](OpBuilder &, Location, Value stepStart, ValueRange carried) {
        scf::YieldOp::create(rewriter, e.loc,
                             computeStep(stepStart, carried, true));
      });
  // The first loop's steps end at the first step start at or past
  // copiesEnd.
  Value lastSteps =
      e.add(chunk.begin,
            e.mul(arith::CeilDivUIOp::create(rewriter, e.loc,
                                             e.sub(copiesEnd, chunk.begin),
                                             e.index(keysPerStep)),
                  e.index(keysPerStep)));
  auto stream = scf::ForOp::create(
      rewriter, e.loc, lastSteps, chunk.end, e.index(keysPerStep),
      copying.getResults().take_front(entriesAt),
      [&](OpBuilder &, Location, Value stepStart, ValueRange carried) {
        scf::YieldOp::create(rewriter, e.loc,
                             computeStep(stepStart, carried, false));
      });
  // The last copies (past the chunk: empty) drain, and every warp is past
  // its last read of the stages before the accumulators take their place.
  NVVM::CpAsyncWaitGroupOp::create(rewriter, e.loc, 0);
  gpu::BarrierOp::create(rewriter, e.loc);
  publishSplitState(stream.getResults());
}

void SplitValueTileBuilder::publishSplitState(ValueRange loopResults) {
  const int64_t tiles = layout.warpValueDims() / 8;
  const int64_t valueHeadDim = geometry.valueHeadDim;
  SmallVector<Value> result(loopResults);
  sumRowsOverQuad(result);
  for (int64_t r = 0; r < 2; ++r) {
    Value tileRow = e.add(fragmentRow, e.index(8 * r));
    OpBuilder::InsertionGuard guard(rewriter);
    if (8 * r + 8 > layout.rowTile) {
      auto inTile = scf::IfOp::create(
          rewriter, e.loc, e.lessThan(tileRow, e.index(layout.rowTile)),
          /*withElseRegion=*/false);
      rewriter.setInsertionPointToStart(inTile.thenBlock());
    }
    // Tiles 4k .. 4k + 3 of column n are 4 consecutive dims: one 16-byte
    // store each.
    Value rowStart = e.mul(tileRow, e.index(valueHeadDim));
    for (int64_t i = 0; i < 2; ++i) {
      Value column = e.add(e.mul(fragmentPair, e.index(2)), e.index(i));
      Value columnStart = e.add(
          rowStart, e.add(warpFirstValueDim, e.mul(column, e.index(tiles))));
      for (int64_t first = 0; first < tiles; first += 4) {
        SmallVector<Value> elements;
        for (int64_t k = 0; k < 4; ++k)
          elements.push_back(result[4 + 4 * (first + k) + 2 * r + i]);
        Value vector = e.vector(elements);
        LLVM::StoreOp::create(rewriter, e.loc, vector,
                              e.address(stages, rewriter.getF32Type(),
                                        e.add(columnStart, e.index(first))),
                              16);
      }
    }
    auto firstLane = scf::IfOp::create(
        rewriter, e.loc,
        arith::AndIOp::create(rewriter, e.loc,
                              e.equal(fragmentPair, e.index(0)),
                              e.equal(warp, e.index(0))),
        /*withElseRegion=*/false);
    rewriter.setInsertionPointToStart(firstLane.thenBlock());
    memref::StoreOp::create(rewriter, e.loc, result[r], warpMaxSum,
                            ValueRange{e.index(0), tileRow, e.index(0)});
    memref::StoreOp::create(rewriter, e.loc, result[2 + r], warpMaxSum,
                            ValueRange{e.index(0), tileRow, e.index(1)});
  }
}
