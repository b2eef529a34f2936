// RUN: fd-opt %s -split-input-file -fd-split-kv="num-splits=4 chip=sm_80" -convert-fd-to-gpu=chip=sm_80 | FileCheck %s

// MHA (Hq = Hkv = 8), D = 64, f16, on CUDA cores: a lane group of 8 lanes
// reads one 128-byte row with one 16-byte load per lane, 4 rows per warp.

// CHECK-LABEL: func.func @decode
// CHECK-SAME: %[[Q:[a-z0-9]+]]: memref<?x8x64xf16>, %[[K:[a-z0-9]+]]: memref<?x?x8x64xf16>
// CHECK: memref.extract_aligned_pointer_as_index %[[Q]]
// CHECK: %[[LMAX:.*]] = memref.dim %[[K]], %c1
// CHECK: %[[LMAX32:.*]] = arith.index_cast %[[LMAX]] : index to i32
// CHECK: gpu.launch_func @fd_partial_attention::@fd_partial_attention blocks in (%c4, %c8, %{{.*}}) threads in (%c128, %c1, %c1) args({{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, %[[LMAX32]] : i32)
// Each launch names the grid dimensions the runtime computes (the manifest's
// grid, docs/KernelABI.md): the split count and the batch; "" for a constant.
// CHECK-SAME: {fd.grid_symbols = ["num_splits", "", "batch"]}
// CHECK: gpu.launch_func @fd_merge::@fd_merge blocks in (%c8, %c1, %{{.*}}) threads in (%c64, %c1, %c1) args({{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>)
// CHECK-SAME: {fd.grid_symbols = ["", "", "batch"]}
// CHECK-NOT: fd.{{[a-z_]+}} %

// The partial kernel. Its workgroup buffers are read with 16-byte vectors.
// CHECK: gpu.module @fd_partial_attention
// CHECK: gpu.func @fd_partial_attention(%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %[[LENS:[a-z0-9]+]]: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32)
// CHECK-SAME: workgroup(%[[QTILE:.*]] : memref<1x64xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[WACC:.*]] : memref<4x1x64xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[WML:.*]] : memref<4x1x2xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel
// Each kernel names its parameters (docs/KernelABI.md): the manifest's; the
// partial kernel also says which units compute it.
// CHECK-SAME: attributes {fd.math_units = "cuda_cores", fd.params = ["query", "key_cache", "value_cache", "seq_lens", "partial_output", "partial_lse", "max_len"]
// The length of the block's sequence (blockIdx.z) comes from device memory.
// CHECK: %[[B:.*]] = gpu.block_id z
// CHECK: %[[B64:.*]] = arith.index_cast %[[B]] : index to i64
// CHECK: %[[LENPTR:.*]] = llvm.getelementptr %[[LENS]][%[[B64]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
// CHECK: llvm.load %[[LENPTR]] {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK: arith.ceildivsi
// The query tile is staged, prescaled, in workgroup memory.
// CHECK: memref.store {{.*}}, %[[QTILE]]
// CHECK: gpu.barrier
// Keys and values stream with 16-byte vector loads, 4 steps in flight.
// CHECK: scf.for
// CHECK-COUNT-8: llvm.load {{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xf16>
// q.k: one fused multiply-add per element, reduced across the 8 lanes of a
// token group with shuffles.
// CHECK: llvm.intr.fma
// CHECK: gpu.shuffle xor %{{.*}}, %c4_i32, %c32_i32 : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c2_i32, %c32_i32 : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32, %c32_i32 : f32
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"
// The accumulators: rescale, then add p * v in one fma.
// CHECK: llvm.intr.fma
// CHECK: scf.yield
// Token groups of a warp combine across lane bits 8 and 16.
// CHECK: gpu.shuffle xor %{{.*}}, %c8_i32, %c32_i32 : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c16_i32, %c32_i32 : f32
// Warps combine through workgroup memory.
// CHECK: memref.store {{.*}}, %[[WACC]]
// CHECK: memref.store {{.*}}, %[[WML]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[WML]]
// CHECK: llvm.store {{.*}} : f32, !llvm.ptr<1>
// CHECK: gpu.barrier
// CHECK: gpu.return

