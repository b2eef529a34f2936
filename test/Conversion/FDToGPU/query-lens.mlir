// RUN: fd-opt %s -split-input-file -fd-schedule-kernels=chip=sm_80 -convert-fd-to-gpu=chip=sm_80 | FileCheck %s

// Per-sequence query lengths on tensor cores: the partial kernel takes
// them last, reads its sequence's entry (blockIdx.z) once and clamps it to
// [0, Lq]; n = 0 empties the chunk; of the two row tiles of 16 (Lq = 8 times
// a group of 4), each a block, one past the n * group real rows does
// nothing, and only real rows load queries and store partials; the causal
// limit counts from length - n.

// CHECK-LABEL: func.func @tensor_cores
// CHECK: gpu.launch_func @fd_partial_attention::@fd_partial_attention blocks in (%c3, %c4, %{{.*}}) {{.*}} args({{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : i32, {{.*}} : !llvm.ptr<1>)
// CHECK: gpu.func @fd_partial_attention(%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %[[LENS:.*]]: !llvm.ptr<1>, %[[PO:.*]]: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32, %[[QL:.*]]: !llvm.ptr<1>)
// CHECK: %[[BY:.*]] = gpu.block_id y
// CHECK-NEXT: arith.divui %[[BY]], %c2 : index
// CHECK-NEXT: %[[TILE:.*]] = arith.remui %[[BY]], %c2 : index
// CHECK: %[[BZ:.*]] = gpu.block_id z
// CHECK: llvm.getelementptr %[[LENS]]
// CHECK: %[[LEN:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// CHECK: %[[B:.*]] = arith.index_cast %[[BZ]] : index to i64
// CHECK-NEXT: %[[ADDRESS:.*]] = llvm.getelementptr %[[QL]][%[[B]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
// CHECK-NEXT: %[[ENTRY:.*]] = llvm.load %[[ADDRESS]] {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK-NEXT: %[[ENTRY_INDEX:.*]] = arith.index_cast %[[ENTRY]] : i32 to index
// CHECK-NEXT: %[[AT_LEAST_0:.*]] = arith.maxsi %[[ENTRY_INDEX]], %c0 : index
// CHECK-NEXT: %[[N:.*]] = arith.minsi %[[AT_LEAST_0]], %c8 : index
// CHECK-NEXT: %[[NONE:.*]] = arith.cmpi eq, %[[N]], %c0 : index
// CHECK-NEXT: %[[END:.*]] = arith.select %[[NONE]], %c0, %[[LEN]] : index
// CHECK: %[[ROWS:.*]] = arith.muli %[[N]], %c4 : index
// CHECK-NEXT: %[[LAST:.*]] = arith.subi %[[ROWS]], %c1 : index
// CHECK-NEXT: %[[FIRST_ROW:.*]] = arith.muli %[[TILE]], %c16 : index
// CHECK-NEXT: %[[REAL_TILE:.*]] = arith.cmpi slt, %[[FIRST_ROW]], %[[ROWS]] : index
// CHECK-NEXT: scf.if %[[REAL_TILE]] {
// Padding rows read the last real row's query.
// CHECK: arith.minsi %{{.*}}, %[[LAST]] : index
// CHECK: arith.cmpi slt, %{{.*}}, %[[ROWS]] : index
// CHECK: %[[FIRST_TOKEN:.*]] = arith.subi %[[LEN]], %[[N]] : index
// CHECK-NEXT: arith.addi %[[FIRST_TOKEN]], %c1 : index
// CHECK: nvvm.mma.sync
// CHECK: %[[REAL:.*]] = arith.cmpi slt, %{{.*}}, %[[ROWS]] : index
// CHECK-NEXT: scf.if %[[REAL]] {
// CHECK: llvm.getelementptr %[[PO]]
// CHECK: llvm.store
func.func @tensor_cores(%q: memref<?x8x8x64xf16>, %k: memref<?x?x2x64xf16>, %v: memref<?x?x2x64xf16>,
                        %lens: memref<?xi32>, %ql: memref<?xi32>,
                        %po: memref<?x8x8x3x64xf32>, %pl: memref<?x8x8x3xf32>) {
  fd.partial_attention %q, %k, %v, %lens query_lens %ql : memref<?xi32> into %po, %pl
      : memref<?x8x8x64xf16>, memref<?x?x2x64xf16>, memref<?x?x2x64xf16>,
        memref<?xi32> into memref<?x8x8x3x64xf32>, memref<?x8x8x3xf32>
  return
}

