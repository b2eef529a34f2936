// RUN: fd-opt %s -split-input-file -fd-split-kv="num-splits=4 workspace-argument=true" -verify-diagnostics | FileCheck %s

// The workspace is a new last argument the caller allocates once: no alloc,
// no dealloc, the views come from the argument; both calls of the function
// share it (they run in turn). Bytes per sequence: 32 * 4 * 129 * 4 = 66048.

// CHECK-LABEL: func @decode
// CHECK-SAME: %[[Q:[a-z0-9]+]]: memref<?x32x128xf16>
// CHECK-SAME: %[[WS:[a-z0-9]+]]: memref<?xi8> {fd.workspace})
// CHECK-NOT: memref.alloc
// CHECK: memref.view %[[WS]][%{{.*}}][%{{.*}}] : memref<?xi8> to memref<?x32x4x128xf32>
// CHECK: fd.partial_attention
// CHECK: fd.merge
// CHECK: memref.view %[[WS]][%{{.*}}][%{{.*}}] : memref<?xi8> to memref<?x32x4x128xf32>
// CHECK: fd.merge
// CHECK-NOT: memref.dealloc
// CHECK: return
func.func @decode(%q: memref<?x32x128xf16>, %k: memref<?x?x8x128xf16>,
                  %v: memref<?x?x8x128xf16>, %lens: memref<?xi32>,
                  %out: memref<?x32x128xf16>, %out2: memref<?x32x128xf16>) {
  fd.attention %q, %k, %v, %lens into %out
      : memref<?x32x128xf16>, memref<?x?x8x128xf16>, memref<?x?x8x128xf16>,
        memref<?xi32> into memref<?x32x128xf16>
  fd.attention %q, %k, %v, %lens into %out2
      : memref<?x32x128xf16>, memref<?x?x8x128xf16>, memref<?x?x8x128xf16>,
        memref<?xi32> into memref<?x32x128xf16>
  return
}

// -----

// A function that is called would change under its callers: refused.
// expected-error @below {{fd-split-kv: workspace-argument adds an argument to @called, which is called in this module}}
func.func @called(%q: memref<1x8x64xf16>, %k: memref<1x256x8x64xf16>,
                  %v: memref<1x256x8x64xf16>, %lens: memref<1xi32>,
                  %out: memref<1x8x64xf16>) {
  fd.attention %q, %k, %v, %lens into %out
      : memref<1x8x64xf16>, memref<1x256x8x64xf16>, memref<1x256x8x64xf16>,
        memref<1xi32> into memref<1x8x64xf16>
  return
}

func.func @caller(%q: memref<1x8x64xf16>, %k: memref<1x256x8x64xf16>,
                  %v: memref<1x256x8x64xf16>, %lens: memref<1xi32>,
                  %out: memref<1x8x64xf16>) {
  call @called(%q, %k, %v, %lens, %out)
      : (memref<1x8x64xf16>, memref<1x256x8x64xf16>, memref<1x256x8x64xf16>,
         memref<1xi32>, memref<1x8x64xf16>) -> ()
  return
}