// The merge kernel: D threads; the first warp turns the lses into weights
// (base 2) in workgroup memory and writes the lse from lane 0, then every
// thread sums its element's partials.
// CHECK: gpu.module @fd_merge
// CHECK: gpu.func @fd_merge(%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>) workgroup(%[[WEIGHTS:.*]] : memref<4xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel attributes {fd.params = ["partial_output", "partial_lse", "output", "lse"], known_block_size = array<i32: 64, 1, 1>}
// CHECK: arith.maximumf
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"
// CHECK: memref.store %{{.*}}, %[[WEIGHTS]]
// CHECK: llvm.call_intrinsic "llvm.nvvm.lg2.approx.f"
// CHECK: gpu.barrier
// CHECK: memref.load %[[WEIGHTS]]
// CHECK: arith.truncf {{.*}} : f32 to f16
func.func @decode(%q: memref<?x8x64xf16>, %k: memref<?x?x8x64xf16>, %v: memref<?x?x8x64xf16>,
                  %lens: memref<?xi32>, %out: memref<?x8x64xf16>, %lse: memref<?x8xf32>) {
  fd.attention %q, %k, %v, %lens into %out, %lse
      : memref<?x8x64xf16>, memref<?x?x8x64xf16>, memref<?x?x8x64xf16>,
        memref<?xi32> into memref<?x8x64xf16>, memref<?x8xf32>
  return
}

// -----

// GQA (Hq = 8, Hkv = 2), D = 64, f16, on tensor cores: the group's 4 rows
// are one mma tile; the query tile holds the lanes' q fragments. K and V
// reach the fragments through two stages in the accumulators' buffer (16
// rows: the stages' 2 x 8 KB), copied with cp.async a step and a half
// before their use, K and V in commit groups of their own. The schedule,
// written by hand, holds two of q's four k-steps in registers (the planner
// holds all four), so the loop reads the others from workgroup memory.

