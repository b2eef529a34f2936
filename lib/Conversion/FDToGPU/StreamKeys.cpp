//===- StreamKeys.cpp - The partial kernel's K/V stream -------------------===//
//
// The token loop of the partial kernel: each iteration issues the 16-byte
// loads of `unroll` steps (each step is layout.tokensPerStep() keys, one per
// token group of each warp), then folds those keys into every row's online
// softmax as one tile.
//
//===----------------------------------------------------------------------===//

#include "CudaCoreTileBuilder.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

SmallVector<Value> CudaCoreTileBuilder::streamKeys(Value lower, Value upper,
                                                   int64_t unroll,
                                                   const RowMask &mask,
                                                   ValueRange start) {
  const int64_t tokensPerStep = layout.tokensPerStep();
  auto stream = scf::ForOp::create(
      rewriter, e.loc, lower, upper, e.index(tokensPerStep * unroll), start,
      [&](OpBuilder &, Location, Value stepStart, ValueRange flat) {
        scf::YieldOp::create(rewriter, e.loc,
                             streamStep(stepStart, upper, unroll, mask, flat));
      });
  return SmallVector<Value>(stream.getResults());
}

Value CudaCoreTileBuilder::maskForRow(const RowMask &mask, int64_t r,
                                      Value token, Value visible) {
  auto both = [&](Value lhs, Value rhs) -> Value {
    return arith::AndIOp::create(rewriter, e.loc, lhs, rhs);
  };
  if (!mask.causalBase) {
    const KeyRange &keys = mask.rowKeys[r];
    visible = both(visible, e.lessThan(token, keys.end));
    if (keys.begin)
      visible = both(visible, arith::CmpIOp::create(rewriter, e.loc,
                                                    arith::CmpIPredicate::sge,
                                                    token, keys.begin));
    return visible;
  }
  // CudaCoreTileBuilder::streamRowTile says why these are the row's bounds.
  const int64_t group = geometry.groupSize();
  Value maskKey = e.add(e.mul(token, e.index(group)), mask.causalBase);
  visible = both(visible, e.lessThan(maskKey, e.index(r + 1)));
  if (rules.windowLeft)
    visible = both(visible,
                   e.lessThan(e.index(r - *rules.windowLeft * group), maskKey));
  return visible;
}

SmallVector<Value> CudaCoreTileBuilder::streamStep(Value stepStart, Value upper,
                                                   int64_t unroll,
                                                   const RowMask &mask,
                                                   ValueRange flat) {
  const int64_t tileRows = layout.rowTile;
  SmallVector<RowState> states = unpack(flat);
  Value cachedBlock, cachedPage;
  if (geometry.isPaged()) {
    cachedBlock = flat[flat.size() - 2];
    cachedPage = flat.back();
  }
  StepLoads loads = loadStep(stepStart, upper, unroll, cachedBlock, cachedPage);
  SmallVector<SmallVector<Value>> valueElements;
  SmallVector<SmallVector<Value>> scores =
      scoreStep(loads, unroll, valueElements);
  for (int64_t r = 0; r < tileRows; ++r) {
    RowState &state = states[r];
    SmallVector<Value> visible;
    Value tileMax = state.max;
    for (int64_t u = 0; u < unroll; ++u) {
      visible.push_back(e.lessThan(loads.tokens[u], upper));
      if (!loads.isKey.empty())
        visible[u] =
            arith::AndIOp::create(rewriter, e.loc, visible[u], loads.isKey[u]);
      if (mask)
        visible[u] = maskForRow(mask, r, loads.tokens[u], visible[u]);
      tileMax = e.select(visible[u], e.max(tileMax, scores[r][u]), tileMax);
    }
    // A NaN score propagates through the max.
    Value rescale = buildRescale(e, state.max, tileMax);
    SmallVector<Value> weights;
    for (int64_t u = 0; u < unroll; ++u)
      weights.push_back(e.select(
          visible[u], e.exp2(e.sub(scores[r][u], tileMax)), e.f32(0.0)));
    state.sum = e.mul(state.sum, rescale);
    for (Value weight : weights)
      state.sum = e.add(state.sum, weight);
    // A per-token value scale weighs the token's value, not the sum.
    SmallVector<Value> valueWeights = weights;
    if (valueScales)
      for (int64_t u = 0; u < unroll; ++u)
        valueWeights[u] = e.mul(weights[u], loads.valueScales[u]);
    for (int64_t i = 0; i < layout.valueDimsPerLane(); ++i) {
      Value accumulator = e.mul(state.accumulator[i], rescale);
      for (int64_t u = 0; u < unroll; ++u)
        accumulator = e.fma(valueWeights[u], valueElements[u][i], accumulator);
      state.accumulator[i] = accumulator;
    }
    state.max = tileMax;
  }
  SmallVector<Value> next = pack(states);
  if (geometry.isPaged()) {
    next.push_back(cachedBlock);
    next.push_back(cachedPage);
  }
  return next;
}

