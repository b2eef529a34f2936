// RUN: fd-opt %s -split-input-file -fd-schedule-kernels=chip=sm_80 -convert-fd-to-gpu=chip=sm_80 | FileCheck %s

// ALiBi on tensor cores: the partial kernel takes the slopes last, reads
// each lane row's slope once (in base 2: times log2 e) and adds
// slope * (key - position) to each score after the scale.

// CHECK-LABEL: func.func @alibi_tensor_cores
// CHECK: gpu.launch_func @fd_partial_attention::@fd_partial_attention {{.*}} args({{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : i32, {{.*}} : !llvm.ptr<1>)
// CHECK: gpu.func @fd_partial_attention(%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32, %[[SLOPES:.*]]: !llvm.ptr<1>)
// CHECK-SAME: nvvm.minctasm = 3
// CHECK: llvm.getelementptr %[[SLOPES]]
// CHECK: scf.for
// CHECK: nvvm.mma.sync
// CHECK: %[[D:.*]] = arith.subi %{{.*}}, %{{.*}} : i32
// CHECK: %[[F:.*]] = arith.sitofp %[[D]] : i32 to f32
// CHECK: %[[B:.*]] = arith.mulf %{{.*}}, %[[F]] : f32
// CHECK: arith.addf %{{.*}}, %[[B]] : f32
func.func @alibi_tensor_cores(%q: memref<1x32x128xf16>, %k: memref<1x?x8x128xf16>,
                              %v: memref<1x?x8x128xf16>, %lens: memref<1xi32>,
                              %a: memref<32xf32>,
                              %po: memref<1x32x2x128xf32>, %pl: memref<1x32x2xf32>) {
  fd.partial_attention %q, %k, %v, %lens alibi_slopes %a : memref<32xf32> into %po, %pl
      : memref<1x32x128xf16>, memref<1x?x8x128xf16>, memref<1x?x8x128xf16>,
        memref<1xi32> into memref<1x32x2x128xf32>, memref<1x32x2xf32>
  return
}
