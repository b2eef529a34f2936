// RUN: fd-opt %s -fd-split-kv="num-splits=48 chip=sm_80" -convert-fd-to-gpu="chip=sm_80 fuse-merge=1" | FileCheck %s

// MQA f32 at D = 64 with Lq = 2: 64 rows x 48 splits of weights outgrow the
// warps' accumulators (4 x 8 x 64 floats): the kernel gets a fourth
// workgroup buffer for them, 64 x 48 floats.

// CHECK-LABEL: func.func @own_weights
// CHECK: gpu.func @fd_partial_attention
// CHECK-SAME: workgroup(%{{.*}} : memref<8x64xf32, #gpu.address_space<workgroup>>{{.*}}, %{{.*}} : memref<4x8x64xf32, #gpu.address_space<workgroup>>{{.*}}, %{{.*}} : memref<4x8x2xf32, #gpu.address_space<workgroup>>{{.*}}, %[[WEIGHTS:.*]] : memref<3072xf32, #gpu.address_space<workgroup>>
// CHECK-NOT: memref.reinterpret_cast
// CHECK: memref.store %{{.*}}, %[[WEIGHTS]]
// CHECK: memref.load %[[WEIGHTS]]
func.func @own_weights(%q: memref<?x2x32x64xf32>, %k: memref<?x?x1x64xf32>,
                       %v: memref<?x?x1x64xf32>, %lens: memref<?xi32>,
                       %out: memref<?x2x32x64xf32>) {
  fd.attention %q, %k, %v, %lens into %out
      : memref<?x2x32x64xf32>, memref<?x?x1x64xf32>, memref<?x?x1x64xf32>,
        memref<?xi32> into memref<?x2x32x64xf32>
  return
}
