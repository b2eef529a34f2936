// RUN: fd-opt %s -convert-fd-to-gpu=chip=sm_90a | FileCheck %s

// Kimi K2's 64 heads on sm_90a's warpgroup tile with cluster_ctas = 4: 8
// chunks of 4 blocks (the grid's x is 32). Its rows are in registers: after
// a barrier that retires both warpgroups' operand reads, each lane stores
// its normalized rows (8 bytes a store, 32 a row half) into the dynamic
// shared memory q and the stages used, and the row's lse beside them; then
// the cluster merge as for the other tiles, the rows already weighted.

// CHECK-LABEL: func.func @warpgroup_cluster
// CHECK: gpu.launch_func @fd_partial_attention::@fd_partial_attention blocks in (%c32, %c1, %c1) threads in (%c256, %c1, %c1)
// CHECK: gpu.func @fd_partial_attention(
// CHECK-SAME: nvvm.cluster_dim = array<i32: 4, 1, 1>
// CHECK: nvvm.cp.async.wait.group 0
// CHECK-NEXT: gpu.barrier
// CHECK-COUNT-32: llvm.store {{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<3>
// CHECK: nvvm.cluster.arrive {aligned}
// CHECK-NEXT: nvvm.cluster.wait {aligned}
// CHECK-COUNT-8: nvvm.mapa %{{.*}}, %c{{[0-3]}}_i32 : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK-COUNT-4: llvm.load {{.*}} {alignment = 16 : i64} : !llvm.ptr<7> -> vector<4xf32>
// CHECK: llvm.store {{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<1>
// CHECK: nvvm.cluster.arrive {aligned}
// CHECK-NEXT: nvvm.cluster.wait {aligned}
// CHECK-NOT: !llvm.ptr<7>
// CHECK: gpu.return

func.func @warpgroup_cluster(%q: memref<1x64x576xbf16>,
                             %kv: memref<?x64x1x576xbf16>,
                             %lens: memref<1xi32>, %table: memref<1x?xi32>,
                             %po: memref<1x64x8x512xf32>,
                             %pl: memref<1x64x8xf32>,
                             %out: memref<1x64x512xbf16>) {
  fd.partial_attention %q, %kv, %lens block_table %table : memref<1x?xi32>
      into %po, %pl {scale = 0.0721687824 : f32, schedule = #fd.schedule<form = warpgroup_tensor_cores, rows_per_tile = 64, row_tiles = 1, threads = 256, min_blocks_per_sm = 1, stages = 4, cluster_ctas = 4>}
      : memref<1x64x576xbf16>, memref<?x64x1x576xbf16>, memref<1xi32>
        into memref<1x64x8x512xf32>, memref<1x64x8xf32>
  fd.merge %po, %pl into %out : memref<1x64x8x512xf32>, memref<1x64x8xf32>
      into memref<1x64x512xbf16>
  return
}
