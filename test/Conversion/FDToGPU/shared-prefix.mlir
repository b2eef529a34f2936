// RUN: fd-opt %s -split-input-file -fd-schedule-kernels=chip=sm_80 -convert-fd-to-gpu=chip=sm_80 | FileCheck %s

// A shared prefix (cascade) on the GPU: the cache holds one sequence, so a
// block computes the rows of several query sequences together and streams
// the prefix once for all of them. The partial kernel takes the suffix
// lengths and the query batch B last; the launch's grid z counts blocks of
// N sequences, ceil(B / N), and names it "batch/N" ("batch" where N = 1)
// for the manifest. The kernel reads the prefix's length at seq_lens[0],
// the keys at sequence 0 (no batch term in their addresses), and each row's
// suffix at its own sequence, z * N + (row / rows a sequence), clamped to
// [0, 2^30] and added to the prefix's length: where its keys end.

// Llama-like grouping, 32 query heads over 8 KV heads, Lq = 1: 4 rows a
// sequence, N = 16 / 4 = 4 sequences to a 16-row tensor-core tile.

// CHECK-LABEL: func.func @grouped
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: memref<?x32x128xf16>, {{.*}}, %[[SUFFIX:[a-z0-9]+]]: memref<?xi32>
// CHECK: %[[B:.*]] = memref.dim %[[Q]], %c0 : memref<?x32x128xf16>
// CHECK: memref.extract_aligned_pointer_as_index %[[SUFFIX]]
// CHECK: %[[SUFFIX_ARG:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr<1>
// CHECK: %[[B_ARG:.*]] = arith.index_cast %[[B]] : index to i32
// CHECK: %[[BLOCKS_Z:.*]] = arith.ceildivui %[[B]], %c4 : index
// CHECK: gpu.launch_func @fd_partial_attention::@fd_partial_attention blocks in (%{{.*}}, %c8, %[[BLOCKS_Z]])
// CHECK-SAME: %[[SUFFIX_ARG]] : !llvm.ptr<1>, %[[B_ARG]] : i32)
// CHECK-SAME: {fd.grid_symbols = ["num_splits", "", "batch/4"]}
// CHECK: gpu.func @fd_partial_attention(%{{.*}}: !llvm.ptr<1>, %[[K:.*]]: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %[[LENS:.*]]: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32, %[[SUFFIXES:.*]]: !llvm.ptr<1>, %[[BATCH:.*]]: i32)
// CHECK-SAME: fd.params = ["query", "key_cache", "value_cache", "seq_lens", "partial_output", "partial_lse", "max_len", "suffix_lens", "batch"]
// The prefix's length, read at seq_lens[0]: no offset into seq_lens.
// CHECK: %[[P_ENTRY:.*]] = llvm.load %[[LENS]] {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK-NEXT: %[[P_READ:.*]] = arith.index_cast %[[P_ENTRY]] : i32 to index
// CHECK-NEXT: %[[P_LOW:.*]] = arith.maxsi %[[P_READ]], %c0 : index
// CHECK-NEXT: %[[P:.*]] = arith.minsi %[[P_LOW]], %{{.*}} : index
// The block's sequences: min(B - 4z, 4), 4 rows each.
// CHECK: %[[B_READ:.*]] = arith.index_cast %[[BATCH]] : i32 to index
// CHECK-NEXT: %[[FIRST:.*]] = arith.muli %block_id_z, %c4 : index
// CHECK-NEXT: %[[LEFT:.*]] = arith.subi %[[B_READ]], %[[FIRST]] : index
// CHECK-NEXT: %[[SEQUENCES:.*]] = arith.minsi %[[LEFT]], %c4 : index
// CHECK-NEXT: %[[ROWS:.*]] = arith.muli %[[SEQUENCES]], %c4 : index
// CHECK-NEXT: %[[LAST_ROW:.*]] = arith.subi %[[ROWS]], %c1 : index
// The keys of sequence 0: (key * Hkv + KV head) * D, no batch term.
// CHECK: %[[KEY:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// CHECK-NEXT: %[[KEY_ROW:.*]] = arith.muli %[[KEY]], %c8 : index
// CHECK-NEXT: %[[KEY_HEAD:.*]] = arith.addi %[[KEY_ROW]], %block_id_y : index
// CHECK-NEXT: %[[KEY_AT:.*]] = arith.muli %[[KEY_HEAD]], %c128 : index
// CHECK-NEXT: %[[KEY_COLUMN:.*]] = arith.addi %[[KEY_AT]], %{{.*}} : index
// CHECK-NEXT: %[[KEY_OFFSET:.*]] = arith.index_cast %[[KEY_COLUMN]] : index to i64
// CHECK-NEXT: llvm.getelementptr %[[K]][%[[KEY_OFFSET]]]
// A row's query: of sequence z * 4 + row / 4, head 4y + row % 4.
// CHECK: %[[Q_ROW:.*]] = arith.minsi %{{.*}}, %[[LAST_ROW]] : index
// CHECK-NEXT: %[[Q_IN_BLOCK:.*]] = arith.divui %[[Q_ROW]], %c4 : index
// CHECK-NEXT: %[[Q_IN_GROUP:.*]] = arith.remui %[[Q_ROW]], %c4 : index
// CHECK-NEXT: %[[GROUP:.*]] = arith.muli %block_id_y, %c4 : index
// CHECK-NEXT: %[[HEAD:.*]] = arith.addi %[[GROUP]], %[[Q_IN_GROUP]] : index
// CHECK-NEXT: %[[Q_FIRST:.*]] = arith.muli %block_id_z, %c4 : index
// CHECK-NEXT: %[[Q_SEQUENCE:.*]] = arith.addi %[[Q_FIRST]], %[[Q_IN_BLOCK]] : index
// CHECK-NEXT: %[[Q_SEQUENCE_AT:.*]] = arith.muli %[[Q_SEQUENCE]], %c32 : index
// CHECK-NEXT: arith.addi %[[Q_SEQUENCE_AT]], %[[HEAD]] : index
// A row's suffix (read after the queries are staged), at its sequence
// z * 4 + row / 4.
// CHECK: gpu.barrier
// CHECK: %[[ROW:.*]] = arith.minsi %{{.*}}, %[[LAST_ROW]] : index
// CHECK-NEXT: %[[IN_BLOCK:.*]] = arith.divui %[[ROW]], %c4 : index
// CHECK-NEXT: %[[FIRST_AGAIN:.*]] = arith.muli %block_id_z, %c4 : index
// CHECK-NEXT: %[[SEQUENCE:.*]] = arith.addi %[[FIRST_AGAIN]], %[[IN_BLOCK]] : index
// CHECK-NEXT: %[[SEQUENCE_OFFSET:.*]] = arith.index_cast %[[SEQUENCE]] : index to i64
// CHECK-NEXT: %[[SUFFIX_AT:.*]] = llvm.getelementptr %[[SUFFIXES]][%[[SEQUENCE_OFFSET]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
// CHECK-NEXT: %[[S_ENTRY:.*]] = llvm.load %[[SUFFIX_AT]] {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK-NEXT: %[[S_READ:.*]] = arith.index_cast %[[S_ENTRY]] : i32 to index
// CHECK-NEXT: %[[S_LOW:.*]] = arith.maxsi %[[S_READ]], %c0 : index
// CHECK-NEXT: %[[S:.*]] = arith.minsi %[[S_LOW]], %c1073741824 : index
// CHECK-NEXT: %[[END:.*]] = arith.addi %[[P]], %[[S]] : index
// CHECK-NEXT: arith.minsi %{{.*}}, %[[END]] : index
func.func @grouped(%q: memref<?x32x128xf16>, %k: memref<1x?x8x128xf16>, %v: memref<1x?x8x128xf16>,
                   %lens: memref<1xi32>, %suffix: memref<?xi32>,
                   %po: memref<?x32x4x128xf32>, %pl: memref<?x32x4xf32>) {
  fd.partial_attention %q, %k, %v, %lens suffix_lens %suffix : memref<?xi32> into %po, %pl
      : memref<?x32x128xf16>, memref<1x?x8x128xf16>, memref<1x?x8x128xf16>,
        memref<1xi32> into memref<?x32x4x128xf32>, memref<?x32x4xf32>
  return
}