CudaCoreTileBuilder::StepLoads
CudaCoreTileBuilder::loadStep(Value stepStart, Value upper, int64_t unroll,
                              Value &cachedBlock, Value &cachedPage) {
  const int64_t tokensPerStep = layout.tokensPerStep();
  const bool holes = rules.blockTableHoles;
  // Issue every load of the unrolled steps before using any, so several
  // 16-byte loads per lane are in flight.
  StepLoads loads;
  Value lastToken = e.sub(upper, e.index(1));
  for (int64_t u = 0; u < unroll; ++u) {
    Value token =
        e.add(e.add(stepStart, e.index(u * tokensPerStep)), tokenInStep);
    loads.tokens.push_back(token);
    Value clamped = e.min(token, lastToken);
    Value page;
    if (geometry.isPaged()) {
      // With holes the entry is carried as it is (a hole is negative) and
      // clamped into the pool where it addresses the cache.
      Value block = arith::DivUIOp::create(rewriter, e.loc, clamped,
                                           e.index(geometry.pageSize));
      auto lookup = scf::IfOp::create(
          rewriter, e.loc, e.equal(block, cachedBlock),
          [&](OpBuilder &, Location) {
            scf::YieldOp::create(rewriter, e.loc, cachedPage);
          },
          [&](OpBuilder &, Location) {
            scf::YieldOp::create(
                rewriter, e.loc,
                holes ? arith::IndexCastOp::create(rewriter, e.loc,
                                                   rewriter.getIndexType(),
                                                   loadPageEntry(clamped))
                            .getResult()
                      : pageOf(clamped));
          });
      page = lookup.getResult(0);
      cachedBlock = block;
      cachedPage = page;
      if (holes) {
        loads.isKey.push_back(arith::CmpIOp::create(
            rewriter, e.loc, arith::CmpIPredicate::sge, page, e.index(0)));
        page = buildClampedPage(rewriter, e.loc, page, numPages);
      }
    }
    Value row = cacheRow(clamped, page);
    if (!holes) {
      unpackRow(loadRow(row), loads);
      continue;
    }
    // A hole's row is not read: its loads are zeros.
    SmallVector<Type> types;
    auto ifKey = scf::IfOp::create(
        rewriter, e.loc, loads.isKey.back(),
        [&](OpBuilder &, Location) {
          SmallVector<Value> loaded = loadRow(row);
          for (Value value : loaded)
            types.push_back(value.getType());
          scf::YieldOp::create(rewriter, e.loc, loaded);
        },
        [&](OpBuilder &, Location) {
          SmallVector<Value> zeros;
          for (Type type : types)
            zeros.push_back(arith::ConstantOp::create(
                rewriter, e.loc, cast<TypedAttr>(rewriter.getZeroAttr(type))));
          scf::YieldOp::create(rewriter, e.loc, zeros);
        });
    unpackRow(SmallVector<Value>(ifKey.getResults()), loads);
  }
  return loads;
}

SmallVector<Value> CudaCoreTileBuilder::loadRow(Value row) {
  // Vector v of the key row, then of the value row: the loads of a step
  // alternate between the caches. With per-token scales, those first.
  Value keyOffset = e.mul(row, e.index(geometry.headDim));
  Value valueOffset = geometry.valueHeadDim == geometry.headDim
                          ? keyOffset
                          : e.mul(row, e.index(geometry.valueHeadDim));
  SmallVector<Value> loaded;
  if (keyScales) {
    loaded.push_back(loadTokenScale(keyScales, row));
    if (values)
      loaded.push_back(loadTokenScale(valueScales, row));
  }
  auto vectorAt = [&](Value offset, Value index) {
    return e.add(offset, e.mul(index, e.index(layout.vectorWidth)));
  };
  for (int64_t v = 0;
       v < std::max(layout.vectorsPerLane, layout.valueVectorsPerLane); ++v) {
    Value keyAt;
    if (v < layout.vectorsPerLane) {
      keyAt = vectorAt(keyOffset, vectorIndices[v]);
      loaded.push_back(loadCacheVector(keys, keyAt));
    }
    if (!values || v >= layout.valueVectorsPerLane)
      continue;
    Value valueAt = keyAt && valueOffset == keyOffset &&
                            valueVectorIndices[v] == vectorIndices[v]
                        ? keyAt
                        : vectorAt(valueOffset, valueVectorIndices[v]);
    loaded.push_back(loadCacheVector(values, valueAt));
  }
  return loaded;
}

