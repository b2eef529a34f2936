// RUN: fd-opt %s -convert-fd-to-gpu | FileCheck %s

// The merge loads up to 32 splits per loop iteration before using any (a
// memory latency per iteration, not per split): 63 splits are two
// iterations of 32, the last split past them clamped to split 62 and
// counted as an empty chunk (lse -inf, partial 0), in the max and in the
// weighted sum alike.

// CHECK-LABEL: func.func @merge_63_splits
// CHECK: gpu.func @fd_merge
// CHECK-DAG: %[[NEG_INF:.*]] = arith.constant 0xFF800000 : f32
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: scf.for %[[FIRST:.*]] = %c0 to %c63 step %c32 iter_args
// CHECK-COUNT-32: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK-NOT: llvm.load
// CHECK: arith.maximumf
// CHECK: scf.for %[[SUM_FIRST:.*]] = %c0 to %c63 step %c32 iter_args
// CHECK: %[[LAST:.*]] = arith.addi %[[SUM_FIRST]], %c31 : index
// CHECK-NEXT: %[[CLAMPED:.*]] = arith.minsi %[[LAST]], %c62 : index
// CHECK: %[[REAL:.*]] = arith.cmpi slt, %[[LAST]], %c63 : index
// CHECK: %[[LSE:.*]] = llvm.load
// CHECK-NEXT: arith.select %[[REAL]], %[[LSE]], %[[NEG_INF]] : f32
// CHECK: %[[PARTIAL:.*]] = llvm.load
// CHECK-NEXT: arith.select %[[REAL]], %[[PARTIAL]], %[[ZERO]] : f32
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"
func.func @merge_63_splits(%po: memref<?x8x63x64xf32>, %pl: memref<?x8x63xf32>,
                           %out: memref<?x8x64xf16>) {
  fd.merge %po, %pl into %out
      : memref<?x8x63x64xf32>, memref<?x8x63xf32> into memref<?x8x64xf16>
  return
}
