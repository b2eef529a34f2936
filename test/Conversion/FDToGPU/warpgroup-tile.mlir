// RUN: fd-opt %s -fd-schedule-kernels=chip=sm_90a -convert-fd-to-gpu=chip=sm_90a | FileCheck %s
// RUN: not fd-opt %s -fd-schedule-kernels=chip=sm_90a -convert-fd-to-gpu=chip=sm_90 2>&1 >/dev/null | FileCheck %s --check-prefix=CHIP

// MLA at 128 heads over pages of 64 on sm_90a: the warpgroup tile. The
// planner makes two 64-row tiles (the grid's y) of 256 threads, one block
// an SM, four stages of 32 latent rows; q (64 x 1152 bytes), the stages (4
// x 32 x 1152) and P (4 x 64 x 16) lie in dynamic shared memory from a
// 1024-byte boundary (221 KB + 1 KB), an external shared array the launch
// sizes. The only workgroup buffer with bytes is the warpgroups' exchange
// of row maxima and sums (2 x 64 x 2). A step: each warpgroup's S in 36
// chained m64n16k16 from zero (its 16 keys), one group waited for; P V in
// two m64n256k16 k-steps (32 keys) on its 256 value dims, V read
// MN-major (B's layout row); the fence makes the threads' shared writes
// (the copies, P) visible to wgmma before each barrier. The partials are
// written from registers, 8 bytes a store; the merge kernel merges them.

// CHECK-LABEL: func.func @warpgroup
// CHECK: gpu.launch_func @fd_partial_attention::@fd_partial_attention blocks in (%{{.*}}, %c2, %{{.*}}) threads in (%c256, %c1, %c1) dynamic_shared_memory_size %c226304_i32
// CHECK: gpu.launch_func @fd_merge::@fd_merge
// CHECK: llvm.mlir.global external @fd_dynamic_shared() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
// CHECK: gpu.func @fd_partial_attention({{.*}}) workgroup(%{{.*}} : memref<0xf32, #gpu.address_space<workgroup>> {{.*}}, %{{.*}} : memref<0xf32, #gpu.address_space<workgroup>> {{.*}}, %{{.*}} : memref<2x64x2xf32, #gpu.address_space<workgroup>> {{.*}}) kernel
// CHECK-SAME: fd.math_units = "warpgroup_tensor_cores"
// CHECK-SAME: nvvm.maxntid = array<i32: 256, 1, 1>, nvvm.minctasm = 1 : i32
// CHECK: llvm.mlir.addressof @fd_dynamic_shared
// CHECK: scf.for
// CHECK: nvvm.cp.async.wait.group 2
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: gpu.barrier
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 16, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-COUNT-35: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 16, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: gpu.barrier
// CHECK: nvvm.fence.proxy
// CHECK-NEXT: gpu.barrier
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-2: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 256, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: scf.yield
// CHECK: nvvm.cp.async.wait.group 0
// CHECK-COUNT-32: llvm.store {{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<1>
// CHECK-NOT: nvvm.wgmma

// CHIP: error: 'fd.partial_attention' op convert-fd-to-gpu: form = warpgroup_tensor_cores needs wgmma, which chip sm_90 lacks: compile for sm_90a, or take the planner's schedule for sm_90

func.func @warpgroup(%q: memref<2x128x576xbf16>, %kv: memref<?x64x1x576xbf16>,
                     %lens: memref<2xi32>, %table: memref<2x?xi32>,
                     %po: memref<2x128x2x512xf32>, %pl: memref<2x128x2xf32>,
                     %out: memref<2x128x512xbf16>) {
  fd.partial_attention %q, %kv, %lens block_table %table : memref<2x?xi32>
      into %po, %pl {scale = 0.0721687824 : f32}
      : memref<2x128x576xbf16>, memref<?x64x1x576xbf16>, memref<2xi32>
        into memref<2x128x2x512xf32>, memref<2x128x2xf32>
  fd.merge %po, %pl into %out : memref<2x128x2x512xf32>, memref<2x128x2xf32>
      into memref<2x128x512xbf16>
  return
}