void CudaCoreTileBuilder::unpackRow(ArrayRef<Value> loaded, StepLoads &loads) {
  if (keyScales) {
    loads.keyScales.push_back(loaded.front());
    loaded = loaded.drop_front();
    // Values read from the keys are scaled as the keys are.
    loads.valueScales.push_back(values ? loaded.front()
                                       : loads.keyScales.back());
    if (values)
      loaded = loaded.drop_front();
  }
  loads.keyVectors.emplace_back();
  loads.valueVectors.emplace_back();
  for (int64_t v = 0;
       v < std::max(layout.vectorsPerLane, layout.valueVectorsPerLane); ++v) {
    if (v < layout.vectorsPerLane) {
      loads.keyVectors.back().push_back(loaded.front());
      loaded = loaded.drop_front();
    }
    if (!values || v >= layout.valueVectorsPerLane)
      continue;
    loads.valueVectors.back().push_back(loaded.front());
    loaded = loaded.drop_front();
  }
}

SmallVector<SmallVector<Value>>
CudaCoreTileBuilder::scoreStep(const StepLoads &loads, int64_t unroll,
                               SmallVector<SmallVector<Value>> &valueElements) {
  const int64_t tileRows = layout.rowTile;
  // The step's keys as one tile: every (step, row) score first, as
  // independent FMA chains and shuffles the in-order issue can overlap, then
  // one max and one rescale per row for the whole tile, each score's exp
  // computed once.
  SmallVector<SmallVector<Value>> keyElements(unroll);
  valueElements.assign(unroll, {});
  for (int64_t u = 0; u < unroll; ++u) {
    for (int64_t v = 0;
         v < std::max(layout.vectorsPerLane, layout.valueVectorsPerLane); ++v) {
      if (v < layout.vectorsPerLane)
        for (Value key : cacheVectorToF32(loads.keyVectors[u][v]))
          keyElements[u].push_back(
              layout.hasIdleLanes()
                  ? e.select(vectorIsInRow[v], key, e.f32(0.0))
                  : key);
      if (values && v < layout.valueVectorsPerLane)
        llvm::append_range(valueElements[u],
                           cacheVectorToF32(loads.valueVectors[u][v]));
    }
    // Values read from the keys are the lane's first key vectors, converted
    // once.
    if (!values)
      valueElements[u].assign(keyElements[u].begin(),
                              keyElements[u].begin() +
                                  layout.valueDimsPerLane());
  }
  SmallVector<SmallVector<Value>> scores(
      tileRows, SmallVector<Value>(unroll, e.f32(0.0)));
  for (int64_t r = 0; r < tileRows; ++r)
    for (int64_t i = 0; i < layout.dimsPerLane(); ++i) {
      Value q = memref::LoadOp::create(rewriter, e.loc, queryTile,
                                       ValueRange{e.index(r), laneDim(i)});
      for (int64_t u = 0; u < unroll; ++u)
        scores[r][u] = e.fma(q, keyElements[u][i], scores[r][u]);
    }
  // The lanes of a token group hold slices of one dot product.
  for (int64_t offset = layout.lanesPerToken / 2; offset >= 1; offset /= 2)
    for (SmallVector<Value> &rowScores : scores)
      for (Value &score : rowScores)
        score = e.add(score, e.shuffleXor(score, offset));
  for (int64_t r = 0; r < tileRows; ++r)
    for (int64_t u = 0; u < unroll; ++u) {
      Value &score = scores[r][u];
      if (keyScales)
        score = e.mul(score, loads.keyScales[u]);
      score = shapeScore(score);
      if (alibiSlopes)
        score = buildAlibiBias(
            rewriter, e.loc, score, rowAlibi[r].slope,
            buildKeyPosition(rewriter, e.loc, chunk.sequence, loads.tokens[u]),
            rowAlibi[r].position);
    }
  return scores;
}

Value CudaCoreTileBuilder::loadCacheVector(Value base, Value offset) {
  // An fp8 vector is loaded as words, decoded four elements at a time.
  int64_t bytes = layout.vectorWidth * cache.bytes();
  Type type = cache.isFloat8()
                  ? VectorType::get({bytes / 4}, rewriter.getI32Type())
                  : VectorType::get({layout.vectorWidth}, cache.type);
  return e.load(type, base, cache.addressType(), offset, bytes);
}

SmallVector<Value> CudaCoreTileBuilder::cacheVectorToF32(Value vector) {
  SmallVector<Value> elements;
  if (!cache.isFloat8()) {
    for (int64_t i = 0; i < layout.vectorWidth; ++i)
      elements.push_back(e.toF32(e.extract(vector, i)));
    return elements;
  }
  for (int64_t word = 0; word < layout.vectorWidth / 4; ++word)
    for (Value pair : decodeFloat8Word(e, cache, e.extract(vector, word)))
      for (int64_t half = 0; half < 2; ++half)
        elements.push_back(e.toF32(e.extract(pair, half)));
  return elements;
}
