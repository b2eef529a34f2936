//===- DiagnosticCollector.h - Diagnostics into an llvm::Error --*- C++ -*-===//
//
// Private to lib/Compiler: the JIT paths (CPU and PTX) collect what a pass
// pipeline reports so that a failure returns it as an error message.
//
//===----------------------------------------------------------------------===//

#ifndef FD_LIB_COMPILER_DIAGNOSTICCOLLECTOR_H
#define FD_LIB_COMPILER_DIAGNOSTICCOLLECTOR_H

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace flashdecode {

/// Collects every diagnostic of `context` while alive.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(mlir::MLIRContext &context)
      : handler(&context, [this](mlir::Diagnostic &diagnostic) {
          llvm::raw_string_ostream(messages) << diagnostic << "\n";
          return mlir::success();
        }) {}

  /// "`stage` failed: " followed by the collected diagnostics.
  llvm::Error failure(const llvm::Twine &stage) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   stage + " failed: " + messages);
  }

private:
  std::string messages;
  mlir::ScopedDiagnosticHandler handler;
};

} // namespace flashdecode

#endif // FD_LIB_COMPILER_DIAGNOSTICCOLLECTOR_H