// -----

// On CUDA cores (f32, MHA: one row per token) after the ALiBi slopes, with
// a window of 5: the first attended key is max(0, length - n + 1 - W), and
// n = 0 ends the chunk there; one tile of the 2 rows, run when n > 0; the
// keys every
// token sees (streamed without masks) start at the last token's window,
// (length - n + 1) + (n - 1) - W.

// CHECK-LABEL: func.func @cuda_cores_window_alibi
// CHECK: gpu.func @fd_partial_attention(%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %[[LENS:.*]]: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32, %[[SLOPES:.*]]: !llvm.ptr<1>, %[[QL:.*]]: !llvm.ptr<1>)
// CHECK: llvm.getelementptr %[[LENS]]
// CHECK: %[[LEN:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// CHECK: llvm.getelementptr %[[QL]]
// CHECK: %[[AT_LEAST_0:.*]] = arith.maxsi %{{.*}}, %c0 : index
// CHECK-NEXT: %[[N:.*]] = arith.minsi %[[AT_LEAST_0]], %c2 : index
// CHECK-NEXT: %[[FIRST_TOKEN:.*]] = arith.subi %[[LEN]], %[[N]] : index
// CHECK-NEXT: %[[MASKED:.*]] = arith.addi %[[FIRST_TOKEN]], %c1 : index
// CHECK-NEXT: %[[WINDOW:.*]] = arith.subi %[[MASKED]], %c5 : index
// CHECK-NEXT: %[[FIRST:.*]] = arith.maxsi %[[WINDOW]], %c0 : index
// CHECK-NEXT: %[[NONE:.*]] = arith.cmpi eq, %[[N]], %c0 : index
// CHECK-NEXT: %[[END:.*]] = arith.select %[[NONE]], %[[FIRST]], %[[LEN]] : index
// CHECK-NEXT: arith.subi %[[END]], %[[FIRST]] : index
// CHECK: %[[REAL_TILE:.*]] = arith.cmpi sgt, %[[N]], %c0 : index
// CHECK-NEXT: scf.if %[[REAL_TILE]] {
// CHECK: llvm.getelementptr %[[SLOPES]]
// CHECK: %[[LAST_TOKEN:.*]] = arith.subi %[[N]], %c1 : index
// CHECK-NEXT: %[[FIRST_TOKEN_AGAIN:.*]] = arith.subi %[[LEN]], %[[N]] : index
// CHECK-NEXT: %[[MASKED_AGAIN:.*]] = arith.addi %[[FIRST_TOKEN_AGAIN]], %c1 : index
// CHECK-NEXT: %[[LAST_END:.*]] = arith.addi %[[MASKED_AGAIN]], %[[LAST_TOKEN]] : index
// CHECK-NEXT: arith.subi %[[LAST_END]], %c5 : index
// CHECK-NOT: nvvm.mma.sync
func.func @cuda_cores_window_alibi(%q: memref<?x2x8x64xf32>, %k: memref<?x?x8x64xf32>, %v: memref<?x?x8x64xf32>,
                                   %lens: memref<?xi32>, %a: memref<8xf32>, %ql: memref<?xi32>,
                                   %po: memref<?x2x8x3x64xf32>, %pl: memref<?x2x8x3xf32>) {
  fd.partial_attention %q, %k, %v, %lens alibi_slopes %a : memref<8xf32> query_lens %ql : memref<?xi32> into %po, %pl {window_left = 5}
      : memref<?x2x8x64xf32>, memref<?x?x8x64xf32>, memref<?x?x8x64xf32>,
        memref<?xi32> into memref<?x2x8x3x64xf32>, memref<?x2x8x3xf32>
  return
}

