//===- CacheOperands.h - The attention ops' cache operands ------*- C++ -*-===//
//
// The custom<CacheOperands> and custom<CacheTypes> directives of the
// attention ops' assembly format (FDOps.td).
//
//===----------------------------------------------------------------------===//

#ifndef FD_LIB_DIALECT_FD_IR_CACHEOPERANDS_H
#define FD_LIB_DIALECT_FD_IR_CACHEOPERANDS_H

#include "mlir/IR/OpImplementation.h"

#include <optional>

namespace mlir::fd {

ParseResult
parseCacheOperands(OpAsmParser &parser,
                   OpAsmParser::UnresolvedOperand &keyCache,
                   std::optional<OpAsmParser::UnresolvedOperand> &valueCache,
                   OpAsmParser::UnresolvedOperand &seqLens);
void printCacheOperands(OpAsmPrinter &printer, Operation *op, Value keyCache,
                        Value valueCache, Value seqLens);
ParseResult parseCacheTypes(OpAsmParser &parser, Type &keyCache,
                            Type &valueCache, Type &seqLens);
void printCacheTypes(OpAsmPrinter &printer, Operation *op, Type keyCache,
                     Type valueCache, Type seqLens);

} // namespace mlir::fd

#endif // FD_LIB_DIALECT_FD_IR_CACHEOPERANDS_H
