// RUN: fd-opt %s -split-input-file -fd-schedule-kernels=chip=sm_80 -convert-fd-to-gpu=chip=sm_80 | FileCheck %s

// The merge in two steps. Each lane (thread id mod 32) loads the lses of
// splits lane and lane + 32 (the second clamped to split 62 and -inf past
// it). 63 splits take eight groups of 64 threads (a thread per element),
// each summing a share of 8 splits (the eighth's last past the splits: its
// address clamped to split 62, its weight 0). Every thread loads the
// partials of its share's first iteration of up to 64 (they do not depend
// on the weights): all 8 here. Every warp weighs the row's 63 splits (the
// max and the sum reduced with xor shuffles), so that the lses' loads are
// not sunk behind a branch to one warp, and warp 0's lanes store the
// weights, divided by the sum, to workgroup memory: 64 per row (63 and,
// from the lane past the last split, a zero: whole 16-byte vectors). After
// a barrier every thread sums its element over its share, every partial
// and weight loaded before any is used; the groups' sums meet in workgroup
// memory and the first group adds them.

// CHECK-LABEL: func.func @merge_63_splits
// CHECK: gpu.launch_func @fd_merge::@fd_merge blocks in (%c8, %c1, %{{.*}}) threads in (%c512, %c1, %c1)
// CHECK: gpu.func @fd_merge
// CHECK-SAME: workgroup(%[[WEIGHTS:.*]] : memref<64xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[SUMS:.*]] : memref<512xf32, #gpu.address_space<workgroup>>
// CHECK-DAG: %[[NEG_INF:.*]] = arith.constant 0xFF800000 : f32
// CHECK-DAG: %[[DIM:.*]] = gpu.thread_id x
// CHECK: %[[GROUP:.*]] = arith.divui %[[DIM]], %c64 : index
// CHECK: %[[ELEMENT:.*]] = arith.remui %[[DIM]], %c64 : index
// CHECK: %[[LANE:.*]] = arith.remui %[[DIM]], %c32 : index
// CHECK: arith.minsi %[[LANE]], %c62 : index
// CHECK: llvm.load
// CHECK: %[[SECOND:.*]] = arith.addi %[[LANE]], %c32 : index
// CHECK-NEXT: %[[CLAMPED:.*]] = arith.minsi %[[SECOND]], %c62 : index
// CHECK: llvm.load
// CHECK: %[[REAL:.*]] = arith.cmpi slt, %{{.*}}, %c63 : index
// CHECK-NEXT: arith.select %[[REAL]], %{{.*}}, %[[NEG_INF]] : f32
// CHECK-COUNT-8: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK-NOT: llvm.load
// CHECK: %[[FIRST_WARP:.*]] = arith.cmpi slt, %[[DIM]], %c32 : index
// CHECK-NOT: scf.if
// CHECK-COUNT-5: gpu.shuffle xor
// CHECK-COUNT-5: gpu.shuffle xor
// CHECK: arith.divf
// CHECK: scf.if %[[FIRST_WARP]] {
// CHECK-NEXT: memref.store %{{.*}}, %[[WEIGHTS]][%[[LANE]]]
// CHECK: arith.divf
// CHECK: scf.if %[[FIRST_WARP]] {
// CHECK: memref.store %{{.*}}, %[[WEIGHTS]]
// CHECK: gpu.barrier
// CHECK-NOT: scf.for
// CHECK: %[[WEIGHT:.*]] = memref.load %[[WEIGHTS]]
// CHECK-NEXT: %[[IS_SPLIT:.*]] = arith.cmpi slt, %{{.*}}, %c63 : index
// CHECK-NEXT: arith.select %[[IS_SPLIT]], %[[WEIGHT]]
// CHECK-COUNT-7: memref.load %[[WEIGHTS]]
// CHECK-COUNT-8: llvm.intr.fma
// CHECK-NOT: llvm.load
// CHECK: memref.store %{{.*}}, %[[SUMS]][%[[DIM]]]
// CHECK-NEXT: gpu.barrier
// CHECK: %[[IS_FIRST:.*]] = arith.cmpi eq, %[[GROUP]], %c0 : index
// CHECK-NEXT: scf.if %[[IS_FIRST]] {
// CHECK-NEXT: memref.load %[[SUMS]][%[[ELEMENT]]]
// CHECK-COUNT-7: memref.load %[[SUMS]]
// CHECK-NOT: memref.load
// CHECK: arith.truncf
func.func @merge_63_splits(%po: memref<?x8x63x64xf32>, %pl: memref<?x8x63xf32>,
                           %out: memref<?x8x64xf16>) {
  fd.merge %po, %pl into %out
      : memref<?x8x63x64xf32>, memref<?x8x63xf32> into memref<?x8x64xf16>
  return
}