// -----

// 16 query heads over 1 KV head, Lq = 1: 16 rows a sequence fill a tile
// alone, N = 1: the grid's z is the query batch itself, named "batch", and
// a row's sequence is z.

// CHECK-LABEL: func.func @one_sequence_a_block
// CHECK: %[[B:.*]] = memref.dim %{{.*}}, %c0 : memref<?x16x128xf16>
// CHECK-NOT: arith.ceildivui
// CHECK: gpu.launch_func @fd_partial_attention::@fd_partial_attention blocks in (%{{.*}}, %c1, %[[B]])
// CHECK-SAME: {fd.grid_symbols = ["num_splits", "", "batch"]}
// CHECK: gpu.func @fd_partial_attention(
// CHECK-SAME: %[[SUFFIXES:[a-z0-9]+]]: !llvm.ptr<1>, %{{[a-z0-9]+}}: i32)
// CHECK-SAME: fd.params = ["query", "key_cache", "value_cache", "seq_lens", "partial_output", "partial_lse", "max_len", "suffix_lens", "batch"]
// CHECK: gpu.barrier
// CHECK: %[[IN_BLOCK:.*]] = arith.divui %{{.*}}, %c16 : index
// CHECK-NEXT: %[[SEQUENCE:.*]] = arith.addi %block_id_z, %[[IN_BLOCK]] : index
// CHECK-NEXT: %[[SEQUENCE_OFFSET:.*]] = arith.index_cast %[[SEQUENCE]] : index to i64
// CHECK-NEXT: llvm.getelementptr %[[SUFFIXES]][%[[SEQUENCE_OFFSET]]]
func.func @one_sequence_a_block(%q: memref<?x16x128xf16>, %k: memref<1x?x1x128xf16>, %v: memref<1x?x1x128xf16>,
                                %lens: memref<1xi32>, %suffix: memref<?xi32>,
                                %po: memref<?x16x4x128xf32>, %pl: memref<?x16x4xf32>) {
  fd.partial_attention %q, %k, %v, %lens suffix_lens %suffix : memref<?xi32> into %po, %pl
      : memref<?x16x128xf16>, memref<1x?x1x128xf16>, memref<1x?x1x128xf16>,
        memref<1xi32> into memref<?x16x4x128xf32>, memref<?x16x4xf32>
  return
}
