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
// into workgroup memory with cp.async steps before their use (the
// schedule's stages, K and V in commit groups of their own), and reads them
// back as the k-steps and output tiles take them.
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
// the way (loadFragmentWords; to f16 under bf16 queries with per-tensor
// scales, whose q is rewritten in f16: HalfQuery.cpp); its per-token scales
// multiply the scores (K) and P (V), each lane loading those of its two
// keys.
//
//===----------------------------------------------------------------------===//

#include "KeyValuePipeline.h"
#include "TensorCoreTileBuilder.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

void TensorCoreTileBuilder::setUpLanes() {
  queryFragments = kernel.getWorkgroupAttributions()[kQueryBuffer];
  fragmentRow = arith::DivUIOp::create(rewriter, e.loc, lane, e.index(4));
  fragmentPair = arith::RemUIOp::create(rewriter, e.loc, lane, e.index(4));
}

KeyRange TensorCoreTileBuilder::visibleKeys(Value firstRow, Value tileRow) {
  if (!rules.rowsDiffer())
    return {Value(), chunk.end};
  RowQuery rowQuery = queryOfRow(e.min(e.add(firstRow, tileRow), lastRow));
  return buildVisibleKeys(rewriter, e.loc, rowQuery.sequence, rowQuery.token,
                          rules);
}

void TensorCoreTileBuilder::streamRowTile(Value firstRow) {
  const int64_t headDim = geometry.headDim;
  const int64_t kSteps = headDim / 16;
  const int64_t outputTiles = headDim / 8;
  const int64_t tokensPerStep = layout.tokensPerStep();
  KeyValuePipeline pipeline(*this);
  Value pairKey = pipeline.getPairKey();
  SmallVector<Value> carriedEntries = pipeline.start();
  stageQueryFragments(firstRow);
  Value scoreScale = queryScale;
  if (multipliesInHalf())
    scoreScale = e.mul(scoreScale, halveQueryFragments());
  // q's A fragments of the first heldQuerySteps k-steps stay in registers
  // through the loop; the others are read from workgroup memory as the
  // k-steps take them.
  SmallVector<SmallVector<Value>> heldQueryWords;
  for (int64_t step = 0; step < std::min(kSteps, schedule.heldQuerySteps);
       ++step)
    heldQueryWords.push_back(loadQueryFragment(step));
  TensorCoreRows rows = getTensorCoreRows(firstRow);

  // Carried per lane: each row's max and this lane's share of its sum,
  // then the output accumulator, tile by tile (c0..c3).
  SmallVector<Value> initial = getInitialTileState(outputTiles);

  const int64_t entriesAt = initial.size();
  initial.append(carriedEntries);

  auto stream = scf::ForOp::create(
      rewriter, e.loc, chunk.begin, chunk.end, e.index(tokensPerStep), initial,
      [&](OpBuilder &, Location, Value stepStart, ValueRange carried) {
        Value first = e.add(stepStart, pipeline.getWarpBase());
        ValueRange entries = carried.drop_front(entriesAt);
        // With holes, which of the lane's keys are keys: loaded before the
        // waits, read by the mask.
        SmallVector<Value> pairIsKey = pipeline.pairIsKey(first);
        KeyValuePipeline::Step step =
            pipeline.beginStep(stepStart, first, entries);
        Value stage = step.stage;
        // Per-token scales of the lane's keys 2p, 2p+1: q's prescale times
        // the key scale (and, with V, the value scale).
        auto pairType = VectorType::get({2}, rewriter.getF32Type());
        Value pairScoreScales[2] = {scoreScale, scoreScale};
        if (keyScales) {
          Value keyPair = LLVM::LoadOp::create(
              rewriter, e.loc, pairType, pipeline.tokenScales(stage, false), 8);
          for (int64_t key = 0; key < 2; ++key)
            pairScoreScales[key] = e.mul(scoreScale, e.extract(keyPair, key));
        }
        SmallVector<Value> s =
            multiplyQueryKeys(pipeline, stage, heldQueryWords);
        // This step's K is read: its slots take K of step i + S.
        pipeline.copyKeysAhead(stepStart, first, stage, entries);

        SmallVector<Value> scores = maskTensorCoreScores(
            first, pairKey, s, pairScoreScales, rows, pairIsKey);

        SmallVector<Value> next(carried.begin(), carried.end());
        TensorCoreSoftmaxStep softmax =
            stepTensorCoreSoftmax(carried, scores, next);
        accumulateValues(pipeline, stage, softmax, carried, next);
        llvm::copy(step.nextEntries, next.begin() + entriesAt);
        scf::YieldOp::create(rewriter, e.loc, next);
      });

  pipeline.drain();
  publishTensorCoreStates(stream.getResults());
}