// -----

// 300 splits: 16 groups of 19 (the last's 4 past the splits), 16 groups
// of 64 threads over 512 threads, so blocks of 512 a slice of 32 dims, two
// blocks a row: each lane's 10 lses and its share's 19 partials one batch
// of loads before its weights and fmas.

// CHECK-LABEL: func.func @merge_300_splits
// CHECK: blocks in (%c16, %c1, %{{.*}}) threads in (%c512, %c1, %c1)
// CHECK: gpu.func @fd_merge
// CHECK-SAME: workgroup(%[[WEIGHTS:.*]] : memref<300xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[SUMS:.*]] : memref<512xf32, #gpu.address_space<workgroup>>
// CHECK-COUNT-29: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK-NOT: llvm.load
// CHECK: gpu.barrier
// CHECK-NOT: scf.for
// CHECK-COUNT-19: memref.load %[[WEIGHTS]]
// CHECK-NOT: llvm.load
// CHECK: gpu.barrier
// CHECK-COUNT-16: memref.load %[[SUMS]]
// CHECK-NOT: memref.load %[[SUMS]]
// CHECK: arith.truncf
func.func @merge_300_splits(%po: memref<?x8x300x64xf32>, %pl: memref<?x8x300xf32>,
                           %out: memref<?x8x64xf16>) {
  fd.merge %po, %pl into %out
      : memref<?x8x300x64xf32>, memref<?x8x300xf32> into memref<?x8x64xf16>
  return
}

// -----

// 7 splits: one group, a thread per element summing them all (no sums
// buffer, the output stored straight from the chains).

// CHECK-LABEL: func.func @merge_7_splits
// CHECK: threads in (%c64, %c1, %c1)
// CHECK: gpu.func @fd_merge
// CHECK-SAME: workgroup(%[[WEIGHTS:.*]] : memref<8xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel
// CHECK-COUNT-7: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK: gpu.barrier
// CHECK-COUNT-7: memref.load %[[WEIGHTS]]
// CHECK-NOT: gpu.barrier
// CHECK: arith.truncf
func.func @merge_7_splits(%po: memref<?x8x7x64xf32>, %pl: memref<?x8x7xf32>,
                          %out: memref<?x8x64xf16>) {
  fd.merge %po, %pl into %out
      : memref<?x8x7x64xf32>, memref<?x8x7xf32> into memref<?x8x64xf16>
  return
}

// -----

// 8 splits: two groups of 4 (the shortest share that doubles the groups):
// a lane's lse and its share's 4 partials.

// CHECK-LABEL: func.func @merge_8_splits
// CHECK: threads in (%c128, %c1, %c1)
// CHECK-COUNT-5: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK-NOT: llvm.load
// CHECK: gpu.barrier
func.func @merge_8_splits(%po: memref<?x8x8x64xf32>, %pl: memref<?x8x8xf32>,
                          %out: memref<?x8x64xf16>) {
  fd.merge %po, %pl into %out
      : memref<?x8x8x64xf32>, memref<?x8x8xf32> into memref<?x8x64xf16>
  return
}

// -----

// 512-wide rows over 121 splits with their lse: 8 groups of 16 splits (the
// last's 7 past the splits; 16 groups would take 256 blocks of 512 threads
// for the sequence's 16 rows, more than the 128 the groups stop at) in
// blocks of 512 threads, each a slice of 64 dims, 8 blocks a row (the
// grid's x the 16 heads' 128 slices); every slice weighs the row, the first
// (block x mod 8 = 0) writes its lse.

