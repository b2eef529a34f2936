// RUN: fd-opt %s -split-input-file -fd-split-kv=num-splits=3 | FileCheck %s
// RUN: fd-opt %s -split-input-file -fd-split-kv | FileCheck %s --check-prefix=AUTO

// A sharded cache: the partial attention reads this rank's share with the
// global lengths, so it keeps kv_shard and kv_shard_rank; the merge knows
// nothing of shards.

// CHECK-LABEL: func @sharded
// CHECK-SAME: %[[RANK:[a-z0-9]+]]: memref<1xi32>
// CHECK: fd.partial_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} query_lens %{{.*}} : memref<?xi32> kv_shard_rank %[[RANK]] : memref<1xi32> into %{{.*}}, %{{.*}} {kv_shard = #fd.kv_shard<world = 4, interleave = 16>, schedule = #fd.schedule<{{.*}}>, window_left = 100 : i64} :
// CHECK-SAME: into memref<2x4x8x3x64xf32>, memref<2x4x8x3xf32>
// CHECK-NEXT: fd.merge %{{.*}}, %{{.*}} query_lens %{{.*}} : memref<?xi32> into
func.func @sharded(%q: memref<2x4x8x64xf16>, %k: memref<2x?x2x64xf16>, %v: memref<2x?x2x64xf16>,
                   %lens: memref<2xi32>, %ql: memref<?xi32>, %rank: memref<1xi32>,
                   %out: memref<2x4x8x64xf16>) {
  fd.attention %q, %k, %v, %lens query_lens %ql : memref<?xi32> kv_shard_rank %rank : memref<1xi32> into %out {kv_shard = #fd.kv_shard<world = 4, interleave = 16>, window_left = 100}
      : memref<2x4x8x64xf16>, memref<2x?x2x64xf16>, memref<2x?x2x64xf16>,
        memref<2xi32> into memref<2x4x8x64xf16>
  return
}

// -----

// Planning: a window of W = 1000 keys ending at Lq = 4 query tokens spans
// 1003 global positions, of which one rank of 4 x 16 holds at most 15 * 16
// + 16 = 256 (a whole block per round, then up to a block of the rest):
// the attended length the split count is planned for, where the rank's
// cache holds 4096 keys. Two splits (unsharded, the same op attends 1003
// keys and plans 7).

// AUTO-LABEL: func @planned
// AUTO: fd.partial_attention {{.*}} into memref<1x4x8x2x64xf32>, memref<1x4x8x2xf32>
func.func @planned(%q: memref<1x4x8x64xf16>, %k: memref<1x4096x2x64xf16>, %v: memref<1x4096x2x64xf16>,
                   %lens: memref<1xi32>, %rank: memref<1xi32>, %out: memref<1x4x8x64xf16>) {
  fd.attention %q, %k, %v, %lens kv_shard_rank %rank : memref<1xi32> into %out {kv_shard = #fd.kv_shard<world = 4, interleave = 16>, window_left = 1000}
      : memref<1x4x8x64xf16>, memref<1x4096x2x64xf16>, memref<1x4096x2x64xf16>,
        memref<1xi32> into memref<1x4x8x64xf16>
  return
}