SmallVector<Value> TensorCoreTileBuilder::loadQueryFragment(int64_t step) {
  SmallVector<Value> words;
  for (int64_t i = 0; i < 4; ++i)
    words.push_back(
        memref::LoadOp::create(rewriter, e.loc, queryFragments,
                               ValueRange{e.index(step), lane, e.index(i)}));
  return words;
}

SmallVector<Value> TensorCoreTileBuilder::multiplyQueryKeys(
    KeyValuePipeline &pipeline, Value stage,
    ArrayRef<SmallVector<Value>> heldQueryWords) {
  const int64_t kSteps = geometry.headDim / 16;
  // S = q K^T over D / 16 k-steps.
  // Two accumulators (even and odd k-steps), added at the end: two
  // independent mma chains of D / 32 instead of one of D / 16, each
  // link an mma's latency.
  SmallVector<SmallVector<Value>> partialS(2,
                                           SmallVector<Value>(4, e.f32(0.0)));
  // K's vectors are read from the stage as the k-steps take them (the
  // registers go to q's fragments, held through the loop).
  SmallVector<Value> keyWords;
  for (int64_t step = 0; step < kSteps; ++step) {
    if (step % 2 == 0)
      keyWords = loadFragmentWords(pipeline.keyVector(stage, step / 2));
    int64_t word = 2 * (step % 2);
    SmallVector<Value> &chain = partialS[step % 2];
    SmallVector<Value> queryWords = step < schedule.heldQuerySteps
                                        ? heldQueryWords[step]
                                        : loadQueryFragment(step);
    chain = mma(queryWords, {keyWords[word], keyWords[word + 1]}, chain);
  }
  SmallVector<Value> s;
  for (int64_t i = 0; i < 4; ++i)
    s.push_back(e.add(partialS[0][i], partialS[1][i]));
  return s;
}

void TensorCoreTileBuilder::accumulateValues(
    KeyValuePipeline &pipeline, Value stage,
    const TensorCoreSoftmaxStep &softmax, ValueRange carried,
    MutableArrayRef<Value> next) {
  const int64_t outputTiles = geometry.headDim / 8;
  auto pairType = VectorType::get({2}, rewriter.getF32Type());
  SmallVector<Value> pairValueScales;

  // O = O * rescale + P V with m16n8k8: P's A fragment (rows g, g + 8
  // at keys 2p, 2p+1) is S's accumulator layout, rounded to the
  // element type (after a per-token value scale, times
  // cache.probabilityFactor(): it weighs the key's value, not the
  // sum); B is V at keys 2p, 2p+1 of column g, copied (stages - 1) steps
  // and a half ago.
  pipeline.waitForHalfStep();
  if (valueScales) {
    Value valuePair = LLVM::LoadOp::create(
        rewriter, e.loc, pairType, pipeline.tokenScales(stage, true), 8);
    for (int64_t key = 0; key < 2; ++key)
      pairValueScales.push_back(
          e.mul(e.extract(valuePair, key), e.f32(cache.probabilityFactor())));
  }
  SmallVector<Value> p = packProbabilities(softmax, pairValueScales);
  SmallVector<Value> outputs = rescaleOutputs(softmax, carried, outputTiles);
  // V's vectors are read as the output tiles take them: the vector of
  // each key that output tiles [8v, 8v + 8) need.
  SmallVector<Value> valueWords[2];
  for (int64_t tile = 0; tile < outputTiles; ++tile) {
    if (tile % 8 == 0)
      for (int64_t key = 0; key < 2; ++key)
        valueWords[key] =
            loadFragmentWords(pipeline.valueVector(stage, key, tile / 8));
    auto element = [&](int64_t key) {
      auto pair = LLVM::BitcastOp::create(
          rewriter, e.loc, VectorType::get({2}, getOperandType()),
          valueWords[key][(tile % 8) / 2]);
      return e.extract(pair, tile % 2);
    };
    accumulateOutputTile(
        tile, p, [&] { return packPair(element(0), element(1)); }, outputs,
        next);
  }
}

