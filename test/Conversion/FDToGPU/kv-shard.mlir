// RUN: fd-opt %s -split-input-file -fd-schedule-kernels=chip=sm_80 -convert-fd-to-gpu=chip=sm_80 | FileCheck %s

// A sharded cache (2 ranks of 1 token, Lq = 4, a window of 5) on tensor
// cores: the partial kernel takes the rank last, reads it once and clamps
// it to [0, 1]; the global length is clamped to 2 * Lmax (what both ranks'
// caches hold) and the rank's share of it is what its chunks divide.

// CHECK-LABEL: func.func @tensor_cores
// CHECK: gpu.func @fd_partial_attention(%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %[[LENS:.*]]: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %[[LMAX:.*]]: i32, %[[QL:.*]]: !llvm.ptr<1>, %[[RANK:.*]]: !llvm.ptr<1>)
// CHECK-SAME: fd.params = ["query", "key_cache", "value_cache", "seq_lens", "partial_output", "partial_lse", "max_len", "query_lens", "kv_shard_rank"]
// CHECK: llvm.getelementptr %[[LENS]]
// CHECK-NEXT: %[[LEN_ENTRY:.*]] = llvm.load
// CHECK-NEXT: %[[LEN:.*]] = arith.index_cast %[[LEN_ENTRY]] : i32 to index
// CHECK-NEXT: %[[RANK_ENTRY:.*]] = llvm.load %[[RANK]] {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK-NEXT: %[[RANK_READ:.*]] = arith.index_cast %[[RANK_ENTRY]] : i32 to index
// CHECK-NEXT: %[[RANK_LOW:.*]] = arith.maxsi %[[RANK_READ]], %c0 : index
// CHECK-NEXT: %[[R:.*]] = arith.minsi %[[RANK_LOW]], %c1 : index
// CHECK-NEXT: %[[CAPACITY:.*]] = arith.muli %{{.*}}, %c2 : index
// CHECK-NEXT: %[[GLOBAL_LOW:.*]] = arith.maxsi %[[LEN]], %c0 : index
// CHECK-NEXT: %[[GLOBAL:.*]] = arith.minsi %[[GLOBAL_LOW]], %[[CAPACITY]] : index
// CHECK-NEXT: %[[POSITIVE:.*]] = arith.maxsi %[[GLOBAL]], %c0 : index
// CHECK-NEXT: %[[ROUNDS:.*]] = arith.divui %[[POSITIVE]], %c2 : index
// CHECK-NEXT: %[[IN_ROUND:.*]] = arith.remui %[[POSITIVE]], %c2 : index
// CHECK-NEXT: %[[REST:.*]] = arith.subi %[[IN_ROUND]], %[[R]] : index
// CHECK-NEXT: %[[REST_LOW:.*]] = arith.maxsi %[[REST]], %c0 : index
// CHECK-NEXT: %[[REST_HIGH:.*]] = arith.minsi %[[REST_LOW]], %c1 : index
// CHECK-NEXT: %[[SHARE:.*]] = arith.addi %[[ROUNDS]], %[[REST_HIGH]] : index
// CHECK: llvm.getelementptr %[[QL]]
func.func @tensor_cores(%q: memref<?x4x8x64xf16>, %k: memref<?x?x2x64xf16>, %v: memref<?x?x2x64xf16>,
                        %lens: memref<?xi32>, %ql: memref<?xi32>, %rank: memref<1xi32>,
                        %po: memref<?x4x8x3x64xf32>, %pl: memref<?x4x8x3xf32>) {
  fd.partial_attention %q, %k, %v, %lens query_lens %ql : memref<?xi32> kv_shard_rank %rank : memref<1xi32> into %po, %pl {kv_shard = #fd.kv_shard<world = 2, interleave = 1>, window_left = 5}
      : memref<?x4x8x64xf16>, memref<?x?x2x64xf16>, memref<?x?x2x64xf16>,
        memref<?xi32> into memref<?x4x8x3x64xf32>, memref<?x4x8x3xf32>
  return
}
