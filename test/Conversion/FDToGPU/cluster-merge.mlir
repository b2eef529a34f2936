// RUN: fd-opt %s -convert-fd-to-gpu=chip=sm_90 | FileCheck %s
// RUN: not fd-opt %s -convert-fd-to-gpu=chip=sm_80 2>&1 >/dev/null | FileCheck %s --check-prefix=CHIP
// RUN: not fd-opt %s "-convert-fd-to-gpu=chip=sm_90 fuse-merge=1" 2>&1 >/dev/null | FileCheck %s --check-prefix=FUSED

// MLA at 16 heads (the split-value tile) with cluster_ctas = 8: each of the
// 4 chunks is streamed by a cluster of 8 blocks (the grid's x is 32, the
// kernel's cluster 8 x 1 x 1: .reqnctapercluster). After the row pass each
// block keeps its rows' lse (base 2) in the max-sum buffer; the cluster
// waits; every block maps the 8 blocks' accumulators and max-sum buffers
// into the cluster's shared window, the first writes the chunk's lse, each
// merges its 16 of the 128 four-dim groups of every row from the blocks'
// weighted accumulators and writes them; the cluster waits again before the
// blocks exit. The merge kernel merges the 4 chunks' partials as ever.

// CHECK-LABEL: func.func @cluster
// CHECK: gpu.launch_func @fd_partial_attention::@fd_partial_attention blocks in (%c32, %c1, %c1) threads in (%c128, %c1, %c1)
// CHECK: gpu.launch_func @fd_merge::@fd_merge
// CHECK: gpu.func @fd_partial_attention(
// CHECK-SAME: nvvm.cluster_dim = array<i32: 8, 1, 1>
// CHECK: memref.store %{{.*}}, %{{.*}}[%c0, %{{.*}}, %c1] : memref<1x16x2xf32, #gpu.address_space<workgroup>>
// CHECK: nvvm.cluster.arrive {aligned}
// CHECK-NEXT: nvvm.cluster.wait {aligned}
// CHECK-COUNT-16: nvvm.mapa %{{.*}}, %c{{[0-7]}}_i32 : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK: scf.if
// CHECK-COUNT-8: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<7> -> f32
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<1>
// CHECK-COUNT-8: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<7> -> vector<4xf32>
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<1>
// CHECK: nvvm.cluster.arrive {aligned}
// CHECK-NEXT: nvvm.cluster.wait {aligned}
// CHECK-NOT: nvvm.cluster
// CHECK: gpu.return

// CHIP: error: 'fd.partial_attention' op convert-fd-to-gpu: cluster_ctas = 8 needs thread block clusters, which chip sm_80 lacks: compile for sm_90 or later, or take the planner's schedule for sm_80
// FUSED: error: 'fd.partial_attention' op convert-fd-to-gpu: fuse-merge: cluster_ctas = 8: a chunk's blocks merge their rows in the cluster, and the cluster's blocks would each count; use the merge kernel (no fuse-merge)

func.func @cluster(%q: memref<1x16x576xbf16>, %kv: memref<?x64x1x576xbf16>,
                   %lens: memref<1xi32>, %table: memref<1x?xi32>,
                   %po: memref<1x16x4x512xf32>, %pl: memref<1x16x4xf32>,
                   %out: memref<1x16x512xbf16>) {
  fd.partial_attention %q, %kv, %lens block_table %table : memref<1x?xi32>
      into %po, %pl {scale = 0.0721687824 : f32, schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 16, row_tiles = 1, threads = 128, min_blocks_per_sm = 2, held_query_steps = 9, stages = 4, cluster_ctas = 8>}
      : memref<1x16x576xbf16>, memref<?x64x1x576xbf16>, memref<1xi32>
        into memref<1x16x4x512xf32>, memref<1x16x4xf32>
  fd.merge %po, %pl into %out : memref<1x16x4x512xf32>, memref<1x16x4xf32>
      into memref<1x16x512xbf16>
  return
}