SmallVector<Value>
TensorCoreTileBuilder::getInitialTileState(int64_t outputTiles) {
  SmallVector<Value> initial = {e.negInf(), e.negInf(), e.f32(0.0), e.f32(0.0)};
  initial.append(4 * outputTiles, e.f32(0.0));
  return initial;
}

SmallVector<Value>
TensorCoreTileBuilder::packProbabilities(const TensorCoreSoftmaxStep &softmax,
                                         ArrayRef<Value> pairValueScales) {
  // With per-token value scales P weighs the key's value: times its scale
  // (and cache.probabilityFactor(), which the normalization divides out).
  auto probability = [&](int64_t i) -> Value {
    Value weight = softmax.weights[i];
    if (!pairValueScales.empty())
      weight = e.mul(weight, pairValueScales[i % 2]);
    return arith::TruncFOp::create(rewriter, e.loc, getOperandType(), weight);
  };
  SmallVector<Value> p;
  for (size_t first = 0; first < softmax.weights.size(); first += 4)
    for (int64_t r = 0; r < 2; ++r)
      p.push_back(
          packPair(probability(first + 2 * r), probability(first + 2 * r + 1)));
  return p;
}

SmallVector<Value>
TensorCoreTileBuilder::rescaleOutputs(const TensorCoreSoftmaxStep &softmax,
                                      ValueRange carried, int64_t outputTiles) {
  ValueRange outputs = carried.slice(4, 4 * outputTiles);
  auto multiply = [&] {
    SmallVector<Value> rescaled;
    for (auto [index, output] : llvm::enumerate(outputs))
      rescaled.push_back(e.mul(output, softmax.rescale[index % 4 / 2]));
    return rescaled;
  };
  // Most steps raise no max of the warp's rows: their accumulators stay
  // as they are, a branch the whole warp takes (the vote) skips their
  // multiplies.
  auto raised = scf::IfOp::create(rewriter, e.loc, outputs.getTypes(),
                                  softmax.raised, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(raised.thenBlock());
    scf::YieldOp::create(rewriter, e.loc, multiply());
    rewriter.setInsertionPointToStart(raised.elseBlock());
    scf::YieldOp::create(rewriter, e.loc, outputs);
  }
  return SmallVector<Value>(raised.getResults());
}

void TensorCoreTileBuilder::accumulateOutputTile(
    int64_t tile, ArrayRef<Value> p, function_ref<Value()> valueWord,
    ArrayRef<Value> outputs, MutableArrayRef<Value> next) {
  SmallVector<Value> d = mma(p, {valueWord()}, outputs.slice(4 * tile, 4));
  for (int64_t i = 0; i < 4; ++i)
    next[4 + 4 * tile + i] = d[i];
}

void TensorCoreTileBuilder::sumRowsOverQuad(
    MutableArrayRef<Value> loopResults) {
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t offset : {1, 2})
      loopResults[2 + r] =
          e.add(loopResults[2 + r], e.shuffleXor(loopResults[2 + r], offset));
}

