//===- KernelIndexing.cpp - Where the partial kernel's rows and keys are --===//
//
// The partial kernel's addressing: the head, token and q row of a block's
// row, whether a tile row is one of the block's rows, a row's ALiBi slope
// and position; a key's cache row (through the block
// table for paged caches, whose entries may be loaded ahead of their
// clamping) and its per-token scale.
//
//===----------------------------------------------------------------------===//

#include "PartialKernelBuilder.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

Value PartialKernelBuilder::stepAhead(Value stepStart, int64_t steps) {
  return e.add(stepStart, e.index(steps * layout.tokensPerStep()));
}

Value PartialKernelBuilder::stageOfStep(Value stepStart, int64_t ahead) {
  Value stepIndex =
      arith::DivUIOp::create(rewriter, e.loc, e.sub(stepStart, chunk.begin),
                             e.index(layout.tokensPerStep()));
  return arith::RemUIOp::create(rewriter, e.loc,
                                e.add(stepIndex, e.index(ahead)),
                                e.index(schedule.keyValueStages));
}

AlibiRow PartialKernelBuilder::alibiOfRow(Value firstRow, Value tileRow) {
  Value row = e.min(e.add(firstRow, tileRow), lastRow);
  Value head = queryHeadOf(row);
  Type f32 = rewriter.getF32Type();
  // In base 2, as the scores are.
  Value slope = e.mul(e.load(f32, alibiSlopes, f32, head, 4),
                      e.f32(llvm::numbers::log2e));
  RowQuery rowQuery = queryOfRow(row);
  return {slope, buildQueryPosition(rewriter, e.loc, rowQuery.sequence,
                                    rowQuery.token)};
}

Value PartialKernelBuilder::queryHeadOf(Value row) {
  const int64_t group = geometry.groupSize();
  return e.add(e.mul(kvHead, e.index(group)),
               arith::RemUIOp::create(rewriter, e.loc, row, e.index(group)));
}

Value PartialKernelBuilder::tokenOf(Value row) {
  return arith::DivUIOp::create(rewriter, e.loc, row,
                                e.index(geometry.groupSize()));
}

Value PartialKernelBuilder::queryRow(Value row) {
  Value token = tokenOf(row);
  Value head = queryHeadOf(row);
  // The block's query tokens: Lq of its sequence, or of each of its
  // sequences, which are consecutive.
  Value tokensPerBlock = e.index(layout.rows / geometry.groupSize());
  return e.add(e.mul(e.add(e.mul(batch, tokensPerBlock), token),
                     e.index(geometry.numQueryHeads)),
               head);
}

PartialKernelBuilder::RowQuery PartialKernelBuilder::queryOfRow(Value row) {
  Value token = tokenOf(row);
  if (!suffixLens)
    return {chunk.sequence, token};
  Value queryLength = e.index(geometry.queryLength);
  Value sequenceInBlock =
      arith::DivUIOp::create(rewriter, e.loc, token, queryLength);
  Value sequence =
      e.add(e.mul(batch, e.index(sequencesPerBlock)), sequenceInBlock);
  Type i32 = rewriter.getI32Type();
  Value suffix =
      arith::IndexCastOp::create(rewriter, e.loc, rewriter.getIndexType(),
                                 e.load(i32, suffixLens, i32, sequence, 4));
  return {buildSharedPrefixExtent(rewriter, e.loc, chunk.sequence, suffix),
          arith::RemUIOp::create(rewriter, e.loc, token, queryLength)};
}

Value PartialKernelBuilder::isRealRow(Value firstRow, Value tileRow) {
  return e.lessThan(e.add(firstRow, tileRow), realRows);
}

void PartialKernelBuilder::ifRealRow(Value firstRow, Value tileRow,
                                     function_ref<void()> body) {
  auto realRow =
      scf::IfOp::create(rewriter, e.loc, isRealRow(firstRow, tileRow),
                        /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(realRow.thenBlock());
  body();
}

Value PartialKernelBuilder::cacheRow(Value token, Value page) {
  bool isNHD = op.getKvLayout() == KVLayout::NHD;
  Value heads = e.index(geometry.numKVHeads);
  Value row;
  if (geometry.isPaged()) {
    Value pageSize = e.index(geometry.pageSize);
    Value slot = arith::RemUIOp::create(rewriter, e.loc, token, pageSize);
    row = isNHD
              ? e.add(e.mul(e.add(e.mul(page, pageSize), slot), heads), kvHead)
              : e.add(e.mul(e.add(e.mul(page, heads), kvHead), pageSize), slot);
  } else {
    row = isNHD
              ? e.add(e.mul(e.add(e.mul(cacheBatch, maxLength), token), heads),
                      kvHead)
              : e.add(e.mul(e.add(e.mul(cacheBatch, heads), kvHead), maxLength),
                      token);
  }
  return row;
}

PartialKernelBuilder::CopiedRow
PartialKernelBuilder::copiedRow(Value token, Value entry, Value live) {
  Value page;
  if (entry) {
    page = clampPage(entry);
    if (rules.blockTableHoles)
      live = arith::AndIOp::create(rewriter, e.loc, live, isKeyEntry(entry));
  }
  return {cacheRow(token, page), live};
}

Value PartialKernelBuilder::loadTokenScale(Value scales, Value row) {
  Type f32 = rewriter.getF32Type();
  return e.load(f32, scales, f32, row, 4);
}

Value PartialKernelBuilder::pageOf(Value token) {
  if (!geometry.isPaged())
    return Value();
  return clampPage(loadPageEntry(token));
}

Value PartialKernelBuilder::loadPageEntry(Value token) {
  Value block = arith::DivUIOp::create(rewriter, e.loc, token,
                                       e.index(geometry.pageSize));
  return e.load(rewriter.getI32Type(), blockTable, rewriter.getI32Type(),
                e.add(tableRow, block), 4);
}

Value PartialKernelBuilder::isKeyEntry(Value entry) {
  return arith::CmpIOp::create(rewriter, e.loc, arith::CmpIPredicate::sge,
                               entry, e.i32(0));
}

Value PartialKernelBuilder::clampPage(Value entry) {
  return buildClampedPage(rewriter, e.loc,
                          arith::IndexCastOp::create(
                              rewriter, e.loc, rewriter.getIndexType(), entry),
                          numPages);
}