// CHECK-LABEL: func.func @grouped_tensor_cores
// CHECK: gpu.func @fd_partial_attention
// CHECK-SAME: workgroup(%[[QFRAG:.*]] : memref<4x32x4xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[WACC:.*]] : memref<4x16x64xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[WML:.*]] : memref<4x4x2xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel
// CHECK-SAME: fd.math_units = "tensor_cores"
// CHECK-SAME: nvvm.maxntid = array<i32: 128, 1, 1>, nvvm.minctasm = 4 : i32
// The first step's K of key g (2 vectors), its V of keys 2p and 2p+1 (1
// vector each), then the second step's K, 16 bytes a lane, reading nothing
// past the chunk.
// CHECK: memref.extract_aligned_pointer_as_index %[[WACC]]
// CHECK-COUNT-2: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache =  cg, %{{.*}} : !llvm.ptr<3>, !llvm.ptr<1>, i32
// CHECK-NEXT: nvvm.cp.async.commit.group
// CHECK-COUNT-2: nvvm.cp.async.shared.global
// CHECK-NEXT: nvvm.cp.async.commit.group
// CHECK-COUNT-2: nvvm.cp.async.shared.global
// CHECK-NEXT: nvvm.cp.async.commit.group
// q's A fragments, 8 bytes per row half, staged per (k-step, lane).
// CHECK: llvm.load {{.*}} {alignment = 8 : i64} : !llvm.ptr<1> -> vector<2xi32>
// CHECK: memref.store {{.*}}, %[[QFRAG]]
// CHECK: gpu.barrier
// Two k-steps' fragments are held through the loop (the schedule's).
// CHECK-COUNT-8: memref.load %[[QFRAG]]
// CHECK-NOT: memref.load
// Each warp takes 8 keys per step, the block 32.
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c32 iter_args
// The next step's V, then a wait for this step's K (V(i + 1), K(i + 1)
// and V(i) stay in flight).
// CHECK-COUNT-2: nvvm.cp.async.shared.global
// CHECK-NEXT: nvvm.cp.async.commit.group
// CHECK-NEXT: nvvm.cp.async.wait.group 3
// S = q K^T in 4 k-steps, as two accumulators of even and odd steps; K's
// vectors read back from the stage as the k-steps take them, the last two
// k-steps' q fragments from workgroup memory.
// CHECK: llvm.load {{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// CHECK-COUNT-2: nvvm.mma.sync {{.*}} {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK: llvm.load {{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// CHECK: memref.load %[[QFRAG]]
// CHECK-COUNT-2: nvvm.mma.sync {{.*}} shape = #nvvm.shape<m = 16, n = 8, k = 16>
// CHECK: arith.addf
// K of the step after next into the K slots just read.
// CHECK-COUNT-2: nvvm.cp.async.shared.global
// CHECK-NEXT: nvvm.cp.async.commit.group
// The row max over the quad of lanes holding the row.
// CHECK: arith.maximumf
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32, %c32_i32 : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c2_i32, %c32_i32 : f32
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"
// P in f16 as the A operand of O += P V, once this step's V is in (K(i +
// 1), V(i + 1) and K(i + 2) stay in flight): one m16n8k8 per 8 head dims,
// V's vectors of both keys read back first.
// CHECK: nvvm.cp.async.wait.group 3
// CHECK-NOT: nvvm.cp.async
// CHECK: arith.truncf {{.*}} : f32 to f16
// CHECK-COUNT-2: llvm.load {{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// CHECK-COUNT-8: nvvm.mma.sync {{.*}} shape = #nvvm.shape<m = 16, n = 8, k = 8>
// CHECK-NOT: nvvm.mma.sync
// CHECK: scf.yield
// The copies drain and every warp leaves the stages before the
// accumulators take their place.
// CHECK-NEXT: }
// CHECK-NEXT: nvvm.cp.async.wait.group 0
// CHECK-NEXT: gpu.barrier
// Each row's sum over its quad, then the warp's accumulators in 16-byte
// stores (4 consecutive dims of a column, swizzled: arith.xori), and the
// warps combine as on CUDA cores.
// CHECK: memref.extract_aligned_pointer_as_index %[[WACC]]
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32, %c32_i32 : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c2_i32, %c32_i32 : f32
// CHECK: arith.xori
// CHECK: llvm.store {{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<3>
// CHECK: memref.store {{.*}}, %[[WML]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[WML]]
// CHECK: llvm.store {{.*}} : f32, !llvm.ptr<1>
// CHECK: gpu.return
func.func @grouped_tensor_cores(%q: memref<?x8x64xf16>, %k: memref<?x?x2x64xf16>, %v: memref<?x?x2x64xf16>,
                  %lens: memref<?xi32>, %out: memref<?x8x64xf16>) {
  fd.attention %q, %k, %v, %lens into %out {schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 4, row_tiles = 1, threads = 128, min_blocks_per_sm = 4, held_query_steps = 2, stages = 2>}
      : memref<?x8x64xf16>, memref<?x?x2x64xf16>, memref<?x?x2x64xf16>,
        memref<?xi32> into memref<?x8x64xf16>
  return
}

// -----

// HND, f32, D = 128 (32 lanes per row, one 16-byte vector each), speculative
// decoding (Lq = 2): the partial kernel serves 2 rows per KV head (MHA); the
// merge grid covers (Hq, Lq, B). The cache length is dimension 2.