TensorCoreTileBuilder::TensorCoreSoftmaxStep
TensorCoreTileBuilder::stepTensorCoreSoftmax(
    ValueRange carried, ArrayRef<Value> scores, MutableArrayRef<Value> next,
    function_ref<void(MutableArrayRef<Value>)> shareRowMaxes) {
  // The online softmax per row: the step's max over the 4 lanes of the
  // row, one rescale, each score's exp once. The max the weights are taken
  // against lags the row's: it moves only past getMaxLag() above the carried
  // one (weights up to 2^kMaxLag, well within P's operand type), so most
  // steps leave the accumulators as they are (rescaleOutputs); the max,
  // the sum and the accumulators keep one max, so the state is exact.
  TensorCoreSoftmaxStep step;
  step.weights.resize(scores.size());
  Value raises;
  // Score i of 8-key tile t is scores[4 t + i] (row g + 8 (i / 2)).
  const size_t tileScores = scores.size();
  auto rowMax = [&](int64_t r) {
    Value tileMax = carried[r];
    for (size_t first = 0; first < tileScores; first += 4)
      for (int64_t i = 0; i < 2; ++i)
        tileMax = e.max(tileMax, scores[first + 2 * r + i]);
    for (int64_t offset : {1, 2})
      tileMax = e.max(tileMax, e.shuffleXor(tileMax, offset));
    return tileMax;
  };
  auto finishRow = [&](int64_t r, Value tileMax) {
    // A NaN score propagates through the max (it is not within the lag);
    // so does the first visible key's past a max of -inf.
    Value raise =
        arith::CmpFOp::create(rewriter, e.loc, arith::CmpFPredicate::UGT,
                              tileMax, e.add(carried[r], e.f32(getMaxLag())));
    raises =
        raises ? arith::OrIOp::create(rewriter, e.loc, raises, raise) : raise;
    tileMax = e.select(raise, tileMax, carried[r]);
    // Nothing visible yet: weights 0 (2^(-inf - -inf) would be NaN).
    Value empty = e.isNegInf(tileMax);
    step.rescale[r] = buildRescale(e, carried[r], tileMax);
    Value sum = e.mul(carried[2 + r], step.rescale[r]);
    for (size_t first = 0; first < tileScores; first += 4)
      for (int64_t i = 0; i < 2; ++i) {
        size_t index = first + 2 * r + i;
        step.weights[index] =
            e.select(empty, e.f32(0.0), e.exp2(e.sub(scores[index], tileMax)));
        sum = e.add(sum, step.weights[index]);
      }
    step.max[r] = tileMax;
    step.sum[r] = sum;
    next[r] = tileMax;
    next[2 + r] = sum;
  };
  if (shareRowMaxes) {
    Value maxes[2] = {rowMax(0), rowMax(1)};
    shareRowMaxes(maxes);
    for (int64_t r = 0; r < 2; ++r)
      finishRow(r, maxes[r]);
  } else {
    for (int64_t r = 0; r < 2; ++r)
      finishRow(r, rowMax(r));
  }
  step.raised =
      NVVM::VoteSyncOp::create(rewriter, e.loc, rewriter.getI1Type(), e.i32(-1),
                               raises, NVVM::VoteSyncKind::any);
  return step;
}

TensorCoreTileBuilder::TensorCoreRows
TensorCoreTileBuilder::getTensorCoreRows(Value firstRow) {
  // The keys the lane's two rows (g and g + 8) see, within the chunk. As
  // i32 (positions fit: max_len is an i32): one register each, not two,
  // through the token loop. A row's window [end - W, end) keeps only its
  // end: its start is recomputed per step and the chunk's end is a bound of
  // its own (the registers of two more starts made ptxas spill).
  // With a KV shard a window's start is not its end - W: it is kept.
  TensorCoreRows rows;
  rows.windowed = rules.windowLeft && rules.rowsDiffer();
  for (int64_t r = 0; r < 2; ++r) {
    KeyRange keys = visibleKeys(firstRow, e.add(fragmentRow, e.index(8 * r)));
    rows.ends[r] =
        e.toI32(rows.windowed ? keys.end : e.min(chunk.end, keys.end));
    if (rows.windowed && rules.kvShard)
      rows.begins[r] = e.toI32(keys.begin);
  }
  if (rows.windowed)
    rows.chunkEnd = e.toI32(chunk.end);
  // ALiBi: each row's slope and position (i32, as the keys are compared).
  if (alibiSlopes)
    for (int64_t r = 0; r < 2; ++r) {
      rows.alibi[r] = alibiOfRow(firstRow, e.add(fragmentRow, e.index(8 * r)));
      rows.alibi[r].position = e.toI32(rows.alibi[r].position);
    }
  return rows;
}

