// RUN: fd-opt %s -fd-schedule-kernels=chip=sm_80 -convert-fd-to-gpu=chip=sm_80 | FileCheck %s

// Attention sinks on the GPU: only the merge kernel reads them (one more
// parameter, after the lse). Its warps load the row's sink after the lses
// (and the first partials), take it (in base 2) into the max and its weight
// 2^(sink - shift) into the sum, which every split's weight is divided by.

// CHECK-LABEL: func.func @merge_sinks
// CHECK: gpu.launch_func @fd_merge::@fd_merge {{.*}} args({{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>)
// CHECK: gpu.func @fd_merge(%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %[[SINKS:.*]]: !llvm.ptr<1>)
// CHECK-SAME: workgroup(%[[WEIGHTS:.*]] : memref<4xf32, #gpu.address_space<workgroup>>
// CHECK-DAG: %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
// CHECK-DAG: %[[HEAD:.*]] = gpu.block_id x
// CHECK: %[[LSE:.*]] = llvm.load
// CHECK-NOT: scf.if
// CHECK: %[[HEAD64:.*]] = arith.index_cast %[[HEAD]] : index to i64
// CHECK: %[[ADDRESS:.*]] = llvm.getelementptr %[[SINKS]][%[[HEAD64]]]
// CHECK: %[[SINK:.*]] = llvm.load %[[ADDRESS]] {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK: %[[SINK2:.*]] = arith.mulf %[[SINK]], %[[LOG2E]] : f32
// CHECK: gpu.shuffle xor
// CHECK: %[[WITH_SINK:.*]] = arith.maximumf %{{.*}}, %[[SINK2]] : f32
// CHECK: %[[SHIFT:.*]] = arith.select %{{.*}}, %{{.*}}, %[[WITH_SINK]] : f32
// CHECK: %[[D:.*]] = arith.subf %[[SINK2]], %[[SHIFT]] : f32
// CHECK-NEXT: %[[W:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"(%[[D]])
// CHECK-NEXT: %[[SUM:.*]] = arith.addf %{{.*}}, %[[W]] : f32
// CHECK: arith.divf %{{.*}}, %[[SUM]] : f32
// CHECK: memref.store %{{.*}}, %[[WEIGHTS]]
func.func @merge_sinks(%po: memref<?x8x4x64xf32>, %pl: memref<?x8x4xf32>, %s: memref<8xf32>,
                       %out: memref<?x8x64xf16>, %lse: memref<?x8xf32>) {
  fd.merge %po, %pl sinks %s : memref<8xf32> into %out, %lse
      : memref<?x8x4x64xf32>, memref<?x8x4xf32> into memref<?x8x64xf16>, memref<?x8xf32>
  return
}