// -----

// The merge takes the query lengths last (after the lse and the sinks) and
// reads its sequence's entry (blockIdx.z): a padding token's row
// (blockIdx.y >= n) loads no lse and no partial and takes no sink (-inf), so
// its weights are 0 and it gets zeros and lse -inf. Its 3 partials, fewer
// than an iteration's 32, are loaded first (before the weights), under the
// same test, and summed without a loop.

// CHECK-LABEL: func.func @merge
// CHECK: gpu.launch_func @fd_merge::@fd_merge {{.*}} args({{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>)
// CHECK: gpu.func @fd_merge(%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %[[SINKS:.*]]: !llvm.ptr<1>, %[[QL:.*]]: !llvm.ptr<1>)
// CHECK-DAG: %[[NEG_INF:.*]] = arith.constant 0xFF800000 : f32
// CHECK-DAG: %[[TOKEN:.*]] = gpu.block_id y
// CHECK-DAG: %[[BZ:.*]] = gpu.block_id z
// CHECK: %[[B:.*]] = arith.index_cast %[[BZ]] : index to i64
// CHECK-NEXT: %[[ADDRESS:.*]] = llvm.getelementptr %[[QL]][%[[B]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
// CHECK-NEXT: %[[ENTRY:.*]] = llvm.load %[[ADDRESS]] {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK-NEXT: %[[ENTRY_INDEX:.*]] = arith.index_cast %[[ENTRY]] : i32 to index
// CHECK-NEXT: %[[AT_LEAST_0:.*]] = arith.maxsi %[[ENTRY_INDEX]], %c0 : index
// CHECK-NEXT: %[[N:.*]] = arith.minsi %[[AT_LEAST_0]], %c4 : index
// CHECK-NEXT: %[[IS_QUERY:.*]] = arith.cmpi slt, %[[TOKEN]], %[[N]] : index
// CHECK: %[[LSES:.*]] = scf.if %[[IS_QUERY]] -> (f32) {
// CHECK: llvm.load
// CHECK: } else {
// CHECK-NEXT: scf.yield %[[NEG_INF]] : f32
// CHECK: %[[PARTIALS:.*]]:3 = scf.if %[[IS_QUERY]] -> (f32, f32, f32) {
// CHECK-COUNT-3: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK: } else {
// CHECK: %[[SINK_ADDRESS:.*]] = llvm.getelementptr %[[SINKS]]
// CHECK-NEXT: %[[SINK:.*]] = llvm.load %[[SINK_ADDRESS]]
// CHECK-NEXT: %[[SINK2:.*]] = arith.mulf %[[SINK]], %{{.*}} : f32
// CHECK-NEXT: arith.select %[[IS_QUERY]], %[[SINK2]], %[[NEG_INF]] : f32
// CHECK: gpu.barrier
// CHECK: scf.if %[[IS_QUERY]] -> (f32, f32, f32, f32) {
// CHECK-COUNT-3: memref.load
// CHECK-NOT: llvm.load
// CHECK: llvm.intr.fma(%{{.*}}, %[[PARTIALS]]#0
// CHECK: } else {
func.func @merge(%po: memref<?x4x8x3x64xf32>, %pl: memref<?x4x8x3xf32>, %s: memref<8xf32>,
                 %ql: memref<?xi32>, %out: memref<?x4x8x64xf16>, %lse: memref<?x4x8xf32>) {
  fd.merge %po, %pl sinks %s : memref<8xf32> query_lens %ql : memref<?xi32> into %out, %lse
      : memref<?x4x8x3x64xf32>, memref<?x4x8x3xf32> into memref<?x4x8x64xf16>, memref<?x4x8xf32>
  return
}
