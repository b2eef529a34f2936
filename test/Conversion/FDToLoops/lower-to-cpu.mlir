// The whole CPU pipeline leaves only the LLVM dialect.
// RUN: fd-opt %s -fd-split-kv=num-splits=2 -fd-lower-to-cpu | FileCheck %s

// CHECK-LABEL: llvm.func @decode
// CHECK: llvm.call @malloc
// CHECK: llvm.intr.exp
// CHECK: llvm.call @free
// CHECK-NOT: fd.
// CHECK-NOT: scf.
// CHECK-NOT: memref.
func.func @decode(%q: memref<?x8x64xbf16>, %k: memref<?x?x2x64xbf16>, %v: memref<?x?x2x64xbf16>,
                  %lens: memref<?xi32>, %out: memref<?x8x64xbf16>) {
  fd.attention %q, %k, %v, %lens into %out
      : memref<?x8x64xbf16>, memref<?x?x2x64xbf16>, memref<?x?x2x64xbf16>,
        memref<?xi32> into memref<?x8x64xbf16>
  return
}
