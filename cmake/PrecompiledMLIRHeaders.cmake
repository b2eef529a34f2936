# The upstream MLIR headers the compiler's libraries include are nearly all
# of their build: a translation unit that includes only KernelBuilder.h's
# headers takes 13 of a whole unit's 14 seconds (bench/RESULTS.md). They are
# compiled once, into one precompiled header that every library named here
# reuses (their compile flags are the same); including a header a file did
# not ask for changes nothing it compiles to. FD_PRECOMPILED_HEADERS=OFF
# builds without it.
option(FD_PRECOMPILED_HEADERS
  "Compile the upstream MLIR headers once for the compiler's libraries" ON)

set(FD_PRECOMPILED_MLIR_HEADERS
  <mlir/Dialect/Arith/IR/Arith.h>
  <mlir/Dialect/Func/IR/FuncOps.h>
  <mlir/Dialect/GPU/IR/GPUDialect.h>
  <mlir/Dialect/LLVMIR/LLVMDialect.h>
  <mlir/Dialect/LLVMIR/NVVMDialect.h>
  <mlir/Dialect/Math/IR/Math.h>
  <mlir/Dialect/MemRef/IR/MemRef.h>
  <mlir/Dialect/SCF/IR/SCF.h>
  <mlir/IR/PatternMatch.h>
  <mlir/Pass/PassManager.h>
  <mlir/Transforms/DialectConversion.h>)

# An object library of one empty file compiles the header; the targets
# named reuse it (and so build after it).
function(fd_precompile_mlir_headers)
  if(NOT FD_PRECOMPILED_HEADERS)
    return()
  endif()
  add_library(FDPrecompiledMLIRHeaders OBJECT
    ${PROJECT_SOURCE_DIR}/cmake/PrecompiledMLIRHeaders.cpp)
  # The flags add_mlir_library gives its object libraries (no exceptions,
  # unwind tables): a header compiled with others is not used.
  llvm_update_compile_flags(FDPrecompiledMLIRHeaders)
  target_precompile_headers(FDPrecompiledMLIRHeaders PRIVATE
    ${FD_PRECOMPILED_MLIR_HEADERS})
  foreach(target ${ARGN})
    target_precompile_headers(${target} REUSE_FROM FDPrecompiledMLIRHeaders)
    target_compile_options(${target} PRIVATE -Winvalid-pch)
  endforeach()
endfunction()
