// RUN: fd-opt %s -convert-fd-to-gpu | FileCheck %s

// Attention sinks on the GPU: only the merge kernel reads them (one more
// parameter, after the lse), takes the row's sink into the max and starts
// the sum of the weights at 2^((sink - shift) log2 e).

// CHECK-LABEL: func.func @merge_sinks
// CHECK: gpu.launch_func @fd_merge::@fd_merge {{.*}} args({{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>)
// CHECK: gpu.func @fd_merge(%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %[[SINKS:.*]]: !llvm.ptr<1>)
// CHECK: %[[HEAD:.*]] = gpu.block_id x
// CHECK: %[[MAX:.*]] = scf.for
// CHECK: %[[HEAD64:.*]] = arith.index_cast %[[HEAD]] : index to i64
// CHECK: %[[ADDRESS:.*]] = llvm.getelementptr %[[SINKS]][%[[HEAD64]]]
// CHECK: %[[SINK:.*]] = llvm.load %[[ADDRESS]] {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK: %[[WITH_SINK:.*]] = arith.maximumf %[[MAX]], %[[SINK]] : f32
// CHECK: %[[SHIFT:.*]] = arith.select %{{.*}}, %{{.*}}, %[[WITH_SINK]] : f32
// CHECK: %[[D:.*]] = arith.subf %[[SINK]], %[[SHIFT]] : f32
// CHECK: %[[E:.*]] = arith.mulf %[[D]], %{{.*}} : f32
// CHECK: %[[W:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"(%[[E]])
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[W]], %{{.*}} = %{{.*}})
func.func @merge_sinks(%po: memref<?x8x4x64xf32>, %pl: memref<?x8x4xf32>, %s: memref<8xf32>,
                       %out: memref<?x8x64xf16>, %lse: memref<?x8xf32>) {
  fd.merge %po, %pl sinks %s : memref<8xf32> into %out, %lse
      : memref<?x8x4x64xf32>, memref<?x8x4xf32> into memref<?x8x64xf16>, memref<?x8xf32>
  return
}