// CHECK-LABEL: func.func @speculative_hnd
// CHECK: memref.dim %{{.*}}, %c2 : memref<3x4x?x128xf32>
// CHECK: gpu.launch_func @fd_partial_attention::@fd_partial_attention blocks in (%c4, %c4, %c3)
// CHECK: gpu.launch_func @fd_merge::@fd_merge blocks in (%c4, %c2, %c3) threads in (%c128, %c1, %c1)
// CHECK: gpu.func @fd_partial_attention
// CHECK-SAME: workgroup(%{{.*}} : memref<2x128xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}
// The last Lq - 1 keys of the sequence stream first, one step of 4 keys per
// iteration, each row masking those its query token may not see; the rest
// stream 4 steps per iteration without a mask.
// CHECK: %[[MASKED:.*]]:12 = scf.for %{{.*}} = %[[MASKED_BEGIN:.*]] to %{{.*}} step %c4 iter_args
// CHECK: llvm.load {{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
// CHECK: gpu.shuffle xor %{{.*}}, %c16_i32, %c32_i32 : f32
// CHECK: arith.andi
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[MASKED_BEGIN]] step %c16 iter_args(%{{.*}} = %[[MASKED]]#0,
// CHECK-NOT: arith.andi
// CHECK: scf.yield
func.func @speculative_hnd(%q: memref<3x2x4x128xf32>, %k: memref<3x4x?x128xf32>, %v: memref<3x4x?x128xf32>,
                           %lens: memref<3xi32>, %out: memref<3x2x4x128xf32>) {
  fd.attention %q, %k, %v, %lens into %out {kv_layout = #fd.kv_layout<HND>}
      : memref<3x2x4x128xf32>, memref<3x4x?x128xf32>, memref<3x4x?x128xf32>,
        memref<3xi32> into memref<3x2x4x128xf32>
  return
}

// -----

// f32, D = 128, MQA (Hq = 32, Hkv = 1): 32 query rows per KV head. A row
// takes 14 registers (max, sum, 4 accumulators, 4 query elements, a score
// per unrolled step), so a tile holds at most 12 rows and each of several
// at most 11; four tiles of 8 (154 registers: three blocks per SM) take the
// fewest tiles per resident block, each a block of its own (grid y = Hkv *
// 4, KV head y / 4, tile y % 4) streaming the chunk.

// CHECK-LABEL: func.func @mqa_f32
// CHECK: gpu.launch_func @fd_partial_attention::@fd_partial_attention blocks in (%c4, %c4, %c1)
// CHECK: gpu.func @fd_partial_attention
// CHECK-SAME: workgroup(%{{.*}} : memref<8x128xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<4x8x128xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<4x8x2xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK-SAME: nvvm.maxntid = array<i32: 128, 1, 1>, nvvm.minctasm = 3 : i32
// CHECK: %[[Y:.*]] = gpu.block_id y
// CHECK-NEXT: %[[HEAD:.*]] = arith.divui %[[Y]], %c4 : index
// CHECK-NEXT: %[[TILE:.*]] = arith.remui %[[Y]], %c4 : index
// CHECK: %{{.*}} = arith.muli %[[TILE]], %c8 : index
// CHECK-NOT: scf.for %{{.*}} = %c0 to %c4 step %c1
func.func @mqa_f32(%q: memref<1x32x128xf32>, %k: memref<1x?x1x128xf32>, %v: memref<1x?x1x128xf32>,
                   %lens: memref<1xi32>, %out: memref<1x32x128xf32>) {
  fd.attention %q, %k, %v, %lens into %out
      : memref<1x32x128xf32>, memref<1x?x1x128xf32>, memref<1x?x1x128xf32>,
        memref<1xi32> into memref<1x32x128xf32>
  return
}

// -----

// A paged cache (pages of 16 positions): the kernel takes the block table
// and the pool's page count last, the launch passes max_pages * 16 as the
// cache length, and a thread reads a block-table entry only when its token
// enters a new page, clamped into the pool.

// CHECK-LABEL: func.func @paged
// CHECK-SAME: %[[K:[a-z0-9]+]]: memref<?x16x2x64xf16>
// CHECK-SAME: %[[BT:[a-z0-9]+]]: memref<2x?xi32>
// CHECK: %[[PAGES:.*]] = memref.dim %[[BT]], %c1
// CHECK: %[[LEN:.*]] = arith.muli %[[PAGES]], %c16
// CHECK: %[[LEN32:.*]] = arith.index_cast %[[LEN]] : index to i32
// CHECK: %[[POOL:.*]] = memref.dim %[[K]], %c0
// CHECK: %[[POOL32:.*]] = arith.index_cast %[[POOL]] : index to i32
// CHECK: gpu.launch_func @fd_partial_attention::@fd_partial_attention {{.*}} args({{.*}}, %[[LEN32]] : i32, %{{.*}} : !llvm.ptr<1>, %[[POOL32]] : i32)
// CHECK: gpu.func @fd_partial_attention({{.*}}, %{{.*}}: i32, %[[TABLE:[a-z0-9]+]]: !llvm.ptr<1>, %[[NUMPAGES:[a-z0-9]+]]: i32)
// CHECK: %[[NUMPAGESINDEX:.*]] = arith.index_cast %[[NUMPAGES]] : i32 to index
// CHECK: scf.for {{.*}} iter_args
// CHECK: %[[BLOCK:.*]] = arith.divui %{{.*}}, %c16
// CHECK: %[[SAME:.*]] = arith.cmpi eq, %[[BLOCK]], %{{.*}} : index
// CHECK: scf.if %[[SAME]] -> (index) {
// CHECK: } else {
// CHECK: llvm.getelementptr %[[TABLE]]
// CHECK: %[[ENTRY:.*]] = llvm.load {{.*}} : !llvm.ptr<1> -> i32
// CHECK: %[[ENTRYINDEX:.*]] = arith.index_cast %[[ENTRY]] : i32 to index
// CHECK: %[[LASTPAGE:.*]] = arith.subi %[[NUMPAGESINDEX]], %c1
// CHECK: %[[NONNEG:.*]] = arith.maxsi %[[ENTRYINDEX]], %c0
// CHECK: arith.minsi %[[NONNEG]], %[[LASTPAGE]]
// CHECK: arith.remui %{{.*}}, %c16
// CHECK: llvm.load {{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xf16>
func.func @paged(%q: memref<2x2x64xf16>, %k: memref<?x16x2x64xf16>, %v: memref<?x16x2x64xf16>,
                 %lens: memref<2xi32>, %table: memref<2x?xi32>, %out: memref<2x2x64xf16>) {
  fd.attention %q, %k, %v, %lens block_table %table : memref<2x?xi32> into %out
      : memref<2x2x64xf16>, memref<?x16x2x64xf16>, memref<?x16x2x64xf16>,
        memref<2xi32> into memref<2x2x64xf16>
  return
}

// -----

// Paged on tensor cores (bf16, GQA-4, D = 128): each lane loads the
// block-table entry of every key it copies (1 for K, 2 for V) three steps
// ahead and clamps it into the pool only where a copy uses it: the first
// three steps' entries before the loop (none for an empty chunk), the
// first step's K and V and the second step's K from them; inside the loop
// the next step's V from the first three carried entries, the entries of
// the step three ahead, then (after S) the K of the step after next from
// the next three; the entries are carried as i32s; bf16 operands are i32
// words.

// CHECK-LABEL: func.func @paged_tensor_cores
// CHECK: gpu.func @fd_partial_attention({{.*}}, %{{.*}}: i32, %[[TABLE:[a-z0-9]+]]: !llvm.ptr<1>, %{{.*}}: i32)
// CHECK-SAME: nvvm.minctasm = 3 : i32
// CHECK: %[[FIRST:.*]]:9 = scf.if %{{.*}} -> (i32, i32, i32, i32, i32, i32, i32, i32, i32)
// CHECK-COUNT-9: llvm.getelementptr %[[TABLE]]
// CHECK: } else {
// CHECK-NEXT: scf.yield %c0_i32, %c0_i32, %c0_i32, %c0_i32, %c0_i32, %c0_i32, %c0_i32, %c0_i32, %c0_i32 : i32, i32, i32, i32, i32, i32, i32, i32, i32
// CHECK: %[[ENTRY:.*]] = arith.index_cast %[[FIRST]]#0 : i32 to index
// CHECK: arith.maxsi %[[ENTRY]], %c0 : index
// CHECK-COUNT-4: nvvm.cp.async.shared.global
// CHECK-NEXT: nvvm.cp.async.commit.group
// CHECK-COUNT-4: nvvm.cp.async.shared.global
// CHECK-NEXT: nvvm.cp.async.commit.group
// CHECK: %[[SECOND:.*]] = arith.index_cast %[[FIRST]]#3 : i32 to index
// CHECK: arith.maxsi %[[SECOND]], %c0 : index
// CHECK-COUNT-4: nvvm.cp.async.shared.global
// CHECK-NEXT: nvvm.cp.async.commit.group
// CHECK: scf.for {{.*}} step %c32 iter_args({{.*}}, %{{.*}} = %[[FIRST]]#3, %[[PAGE1:[a-z0-9]+]] = %[[FIRST]]#4, %[[PAGE2:[a-z0-9]+]] = %[[FIRST]]#5, %[[LATER:[a-z0-9]+]] = %[[FIRST]]#6, %[[LATER1:[a-z0-9]+]] = %[[FIRST]]#7, %[[LATER2:[a-z0-9]+]] = %[[FIRST]]#8) -> ({{.*}}, i32, i32, i32, i32, i32, i32)
// CHECK-DAG: arith.index_cast %[[PAGE1]] : i32 to index
// CHECK-DAG: arith.index_cast %[[PAGE2]] : i32 to index
// CHECK-NOT: llvm.getelementptr %[[TABLE]]
// CHECK-COUNT-4: nvvm.cp.async.shared.global
// CHECK-NEXT: nvvm.cp.async.commit.group
// CHECK-NEXT: nvvm.cp.async.wait.group 3
// CHECK-NOT: nvvm.mma.sync
// CHECK: %[[NEW:.*]] = llvm.load {{.*}} : !llvm.ptr<1> -> i32
// CHECK: %[[NEW1:.*]] = llvm.load {{.*}} : !llvm.ptr<1> -> i32
// CHECK: %[[NEW2:.*]] = llvm.load {{.*}} : !llvm.ptr<1> -> i32
// CHECK-NOT: llvm.getelementptr %[[TABLE]]
// CHECK: nvvm.mma.sync {{.*}} {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK: %[[AHEAD:.*]] = arith.index_cast %[[LATER]] : i32 to index
// CHECK: arith.maxsi %[[AHEAD]], %c0 : index
// CHECK-COUNT-4: nvvm.cp.async.shared.global
// CHECK-NEXT: nvvm.cp.async.commit.group
// CHECK: nvvm.cp.async.wait.group 3
// CHECK: nvvm.mma.sync {{.*}} shape = #nvvm.shape<m = 16, n = 8, k = 8>} : (i32, i32, f32)
// CHECK: scf.yield {{.*}}, %[[LATER]], %[[LATER1]], %[[LATER2]], %[[NEW]], %[[NEW1]], %[[NEW2]] : {{.*}}, i32, i32, i32, i32, i32, i32
func.func @paged_tensor_cores(%q: memref<2x8x128xbf16>, %k: memref<?x16x2x128xbf16>, %v: memref<?x16x2x128xbf16>,
                 %lens: memref<2xi32>, %table: memref<2x?xi32>, %out: memref<2x8x128xbf16>) {
  fd.attention %q, %k, %v, %lens block_table %table : memref<2x?xi32> into %out
      : memref<2x8x128xbf16>, memref<?x16x2x128xbf16>, memref<?x16x2x128xbf16>,
        memref<2xi32> into memref<2x8x128xbf16>
  return
}
