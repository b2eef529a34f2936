//===- CacheOperands.cpp - The attention ops' cache operands --------------===//
//
// The custom directive of fd.attention's and fd.partial_attention's caches:
// `%k, %v, %lens`, or `%kv, %lens` without a value cache (the values are
// the key cache's first D_v columns), and their types alike.
//
//===----------------------------------------------------------------------===//

#include "CacheOperands.h"

using namespace mlir;

/// Parses `first, second [, third]`: with three, the key cache, the value
/// cache and the lengths; with two, the key cache and the lengths. The
/// caches' operands and their types are spelled alike (no comma follows
/// either list).
template <typename Item, typename ParseItem>
static ParseResult parseCacheList(OpAsmParser &parser, Item &keyCache,
                                  Item &valueCache, bool &hasValueCache,
                                  Item &seqLens, ParseItem parseItem) {
  Item second;
  if (parseItem(keyCache) || parser.parseComma() || parseItem(second))
    return failure();
  hasValueCache = succeeded(parser.parseOptionalComma());
  if (!hasValueCache) {
    seqLens = second;
    return success();
  }
  valueCache = second;
  return parseItem(seqLens);
}

/// Prints what parseCacheList reads (a null value cache: none).
template <typename Item>
static void printCacheList(OpAsmPrinter &printer, Item keyCache,
                           Item valueCache, Item seqLens) {
  printer << keyCache << ", ";
  if (valueCache)
    printer << valueCache << ", ";
  printer << seqLens;
}

ParseResult mlir::fd::parseCacheOperands(
    OpAsmParser &parser, OpAsmParser::UnresolvedOperand &keyCache,
    std::optional<OpAsmParser::UnresolvedOperand> &valueCache,
    OpAsmParser::UnresolvedOperand &seqLens) {
  OpAsmParser::UnresolvedOperand values;
  bool hasValueCache = false;
  if (parseCacheList(parser, keyCache, values, hasValueCache, seqLens,
                     [&](OpAsmParser::UnresolvedOperand &operand) {
                       return parser.parseOperand(operand);
                     }))
    return failure();
  if (hasValueCache)
    valueCache = values;
  return success();
}

void mlir::fd::printCacheOperands(OpAsmPrinter &printer, Operation *,
                                  Value keyCache, Value valueCache,
                                  Value seqLens) {
  printCacheList(printer, keyCache, valueCache, seqLens);
}

ParseResult mlir::fd::parseCacheTypes(OpAsmParser &parser, Type &keyCache,
                                      Type &valueCache, Type &seqLens) {
  bool hasValueCache = false;
  return parseCacheList(parser, keyCache, valueCache, hasValueCache, seqLens,
                        [&](Type &type) { return parser.parseType(type); });
}

void mlir::fd::printCacheTypes(OpAsmPrinter &printer, Operation *,
                               Type keyCache, Type valueCache, Type seqLens) {
  printCacheList(printer, keyCache, valueCache, seqLens);
}