SmallVector<Value> TensorCoreTileBuilder::maskTensorCoreScores(
    Value first, Value pairKey, ArrayRef<Value> s, ArrayRef<Value> scoreScales,
    const TensorCoreRows &rows, ArrayRef<Value> pairIsKey) {
  // Scaled to base 2; keys a row may not see are -inf. s[i] is row
  // g + 8 (i % 4 / 2), key 8 (i / 4) + 2p + i % 2; the pairs' scales and
  // key flags are per tile where given for more than one.
  SmallVector<Value> scores;
  for (int64_t i = 0; i < static_cast<int64_t>(s.size()); ++i) {
    int64_t row = i % 4 / 2;
    auto pairOf = [&](ArrayRef<Value> perPair) {
      return perPair[perPair.size() > 2 ? i / 4 * 2 + i % 2 : i % 2];
    };
    Value key =
        e.toI32(e.add(e.add(first, e.index(8 * (i / 4) + i % 2)), pairKey));
    Value visible = e.lessThan(key, rows.ends[row]);
    if (rows.windowed) {
      Value begin = rows.begins[row]
                        ? rows.begins[row]
                        : e.sub(rows.ends[row], e.i32(*rules.windowLeft));
      Value inWindow = arith::CmpIOp::create(
          rewriter, e.loc, arith::CmpIPredicate::sge, key, begin);
      Value inChunk = e.lessThan(key, rows.chunkEnd);
      visible = arith::AndIOp::create(
          rewriter, e.loc, visible,
          arith::AndIOp::create(rewriter, e.loc, inWindow, inChunk));
    }
    if (!pairIsKey.empty())
      visible =
          arith::AndIOp::create(rewriter, e.loc, visible, pairOf(pairIsKey));
    Value score = shapeScore(e.mul(s[i], pairOf(scoreScales)));
    if (alibiSlopes)
      score =
          buildAlibiBias(rewriter, e.loc, score, rows.alibi[row].slope,
                         buildKeyPosition(rewriter, e.loc, chunk.sequence, key),
                         rows.alibi[row].position);
    scores.push_back(e.select(visible, score, e.negInf()));
  }
  return scores;
}

void TensorCoreTileBuilder::publishTensorCoreStates(ValueRange loopResults) {
  const int64_t headDim = geometry.headDim;
  const int64_t outputTiles = headDim / 8;
  // Each row's sum over its four lanes, then the warp's state per row, as
  // publishWarpStates leaves it: padding rows are not published.
  SmallVector<Value> result(loopResults);
  auto accumulators = cast<MemRefType>(warpAccumulators.getType());
  Value accumulatorsPointer = sharedPointer(rewriter, e.loc, warpAccumulators);
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
    // Output tiles 4k .. 4k + 3 hold 4 consecutive dims of each of the
    // lane's columns: one 16-byte store each.
    Value rowStart =
        e.mul(e.add(e.mul(warp, e.index(accumulators.getDimSize(1))), tileRow),
              e.index(headDim));
    for (int64_t first = 0; first < outputTiles; first += 4)
      for (int64_t i = 0; i < 2; ++i) {
        Value column = e.add(e.mul(fragmentPair, e.index(2)), e.index(i));
        Value dim = e.add(e.mul(column, e.index(8)),
                          e.index(64 * (first / 8) + first % 8));
        SmallVector<Value> elements;
        for (int64_t k = 0; k < 4; ++k)
          elements.push_back(result[4 + 4 * (first + k) + 2 * r + i]);
        Value vector = e.vector(elements);
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
