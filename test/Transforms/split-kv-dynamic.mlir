// RUN: fd-opt %s -fd-split-kv="batch=1 max-len=32768" | FileCheck %s
// RUN: fd-opt %s -fd-split-kv="num-splits=3" | FileCheck %s --check-prefix=FIXED

// Dynamic batch, planned for B = 1: 19 splits (split-kv.mlir); the
// workspace is B * 313728 bytes, the lse part at B * 311296; the views take
// B as their dynamic size.

// CHECK-LABEL: func @dynamic
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: memref<?x32x128xf16>
// CHECK-DAG:  %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:  %[[WSPER:.*]] = arith.constant 313728 : index
// CHECK-DAG:  %[[LSEPER:.*]] = arith.constant 311296 : index
// CHECK:      %[[B:.*]] = memref.dim %[[Q]], %[[C0]] : memref<?x32x128xf16>
// CHECK:      %[[OFF:.*]] = arith.muli %[[B]], %[[LSEPER]] : index
// CHECK:      %[[BYTES:.*]] = arith.muli %[[B]], %[[WSPER]] : index
// CHECK:      %[[WS:.*]] = memref.alloc(%[[BYTES]]) {alignment = 64 : i64} : memref<?xi8>
// CHECK:      %[[PO:.*]] = memref.view %[[WS]][%[[C0]]][%[[B]]] : memref<?xi8> to memref<?x32x19x128xf32>
// CHECK:      %[[PL:.*]] = memref.view %[[WS]][%[[OFF]]][%[[B]]] : memref<?xi8> to memref<?x32x19xf32>
// CHECK:      fd.partial_attention {{.*}} into %[[PO]], %[[PL]]
// CHECK:      fd.merge %[[PO]], %[[PL]]
// CHECK:      memref.dealloc %[[WS]] : memref<?xi8>

// FIXED-LABEL: func @dynamic
// FIXED: fd.partial_attention {{.*}} into memref<?x32x3x128xf32>, memref<?x32x3xf32>
func.func @dynamic(%q: memref<?x32x128xf16>, %k: memref<?x?x8x128xf16>,
                   %v: memref<?x?x8x128xf16>, %lens: memref<?xi32>,
                   %out: memref<?x32x128xf16>) {
  fd.attention %q, %k, %v, %lens into %out
      : memref<?x32x128xf16>, memref<?x?x8x128xf16>, memref<?x?x8x128xf16>,
        memref<?xi32> into memref<?x32x128xf16>
  return
}
