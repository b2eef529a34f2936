// RUN: fd-opt %s -split-input-file -fd-schedule-kernels=chip=sm_80 -convert-fd-to-gpu=chip=sm_80 | FileCheck %s

// The merge in two steps. Each lane (thread id mod 32) loads the lses of
// splits lane and lane + 32 (the second clamped to split 62 and -inf past
// it), then every thread the partials of its first iteration of up to 64
// (they do not depend on the weights): all 63 here. Every warp weighs the
// row's 63 splits (the max and the sum reduced with xor shuffles), so that
// the lses' loads are not sunk behind a branch to one warp, and warp 0's
// lanes store the weights, divided by the sum, to workgroup memory: 64 per
// row (63 and, from the lane past the last split, a zero: whole 16-byte
// vectors). After a barrier every thread sums its element, every partial
// and weight loaded before any is used, at constant offsets.

// CHECK-LABEL: func.func @merge_63_splits
// CHECK: gpu.func @fd_merge
// CHECK-SAME: workgroup(%[[WEIGHTS:.*]] : memref<64xf32, #gpu.address_space<workgroup>>
// CHECK-DAG: %[[NEG_INF:.*]] = arith.constant 0xFF800000 : f32
// CHECK-DAG: %[[DIM:.*]] = gpu.thread_id x
// CHECK: %[[LANE:.*]] = arith.remui %[[DIM]], %c32 : index
// CHECK: arith.minsi %[[LANE]], %c62 : index
// CHECK: llvm.load
// CHECK: %[[SECOND:.*]] = arith.addi %[[LANE]], %c32 : index
// CHECK-NEXT: %[[CLAMPED:.*]] = arith.minsi %[[SECOND]], %c62 : index
// CHECK: llvm.load
// CHECK: %[[REAL:.*]] = arith.cmpi slt, %{{.*}}, %c63 : index
// CHECK-NEXT: arith.select %[[REAL]], %{{.*}}, %[[NEG_INF]] : f32
// CHECK-COUNT-63: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK: %[[FIRST_WARP:.*]] = arith.cmpi slt, %[[DIM]], %c32 : index
// CHECK-NOT: scf.if
// CHECK-COUNT-5: gpu.shuffle xor
// CHECK-COUNT-5: gpu.shuffle xor
// CHECK: arith.divf
// CHECK: scf.if %[[FIRST_WARP]] {
// CHECK-NEXT: memref.store %{{.*}}, %[[WEIGHTS]][%[[LANE]]]
// CHECK: arith.divf
// CHECK: scf.if %[[FIRST_WARP]] {
// CHECK: memref.store %{{.*}}, %[[WEIGHTS]]
// CHECK: gpu.barrier
// CHECK-NOT: scf.for
// CHECK-COUNT-63: memref.load %[[WEIGHTS]]
// CHECK-COUNT-63: llvm.intr.fma
// CHECK-NOT: llvm.load
// CHECK: arith.truncf
func.func @merge_63_splits(%po: memref<?x8x63x64xf32>, %pl: memref<?x8x63xf32>,
                           %out: memref<?x8x64xf16>) {
  fd.merge %po, %pl into %out
      : memref<?x8x63x64xf32>, memref<?x8x63xf32> into memref<?x8x64xf16>
  return
}

// -----

// 300 splits: the first 128 preloaded, one whole iteration of 128 in a
// loop, then the 44 left, each a batch of loads before its weights and fmas.

// CHECK-LABEL: func.func @merge_300_splits
// CHECK: gpu.func @fd_merge
// CHECK-SAME: workgroup(%[[WEIGHTS:.*]] : memref<300xf32, #gpu.address_space<workgroup>>
// CHECK-COUNT-128: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK: gpu.barrier
// CHECK-COUNT-128: memref.load %[[WEIGHTS]]
// CHECK: scf.for %{{.*}} = %c128 to %c256 step %c128
// CHECK-COUNT-128: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK-COUNT-128: memref.load %[[WEIGHTS]]
// CHECK: scf.yield
// CHECK-COUNT-44: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK-COUNT-44: memref.load %[[WEIGHTS]]
// CHECK-NOT: llvm.load
// CHECK: arith.truncf
func.func @merge_300_splits(%po: memref<?x8x300x64xf32>, %pl: memref<?x8x300xf32>,
                           %out: memref<?x8x64xf16>) {
  fd.merge %po, %pl into %out
      : memref<?x8x300x64xf32>, memref<?x8x300xf32> into memref<?x8x64xf16>
  return
}
