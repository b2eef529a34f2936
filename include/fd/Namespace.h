//===- Namespace.h - flashdecode's C++ namespace and its former name ------===//
//
// flashdecode's C++ API (the JIT, fdrt, the planner, the emulator) lives in
// namespace `flashdecode`, clear of the dialect's `mlir::fd`: inside
// `namespace mlir`, or after `using namespace mlir`, a bare `fd::` means the
// dialect. `fd` is the API's former name, kept as an alias so that existing
// callers (`fd::compile`, `fd::rt::DecodePlan`) still compile; flashdecode's
// own code writes `flashdecode::`.
//
//===----------------------------------------------------------------------===//

#ifndef FD_NAMESPACE_H
#define FD_NAMESPACE_H

namespace flashdecode {}
namespace fd = flashdecode;

#endif // FD_NAMESPACE_H