// CHECK-LABEL: func.func @merge_wide_rows
// CHECK: gpu.launch_func @fd_merge::@fd_merge blocks in (%c128, %c1, %{{.*}}) threads in (%c512, %c1, %c1)
// CHECK: gpu.func @fd_merge
// CHECK-SAME: memref<124xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<512xf32, #gpu.address_space<workgroup>>
// CHECK: %[[BLOCK:.*]] = gpu.block_id x
// CHECK: %[[SLICE:.*]] = arith.remui %[[BLOCK]], %c8 : index
// CHECK: arith.divui %[[BLOCK]], %c8 : index
// CHECK: %[[FIRST_SLICE:.*]] = arith.cmpi eq, %[[SLICE]], %c0 : index
// CHECK: %[[LANE_0:.*]] = arith.cmpi eq, %{{.*}}, %c0 : index
// CHECK: %[[WRITES_LSE:.*]] = arith.andi %[[LANE_0]], %[[FIRST_SLICE]] : i1
// CHECK: arith.andi %[[WRITES_LSE]]
// CHECK-COUNT-16: memref.load
// CHECK: gpu.barrier
// CHECK-COUNT-8: memref.load
// CHECK: arith.truncf {{.*}} to bf16
func.func @merge_wide_rows(%po: memref<?x16x121x512xf32>,
                           %pl: memref<?x16x121xf32>,
                           %out: memref<?x16x512xbf16>, %lse: memref<?x16xf32>) {
  fd.merge %po, %pl into %out, %lse
      : memref<?x16x121x512xf32>, memref<?x16x121xf32>
        into memref<?x16x512xbf16>, memref<?x16xf32>
  return
}

// -----

// 96-wide rows over 300 splits: 16 or 8 groups would take 1536 or 768 threads and the
// row does not slice into whole warps, so 4 groups of 75 splits, 384
// threads: 64 splits a batch of loads (over 256 threads), then the 11 left.

// CHECK-LABEL: func.func @merge_unsliced_rows
// CHECK: threads in (%c384, %c1, %c1)
// CHECK: gpu.func @fd_merge
// CHECK-SAME: memref<384xf32, #gpu.address_space<workgroup>>
// CHECK-COUNT-64: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK: gpu.barrier
// CHECK-NOT: scf.for
// CHECK-COUNT-11: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK-NOT: llvm.load %{{.*}} : !llvm.ptr<1> -> f32
// CHECK: gpu.barrier
func.func @merge_unsliced_rows(%po: memref<?x8x300x96xf32>,
                               %pl: memref<?x8x300xf32>,
                               %out: memref<?x8x96xf16>) {
  fd.merge %po, %pl into %out
      : memref<?x8x300x96xf32>, memref<?x8x300xf32> into memref<?x8x96xf16>
  return
}

// -----

// Kimi K2's 64 rows of 512 over 33 splits: 2 groups of 17 (4 would take
// 256 blocks of 512 threads for the sequence's rows), 2 slices of 256 dims,
// 128 blocks.

// CHECK-LABEL: func.func @merge_many_wide_rows
// CHECK: gpu.launch_func @fd_merge::@fd_merge blocks in (%c128, %c1, %{{.*}}) threads in (%c512, %c1, %c1)
// CHECK: gpu.func @fd_merge
// CHECK-SAME: %{{.*}} : memref<512xf32, #gpu.address_space<workgroup>>
// CHECK: %[[BLOCK:.*]] = gpu.block_id x
// CHECK: arith.remui %[[BLOCK]], %c2 : index
// CHECK: gpu.barrier
// CHECK: gpu.barrier
// CHECK-COUNT-2: memref.load
// CHECK-NOT: memref.load
// CHECK: arith.truncf {{.*}} to bf16
func.func @merge_many_wide_rows(%po: memref<?x64x33x512xf32>,
                                %pl: memref<?x64x33xf32>,
                                %out: memref<?x64x512xbf16>) {
  fd.merge %po, %pl into %out
      : memref<?x64x33x512xf32>, memref<?x64x33xf32> into memref<?x64x512xbf16>
  return
}
