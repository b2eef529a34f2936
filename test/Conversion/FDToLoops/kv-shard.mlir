// RUN: fd-opt %s -split-input-file -convert-fd-to-loops | FileCheck %s

// A sharded cache on loops (4 ranks of 16 tokens): each row reads the rank
// once and clamps it to [0, 3]; the global length is clamped to what the
// ranks' caches of Lmax keys hold, 64 * (Lmax / 16) + Lmax % 16, and the
// rank's share of it is 16 a round plus its part of the last round,
// clamped to [0, 16]. ALiBi's distance is between global positions: a
// local key i is at ((i / 16) * 4 + rank) * 16 + i % 16.

// CHECK-LABEL: func @attention
// CHECK-SAME: %[[LENS:[a-z0-9]+]]: memref<?xi32>, %[[A:[a-z0-9]+]]: memref<8xf32>, %[[RANK:[a-z0-9]+]]: memref<1xi32>
// CHECK: %[[LMAX:.*]] = memref.dim %{{.*}}, %c1 : memref<?x?x2x64xf32>
// CHECK: %[[LEN_ENTRY:.*]] = memref.load %[[LENS]]
// CHECK-NEXT: %[[LEN_READ:.*]] = arith.index_cast %[[LEN_ENTRY]] : i32 to index
// CHECK: %[[RANK_ENTRY:.*]] = memref.load %[[RANK]][%{{.*}}] : memref<1xi32>
// CHECK-NEXT: %[[RANK_READ:.*]] = arith.index_cast %[[RANK_ENTRY]] : i32 to index
// CHECK: %[[RANK_LOW:.*]] = arith.maxsi %[[RANK_READ]], %{{.*}} : index
// CHECK-NEXT: %[[R:.*]] = arith.minsi %[[RANK_LOW]], %c3 : index
// CHECK: %[[BLOCKS:.*]] = arith.divui %[[LMAX]], %c16 : index
// CHECK: %[[ROUNDS:.*]] = arith.muli %[[BLOCKS]], %c64 : index
// CHECK-NEXT: %[[PART:.*]] = arith.remui %[[LMAX]], %c16 : index
// CHECK-NEXT: %[[CAPACITY:.*]] = arith.addi %[[ROUNDS]], %[[PART]] : index
// CHECK: %[[GLOBAL_LOW:.*]] = arith.maxsi %[[LEN_READ]], %{{.*}} : index
// CHECK-NEXT: %[[GLOBAL:.*]] = arith.minsi %[[GLOBAL_LOW]], %[[CAPACITY]] : index
// CHECK: %[[AT_LEAST_0:.*]] = arith.maxsi %[[GLOBAL]], %{{.*}} : index
// CHECK-NEXT: %[[WHOLE:.*]] = arith.divui %[[AT_LEAST_0]], %[[ROUND:.*]] : index
// CHECK-NEXT: %[[IN_ROUND:.*]] = arith.remui %[[AT_LEAST_0]], %[[ROUND]] : index
// CHECK-NEXT: %[[START:.*]] = arith.muli %[[R]], %[[I:.*]] : index
// CHECK-NEXT: %[[REST:.*]] = arith.subi %[[IN_ROUND]], %[[START]] : index
// CHECK: %[[REST_LOW:.*]] = arith.maxsi %[[REST]], %{{.*}} : index
// CHECK-NEXT: %[[REST_HIGH:.*]] = arith.minsi %[[REST_LOW]], %[[I]] : index
// CHECK-NEXT: %[[WHOLE_KEYS:.*]] = arith.muli %[[WHOLE]], %[[I]] : index
// CHECK-NEXT: %[[SHARE:.*]] = arith.addi %[[WHOLE_KEYS]], %[[REST_HIGH]] : index
// CHECK: scf.for %[[KEY:.*]] = %{{.*}} to %{{.*}} step
// CHECK: %[[BLOCK:.*]] = arith.divui %[[KEY]], %[[I2:.*]] : index
// CHECK: %[[KEY_ROUNDS:.*]] = arith.muli %[[BLOCK]], %c4{{.*}} : index
// CHECK-NEXT: %[[GLOBAL_BLOCK:.*]] = arith.addi %[[KEY_ROUNDS]], %[[R]] : index
// CHECK-NEXT: %[[BLOCK_START:.*]] = arith.muli %[[GLOBAL_BLOCK]], %[[I2]] : index
// CHECK-NEXT: %[[IN_BLOCK:.*]] = arith.remui %[[KEY]], %[[I2]] : index
// CHECK-NEXT: %[[KEY_POSITION:.*]] = arith.addi %[[BLOCK_START]], %[[IN_BLOCK]] : index
// CHECK-NEXT: %[[DISTANCE:.*]] = arith.subi %[[KEY_POSITION]], %{{.*}} : index
// CHECK-NEXT: arith.index_cast %[[DISTANCE]] : index to i32
func.func @attention(%q: memref<?x8x64xf32>, %k: memref<?x?x2x64xf32>, %v: memref<?x?x2x64xf32>,
                     %lens: memref<?xi32>, %a: memref<8xf32>, %rank: memref<1xi32>, %out: memref<?x8x64xf32>) {
  fd.attention %q, %k, %v, %lens alibi_slopes %a : memref<8xf32> kv_shard_rank %rank : memref<1xi32> into %out {kv_shard = #fd.kv_shard<world = 4, interleave = 16>}
      : memref<?x8x64xf32>, memref<?x?x2x64xf32>, memref<?x?x2x64xf32>,
        memref<?xi32> into memref<?x8x64xf32>
  return
}
